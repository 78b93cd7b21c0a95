package config_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/ingest-engine/ingest/internal/testkit"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file holds the hostile cases of the YAML layer: inputs a hostile
// user (or a broken producer) sends that must not change committed output
// silently.

// futureIndex is the record of futureInput dated in 2200.
const futureIndex = 5000

// futureBase is where futureInput's event times start: in the past, so
// only the record dated 2200 is ahead of the wall clock.
var futureBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// futureWindow is a window of the far-future pipeline as the file sink
// writes it.
type futureWindow struct {
	Key         int64  `json:"key"`
	WindowStart string `json:"window_start"`
	Count       int64  `json:"count"`
	Sum         int64  `json:"sum"`
}

// futureInput writes in/a.jsonl in dir: 10,000 records in event-time
// order, 1 ms apart, key i%3 and value i%10, except that record
// futureIndex (line futureIndex+1) is dated 2200-01-01. It returns that
// record's line and byte offset, and the exact 1 s windows of the other
// records, by key and window start.
func futureInput(t *testing.T, dir string) (line string, offset int64, want map[string]futureWindow) {
	t.Helper()
	want = map[string]futureWindow{}
	var b strings.Builder
	for i := int64(0); i < 10_000; i++ {
		ts := futureBase.Add(time.Duration(i) * time.Millisecond)
		if i == futureIndex {
			ts = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		l := fmt.Sprintf(`{"key":%d,"value":%d,"ts":%q}`, i%3, i%10, ts.Format(time.RFC3339Nano))
		if i == futureIndex {
			line, offset = l, int64(b.Len())
		} else {
			start := ts.Truncate(time.Second).Format(time.RFC3339Nano)
			k := fmt.Sprintf("%d@%s", i%3, start)
			w := want[k]
			w.Key, w.WindowStart = i%3, start
			w.Count++
			w.Sum += i % 10
			want[k] = w
		}
		b.WriteString(l + "\n")
	}
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "a.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return line, offset, want
}

// futurePipeline is file source in → 1 s window w per key → file sink out,
// with extra lines in the source (on_error, max_future) and, with
// dead_letter, the dead letters in file sink dlq.
func futurePipeline(source string) string {
	y := `pipeline: future
checkpoint: {interval: 20ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  in:
    type: file
    path: in/*.jsonl
    stop_at: latest
    fields: {key: int, value: int, ts: time}
    event_time: {field: ts}
` + source + `transforms:
  w:
    type: window
    input: in
    key: key
    size: 1s
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out: {type: file, input: w, path: out}
`
	if strings.Contains(source, "dead_letter") {
		y += "  dlq: {type: file, input: in.dead_letter, path: dlq}\n"
	}
	return y
}

// runWatched runs p to its end while sampling every subtask's watermark
// and returns the job's last observation, the highest watermark seen below
// MaxWatermark (which the end of the input sends) and Run's error.
func runWatched(t *testing.T, p *config.Pipeline, opts stream.RunOptions) (runtime.Observation, int64, error) {
	t.Helper()
	job, err := p.Stream.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	var highest int64 = runtime.MinWatermark
	sample := func() {
		for _, n := range job.Observe().Nodes {
			for _, s := range n.Subtasks {
				if s.Watermark != runtime.MaxWatermark {
					highest = max(highest, s.Watermark)
				}
			}
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				sample()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = job.Run(ctx)
	close(stop)
	<-done
	return job.Observe(), highest, err
}

// checkWindows checks that the committed windows of dir are exactly want.
func checkWindows(t *testing.T, dir string, want map[string]futureWindow) {
	t.Helper()
	got := map[string]futureWindow{}
	for _, l := range committedLines(t, dir, "out") {
		var w futureWindow
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("window %s: %v", l, err)
		}
		k := fmt.Sprintf("%d@%s", w.Key, w.WindowStart)
		if _, dup := got[k]; dup {
			t.Errorf("window %s twice", k)
		}
		got[k] = w
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("window %s: got %+v, want %+v", k, got[k], w)
		}
	}
	for k, w := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected window %+v", w)
		}
	}
}

