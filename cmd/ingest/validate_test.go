package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate prints every warning after the plan and still succeeds: a
// nondeterministic expression does not make a pipeline invalid.
func TestValidatePrintsWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	src := `pipeline: p
sources:
  events:
    type: datagen
    count: 10
transforms:
  stamped:
    type: map
    input: events
    select:
      id: id
      ts: now()
sinks:
  out:
    type: file
    input: stamped
    path: out
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := validateCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{path})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	want := "warning: " + path + ":12: transforms.stamped.select.ts: column 1: now() is nondeterministic: " +
		"its result changes when records are replayed after a recovery, so output is not exactly-once equal; " +
		"use event_time, the record's event time, instead\n"
	// The call is a caveat of the guarantee, not a weaker level.
	guarantee := "delivery guarantee: exactly-once\n  exactly-once, but expression in 'stamped' calls now(): output may differ on replay\n"
	if !strings.Contains(out.String(), guarantee) || !strings.HasSuffix(out.String(), want) {
		t.Errorf("validate printed:\n%s\nwant it to end with\n%s", out.String(), want)
	}
	// The physical plan: source, map and sink chain into one task.
	physical := "physical plan: 1 task, 0 channels\n  task events → stamped → out ×1\ncheckpoints: "
	if !strings.Contains(out.String(), physical) {
		t.Errorf("validate printed:\n%s\nwant the physical plan\n%s", out.String(), physical)
	}
}
