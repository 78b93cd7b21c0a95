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

// A SQL script with EXPLAIN prints its plan — keyed state, the delivery
// guarantee and every nondeterministic call — under ingest run, and runs
// nothing: no checkpoint directory, no output.
func TestRunExplainPrintsThePlanAndRunsNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	src := `CREATE SOURCE events WITH (connector = 'datagen', count = 100, keys = 3);
CREATE VIEW stamped AS SELECT key, value, proctime() AS seen FROM events;
EXPLAIN CREATE SINK out AS SELECT key, count(*) AS n FROM events GROUP BY key WITH (connector = 'file', path = 'out');
EXPLAIN SELECT key, seen FROM stamped;
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := runCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{path})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"out-query-aggregate (parallelism 1): aggregate by [key], updating {keyed state by fields [key]}",
		"explain-4-out (parallelism 1): discard",
		"delivery guarantee: exactly-once\n  exactly-once, but expression in 'stamped' calls now(): output may differ on replay\n",
		"EXPLAIN: the plan above is printed; nothing runs",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run printed:\n%s\nwant it to contain %q", out.String(), want)
		}
	}
	for _, made := range []string{"out", "data"} {
		if _, err := os.Stat(filepath.Join(dir, made)); !os.IsNotExist(err) {
			t.Errorf("%s exists after an EXPLAIN (%v): something ran", made, err)
		}
	}
}
