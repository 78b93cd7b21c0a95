package runtime_test

import (
	"errors"
	"github.com/ingest-engine/ingest/internal/testkit"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// Hostile cases of the runtime: each test names the sentence of
// checkpointing.txt it defends and the issue item.

// defaultRestartsOn returns the default strategy on clock c.
func defaultRestartsOn(c runtime.RestartClock) runtime.RestartOptions {
	o := runtime.DefaultRestartOptions()
	o.Clock = c
	return o
}

// failFirst returns a count hook that fails its first n calls: each attempt
// fails at its first batch, before any checkpoint completes, as while a
// destination is down.
func failFirst(n int64) (func(*runtime.Context, int64) error, *atomic.Int64) {
	var calls atomic.Int64
	return func(*runtime.Context, int64) error {
		if calls.Add(1) <= n {
			return errors.New("destination down")
		}
		return nil
	}, &calls
}

// checkpointing.txt: "A restart must not lose accepted data" — an outage
// longer than the former default restart budget (10 restarts 1 s apart, ~17 s
// with the attempts) is ridden out: 12 failures in a row, then the job ends
// with exact output. The default strategy's pauses grow 1 s, 2 s, 4 s …
// (±10 %). (#12 item 4d)
func TestDefaultRestartsRideOutAFailureStreak(t *testing.T) {
	const count, keys = 200, 10
	hook, _ := failFirst(12)
	store := newTxStore[keyCount]()
	clock := testkit.NewInstantClock()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys}, 1, 1, store, hook)
	job := newJob(t, p, newLocal(t), fastCheckpoints(0), defaultRestartsOn(clock))
	if err := runBounded(t, job); err != nil {
		t.Fatalf("a streak of 12 failures stopped the job: %v", err)
	}
	if r := job.Stats().Restarts; r != 12 {
		t.Errorf("Restarts = %d, want 12", r)
	}
	pauses := clock.Pauses()
	for i, d := range pauses {
		base := time.Duration(min(int64(1)<<i, 60)) * time.Second
		if d < base*9/10 || d > base*11/10 {
			t.Errorf("pause %d = %v, want %v ±10%%", i+1, d, base)
		}
	}
	got := store.values()
	if len(got) != count {
		t.Fatalf("%d values committed, want %d", len(got), count)
	}
	verifyCounts(t, got, keys, 1, []int64{count})
}

// checkpointing.txt: "Recovery always starts from a checkpoint whose required
// state was fully persisted" — and a job that cannot get there stops, saying
// why: with the default budget a job failing for good gives up at the first
// failure 10 minutes after the streak began (after 15 restarts without
// jitter), naming the budget and wrapping the cause. (#12 item 4d)
func TestDefaultRestartsGiveUpAfterTheBudget(t *testing.T) {
	hook, calls := failFirst(1 << 40)
	clock := testkit.NewInstantClock()
	o := defaultRestartsOn(clock)
	o.Jitter = 0
	p := countPipeline(t, datagen.Config{Count: 200, Keys: 10}, 1, 1, newTxStore[keyCount](), hook)
	job := newJob(t, p, newLocal(t), fastCheckpoints(0), o)
	err := runBounded(t, job)
	if err == nil || !strings.Contains(err.Error(), "no checkpoint completed within the restart budget of 10m0s") || !strings.Contains(err.Error(), "destination down") {
		t.Fatalf("Run = %v, want giving up after the 10m budget, wrapping the cause", err)
	}
	if r := job.Stats().Restarts; r != 15 || calls.Load() != 16 {
		t.Errorf("Restarts = %d and %d attempts, want 15 restarts (1+2+4+8+16+32+60×9 = 603 s)", r, calls.Load())
	}
}

// A completed checkpoint resets the pause: a job that fails once after each
// of 20 checkpoints restarts 20 times, each after the initial pause, and
// ends with exact output. (#12 item 4d)
func TestRestartPauseResetsAfterACompletedCheckpoint(t *testing.T) {
	const count, keys = 20_000, 10
	var failures, last atomic.Int64
	hook := func(_ *runtime.Context, completed int64) error {
		if completed > last.Load() && failures.Load() < 20 {
			last.Store(completed)
			failures.Add(1)
			return errors.New("fails once per completed checkpoint")
		}
		return nil
	}
	store := newTxStore[keyCount]()
	clock := testkit.NewInstantClock()
	o := defaultRestartsOn(clock)
	o.Jitter = 0
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 20_000}, 1, 1, store, hook)
	job := newJob(t, p, newLocal(t), fastCheckpoints(5*time.Millisecond), o)
	if err := runWithin(job, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if failures.Load() != 20 {
		t.Fatalf("%d failures injected, want 20: the run ended first", failures.Load())
	}
	for i, d := range clock.Pauses() {
		if d != time.Second {
			t.Errorf("pause %d = %v after a completed checkpoint, want 1s", i+1, d)
		}
	}
	verifyCounts(t, store.values(), keys, 1, []int64{count})
}

// Stop during a pause ends the pause: the job restarts at once and stops
// gracefully instead of waiting out a backoff of up to a minute. (#12 item 4d)
func TestStopEndsTheRestartPause(t *testing.T) {
	hook, calls := failFirst(1)
	o := runtime.DefaultRestartOptions()
	o.Delay, o.MaxDelay = time.Hour, time.Hour // a real pause nobody waits out
	p := countPipeline(t, datagen.Config{Keys: 10, Rate: 1000}, 1, 1, newTxStore[keyCount](), hook)
	job := newJob(t, p, newLocal(t), fastCheckpoints(10*time.Millisecond), o)
	err := runUntilStopped(t, job, func() bool { return calls.Load() >= 1 })
	if err != nil {
		t.Fatalf("Run = %v, want a graceful stop", err)
	}
	if r := job.Stats().Restarts; r != 1 {
		t.Errorf("Restarts = %d, want 1", r)
	}
}

// slowCallSpy is checkpoint storage that records the log a job gives it for
// reporting calls that hang.
type slowCallSpy struct {
	*storage.Local
	log   *slog.Logger
	after time.Duration
}

func (s *slowCallSpy) ReportSlowCalls(log *slog.Logger, after time.Duration) {
	s.log, s.after = log, after
}

// checkpointing.txt: "Monitor at least: … checkpoint-storage latency" — a
// job hands its log to storage that reports hanging calls, so a store that
// stops answering shows in the job's log while it hangs, with the default
// threshold. (#12 item 4d)
func TestJobGivesStorageItsLogForSlowCalls(t *testing.T) {
	spy := &slowCallSpy{Local: newLocal(t)}
	log := slog.New(slog.DiscardHandler)
	p := countPipeline(t, datagen.Config{Count: 10, Keys: 2}, 1, 1, newTxStore[keyCount](), nil)
	if _, err := p.NewJob(stream.RunOptions{Storage: spy, Checkpoint: fastCheckpoints(0), Restart: quickRestarts(0), Log: log}); err != nil {
		t.Fatal(err)
	}
	if spy.log != log || spy.after != 0 {
		t.Fatalf("ReportSlowCalls got (%v, %v), want the job's log and the default threshold", spy.log, spy.after)
	}
}
