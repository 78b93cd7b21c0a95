package config_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// filePosition is how a file source's error locates a record.
func filePosition(r inputRecord) string {
	return fmt.Sprintf("%s:%d (byte offset %d)", r.partition, r.line, r.offset)
}

// JSON Lines files with malformed lines, wrong types, missing event times
// and oversized lines among good ones, under each on_error policy (see
// checkPolicies).
func TestConfigOnErrorFileJSONLines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	dir := t.TempDir()
	var recs []inputRecord
	for _, f := range []string{"a", "b"} {
		rs := jsonRecords(300, f)
		writeLines(t, filepath.Join(dir, "in", f+".jsonl"), nil, rs)
		recs = append(recs, rs...)
	}
	source := fmt.Sprintf("    type: file\n    path: %s\n    stop_at: latest\n    parallelism: 2\n", filepath.Join(dir, "in", "*.jsonl")) + badInputFields
	checkPolicies(t, source, recs, filePosition)
}

// CSV files with bare quotes, wrong types, missing event times, too few
// fields and oversized records among good ones (some spanning two lines),
// under each on_error policy.
func TestConfigOnErrorFileCSV(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	dir := t.TempDir()
	var recs []inputRecord
	for _, f := range []string{"a", "b"} {
		rs := csvRecords(300, f)
		writeLines(t, filepath.Join(dir, "in", f+".csv"), []string{"id,name,ts"}, rs)
		recs = append(recs, rs...)
	}
	source := fmt.Sprintf("    type: file\n    format: csv\n    path: %s\n    stop_at: latest\n    parallelism: 2\n", filepath.Join(dir, "in", "*.csv")) + badInputFields
	checkPolicies(t, source, recs, filePosition)
}

// The policy's mistakes are configuration errors at their line: an unknown
// on_error, a max_record_bytes that is not positive, dead_letter with
// nothing reading <source>.dead_letter (records would be lost), reading it
// without dead_letter, and on_error on a source that has no bad input
// (datagen).
func TestConfigOnErrorConfigErrors(t *testing.T) {
	const src = `pipeline: e
checkpoint: {dir: ckpts}
sources:
  in:
    type: file
    path: in/*.jsonl
    fields: {id: int, ts: time}
    event_time: {field: ts}
    stop_at: latest
%s
sinks:
  out: {type: file, input: in, path: out}
%s`
	for _, tc := range []struct {
		name, source, sinks string
		want                []string
	}{
		{"unknown policy", "    on_error: ignore", "", []string{`p.yaml:10: sources.in.on_error: unknown value "ignore" (known: dead_letter, fail, skip)`}},
		{"zero size", "    max_record_bytes: 0", "", []string{"p.yaml:10: sources.in.max_record_bytes: must be positive"}},
		{"dead letters unread", "    on_error: dead_letter", "", []string{"p.yaml:10: sources.in.on_error: dead_letter, but nothing reads in.dead_letter: its bad records would be lost"}},
		{"dead letters without the policy", "    on_error: skip", "  dlq: {type: file, input: in.dead_letter, path: dlq}\n",
			[]string{"p.yaml:10: sources.in.on_error: in.dead_letter is read as an input, but on_error is skip", "set on_error: dead_letter"}},
		{"dead letters without a policy", "", "  dlq: {type: file, input: in.dead_letter, path: dlq}\n",
			[]string{"p.yaml:5: sources.in: in.dead_letter is read as an input, but on_error is fail"}},
		{"misspelled output", "    on_error: dead_letter", "  dlq: {type: file, input: in.dead_letters, path: dlq}\n",
			[]string{`in has no side output "dead_letters" (its side outputs: dead_letter)`, "nothing reads in.dead_letter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("p.yaml", []byte(fmt.Sprintf(src, tc.source, tc.sinks)))
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
	_, err := config.Parse("p.yaml", []byte(`pipeline: e
checkpoint: {dir: ckpts}
sources:
  gen: {type: datagen, count: 10, on_error: skip}
sinks:
  out: {type: file, input: gen, path: out}
`))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4: sources.gen.on_error: unknown field") {
		t.Fatalf("datagen with on_error: %v, want an unknown-field error", err)
	}
	p, err := config.Parse("p.yaml", []byte(fmt.Sprintf(src, "    on_error: dead_letter\n    max_record_bytes: 1024", "  dlq: {type: file, input: in.dead_letter, path: dlq}\n")))
	if err != nil {
		t.Fatalf("a dead-letter pipeline: %v", err)
	}
	if plan := planText(t, p); !strings.Contains(plan, "on_error dead_letter") || !strings.Contains(plan, "dlq (parallelism 1): ") || !strings.Contains(plan, "<- in.dead_letter") {
		t.Errorf("plan does not show the dead-letter output:%s", plan)
	}
}

// A source that infers its fields from its first record skips a first
// record that is not JSON when on_error tolerates bad records, and infers
// from the next (which alone has the field name a window keys by); with
// fail, inference stops at it.
func TestConfigOnErrorInferenceSkipsBadFirstRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("samples a source")
	}
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in", "a.jsonl"), nil, []inputRecord{
		{text: `{"id": 1, "ts": `},
		{text: `{"id": 2, "ts": 1767225600000, "name": "x"}`},
	})
	y := `pipeline: infer
checkpoint: {dir: ckpts}
sources:
  in: {type: file, path: in/*.jsonl, event_time: {field: ts}, stop_at: latest, on_error: %s}
transforms:
  w: {type: window, input: in, key: name, size: 1s, aggregates: {c: count()}}
sinks:
  out: {type: file, input: w, path: out}
%s`
	if _, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(fmt.Sprintf(y, "dead_letter", "  dlq: {type: file, input: in.dead_letter, path: dlq}\n"))); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if _, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(fmt.Sprintf(y, "fail", ""))); err == nil || !strings.Contains(err.Error(), "inferring fields from the first record") {
		t.Fatalf("Parse with fail: %v, want the inference error", err)
	}
}
