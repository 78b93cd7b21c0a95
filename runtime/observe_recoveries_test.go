package runtime_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
)

// The recovery log names each restart's failure and the checkpoint it
// restored: none for a failure before any checkpoint completed (the attempt
// starts over), the latest complete one for a later failure. A start from a
// checkpoint is listed with cause "checkpoint"; a fresh start is not listed.
func TestRecoveryLog(t *testing.T) {
	var first, second atomic.Bool
	hook := func(ctx *runtime.Context, completed int64) error {
		switch {
		case ctx.Attempt == 0 && first.CompareAndSwap(false, true):
			return errors.New("boom before any checkpoint")
		case ctx.Attempt == 1 && completed >= 2 && second.CompareAndSwap(false, true):
			return errors.New("boom after two checkpoints")
		}
		return nil
	}
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := newTxStore[keyCount]()
	// Unbounded, so each attempt runs until the protocol events the hook
	// waits for happen, however slow the machine: stopped once attempt 2
	// completed a checkpoint of its own.
	src := datagen.Config{Keys: 10, Rate: 50000}
	job := newJob(t, countPipeline(t, src, 2, 2, store, hook), st, fastCheckpoints(10*time.Millisecond), quickRestarts(3))
	if got := job.RecoveryLog(); len(got) != 0 {
		t.Fatalf("recovery log before Run: %+v, want empty", got)
	}
	err = runUntilStopped(t, job, func() bool {
		for _, r := range job.Checkpoints() {
			if r.Attempt == 2 && r.Status == runtime.CheckpointCompleted {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint the second restart restored is the newest one that
	// completed before attempt 1 failed: the newest completed by attempt 1.
	var latest int64
	for _, r := range job.Checkpoints() {
		if r.Status == runtime.CheckpointCompleted && r.Attempt <= 1 {
			latest = max(latest, r.ID)
		}
	}
	log := job.RecoveryLog()
	if len(log) != 2 {
		t.Fatalf("recovery log %+v, want two restarts", log)
	}
	newest, oldest := log[0], log[1]
	if oldest.Cause != "restart" || oldest.Attempt != 1 || oldest.Class != "task" || oldest.Restored != 0 ||
		!strings.Contains(oldest.Failure, "boom before any checkpoint") {
		t.Errorf("first restart %+v: want attempt 1 after the task failure, restoring no checkpoint", oldest)
	}
	if latest == 0 || newest.Cause != "restart" || newest.Attempt != 2 || newest.Class != "task" || newest.Restored != latest ||
		!strings.Contains(newest.Failure, "boom after two checkpoints") {
		t.Errorf("second restart %+v: want attempt 2 after the task failure, restoring checkpoint %d", newest, latest)
	}
	if oldest.FailedAt.IsZero() || oldest.At.Before(oldest.FailedAt) || newest.At.Before(oldest.At) || newest.FailedAt.Before(oldest.At) {
		t.Errorf("times out of order: %+v then %+v", oldest, newest)
	}
	if n := job.CheckpointOptions().Interval; n != 10*time.Millisecond {
		t.Errorf("CheckpointOptions().Interval = %v, want the job's 10ms", n)
	}

	// A second job on the same storage starts from the first one's final
	// checkpoint.
	next := newJob(t, countPipeline(t, datagen.Config{Count: 100, Keys: 10}, 1, 1, store, nil), st,
		fastCheckpoints(time.Hour), quickRestarts(0))
	if err := runBounded(t, next); err != nil {
		t.Fatal(err)
	}
	log = next.RecoveryLog()
	if len(log) != 1 || log[0].Cause != "checkpoint" || log[0].Attempt != 0 || log[0].Restored != job.Stats().Latest || log[0].Failure != "" {
		t.Fatalf("recovery log of the next job %+v, want one start from checkpoint %d", log, job.Stats().Latest)
	}
}
