package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// describe parses src as p.yaml and returns its plan's description.
func describe(t *testing.T, src string) string {
	t.Helper()
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return plan.Describe()
}

// This file holds the hostile cases of pipeline validation: pipeline files
// that would load and then lose, repeat or corrupt output. Each test names
// the sentence of checkpointing.txt it defends and the item of issue #12 it
// comes from.

// fileSourceYAML is a pipeline reading a file source with the given extra
// source lines into a file sink.
func fileSourceYAML(extra string) string {
	return `pipeline: p
sources:
  in:
    type: file
    path: in/*.jsonl
    event_time: {field: ts}
    fields: {ts: time}
` + extra + `sinks:
  out: {type: file, input: in, path: out}
`
}

// "A restart must not lose accepted data": on_replace says what a file
// source does with a file replaced under its path; a value other than fail
// or reread is refused at its line. #12 item 3.
func TestHostileOnReplaceOption(t *testing.T) {
	if d := describe(t, fileSourceYAML("")); strings.Contains(d, "on_replace") {
		t.Errorf("default on_replace: plan %q, want it unmentioned (fail)", d)
	}
	if d := describe(t, fileSourceYAML("    on_replace: fail\n")); strings.Contains(d, "on_replace") {
		t.Errorf("on_replace fail: plan %q, want it unmentioned (the default)", d)
	}
	if d := describe(t, fileSourceYAML("    on_replace: reread\n")); !strings.Contains(d, "on_replace reread") {
		t.Errorf("on_replace reread: plan %q", d)
	}
	errs := parseErrs(t, fileSourceYAML("    on_replace: ignore\n"))
	if !hasLine(errs, `p.yaml:8: sources.in.on_replace: unknown value "ignore" (known: fail, reread)`) {
		t.Errorf("errors %q", errs)
	}
}

// csvPipeline is a pipeline reading dir's in/*.csv with the given extra
// source lines (stop_at latest) into a file sink out.
func csvPipeline(extra string) string {
	return `pipeline: csv
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, max_attempts: 0}
sources:
  files:
    type: file
    format: csv
    path: in/*.csv
    event_time: {field: ts}
    stop_at: latest
` + extra + `sinks:
  out: {type: file, input: files, path: out}
`
}

// "A restart must not lose accepted data" starts with accepting it: a CSV
// file that begins with a UTF-8 byte order mark (as spreadsheet exports do)
// loads with declared fields and is read whole. The check of the header at
// load time reads it as the source does. #12 item 8.
func TestHostileCSVByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "in", "a.csv"), "\ufeffid,ts,value\n1,2026-01-01T00:00:00Z,5\n2,2026-01-01T00:00:01Z,6\n")
	path := writePipeline(t, dir, csvPipeline("    fields: {id: int, ts: time, value: int}\n"))
	p, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load of a CSV file with a byte order mark:\n%v", err)
	}
	if err := runToEnd(t, p); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "committed rows", committedLines(t, dir, "out"), []string{
		`{"id":1,"ts":"2026-01-01T00:00:00Z","value":5}`,
		`{"id":2,"ts":"2026-01-01T00:00:01Z","value":6}`,
	})
}

// Bad input gets a clear error: a header whose column names hold
// invisible characters (a zero-width space, a byte order mark after the
// start) shows them escaped, so the user sees why "qty" is not "qty".
// #12 item 8.
func TestHostileCSVHeaderInvisibleCharacters(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "in", "a.csv"), "ts,\u200bqty,\ufeffkey,plain name\n2026-01-01T00:00:00Z,1,2,3\n")
	path := writePipeline(t, dir, csvPipeline("    fields: {ts: time, qty: int}\n"))
	_, err := config.Load(path)
	want := `no column "qty" in the header of ` + filepath.Join("in", "a.csv") + ` (columns: ts, "\u200bqty", "\ufeffkey", "plain name")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load: %v\nwant an error containing %s", err, want)
	}
}

// writeAt writes content to path, creating its directory.
func writeAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loopYAML is a pipeline whose file source reads glob and whose file sink
// writes into sink.
func loopYAML(glob, sink string) string {
	return `pipeline: loop
sources:
  in:
    type: file
    path: ` + glob + `
    event_time: {field: ts}
    fields: {ts: time}
sinks:
  out: {type: file, input: in, path: ` + sink + `}
`
}

// "A restart must not ... repeat already-visible output": a file sink
// writing where its pipeline's own file source reads would feed its output
// back as input, growing it with every checkpoint. It is refused at
// validation, naming the source and the sink, whether the paths are written
// alike, with "..", absolute against relative, or through symbolic links;
// a sink beside the source's files is accepted. #12 item 13.
func TestHostileSinkFeedsOwnSource(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"in/sub", "out", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "out"), filepath.Join(dir, "in", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "out"), filepath.Join(dir, "outlink")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, glob, sink string
		refused          bool
	}{
		{"glob over the sink's output", "out/*/*.jsonl", "out", true},
		{"dot-dot", "in/../out/*/*.jsonl", "./out", true},
		{"absolute sink", "out/*/*", filepath.Join(dir, "out"), true},
		{"wildcard over the sink directory", "data/*/*/*.jsonl", "data/results", true},
		{"the sink's staging read literally", "out/_staging/pending/*", "out", true},
		{"symlinked directory matched by a wildcard", "in/*/*/*.jsonl", "out", true},
		{"symlinked directory in the glob's prefix", "outlink/*/*.jsonl", "out", true},
		{"symlinked sink path", "out/*/*.jsonl", "outlink", true},
		{"source beside the sink", "in/*.jsonl", "out", false},
		{"sink below the source's files but deeper than the glob", "data/*.jsonl", "data/out", false},
		{"other directory", "in/sub/*.jsonl", "out", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "p.yaml")
			if err := os.WriteFile(path, []byte(loopYAML(tc.glob, tc.sink)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused %s reading %s:\n%v", tc.sink, tc.glob, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted a file sink at %s with a file source reading %s", tc.sink, tc.glob)
			}
			if msg := err.Error(); !strings.Contains(msg, `p.yaml:9: sinks.out.path:`) || !strings.Contains(msg, `source "in"`) || !strings.Contains(msg, "its own output") {
				t.Fatalf("error %q: want it at the sink's path naming source \"in\" and the loop", msg)
			}
		})
	}
}
