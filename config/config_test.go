package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/runtime"
)

// contractYAML is the pipeline file of issue 2's "Contracts" section,
// verbatim.
const contractYAML = `pipeline: quickstart
checkpoint:
  interval: 1s
  dir: data/checkpoints
  retain: 3
sources:
  events:
    type: datagen
    parallelism: 2
    count: 1000000        # total records over all subtasks; omit for unbounded
    rate: 100000          # records per second over all subtasks; omit for as fast as possible
    keys: 100
    start_time: 2026-01-01T00:00:00Z   # default
    event_interval: 1ms                # default
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 1s
    aggregates:
      count: count()
      sum: sum(value)
sinks:
  out:
    type: file
    input: per_key
    path: data/out
    parallelism: 2
`

// writeFile writes a pipeline file under a new temporary directory and
// returns its path.
func writeFile(t *testing.T, rel, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, content string) (*config.Pipeline, string) {
	t.Helper()
	path := writeFile(t, "p.yaml", content)
	p, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	return p, filepath.Dir(path)
}

func nodes(t *testing.T, p *config.Pipeline) map[string]*runtime.Node {
	t.Helper()
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*runtime.Node{}
	for _, n := range plan.Nodes {
		out[n.ID] = n
	}
	return out
}

func TestContractPipelineLoads(t *testing.T) {
	p, dir := load(t, contractYAML)
	if p.Name != "quickstart" {
		t.Errorf("Name = %q", p.Name)
	}
	if p.Checkpoint.Interval != time.Second || p.Checkpoint.Retain != 3 {
		t.Errorf("checkpoint interval %v retain %d, want 1s and 3", p.Checkpoint.Interval, p.Checkpoint.Retain)
	}
	if want := filepath.Join(dir, "data", "checkpoints"); p.CheckpointDir != want {
		t.Errorf("CheckpointDir = %q, want %q", p.CheckpointDir, want)
	}
	if err := p.Checkpoint.Validate(); err != nil {
		t.Errorf("effective checkpoint options invalid: %v", err)
	}
	ns := nodes(t, p)
	if len(ns) != 3 {
		t.Fatalf("nodes %v, want events, per_key, out", ns)
	}
	ev, w, out := ns["events"], ns["per_key"], ns["out"]
	if ev == nil || w == nil || out == nil {
		t.Fatalf("nodes %v, want events, per_key, out", ns)
	}
	if ev.NewSource == nil || ev.Parallelism != 2 || ev.Type != "datagen" {
		t.Errorf("events: source %v, parallelism %d, type %q; want a datagen source with parallelism 2", ev.NewSource != nil, ev.Parallelism, ev.Type)
	}
	for _, s := range []string{"count=1000000", "rate=100000/s", "keys=100"} {
		if !strings.Contains(ev.Describe, s) {
			t.Errorf("events describes itself as %q, missing %s", ev.Describe, s)
		}
	}
	if w.Parallelism != 1 || len(w.Inputs) != 1 || w.Inputs[0].From != ev {
		t.Errorf("per_key: parallelism %d, inputs %v; want 1 fed by events", w.Parallelism, w.Inputs)
	}
	if out.Parallelism != 2 || out.Committer == nil || out.Type != "file" || len(out.Inputs) != 1 || out.Inputs[0].From != w {
		t.Errorf("out: parallelism %d, committer %v, type %q; want a file sink with parallelism 2 fed by per_key", out.Parallelism, out.Committer, out.Type)
	}
	if !strings.Contains(out.Describe, filepath.Join(dir, "data", "out")) {
		t.Errorf("out describes itself as %q; want the resolved path %s", out.Describe, filepath.Join(dir, "data", "out"))
	}
	if d := p.Delivery(); d.Level != runtime.DeliveryExactlyOnce || len(d.Reasons) != 0 {
		t.Errorf("Delivery = %+v, want exactly-once without reasons", d)
	}
	ro := p.RunOptions()
	if ro.CheckpointDir != p.CheckpointDir || ro.Checkpoint != p.Checkpoint || ro.Restart != p.Restart {
		t.Errorf("RunOptions %+v do not carry the loaded settings", ro)
	}
}

const minimalYAML = `pipeline: mini
sources:
  events:
    type: datagen
sinks:
  out:
    type: file
    input: events
    path: out
`

