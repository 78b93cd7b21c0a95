package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// advancingSink's snapshot takes `took` of the job's (fake) clock: its
// synchronous part is the slowest part of every checkpoint.
type advancingSink struct {
	fake *clock.Fake
	took time.Duration
}

func (s advancingSink) NewSubtask() runtime.SinkSubtask[datagen.Event] { return &advancingWriter{s} }
func (advancingSink) Committer() runtime.Committer                     { return nil }
func (advancingSink) Descriptor() connector.Descriptor                 { return connector.Descriptor{} }
func (advancingSink) Describe() string                                 { return "a sink whose snapshot takes time" }

type advancingWriter struct{ advancingSink }

func (w *advancingWriter) Open(*runtime.Context) error              { return nil }
func (w *advancingWriter) Write(runtime.Batch[datagen.Event]) error { return nil }
func (w *advancingWriter) ProcessWatermark(int64) error             { return nil }
func (w *advancingWriter) Snapshot(int64) (runtime.Snapshot, error) {
	w.fake.Advance(w.took)
	return runtime.Snapshot{}, nil
}
func (w *advancingWriter) NotifyComplete(int64) error { return nil }
func (w *advancingWriter) Close() error               { return nil }

// runSlowCheckpoints runs 3 checkpoints; see runSlowCheckpointsFor.
func runSlowCheckpoints(t *testing.T, took time.Duration) (*runtime.Job, string) {
	return runSlowCheckpointsFor(t, took, 3)
}

// runSlowCheckpointsFor runs an unbounded input into a sink whose snapshot
// takes took of the job's clock, checkpoints every second, until n periodic
// checkpoints completed; then it stops the job (a final checkpoint) and
// returns it and its log. The clock advances one interval at a time, each
// time once the checkpoint before completed: nothing but the sink's snapshot
// moves it while a checkpoint is in flight, so each takes exactly what the
// sink adds to it.
func runSlowCheckpointsFor(t *testing.T, took time.Duration, n int64) (*runtime.Job, string) {
	t.Helper()
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	src, err := datagen.Events(datagen.Config{Rate: 100, Keys: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("slow-checkpoints")
	stream.To(stream.From[datagen.Event](p, "events", src), "sink", stream.Sink[datagen.Event](advancingSink{fake: fake, took: took}))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = time.Second
	var logs testkit.SyncBuffer
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Clock: fake, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	sfWaitFor(t, done, "the job to wait on the clock", func() bool { return fake.Waiters() >= 2 })
	for k := int64(1); k <= n; k++ {
		fake.Advance(time.Second)
		sfWaitFor(t, done, fmt.Sprintf("checkpoint %d", k), func() bool { return job.Stats().Completed >= k })
	}
	job.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("the stopped job did not end: %+v", job.Stats())
	}
	return job, logs.String()
}

// A checkpoint that takes more than 80% of the interval is slow: the job
// warns once per minute naming the slowest part and subtask, counts every
// slow one, and the observation keeps the newest.
func TestSlowCheckpointWarning(t *testing.T) {
	job, logs := runSlowCheckpoints(t, 900*time.Millisecond)
	completed := job.Stats().Completed
	if completed < 2 {
		t.Fatalf("%d checkpoints completed, want several", completed)
	}
	slow := job.Observe().LastSlowCheckpoint
	if slow == nil {
		t.Fatalf("no slow checkpoint observed; log:\n%s", logs)
	}
	if slow.Count != completed || slow.Phase != "sync" || slow.Task.Operator != "sink" || slow.PhaseDuration < 900*time.Millisecond ||
		slow.Duration < 900*time.Millisecond || slow.Interval != time.Second {
		t.Errorf("last slow checkpoint %+v, want all %d slow, the sink's sync of >= 900ms the slowest part", *slow, completed)
	}
	var warnings []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "checkpoints take more than 80% of the interval") {
			warnings = append(warnings, line)
		}
	}
	// Every checkpoint is slow, all within a minute of the job's clock: one
	// warning, for the first.
	if len(warnings) != 1 {
		t.Fatalf("%d warnings, want 1 (once per minute):\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	for _, want := range []string{"level=WARN", "slowest_phase=sync", "slowest_subtask=sink[0]", "interval=1s", "slow_checkpoints=1", "reduce state pressure"} {
		if !strings.Contains(warnings[0], want) {
			t.Errorf("warning %q lacks %q", warnings[0], want)
		}
	}
}

// 70% of the interval is not slow.
func TestCheckpointWithinInterval(t *testing.T) {
	job, logs := runSlowCheckpoints(t, 700*time.Millisecond)
	if s := job.Observe().LastSlowCheckpoint; s != nil {
		t.Errorf("slow checkpoint %+v at 70%% of the interval", *s)
	}
	if strings.Contains(logs, "checkpoints take more than") {
		t.Errorf("warned at 70%% of the interval:\n%s", logs)
	}
}

// The warning repeats after a minute of the job's clock, counting the slow
// checkpoints in between.
func TestSlowCheckpointWarningRepeatsAfterAMinute(t *testing.T) {
	job, logs := runSlowCheckpointsFor(t, 900*time.Millisecond, 80)
	var counts []string
	for _, line := range strings.Split(logs, "\n") {
		if i := strings.Index(line, "slow_checkpoints="); i >= 0 && strings.Contains(line, "checkpoints take more than") {
			counts = append(counts, strings.Fields(line[i:])[0])
		}
	}
	completed := job.Stats().Completed
	// 80 checkpoints 1.9 s apart on the job's clock (1 s of interval, 0.9 s
	// of snapshot) and the final one: 152 s, warnings at 0.9 s, 61.7 s and
	// 122.5 s, each after the 32 slow checkpoints since the one before.
	want := []string{"slow_checkpoints=1", "slow_checkpoints=32", "slow_checkpoints=32"}
	if !slices.Equal(counts, want) || completed != 81 {
		t.Fatalf("warnings with %v over %d slow checkpoints, want %v over 81", counts, completed, want)
	}
}
