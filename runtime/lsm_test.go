package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// testLSM is the state backend newJob gives jobs: nil (memory) unless a
// test runs on the pebble backend (withLSM).
var testLSM *state.LSMOptions

// withLSM makes newJob's jobs keep their state in Pebble stores under a
// directory of the test's, until the test ends.
func withLSM(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testLSM = &state.LSMOptions{Dir: dir, CacheBytes: 16 << 20}
	t.Cleanup(func() { testLSM = nil })
	return dir
}

// The runtime tests of keyed state, restarts, rescaling and damaged files,
// on the pebble backend: every assertion they make of the memory backend
// holds (exact output under injected crashes, recovery from incremental
// checkpoints, a missing shared file named and fallen back from, keyed state
// redistributed at another parallelism).
func TestLSMBackend(t *testing.T) {
	for name, f := range map[string]func(*testing.T){
		"IncrementalCheckpointsExactUnderCrashes":         TestIncrementalCheckpointsExactUnderCrashes,
		"MissingSharedStateFileIsNamed":                   TestMissingSharedStateFileIsNamed,
		"RescaleKeyedStateAcrossRuns":                     TestRescaleKeyedStateAcrossRuns,
		"SubtaskErrorRestartsFromLastCompleteCheckpoint":  TestSubtaskErrorRestartsFromLastCompleteCheckpoint,
		"StopTakesFinalCheckpointAndNextRunResumes":       TestStopTakesFinalCheckpointAndNextRunResumes,
		"BoundedPipelineEndsWithCommittedFinalCheckpoint": TestBoundedPipelineEndsWithCommittedFinalCheckpoint,
	} {
		t.Run(name, func(t *testing.T) {
			withLSM(t)
			f(t)
		})
	}
}

// Switching a job's backend between runs: a memory backend's checkpoint is
// taken over by the pebble backend (its state moved into the stores), and
// the output stays exact; a pebble checkpoint is refused by the memory
// backend at once, as incompatible, with a message that says which backend
// wrote it, and is kept.
func TestLSMBackendSwitch(t *testing.T) {
	src := pacedEvents{count: 3000, per: 60, hot: 40}
	for _, from := range []string{"memory", "pebble"} {
		t.Run("from "+from, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			st, err := storage.NewLocal(filepath.Join(dir, "ck"))
			if err != nil {
				t.Fatal(err)
			}
			if from == "pebble" {
				withLSM(t)
			}
			// The first run stops (its commits fail for good) once a few
			// checkpoints completed, with windows open.
			disable := failpoint.Enable("job/after-metadata-before-commit", func() error {
				if _, data, _, err := storage.Latest(context.Background(), st); err == nil {
					if m, err := checkpoint.DecodeMetadata(data); err == nil && m.ID > 5 {
						return fmt.Errorf("stop with checkpoint %d complete: %w", m.ID, failpoint.ErrInjected)
					}
				}
				return nil
			})
			job := newJob(t, hotPipeline(src, out), st, fastCheckpoints(2*time.Millisecond), quickRestarts(0))
			err = runBounded(t, job)
			disable()
			if !errors.Is(err, failpoint.ErrInjected) {
				t.Fatalf("first run: %v, want the injected stop", err)
			}
			if from == "pebble" {
				testLSM = nil
			} else {
				withLSM(t)
			}
			job = newJob(t, hotPipeline(src, out), st, fastCheckpoints(2*time.Millisecond), quickRestarts(3))
			err = runBounded(t, job)
			if from == "pebble" {
				if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "pebble") {
					t.Fatalf("run with the memory backend: %v; want an incompatibility naming the pebble backend", err)
				}
				if job.Stats().Restarts != 0 {
					t.Fatalf("%d restarts: an incompatible checkpoint is not retried", job.Stats().Restarts)
				}
				return
			}
			if err != nil {
				t.Fatalf("run on the pebble backend: %v", err)
			}
			if job.Stats().RestoredFrom == 0 {
				t.Fatal("the pebble run did not restore the memory backend's checkpoint")
			}
			if d := diffMultisets(multiset(committedOutput(t, out)), hotExpected(src)); d != "" {
				t.Fatalf("committed output differs from the exact counts:\n%s", d)
			}
		})
	}
}

// The working store deleted under a running job (an operator cleaning up
// disk space) fails it at its next flush; the job restarts from the last
// complete checkpoint, fetching its files from storage, and the output
// stays exact.
func TestLSMStateDirDeletedWhileRunning(t *testing.T) {
	lsmDir := withLSM(t)
	src := pacedEvents{count: 3000, per: 60, hot: 40}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	st, err := storage.NewLocal(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, hotPipeline(src, out), st, fastCheckpoints(2*time.Millisecond), quickRestarts(1000))
	done := make(chan error, 1)
	go func() { done <- runWithin(job, runTimeout) }()
	deadline := time.Now().Add(runTimeout)
	for job.Stats().Completed < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint completed")
		}
		time.Sleep(time.Millisecond)
	}
	// Moved away at once (a removal races with the stores' writes), then
	// removed.
	if err := os.Rename(lsmDir, lsmDir+".gone"); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(lsmDir + ".gone")
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if d := diffMultisets(multiset(committedOutput(t, out)), hotExpected(src)); d != "" {
		t.Fatalf("committed output differs from the exact counts:\n%s", d)
	}
}
