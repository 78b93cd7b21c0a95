package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// writePipeline writes src as p.yaml in a new directory and returns its path.
func writePipeline(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stdoutPipeline is datagen to stdout, at-least-once, with the checkpoint
// block given.
func stdoutPipeline(checkpoint string) string {
	return "pipeline: p\ncheckpoint:\n" + checkpoint + `sources:
  events:
    type: datagen
    count: 10
sinks:
  log:
    type: stdout
    input: events
`
}

// validate prints the level, then one line a reason naming the node and its
// type; the same words start run's output (of a run that fails at once, its
// source being unreachable).
func TestValidatePrintsGuarantee(t *testing.T) {
	path := writePipeline(t, `pipeline: p
restart: {max_attempts: 0}
sources:
  events:
    type: nats
    url: nats://127.0.0.1:1
    stream: S
    fields: {id: int}
sinks:
  log:
    type: stdout
    input: events
`)
	want := "delivery guarantee: at-least-once\n" +
		"  at-least-once: sink 'log' (stdout) is not transactional: output since the last checkpoint is written again after a recovery\n"
	stdout, _, err := runCLI(validateCmd(), path)
	if err != nil || !strings.Contains(stdout, want) {
		t.Errorf("validate: %v, printed\n%s\nwant it to hold\n%s", err, stdout, want)
	}
	_, stderr, err := runCLI(runCmd(), path)
	if err == nil || !strings.HasPrefix(stderr, "pipeline p\n") || !strings.Contains(stderr, want) {
		t.Errorf("run: %v, printed\n%s\nwant it to hold\n%s", err, stderr, want)
	}
}

// checkpoint.require: exactly-once refuses a weaker pipeline with the exit
// code of a configuration error, in validate and in run, naming both levels
// and the reason; a pipeline that meets it shows the requirement.
func TestRequireRefuses(t *testing.T) {
	path := writePipeline(t, stdoutPipeline("  require: exactly-once\n"))
	for name, cmd := range map[string]func() *cobra.Command{"validate": validateCmd, "run": runCmd} {
		stdout, stderr, err := runCLI(cmd(), path)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitConfig {
			t.Fatalf("%s: %v, want exit code %d", name, err, exitConfig)
		}
		want := path + ":3: checkpoint.require: exactly-once is required, but the pipeline is at-least-once: sink 'log' (stdout) is not transactional"
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v\nwant it to start with\n%s", name, err, want)
		}
		if stdout != "" || stderr != "" {
			t.Errorf("%s printed before refusing:\n%s%s", name, stdout, stderr)
		}
	}
	path = writePipeline(t, stdoutPipeline("  require: at-least-once\n"))
	stdout, _, err := runCLI(validateCmd(), path)
	if err != nil || !strings.Contains(stdout, "delivery guarantee: at-least-once (checkpoint.require: at-least-once)\n") {
		t.Errorf("validate: %v\n%s", err, stdout)
	}
}

// runCLI runs cmd with args in-process and returns what it wrote to stdout
// and stderr and its error. A command serving HTTP does not: tests run in
// parallel and the port may be taken.
func runCLI(cmd *cobra.Command, args ...string) (string, string, error) {
	if cmd.Flags().Lookup("http") != nil {
		args = append([]string{"--http="}, args...)
	}
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), errb.String(), err
}
