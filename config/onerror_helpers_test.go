package config_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file generates the bad-input tests' records: good ones interleaved
// with malformed ones, wrong types, missing event times and oversized ones,
// and checks what each on_error policy makes of them.

// maxRecord is the max_record_bytes of the bad-input pipelines.
const maxRecord = 200

// badInputSchema is the declared fields of the bad-input sources.
var badInputSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "name", Kind: row.String}, {Name: "ts", Kind: row.Time}}}

// badInputFields is badInputSchema in YAML, with the event time.
const badInputFields = "    fields: {id: int, name: string, ts: time}\n    event_time: {field: ts}\n    max_record_bytes: 200\n"

// inputRecord is one generated record. The transport (file, Kafka, NATS)
// fills in where it put it.
type inputRecord struct {
	// text is the record's bytes (a JSON Lines line or a CSV record
	// without their line break, a message's payload).
	text string
	// good is the row a good record becomes; nil for a bad one.
	good row.Row
	// cause is what the error of a bad record says.
	cause string
	// partition, offset and line are the record's position, as the
	// dead-letter output names it (line 0 without lines).
	partition    string
	offset, line int64
}

// raw is what the dead-letter output keeps of the record: its bytes, cut to
// max_record_bytes.
func (r inputRecord) raw() string { return r.text[:min(len(r.text), maxRecord)] }

var badInputBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// jsonRecords returns n JSON records tagged tag: every tenth from the first
// on has a name that is not valid UTF-8 (a byte 0xff, or from the eleventh
// on a lone surrogate escape), from the third is malformed, from the fifth
// has a string id, from the seventh has no event time, from the ninth is
// longer than maxRecord; the rest are good.
func jsonRecords(n int, tag string) []inputRecord {
	out := make([]inputRecord, n)
	for i := range out {
		ts := badInputBase.Add(time.Duration(i) * time.Millisecond)
		tss := ts.Format(time.RFC3339Nano)
		name := fmt.Sprintf("%s-%d", tag, i)
		r := &out[i]
		switch i % 10 {
		case 1:
			r.text, r.cause = fmt.Sprintf("{\"id\":%d,\"name\":\"%s\xff\",\"ts\":%q}", i, name, tss), "invalid UTF-8 at byte"
			if i%20 == 11 {
				r.text, r.cause = fmt.Sprintf(`{"id":%d,"name":"%s\udfff","ts":%q}`, i, name, tss), `lone surrogate \udfff`
			}
		case 3:
			r.text, r.cause = fmt.Sprintf(`{"id":%d,"name":}`, i), "invalid JSON at byte"
		case 5:
			r.text, r.cause = fmt.Sprintf(`{"id":"five","name":%q,"ts":%q}`, name, tss), `field "id": want int, got string "five"`
		case 7:
			r.text, r.cause = fmt.Sprintf(`{"id":%d,"name":%q}`, i, name), `event time field "ts" is missing or null`
		case 9:
			r.text, r.cause = fmt.Sprintf(`{"id":%d,"name":"%s","ts":%q}`, i, strings.Repeat("x", maxRecord), tss), "longer than max_record_bytes 200"
		default:
			r.text = fmt.Sprintf(`{"id":%d,"name":%q,"ts":%q}`, i, name, tss)
			r.good = row.Row{row.IntValue(int64(i)), row.StringValue(name), row.TimeValue(ts.UnixNano())}
		}
	}
	return out
}

// csvRecords returns n CSV records (header id,name,ts) tagged tag: every
// tenth from the first on is good with a quoted name spanning two lines;
// from the third has a bare quote, from the fifth a string id, from the
// sixth a name that is not valid UTF-8, from the seventh no event time, from
// the eighth too few fields, from the ninth is longer than maxRecord; the
// rest are good.
func csvRecords(n int, tag string) []inputRecord {
	out := make([]inputRecord, n)
	for i := range out {
		ts := badInputBase.Add(time.Duration(i) * time.Millisecond)
		tss := ts.Format(time.RFC3339Nano)
		name := fmt.Sprintf("%s-%d", tag, i)
		r := &out[i]
		switch i % 10 {
		case 1:
			name += "\nsecond line"
			r.text = fmt.Sprintf("%d,\"%s\",%s", i, name, tss)
		case 3:
			r.text, r.cause = fmt.Sprintf(`%d,na"me,%s`, i, tss), `bare "`
		case 5:
			r.text, r.cause = fmt.Sprintf("five,%s,%s", name, tss), `"five" is not an int`
		case 6:
			r.text, r.cause = fmt.Sprintf("%d,%s\xfe,%s", i, name, tss), "invalid UTF-8 at byte"
		case 7:
			r.text, r.cause = fmt.Sprintf("%d,%s,", i, name), `event time field "ts" is missing or null`
		case 8:
			r.text, r.cause = fmt.Sprintf("%d,%s", i, name), "2 fields, the header has 3"
		case 9:
			r.text, r.cause = fmt.Sprintf("%d,%s,%s", i, strings.Repeat("x", maxRecord), tss), "longer than max_record_bytes 200"
		default:
			r.text = fmt.Sprintf("%d,%s,%s", i, name, tss)
		}
		if r.cause == "" {
			r.good = row.Row{row.IntValue(int64(i)), row.StringValue(name), row.TimeValue(ts.UnixNano())}
		}
	}
	return out
}