// One record dated 2200 among 10,000 must not advance the watermark and
// discard the half of the input that follows it: an event time more than
// max_future (default 1 h) ahead of the wall clock is a bad record, which
// on_error handles. fail stops the job naming the source, the file and the
// line; skip commits exactly the windows of the other 9,999 records and
// counts one; dead_letter commits them too and the record as a dead
// letter. In none does any watermark pass now + max_future.
//
// Defends "A restart must not lose accepted data" and the house rule that
// bad input gets a clear error naming where it came from (#12 item 4a).
func TestHostileFarFutureEventTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	for _, policy := range []string{"fail", "skip", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			line, offset, want := futureInput(t, dir)
			p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(futurePipeline("    on_error: "+policy+"\n")))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			_, highest, runErr := runWatched(t, p, p.RunOptions())
			if limit := time.Now().Add(time.Hour).UnixNano(); highest > limit {
				t.Errorf("a watermark reached %v, past now + max_future", time.Unix(0, highest).UTC())
			}
			path := filepath.Join(dir, "in", "a.jsonl")
			if policy == "fail" {
				if runErr == nil {
					t.Fatal("Run succeeded with an event time in 2200 and on_error: fail")
				}
				msg := runErr.Error()
				t.Log(msg)
				for _, s := range []string{"in[0]", fmt.Sprintf("%s:%d (byte offset %d)", path, futureIndex+1, offset), "2200-01-01T00:00:00Z", "max_future 1h0m0s"} {
					if !strings.Contains(msg, s) {
						t.Errorf("error %q does not name %q", msg, s)
					}
				}
				return
			}
			if runErr != nil {
				t.Fatalf("Run: %v", runErr)
			}
			checkWindows(t, dir, want)
			counts := p.Stream.BadRecordCounts()["in"]
			if policy == "skip" {
				if counts != (stream.BadRecordTally{Skipped: 1}) {
					t.Errorf("counts %+v, want 1 skipped", counts)
				}
				return
			}
			if counts != (stream.BadRecordTally{DeadLettered: 1}) {
				t.Errorf("counts %+v, want 1 dead-lettered", counts)
			}
			dl := committedLines(t, dir, "dlq")
			if len(dl) != 1 {
				t.Fatalf("%d dead letters, want 1: %q", len(dl), dl)
			}
			var d deadLetterRow
			if err := json.Unmarshal([]byte(dl[0]), &d); err != nil {
				t.Fatal(err)
			}
			raw, err := base64.StdEncoding.DecodeString(d.Raw)
			if d.Source != "in" || d.Partition != path || d.Offset != offset || d.Line != futureIndex+1 ||
				!strings.Contains(d.Error, "max_future 1h0m0s") || err != nil || string(raw) != line {
				t.Errorf("dead letter %+v (raw %q, %v): want the record at %s:%d, offset %d, %q", d, raw, err, path, futureIndex+1, offset, line)
			}
		})
	}
}

// With max_future: 0 the record dated 2200 is accepted and moves the
// watermark, and the window drops what follows it as late, as the user
// asked; but not silently: the window's late-record count is exported from
// the start (at 0) and counts every drop live, so that windowed and late
// records add up to the input; the first drop is logged at WARN with the
// record's event time, the watermark and the operator, and further ones at
// most once a minute.
//
// Defends "A restart must not lose accepted data": a loss the pipeline's
// settings cause is visible (#12 item 4b).
func TestHostileLateRecordsCountedAndLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	futureInput(t, dir)
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(futurePipeline("    max_future: 0\n")))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	if !strings.Contains(planText(t, p), "max_future off") {
		t.Errorf("the plan does not say max_future is off:%s", planText(t, p))
	}
	var logs testkit.SyncBuffer
	opts := p.RunOptions()
	opts.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	job, err := p.Stream.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Observe().LateRecords; len(got) != 1 || got["w"] != 0 {
		t.Fatalf("before the run: late records %v, want w: 0 only", got)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	elapsed := time.Since(began)
	late := job.Observe().LateRecords["w"]
	var windowed int64
	for _, l := range committedLines(t, dir, "out") {
		var w futureWindow
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatal(err)
		}
		windowed += w.Count
	}
	if late == 0 || windowed+late != 10_000 {
		t.Errorf("%d records in windows + %d late = %d, want a positive late count adding up to 10000", windowed, late, windowed+late)
	}
	var warnings []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" && strings.HasPrefix(m["msg"].(string), "dropped a late record") {
			warnings = append(warnings, m)
		}
	}
	if limit := 1 + int(elapsed/time.Minute); len(warnings) == 0 || len(warnings) > limit {
		t.Fatalf("%d late-record warnings in %v, want 1 to %d", len(warnings), elapsed, limit)
	}
	w := warnings[0]
	if w["operator"] != "w" || w["watermark"] != "2199-12-31T23:59:59.999999999Z" || !strings.HasPrefix(w["event_time"].(string), "2026-01-01T00:00:0") {
		t.Errorf("first warning %v: want operator w, watermark 2199-12-31T23:59:59.999999999Z and the record's event time", w)
	}
}

// futureCause is what the error of a record dated 2200 says.
const futureCause = "2200-01-01T00:00:00Z is more than max_future 1h0m0s ahead of the wall clock"

