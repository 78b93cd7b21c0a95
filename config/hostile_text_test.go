package config_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/stream"
)

// Hostile inputs of YAML pipelines. Each test names the sentence of
// checkpointing.txt it defends and the item of issue #12.

// utf8Keys are three distinct keys that a decoder replacing invalid UTF-8
// by U+FFFD merges into one: two invalid byte sequences and the replacement
// character itself, valid, which is the only good record.
var utf8Keys = []string{"a\xff", "a\xfe", "a\ufffd"}

// utf8Pipeline is a pipeline counting the records of each key of source in
// tumbling windows of one second, with policy and the key's kind.
func utf8Pipeline(source, policy, kind string) string {
	return fmt.Sprintf(`pipeline: utf8
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  in:
%s    fields: {key: %s, ts: time}
    event_time: {field: ts}
    stop_at: latest
    on_error: %s
transforms:
  w: {type: window, input: in, key: key, size: 1s, aggregates: {n: count()}}
sinks:
  out: {type: file, input: w, path: out}
`, source, kind, policy)
}

// runUTF8 runs the pipeline of source with policy and key kind in a new
// directory holding the input file name with content; it returns the run's
// committed windows, the source's bad-record counts and the run's error.
func runUTF8(t *testing.T, source, policy, kind, name, content string) ([]string, stream.BadRecordTally, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(utf8Pipeline(source, policy, kind)))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = p.Stream.Run(ctx, p.RunOptions())
	var lines []string
	if err == nil {
		lines = committedLines(t, dir, "out")
	}
	return lines, p.Stream.BadRecordCounts()["in"], err
}

// "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream": nor may a decoder
// combine the state of different keys. Invalid UTF-8 in a string field was
// rewritten to U+FFFD, so `a\xff`, `a\xfe` and `a\ufffd` became one window
// of three records, with exit 0 (#12 item 7). Now invalid UTF-8 (raw, or a
// lone surrogate escape) in a string field is bad input under on_error: fail
// names the file and line, skip counts the two bad records and commits the
// valid key's window alone; a field declared bytes keeps the three keys
// apart, exactly.
func TestHostileInvalidUTF8KeysDoNotMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	jsonl := fmt.Sprintf("{\"key\":\"%s\",\"ts\":\"2026-01-01T00:00:00Z\"}\n", utf8Keys[0]) +
		fmt.Sprintf("{\"key\":\"%s\",\"ts\":\"2026-01-01T00:00:00.001Z\"}\n", utf8Keys[1]) +
		"{\"key\":\"a\\ufffd\",\"ts\":\"2026-01-01T00:00:00.002Z\"}\n"
	surrogates := "{\"key\":\"a\\ud800\",\"ts\":\"2026-01-01T00:00:00Z\"}\n" +
		"{\"key\":\"a\\udfff\",\"ts\":\"2026-01-01T00:00:00.001Z\"}\n" +
		"{\"key\":\"a\\ufffd\",\"ts\":\"2026-01-01T00:00:00.002Z\"}\n"
	csv := "key,ts\n" + utf8Keys[0] + ",2026-01-01T00:00:00Z\n" + utf8Keys[1] + ",2026-01-01T00:00:00.001Z\n" +
		utf8Keys[2] + ",2026-01-01T00:00:00.002Z\n"
	const window = `"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:01Z"`
	for _, tc := range []struct {
		name, source, file, content string
		// cause is what the error of on_error: fail says.
		cause string
		// bytesKeys are the keys of the windows of a bytes field, as the
		// sink writes them (base64).
		bytesKeys []string
	}{
		{"jsonl", "    type: file\n    path: in/*.jsonl\n", "a.jsonl", jsonl, `field "key": want string, got string "a\xff" (invalid UTF-8 at byte 1; a bytes field keeps it)`, []string{"Yf8=", "Yf4=", "Ye+/vQ=="}},
		{"jsonl lone surrogates", "    type: file\n    path: in/*.jsonl\n", "a.jsonl", surrogates, `(lone surrogate \ud800; a bytes field keeps it)`, []string{"Ye2ggA==", "Ye2/vw==", "Ye+/vQ=="}},
		{"csv", "    type: file\n    format: csv\n    path: in/*.csv\n", "a.csv", csv, `column 1 "key": "a\xff": invalid UTF-8 at byte 1; a bytes field keeps it`, []string{"Yf8=", "Yf4=", "Ye+/vQ=="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := 1
			if strings.HasSuffix(tc.file, ".csv") {
				line = 2
			}
			_, _, err := runUTF8(t, tc.source, "fail", "string", tc.file, tc.content)
			if err == nil {
				t.Error("on_error: fail: the run succeeded on invalid UTF-8")
			} else if want := fmt.Sprintf("%s:%d ", tc.file, line); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.cause) {
				t.Errorf("on_error: fail: %v\nwant the file and line %q and the cause %s", err, want, tc.cause)
			}

			lines, counts, err := runUTF8(t, tc.source, "skip", "string", tc.file, tc.content)
			if err != nil {
				t.Fatalf("on_error: skip: %v", err)
			}
			sameLines(t, "on_error: skip: windows", lines, []string{`{"key":"a` + "\ufffd" + `",` + window + `,"n":1}`})
			if counts.Skipped != 2 {
				t.Errorf("on_error: skip: %d records skipped, want 2", counts.Skipped)
			}

			lines, counts, err = runUTF8(t, tc.source, "fail", "bytes", tc.file, tc.content)
			if err != nil {
				t.Fatalf("bytes: %v", err)
			}
			var want []string
			for _, k := range tc.bytesKeys {
				want = append(want, `{"key":"`+k+`",`+window+`,"n":1}`)
			}
			slices.Sort(want)
			sameLines(t, "bytes: windows", lines, want)
			if counts != (stream.BadRecordTally{}) {
				t.Errorf("bytes: bad records %+v, want none", counts)
			}
		})
	}
}

