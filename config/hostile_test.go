package config_test

import (
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
