package e2e

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

var injectSeed = flag.Uint64("injectseed", 0, "replay TestInjectedFailures with this seed (0: random)")

const (
	injCount = 30000
	injKeys  = 20
)

// injectedPipeline is the contract pipeline, bounded and rate limited
// so several checkpoints happen while it runs, and tolerant of the failures
// the tests inject.
var injectedPipeline = testkit.WindowPipeline{
	Name: "injected", Interval: 30 * time.Millisecond, Retain: 2, TolerableFailures: 1000,
	RestartDelay: 5 * time.Millisecond, MaxAttempts: 1000,
	Count: injCount, Rate: 60000, Keys: injKeys, Parallelism: 2, WindowParallelism: 2,
}

// runInjected runs the contract pipeline in dir with storage wrapped by
// wrap (nil: local storage) and returns the job's stats after it finished.
// The job runs on a fake clock stepped one checkpoint interval per protocol
// event, so the stream lasts about the same number of checkpoints (count /
// (rate × interval) = 17) however busy the machine is.
func runInjected(t *testing.T, dir string, wrap func(storage.Storage) storage.Storage) runtime.Stats {
	t.Helper()
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	job := yamlJob(t, dir, injectedPipeline.YAML(), func(opts *stream.RunOptions) {
		st, err := storage.NewLocal(opts.CheckpointDir)
		if err != nil {
			t.Fatal(err)
		}
		opts.Storage = st
		if wrap != nil {
			opts.Storage = wrap(st)
		}
		opts.Clock = fake
		if testing.Verbose() {
			opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	})
	runStepped(t, job, fake, injectedPipeline.Interval, 2*time.Minute)
	return job.Stats()
}

// checkExact asserts the committed output is exactly the expected windows.
func checkExact(t *testing.T, dir string) {
	t.Helper()
	checkWindows(t, dir, injCount, injKeys)
}

// failOn makes failpoint name fail on the calls whose numbers (from 1) are
// in at, and counts the calls.
func failOn(name string, at ...int64) (calls *atomic.Int64, disable func()) {
	calls = &atomic.Int64{}
	fail := map[int64]bool{}
	for _, n := range at {
		fail[n] = true
	}
	disable = failpoint.Enable(name, func() error {
		if fail[calls.Add(1)] {
			return fmt.Errorf("failpoint %s: %w", name, failpoint.ErrInjected)
		}
		return nil
	})
	return calls, disable
}

// TestInjectedFailures fails the pipeline in process at random record counts
// and at each step of the checkpoint protocol, lets it restart from the last
// complete checkpoint, and checks the committed output is exactly the
// expected windows: every (key, window) once with the exact count and sum.
// (checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output, or combine state from different points in the
// stream.")
func TestInjectedFailures(t *testing.T) {
	seed := *injectSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -injectseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// randomAt returns k distinct increasing call numbers in [1, n].
	randomAt := func(k int, n int64) []int64 {
		seen := map[int64]bool{}
		var at []int64
		for len(at) < k {
			c := 1 + rng.Int64N(n)
			if !seen[c] {
				seen[c] = true
				at = append(at, c)
			}
		}
		return at
	}

	cases := []struct {
		name  string
		point string
		at    []int64
		// restart is whether the failure restarts the job (else only the
		// checkpoint fails and the pipeline keeps running).
		restart bool
	}{
		// A subtask fails while processing records: the job restarts. The
		// windows alone take at least 30 batches (30,000 records in batches
		// of at most runtime.DefaultBatchSize), so every call number in
		// [1, 30] is reached however the stepped clock groups the records.
		{"random record counts", "task/process-batch", randomAt(3, 30), true},
		// After the snapshot was written, before the subtask acknowledges.
		{"after snapshot before ack", "task/after-snapshot-before-ack", randomAt(2, 20), true},
		// Every subtask acked; the metadata write fails: the checkpoint fails.
		{"metadata write fails", "job/before-metadata-write", randomAt(2, 8), false},
		// The checkpoint is complete; the commit fails before it starts: the
		// job restarts and the recovery re-commits.
		{"after metadata before commit", "job/after-metadata-before-commit", randomAt(2, 8), true},
		// The sink fails to stage its file at a barrier (a failed fsync): the
		// task fails and the job restarts, so no staged record is dropped.
		// The sink prepares once per checkpoint, and a run completes about
		// 17 of them (a run was seen with 19 and 24 prepares): calls up to 12
		// are reached however the stepped clock groups the barriers.
		{"sink prepare fails", "sink/file/prepare", randomAt(2, 12), true},
		// Half of a checkpoint's files were moved, then the commit fails: the
		// recovery finishes the commit, publishing nothing twice.
		{"mid commit", "sink/file/mid-commit", randomAt(2, 8), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls, disable := failOn(c.point, c.at...)
			defer disable()
			dir := t.TempDir()
			st := runInjected(t, dir, nil)
			t.Logf("failpoint %s failed calls %v of %d; stats %+v", c.point, c.at, calls.Load(), st)
			if calls.Load() < slices.Min(c.at) {
				t.Fatalf("failpoint %s was reached %d times, never at %v: the test did not inject anything", c.point, calls.Load(), c.at)
			}
			if c.restart && st.Restarts == 0 {
				t.Fatalf("the failure at %s did not restart the job", c.point)
			}
			if !c.restart && st.Failed == 0 {
				t.Fatalf("the failure at %s did not fail a checkpoint", c.point)
			}
			checkExact(t, dir)
		})
	}

	// Storage fails at random: state writes and metadata writes. Failed
	// checkpoints never become the recovery point; the pipeline keeps
	// running and its output stays exact.
	t.Run("storage failures", func(t *testing.T) {
		var injected atomic.Int64
		p := 0.15
		srng := rand.New(rand.NewPCG(seed, 1))
		var mu = make(chan struct{}, 1)
		dir := t.TempDir()
		st := runInjected(t, dir, func(s storage.Storage) storage.Storage {
			f := storagetest.NewFaulty(s)
			f.FailWhen(func(op storagetest.Op, id int64, name string) error {
				if op != storagetest.OpWriteFile && op != storagetest.OpWriteMetadata {
					return nil
				}
				mu <- struct{}{}
				fail := srng.Float64() < p
				<-mu
				if fail {
					injected.Add(1)
					return fmt.Errorf("injected %v failure for checkpoint %d: %w", op, id, errors.New("disk full"))
				}
				return nil
			})
			return f
		})
		t.Logf("injected %d storage failures; stats %+v", injected.Load(), st)
		if injected.Load() == 0 || st.Failed == 0 {
			t.Fatalf("no checkpoint failed (%d failures injected)", injected.Load())
		}
		checkExact(t, dir)
	})

	// Everything at once, in a random mix.
	t.Run("mixed", func(t *testing.T) {
		for _, c := range cases {
			_, disable := failOn(c.point, randomAt(1, 10)...)
			defer disable()
		}
		dir := t.TempDir()
		st := runInjected(t, dir, nil)
		t.Logf("stats %+v", st)
		checkExact(t, dir)
	})
}
