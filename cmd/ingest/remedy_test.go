package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run that a bad input record ends, after its restarts, says how to go
// on without it: on_error: skip or dead_letter on the source, naming it and
// its dead-letter output. The same file with on_error: skip runs through.
func TestBadRecordFailureNamesTheRemedy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	dir := t.TempDir()
	in := `{"key":1,"ts":"2026-01-01T00:00:00Z"}` + "\n" + `{"key":oops}` + "\n" + `{"key":2,"ts":"2026-01-01T00:00:01Z"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	pipeline := func(name, onError string) string {
		path := filepath.Join(dir, name+".yaml")
		src := `pipeline: ` + name + `
checkpoint: {dir: ckpt-` + name + `}
restart: {max_attempts: 1, delay: 10ms, multiplier: 1}
sources:
  orders:
    type: file
    path: in.jsonl
    stop_at: latest
    fields: {key: int, ts: time}
    event_time: {field: ts}
` + onError + `
sinks:
  out: {type: file, input: orders, path: out-` + name + `}
`
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, stderr, err := runCLI(runCmd(), pipeline("fail", ""))
	var ee *exitError
	if err == nil || !errors.As(err, &ee) || ee.code != exitFailed {
		t.Fatalf("run: %v, want exit %d\n%s", err, exitFailed, stderr)
	}
	msg := err.Error()
	want := "\nthe failure is a bad input record, read again at every restart: to go on without it, set on_error: skip " +
		"(drop and count bad records) or on_error: dead_letter (send them to a sink with input: orders.dead_letter) on source orders"
	if !strings.Contains(msg, "1 restarts in a row did not help") || !strings.Contains(msg, "in.jsonl:2") || !strings.Contains(msg, want) {
		t.Errorf("error:\n%s\nwant it to name the record and then the remedy:%s", msg, want)
	}
	if _, stderr, err := runCLI(runCmd(), pipeline("skip", "    on_error: skip")); err != nil {
		t.Errorf("with on_error: skip: %v\n%s", err, stderr)
	}
}

// Other failures get no such advice.
func TestRemedyOnlyForBadRecords(t *testing.T) {
	err := errors.New("pipeline p failed and 3 restarts in a row did not help: disk full")
	if got := withRemedy(err); got != err {
		t.Errorf("withRemedy(%v) = %v", err, got)
	}
}
