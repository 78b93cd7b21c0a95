package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// latePipeline writes a file source of 3,000 records 1 ms apart, record 1500
// dated 2200, read with the source lines extra (max_future, on_error) into
// a 1 s window w and a file sink, and returns the pipeline's path.
func latePipeline(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3000 {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		if i == 1500 {
			ts = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		fmt.Fprintf(&b, `{"key":%d,"ts":%q}`+"\n", i%2, ts.Format(time.RFC3339Nano))
	}
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "a.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `pipeline: late
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  in:
    type: file
    path: in/*.jsonl
    stop_at: latest
    fields: {key: int, ts: time}
    event_time: {field: ts}
` + extra + `transforms:
  w: {type: window, input: in, key: key, size: 1s, aggregates: {n: count()}}
sinks:
  out: {type: file, input: w, path: out}
`
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The summary `ingest run` prints at the end states the late records each
// operator dropped, at 0 too, and is a warning when any were: a run whose
// output misses records must not end with only a quiet INFO line.
//
// Defends "A restart must not lose accepted data": records dropped as late
// are never dropped silently (#12 item 4b).
func TestHostileRunSummaryStatesLateRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	summary := regexp.MustCompile(`level=(\w+) msg="?pipeline finished[^\n]*late_records_dropped\.w=(\d+)`)

	path := latePipeline(t, "    max_future: 0\n")
	_, stderr, err := runCLI(runCmd(), path)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	m := summary.FindStringSubmatch(stderr)
	t.Log(m)
	if m == nil {
		t.Fatalf("no summary with the late records of w in\n%s", stderr)
	}
	late, _ := strconv.Atoi(m[2])
	lines, err := testkit.ReadCommitted(filepath.Join(filepath.Dir(path), "out"))
	if err != nil {
		t.Fatal(err)
	}
	windowed := 0
	for _, l := range lines {
		var w struct{ N int }
		if err := json.Unmarshal(l.Text, &w); err != nil {
			t.Fatal(err)
		}
		windowed += w.N
	}
	if m[1] != "WARN" || late == 0 || windowed+late != 3000 {
		t.Errorf("summary %q: want WARN and the %d records missing from the windows", m[0], 3000-windowed)
	}

	path = latePipeline(t, "    on_error: skip\n")
	if _, stderr, err = runCLI(runCmd(), path); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if m := summary.FindStringSubmatch(stderr); m == nil || m[1] != "INFO" || m[2] != "0" {
		t.Errorf("with the record dated 2200 skipped: summary %q, want INFO with late_records_dropped.w=0\n%s", m, stderr)
	}
}