// A bytes field stays exact through the transforms that read it (#12 item
// 7): a map passes it on (an expression sees a []byte), a window keys by it
// and takes its min, max and distinct count, and the file sink writes it as
// base64.
func TestHostileBytesFieldThroughTransforms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	in := "{\"k\":\"a\xff\",\"v\":\"\\u0002\",\"ts\":\"2026-01-01T00:00:00Z\"}\n" +
		"{\"k\":\"a\xff\",\"v\":\"\\u0001\",\"ts\":\"2026-01-01T00:00:00.001Z\"}\n" +
		"{\"k\":\"a\xfe\",\"v\":\"z\xff\",\"ts\":\"2026-01-01T00:00:00.002Z\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`pipeline: bytes
checkpoint: {interval: 50ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  in:
    type: file
    path: in.jsonl
    fields: {k: bytes, v: bytes, ts: time}
    event_time: {field: ts}
    stop_at: latest
transforms:
  m:
    type: map
    input: in
    select:
      k: k
      v2: v
      same: 'k == k'
      n: len(v)
  w: {type: window, input: m, key: k, size: 1s, aggregates: {lo: min(v2), hi: max(v2), d: count_distinct(v2), c: count(), len: sum(n)}}
sinks:
  out: {type: file, input: w, path: out}
  rows: {type: file, input: m, path: rows}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runYAMLIn(t, dir)
	const window = `"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:01Z"`
	sameLines(t, "windows", committedLines(t, dir, "out"), []string{
		`{"key":"Yf4=",` + window + `,"lo":"ev8=","hi":"ev8=","d":1,"c":1,"len":2}`,
		`{"key":"Yf8=",` + window + `,"lo":"AQ==","hi":"Ag==","d":2,"c":2,"len":2}`,
	})
	sameLines(t, "rows", committedLines(t, dir, "rows"), []string{
		`{"k":"Yf4=","v2":"ev8=","same":true,"n":2}`,
		`{"k":"Yf8=","v2":"AQ==","same":true,"n":1}`,
		`{"k":"Yf8=","v2":"Ag==","same":true,"n":1}`,
	})
}

// "Monitor at least: … Recovery count and replay volume": what a source
// drops must reach the log in full. Only the first skipped record of a burst
// was logged (#12 item 10); now each source subtask logs its totals when it
// closes, the source's being those of ingest_source_bad_records_total.
func TestHostileSkipTotalsInTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	var in strings.Builder
	for i := range 500 {
		if i%5 == 0 {
			fmt.Fprintf(&in, "{\"key\":\"k\xff\",\"ts\":\"2026-01-01T00:00:00Z\"}\n")
		} else {
			fmt.Fprintf(&in, "{\"key\":\"k%d\",\"ts\":\"2026-01-01T00:00:00Z\"}\n", i%7)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "a.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(utf8Pipeline("    type: file\n    path: in/*.jsonl\n", "skip", "string")))
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	opts := p.RunOptions()
	opts.Log = slog.New(slog.NewTextHandler(&log, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if got := p.Stream.BadRecordCounts()["in"]; got.Skipped != 100 {
		t.Fatalf("counts %+v, want 100 skipped", got)
	}
	var closing []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "closing after bad records") {
			closing = append(closing, l)
		}
	}
	if len(closing) == 0 || !strings.Contains(closing[len(closing)-1], " skipped=100 ") || !strings.Contains(closing[len(closing)-1], "subtask_skipped=100 ") {
		t.Errorf("the log's last word on bad records: %q, want skipped=100 (the metric's value)\n%s", closing, log.String())
	}
}