// futureRecords returns n good records of badInputSchema tagged tag (as
// JSON, or CSV with csv) except record n/2, dated 2200: a bad record for
// checkPolicies.
func futureRecords(n int, tag string, csv bool) []inputRecord {
	out := make([]inputRecord, n)
	for i := range out {
		ts := badInputBase.Add(time.Duration(i) * time.Millisecond)
		if i == n/2 {
			ts = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		tss, name := ts.Format(time.RFC3339Nano), fmt.Sprintf("%s-%d", tag, i)
		r := &out[i]
		r.text = fmt.Sprintf(`{"id":%d,"name":%q,"ts":%q}`, i, name, tss)
		if csv {
			r.text = fmt.Sprintf("%d,%s,%s", i, name, tss)
		}
		if i == n/2 {
			r.cause = futureCause
		} else {
			r.good = row.Row{row.IntValue(int64(i)), row.StringValue(name), row.TimeValue(ts.UnixNano())}
		}
	}
	return out
}

// The far-future check is the sources' bad-record policy, so every source
// that takes event times from its input applies it, each naming the
// record's position its own way: a CSV file (file and line), a Kafka topic
// (partition and offset) and a NATS stream (subject and sequence). Under
// fail, skip and dead_letter (checkPolicies) the record dated 2200 stops
// the job, is counted, or is a dead letter; the other records are
// committed exactly.
//
// Defends "A restart must not lose accepted data" (#12 item 4a).
func TestHostileFarFutureEventTimeEverySource(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	t.Run("csv", func(t *testing.T) {
		dir := t.TempDir()
		recs := futureRecords(2000, "c", true)
		writeLines(t, filepath.Join(dir, "in", "a.csv"), []string{"id,name,ts"}, recs)
		source := fmt.Sprintf("    type: file\n    format: csv\n    path: %s\n    stop_at: latest\n", filepath.Join(dir, "in", "*.csv")) + badInputFields
		checkPolicies(t, source, recs, filePosition)
	})
	t.Run("kafka", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		broker := c.ListenAddrs()[0]
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recs := futureRecords(400, "k", false)
		for i := range recs {
			r := &recs[i]
			res, err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(r.text)}).First()
			if err != nil {
				t.Fatal(err)
			}
			r.partition, r.offset = strconv.Itoa(int(res.Partition)), res.Offset
		}
		source := fmt.Sprintf("    type: kafka\n    brokers: [%s]\n    topic: events\n    stop_at: latest\n    parallelism: 2\n", broker) + badInputFields
		checkPolicies(t, source, recs, func(r inputRecord) string {
			return fmt.Sprintf("topic events partition %s offset %d", r.partition, r.offset)
		})
	})
	t.Run("nats", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		js, name := newNATSStream(ctx, t, "FUTURE")
		recs := futureRecords(400, "n", false)
		for i := range recs {
			r := &recs[i]
			r.partition = fmt.Sprintf("%s.%c", name, 'a'+i%2)
			ack, err := js.Publish(ctx, r.partition, []byte(r.text))
			if err != nil {
				t.Fatal(err)
			}
			r.offset = int64(ack.Sequence)
		}
		source := fmt.Sprintf("    type: nats\n    stream: %s\n    subject: %s.>\n    stop_at: latest\n", name, name) + badInputFields
		checkPolicies(t, source, recs, func(r inputRecord) string {
			return fmt.Sprintf("subject %s, sequence %d", r.partition, r.offset)
		})
	})
}

// max_future is a duration next to on_error: negative is a configuration
// error at its line, 0 turns the check off (and the plan says so), and
// datagen, whose records are generated, takes none.
func TestHostileMaxFutureConfig(t *testing.T) {
	const src = `pipeline: e
checkpoint: {dir: ckpts}
sources:
  in:
    type: file
    path: in/*.jsonl
    fields: {id: int, ts: time}
    event_time: {field: ts}
    stop_at: latest
    max_future: %s
sinks:
  out: {type: file, input: in, path: out}
`
	for v, want := range map[string]string{"-1s": "p.yaml:10: sources.in.max_future: must not be negative", "soon": `p.yaml:10: sources.in.max_future: "soon" is not a duration`} {
		if _, err := config.Parse("p.yaml", []byte(fmt.Sprintf(src, v))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("max_future %s: %v, want %q", v, err, want)
		}
	}
	for v, want := range map[string]string{"0": ", max_future off", "10m": ", max_future 10m0s", "1h": ""} {
		p, err := config.Parse("p.yaml", []byte(fmt.Sprintf(src, v)))
		if err != nil {
			t.Fatalf("max_future %s: %v", v, err)
		}
		if plan := planText(t, p); want == "" && strings.Contains(plan, "max_future") || !strings.Contains(plan, want) {
			t.Errorf("max_future %s: plan%s\nwant it to say %q", v, plan, want)
		}
	}
	_, err := config.Parse("p.yaml", []byte(`pipeline: e
checkpoint: {dir: ckpts}
sources:
  gen: {type: datagen, count: 10, max_future: 1h}
sinks:
  out: {type: file, input: gen, path: out}
`))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4: sources.gen.max_future: unknown field") {
		t.Errorf("datagen with max_future: %v, want an unknown-field error", err)
	}
}