func TestDefaultsMatchReadme(t *testing.T) {
	p, dir := load(t, minimalYAML)
	c := p.Checkpoint
	if c.Interval != 10*time.Second {
		t.Errorf("checkpoint.interval default %v, want 10s", c.Interval)
	}
	if c.Retain != 1 {
		t.Errorf("checkpoint.retain default %d, want 1", c.Retain)
	}
	if c.Timeout != 10*time.Minute {
		t.Errorf("checkpoint.timeout default %v, want 10m", c.Timeout)
	}
	if c.MinPause != 0 {
		t.Errorf("checkpoint.min_pause default %v, want 0", c.MinPause)
	}
	if c.MaxConcurrent != 1 {
		t.Errorf("checkpoint.max_concurrent default %d, want 1", c.MaxConcurrent)
	}
	if c.TolerableFailures != 3 {
		t.Errorf("checkpoint.tolerable_failures default %d, want 3", c.TolerableFailures)
	}
	if c.Mode != checkpoint.ExactlyOnce {
		t.Errorf("checkpoint.mode default %v, want exactly-once", c.Mode)
	}
	if want := filepath.Join(dir, "data", "checkpoints"); p.CheckpointDir != want {
		t.Errorf("checkpoint.dir default %q, want %q", p.CheckpointDir, want)
	}
	if p.Restart.Delay != time.Second {
		t.Errorf("restart.delay default %v, want 1s", p.Restart.Delay)
	}
	if want := runtime.DefaultRestartOptions(); p.Restart != want {
		t.Errorf("restart defaults %+v, want %+v (delay 1s, max_delay 1m, multiplier 2, jitter 0.1, give_up_after 10m, no max_attempts)", p.Restart, want)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if plan.MaxParallelism != 128 {
		t.Errorf("max_parallelism default %d, want 128", plan.MaxParallelism)
	}
	for _, n := range plan.Nodes {
		if n.Parallelism != 1 {
			t.Errorf("node %s parallelism default %d, want 1", n.ID, n.Parallelism)
		}
	}
	ev := nodes(t, p)["events"]
	if !strings.Contains(ev.Describe, "unbounded") || !strings.Contains(ev.Describe, "as fast as possible") || !strings.Contains(ev.Describe, "keys=100") {
		t.Errorf("datagen defaults: %q; want unbounded, as fast as possible, keys=100", ev.Describe)
	}
}

func TestEverySettingIsRead(t *testing.T) {
	p, dir := load(t, `pipeline: full
parallelism: 3
max_parallelism: 64
checkpoint:
  interval: 250ms
  dir: /abs/ckpts
  retain: 4
  staging_max_age: 90s
  timeout: 5m
  min_pause: 2s
  max_concurrent: 2
  tolerable_failures: 0
  mode: at-least-once
restart:
  delay: 0s
  max_attempts: 0
sources:
  events:
    type: datagen
    count: 1_000
    rate: 2.5e3
    keys: 7
    start_time: 2030-02-03T04:05:06.5Z
    event_interval: 250us
transforms:
  w:
    type: window
    input: events
    key: id
    size: 2m
    parallelism: 5
    aggregates:
      n: count()
sinks:
  out:
    type: stdout
    input: w
    parallelism: 1
`)
	_ = dir
	want := checkpoint.Options{Interval: 250 * time.Millisecond, Timeout: 5 * time.Minute, MinPause: 2 * time.Second, MaxConcurrent: 2, TolerableFailures: 0, Retain: 4, StagingMaxAge: 90 * time.Second, Mode: checkpoint.AtLeastOnce}
	if p.Checkpoint != want {
		t.Errorf("checkpoint %+v, want %+v", p.Checkpoint, want)
	}
	if p.CheckpointDir != "/abs/ckpts" {
		t.Errorf("absolute checkpoint dir became %q", p.CheckpointDir)
	}
	if p.Restart.Delay != 0 || p.Restart.MaxAttempts != 0 || p.Restart.GiveUpAfter != 0 {
		t.Errorf("restart %+v, want zero delay and restarts off (max_attempts: 0)", p.Restart)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if plan.MaxParallelism != 64 {
		t.Errorf("max parallelism %d", plan.MaxParallelism)
	}
	ns := nodes(t, p)
	if ns["events"].Parallelism != 3 || ns["w"].Parallelism != 5 || ns["out"].Parallelism != 1 {
		t.Errorf("parallelisms %d %d %d, want 3 (default) 5 1", ns["events"].Parallelism, ns["w"].Parallelism, ns["out"].Parallelism)
	}
	for _, s := range []string{"count=1000", "rate=2500/s", "keys=7"} {
		if !strings.Contains(ns["events"].Describe, s) {
			t.Errorf("events %q lacks %s", ns["events"].Describe, s)
		}
	}
	if !strings.Contains(ns["w"].Describe, "2m0s") {
		t.Errorf("window %q does not show its size 2m", ns["w"].Describe)
	}
}

// Relative paths resolve against the directory of the pipeline file, not
// the working directory.
func TestRelativePathsResolveAgainstFileDir(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub", "dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "p.yaml"), []byte(`pipeline: rel
checkpoint:
  dir: ckpts/here
sources:
  events:
    type: datagen
sinks:
  out:
    type: file
    input: events
    path: ../out
`), 0o644); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	rel, err := filepath.Rel(elsewhere, filepath.Join(sub, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(rel)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(sub, "ckpts", "here"); p.CheckpointDir != want {
		t.Errorf("CheckpointDir = %q, want %q", p.CheckpointDir, want)
	}
	// The sink's committer works in <file dir>/../out: abandoning finds what
	// is staged there.
	outDir := filepath.Join(root, "sub", "out")
	staged := filepath.Join(outDir, "_staging", "pending", "part-x.jsonl")
	if err := os.MkdirAll(filepath.Dir(staged), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staged, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := nodes(t, p)["out"].Committer.Abandon(context.Background(), "job")
	if err != nil || n != 1 {
		t.Fatalf("Abandon through the loaded sink: %d, %v; want 1 staged file under %s", n, err, outDir)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staged file under %s still there: %v", outDir, err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("loading wrote into the working directory: %v", entries)
	}
}

// A transform may name one defined later in the file as its input.
func TestTransformsInAnyOrder(t *testing.T) {
	p, _ := load(t, `pipeline: p
sources:
  events:
    type: datagen
transforms:
  second:
    type: window
    input: first
    key: key
    size: 10s
    aggregates:
      n: count()
  first:
    type: window
    input: events
    key: key
    size: 1s
    aggregates:
      n: count()
      total: sum(value)
sinks:
  out:
    type: stdout
    input: second
`)
	ns := nodes(t, p)
	if ns["second"].Inputs[0].From != ns["first"] || ns["first"].Inputs[0].From != ns["events"] {
		t.Fatal("transforms not wired by input name")
	}
}

// The restart block: every field read; an explicit block of the former
// fixed-delay strategy (delay, max_attempts) still bounds restarts by
// attempts, with the new growing pauses unless it sets multiplier: 1; and
// max_attempts: 0 still turns restarts off. (#12 item 4d)
func TestRestartBlock(t *testing.T) {
	block := func(lines string) string {
		return strings.Replace(minimalYAML, "sources:", "restart:\n"+lines+"sources:", 1)
	}
	for _, c := range []struct {
		name, block string
		want        runtime.RestartOptions
	}{
		{"every field", "  delay: 2s\n  max_delay: 30s\n  multiplier: 1.5\n  jitter: 0\n  give_up_after: 1h\n  max_attempts: 50\n",
			runtime.RestartOptions{Delay: 2 * time.Second, MaxDelay: 30 * time.Second, Multiplier: 1.5, GiveUpAfter: time.Hour, MaxAttempts: 50}},
		{"former block", "  delay: 1s\n  max_attempts: 10\n",
			runtime.RestartOptions{Delay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: 0.1, GiveUpAfter: 10 * time.Minute, MaxAttempts: 10}},
		{"former fixed delay", "  delay: 1s\n  multiplier: 1\n  max_attempts: 10\n",
			runtime.RestartOptions{Delay: time.Second, MaxDelay: time.Minute, Multiplier: 1, Jitter: 0.1, GiveUpAfter: 10 * time.Minute, MaxAttempts: 10}},
		{"restarts off", "  max_attempts: 0\n",
			runtime.RestartOptions{Delay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: 0.1}},
		{"attempts only", "  give_up_after: 0s\n  max_attempts: 3\n",
			runtime.RestartOptions{Delay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: 0.1, MaxAttempts: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := load(t, block(c.block))
			if p.Restart != c.want {
				t.Errorf("restart %+v, want %+v", p.Restart, c.want)
			}
			if err := p.Restart.Validate(); err != nil {
				t.Errorf("loaded restart options invalid: %v", err)
			}
		})
	}
}