// writeLines writes recs as a file at path, one record a line after header
// lines, with a blank line after every 25th record, and fills in their
// positions (partition: path).
func writeLines(t *testing.T, path string, header []string, recs []inputRecord) {
	t.Helper()
	var b strings.Builder
	line := int64(1)
	for _, h := range header {
		b.WriteString(h + "\n")
		line++
	}
	for i := range recs {
		r := &recs[i]
		r.partition, r.offset, r.line = path, int64(b.Len()), line
		b.WriteString(r.text + "\n")
		line += 1 + int64(strings.Count(r.text, "\n"))
		if i%25 == 24 {
			b.WriteString("\n")
			line++
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// badInputPipeline is the YAML of a pipeline reading source (its fields
// after "  in:\n", indented four spaces) with on_error policy into file sink
// out and, with dead_letter, its dead letters into file sink dlq.
func badInputPipeline(source, policy string) string {
	y := fmt.Sprintf(`pipeline: bad-input
checkpoint: {interval: 20ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  in:
%s    on_error: %s
sinks:
  out: {type: file, input: in, path: out}
`, source, policy)
	if policy == "dead_letter" {
		y += "  dlq: {type: file, input: in.dead_letter, path: dlq, parallelism: 2}\n"
	}
	return y
}

// deadLetterRow is a row of <source>.dead_letter as the file sink writes it.
type deadLetterRow struct {
	Source    string `json:"source"`
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
	Line      int64  `json:"line"`
	Error     string `json:"error"`
	Raw       string `json:"raw"`
}

// checkPolicies runs the pipeline of source under each policy on recs and
// checks the outcome: fail stops with an error naming the source and a bad
// record's position (where) and cause; skip commits exactly the good
// records and counts the bad ones; dead_letter commits the good records and
// exactly one dead letter per bad record, with its position, cause and
// bytes. Good, skipped and dead-lettered records add up to the input.
func checkPolicies(t *testing.T, source string, recs []inputRecord, where func(inputRecord) string) {
	var good []row.Row
	bad := 0
	for _, r := range recs {
		if r.good != nil {
			good = append(good, r.good)
		} else {
			bad++
		}
	}
	wantGood := jsonLines(badInputSchema, good)
	for _, policy := range []string{"fail", "skip", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(badInputPipeline(source, policy)))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			t.Log(p.Stream.Name(), planText(t, p))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err = p.Stream.Run(ctx, p.RunOptions())
			counts := p.Stream.BadRecordCounts()["in"]
			if policy == "fail" {
				checkFailure(t, err, recs, where)
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			gotGood := committedLines(t, dir, "out")
			sameLines(t, "good records", gotGood, wantGood)
			if policy == "skip" {
				if counts != (stream.BadRecordTally{Skipped: int64(bad)}) {
					t.Errorf("counts %+v, want %d skipped", counts, bad)
				}
				if len(gotGood)+int(counts.Skipped) != len(recs) {
					t.Errorf("%d good + %d skipped != %d records", len(gotGood), counts.Skipped, len(recs))
				}
				return
			}
			dl := committedLines(t, dir, "dlq")
			checkDeadLetters(t, dl, recs)
			if counts != (stream.BadRecordTally{DeadLettered: int64(bad)}) {
				t.Errorf("counts %+v, want %d dead-lettered", counts, bad)
			}
			if len(gotGood)+len(dl) != len(recs) {
				t.Errorf("%d good + %d dead letters != %d records", len(gotGood), len(dl), len(recs))
			}
		})
	}
}

// planText renders p's plan.
func planText(t *testing.T, p *config.Pipeline) string {
	t.Helper()
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return "\n" + plan.Describe()
}

// checkFailure checks that err names the source "in", the position of one
// of the bad records and that record's cause.
func checkFailure(t *testing.T, err error, recs []inputRecord, where func(inputRecord) string) {
	t.Helper()
	if err == nil {
		t.Fatal("Run succeeded on bad input with on_error: fail")
	}
	msg := err.Error()
	if !strings.Contains(msg, "in[") {
		t.Errorf("error %q does not name the source in", msg)
	}
	for _, r := range recs {
		if r.good == nil && strings.Contains(msg, where(r)) {
			if !strings.Contains(msg, r.cause) {
				t.Errorf("error %q names %s but not its cause %q", msg, where(r), r.cause)
			}
			return
		}
	}
	t.Errorf("error %q names the position of no bad record", msg)
}

// checkDeadLetters checks that lines are exactly one dead letter per bad
// record of recs, with its position, its cause and its bytes.
func checkDeadLetters(t *testing.T, lines []string, recs []inputRecord) {
	t.Helper()
	type pos struct {
		partition string
		offset    int64
	}
	got := map[pos]deadLetterRow{}
	for _, l := range lines {
		var d deadLetterRow
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("dead letter %s: %v", l, err)
		}
		k := pos{d.Partition, d.Offset}
		if _, dup := got[k]; dup {
			t.Errorf("dead letter for %s offset %d twice", d.Partition, d.Offset)
		}
		got[k] = d
	}
	want := 0
	for _, r := range recs {
		if r.good != nil {
			continue
		}
		want++
		d, ok := got[pos{r.partition, r.offset}]
		if !ok {
			t.Errorf("no dead letter for %s offset %d (%s)", r.partition, r.offset, r.cause)
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(d.Raw)
		if d.Source != "in" || d.Line != r.line || !strings.Contains(d.Error, r.cause) || err != nil || string(raw) != r.raw() {
			t.Errorf("dead letter %+v (raw %q, %v)\nwant source in, line %d, an error with %q, raw %q", d, raw, err, r.line, r.cause, r.raw())
		}
	}
	if len(got) != want {
		t.Errorf("%d dead letters, want %d", len(got), want)
	}
}
