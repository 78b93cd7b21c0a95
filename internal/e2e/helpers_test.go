package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// yamlJob writes yaml as dir/p.yaml, loads it and returns its job; edit, when
// not nil, may change the run options first.
func yamlJob(t *testing.T, dir, yaml string, edit func(*stream.RunOptions)) *runtime.Job {
	t.Helper()
	return fileJob(t, filepath.Join(dir, "p.yaml"), yaml, edit)
}

// fileJob writes text to the pipeline file path (YAML, or SQL for a .sql
// name) and plans it as yamlJob does.
func fileJob(t *testing.T, path, text string, edit func(*stream.RunOptions)) *runtime.Job {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := p.RunOptions()
	if edit != nil {
		edit(&opts)
	}
	job, err := p.Stream.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// checkWindows asserts that the output committed under dir/data/out is
// exactly the windows of count datagen records over keys keys: every (key,
// window) once with the exact count and sum, nothing else.
func checkWindows(t *testing.T, dir string, count, keys int64) {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "out"))
	if err != nil {
		t.Fatal(err)
	}
	want := testkit.ExpectedWindows(count, keys, datagen.DefaultStartTime, time.Millisecond, time.Second)
	if r := testkit.CheckWindows(lines, want, time.Second); !r.OK() {
		t.Fatalf("committed output is not exact: %s", r)
	}
}

// runStepped runs job to its end on fake, stepping the clock by step each
// time the job makes protocol progress (testkit.DriveClock), and fails the
// test if the run fails or outlasts timeout of real time. The job must have
// been built with fake as its clock.
func runStepped(t *testing.T, job *runtime.Job, fake *clock.Fake, step, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := testkit.RunStepped(ctx, fake, step, job.Run, func() int64 { return job.Stats().Progress() }); err != nil {
		t.Fatalf("run: %v", err)
	}
}
