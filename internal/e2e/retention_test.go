package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// failEvery makes failpoint name fail on every nth call.
func failEvery(name string, n int64) (fired *atomic.Int64, disable func()) {
	var calls atomic.Int64
	fired = &atomic.Int64{}
	disable = failpoint.Enable(name, func() error {
		if calls.Add(1)%n == 0 {
			fired.Add(1)
			return fmt.Errorf("failpoint %s: %w", name, failpoint.ErrInjected)
		}
		return nil
	})
	return fired, disable
}

// checkpointDirs counts the checkpoint directories under dir.
func checkpointDirs(dir string) int {
	des, _ := os.ReadDir(dir)
	n := 0
	for _, de := range des {
		if _, ok := storage.ParseCheckpointDirName(de.Name()); ok {
			n++
		}
	}
	return n
}

// stagedFiles counts the regular files under dir (a file sink's _staging),
// ignoring what disappears while it walks.
func stagedFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestRetentionKeepsStorageBounded runs the contract pipeline (datagen →
// keyed window → file sink) through more than 500 checkpoints while
// failures are injected — failed checkpoints and in-process restarts — and
// shows that neither the checkpoint directory nor the sink's staging
// directory grows: retention deletes complete checkpoints beyond the
// retained count, failed ones are discarded, and staged files are published
// or abandoned. The committed output is still exact, and the observation's
// RetentionDeleted accounts for every complete checkpoint deleted
// (checkpointing.txt: "obsolete checkpoint data and abandoned staging data
// do not grow without bound").
func TestRetentionKeepsStorageBounded(t *testing.T) {
	const (
		retain        = 3
		maxConcurrent = 1
		count         = 200000
		keys          = 20
		minCompleted  = 500
	)
	wp := testkit.WindowPipeline{
		Name: "retention", Interval: time.Millisecond, Retain: retain, TolerableFailures: 1 << 20,
		RestartDelay: time.Millisecond, MaxAttempts: 1000,
		Count: count, Rate: 16000, Keys: keys, Parallelism: 2, WindowParallelism: 2,
	}
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "data", "checkpoints")
	stagingDir := filepath.Join(dir, "data", "out", "_staging")

	// A checkpoint fails now and then (the job keeps running); a commit
	// fails, which restarts the job, as does a failure while processing.
	ackFails, d1 := failEvery("task/after-snapshot-before-ack", 151)
	defer d1()
	commitFails, d2 := failEvery("job/after-metadata-before-commit", 139)
	defer d2()
	batchFails, d3 := failEvery("task/process-batch", 6000)
	defer d3()

	job := yamlJob(t, dir, wp.YAML(), func(o *stream.RunOptions) {
		o.Checkpoint.MaxConcurrent = maxConcurrent
	})

	// Sample both directories while the job runs.
	var maxDirs, maxStaged, samples int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			maxDirs = max(maxDirs, checkpointDirs(ckDir))
			maxStaged = max(maxStaged, stagedFiles(stagingDir))
			samples++
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := job.Run(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	ob := job.Observe()
	ck := ob.Checkpoints
	st := job.Stats()
	t.Logf("checkpoints: %d triggered, %d completed, %d failed; restarts %d; injected: %d ack, %d commit, %d batch failures; "+
		"retention deleted %d; %d samples: at most %d checkpoint dirs, %d staged files",
		ck.Triggered, ck.Completed, ck.Failed, st.Restarts, ackFails.Load(), commitFails.Load(), batchFails.Load(),
		ob.RetentionDeleted, samples, maxDirs, maxStaged)
	if ck.Completed < minCompleted {
		t.Fatalf("only %d checkpoints completed; the test needs %d", ck.Completed, minCompleted)
	}
	if ackFails.Load() == 0 || commitFails.Load() == 0 || batchFails.Load() == 0 || st.Restarts == 0 {
		t.Fatalf("not every failure was injected (ack %d, commit %d, batch %d, restarts %d)",
			ackFails.Load(), commitFails.Load(), batchFails.Load(), st.Restarts)
	}

	// Bounded while running and at the end.
	bound := retain + maxConcurrent + 1
	if maxDirs > bound {
		t.Errorf("up to %d checkpoint directories while running, want at most %d", maxDirs, bound)
	}
	if n := checkpointDirs(ckDir); n > retain {
		t.Errorf("%d checkpoint directories at the end, want at most %d (retain)", n, retain)
	}
	const stagedBound = 4 * 2 // a few checkpoints' files per sink subtask
	if maxStaged > stagedBound {
		t.Errorf("up to %d files under _staging while running, want at most %d", maxStaged, stagedBound)
	}
	if n := stagedFiles(stagingDir); n > 0 {
		t.Errorf("%d files left under _staging after the final checkpoint's commit", n)
	}

	checkWindows(t, dir, count, keys)

	// Every complete checkpoint no longer stored was deleted by retention
	// and counted; only a failed one's leftovers, removed by the retention
	// pass at a recovery, can add to the count.
	lst, err := storage.NewLocal(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := lst.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	remaining := int64(len(entries))
	if low, high := ck.Completed-remaining, ck.Completed-remaining+ck.Failed; ob.RetentionDeleted < low || ob.RetentionDeleted > high {
		t.Errorf("RetentionDeleted %d, want between %d (completed %d − stored %d) and %d (+ failed %d)",
			ob.RetentionDeleted, low, ck.Completed, remaining, high, ck.Failed)
	}
	if ob.RetentionDeleted < ck.Completed-retain {
		t.Errorf("RetentionDeleted %d < completed %d − retain %d", ob.RetentionDeleted, ck.Completed, retain)
	}
}
