package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
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
		count         = 120000
		keys          = 20
		minCompleted  = 500
	)
	wp := testkit.WindowPipeline{
		Name: "retention", Interval: time.Millisecond, Retain: retain, TolerableFailures: 1 << 20,
		RestartDelay: time.Millisecond, MaxAttempts: 1000,
		Count: count, Rate: 16000, Keys: keys, Parallelism: 2, WindowParallelism: 2,
	}
	// The job runs on a fake clock stepped 10 ms (160 records of the rate,
	// and one tick of the job's driver) per checkpoint: the stream lasts
	// about 750 checkpoints however slow the machine, not as many as
	// complete in 7.5 s of real time.
	const step = 10 * time.Millisecond
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "data", "checkpoints")
	stagingDir := filepath.Join(dir, "data", "out", "_staging")

	// A checkpoint fails now and then (the job keeps running); a commit
	// fails, which restarts the job, as does a failure while processing.
	ackFails, d1 := failEvery("task/after-snapshot-before-ack", 151)
	defer d1()
	commitFails, d2 := failEvery("job/after-metadata-before-commit", 139)
	defer d2()
	batchFails, d3 := failEvery("task/process-batch", 1500)
	defer d3()

	job := yamlJob(t, dir, wp.YAML(), func(o *stream.RunOptions) {
		o.Checkpoint.MaxConcurrent = maxConcurrent
		// Sweep staging at every completed checkpoint with no margin; the
		// exact output below shows it never takes what is still to be
		// published.
		o.Checkpoint.StagingMaxAge = 0
		o.Clock = fake
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
	func() {
		defer func() { close(stop); wg.Wait() }()
		runStepped(t, job, fake, step, 5*time.Minute)
	}()

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

	// Bounded while running and at the end. Incremental snapshots keep
	// the earlier checkpoints a retained one builds on ("held"): each window
	// subtask's chain references at most 7 earlier files.
	const chainFiles, windowSubtasks = 7, 2
	bound := retain + maxConcurrent + 1 + chainFiles*windowSubtasks
	if maxDirs > bound {
		t.Errorf("up to %d checkpoint directories while running, want at most %d", maxDirs, bound)
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
	// At the end storage holds the retained checkpoints and what they
	// reference, nothing else: a checkpoint kept only for its files is
	// trimmed to exactly the files retained ones reference (no metadata).
	// The final one, written in full, references nothing.
	kept := map[int64]bool{}
	referenced := map[int64][]string{}
	var complete []int64
	for _, e := range entries {
		if e.Complete {
			complete = append(complete, e.ID)
		}
	}
	for _, id := range complete[max(0, len(complete)-retain):] {
		kept[id] = true
		data, err := lst.ReadMetadata(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			t.Fatal(err)
		}
		if m.Final && len(m.References()) > 0 {
			t.Errorf("final checkpoint %d references %v: it should be self-contained", id, m.References())
		}
		for _, r := range m.SharedFiles() {
			kept[r.Checkpoint] = true
			referenced[r.Checkpoint] = append(referenced[r.Checkpoint], r.Name)
		}
	}
	for _, e := range entries {
		if !kept[e.ID] {
			t.Errorf("checkpoint %d (complete %v) left in storage: neither retained nor referenced by a retained one (stored %v, kept %v)", e.ID, e.Complete, entries, kept)
		}
		if e.Complete {
			continue
		}
		des, err := os.ReadDir(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		want := slices.Compact(slices.Sorted(slices.Values(referenced[e.ID])))
		if !slices.Equal(names, want) {
			t.Errorf("held checkpoint %d holds %q, want exactly the files retained checkpoints reference, %q", e.ID, names, want)
		}
	}
	remaining := int64(len(entries))
	if low, high := ck.Completed-remaining, ck.Completed-remaining+ck.Failed; ob.RetentionDeleted < low || ob.RetentionDeleted > high {
		t.Errorf("RetentionDeleted %d, want between %d (completed %d − stored %d) and %d (+ failed %d)",
			ob.RetentionDeleted, low, ck.Completed, remaining, high, ck.Failed)
	}
	if ob.RetentionDeleted < ck.Completed-int64(len(kept)) {
		t.Errorf("RetentionDeleted %d < completed %d − kept %d", ob.RetentionDeleted, ck.Completed, len(kept))
	}
}

// TestStagingSweptAtCheckpoints shows the staging lifecycle between
// recoveries: abandoned staged output older than checkpoint.staging_max_age
// (here a file and a partial commit planted an hour old while the job runs)
// is deleted after the next completed checkpoint, without a recovery, and
// counted (Observation.SweptStaged, ingest_abandoned_staged_total{at=
// "checkpoint"}); staged output younger than the age stays; and the job's own
// output is exact.
func TestStagingSweptAtCheckpoints(t *testing.T) {
	const (
		count = 60000
		keys  = 10
	)
	wp := testkit.WindowPipeline{
		Name: "sweep", Interval: 20 * time.Millisecond, Retain: 2, TolerableFailures: 3,
		RestartDelay: time.Millisecond, MaxAttempts: 1,
		Count: count, Rate: 20000, Keys: keys, Parallelism: 2, WindowParallelism: 2,
	}
	dir := t.TempDir()
	staging := filepath.Join(dir, "data", "out", "_staging")
	job := yamlJob(t, dir, wp.YAML(), nil) // the default staging_max_age, 10m

	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	for deadline := time.Now().Add(30 * time.Second); job.Stats().Completed < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint completed in 30s")
		}
	}

	hourAgo := time.Now().Add(-time.Hour)
	// plant puts a file (with its directory, when that is new) under _staging in one rename, its
	// times already set, so that no sweep sees it half planted: deleting a file of a directory
	// whose time was not yet set back would make the directory look new for good.
	plant := func(path string, old bool) {
		t.Helper()
		rel, err := filepath.Rel(staging, path)
		if err != nil {
			t.Fatal(err)
		}
		top := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0] // the entry that appears under _staging
		into := staging
		if top == "pending" {
			top, into = filepath.Base(path), filepath.Dir(path)
		}
		if err := os.MkdirAll(into, 0o755); err != nil {
			t.Fatal(err)
		}
		work := filepath.Join(dir, "plant", top)
		file := filepath.Join(work, strings.TrimPrefix(path, filepath.Join(into, top)))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if old {
			for _, p := range []string{file, filepath.Dir(file)} {
				if err := os.Chtimes(p, hourAgo, hourAgo); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.Rename(work, filepath.Join(into, top)); err != nil {
			t.Fatal(err)
		}
	}
	oldPending := filepath.Join(staging, "pending", "part-0-crashed-000000.jsonl")
	oldCommit := filepath.Join(staging, "commit-crashed-7", "part-1-crashed-000003.jsonl")
	young := filepath.Join(staging, "pending", "part-0-other-000000.jsonl")
	plant(oldPending, true)
	plant(oldCommit, true)
	plant(young, false)
	planted := job.Stats().Completed

	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	st, ob := job.Stats(), job.Observe()
	if st.Restarts != 0 || ob.AbandonedStaged != 0 {
		t.Fatalf("stats %+v, abandoned at recovery %d: the test needs a run without recoveries", st, ob.AbandonedStaged)
	}
	if st.Completed <= planted {
		t.Fatalf("no checkpoint completed after the files were planted (%d before, %d in all)", planted, st.Completed)
	}
	for _, p := range []string{oldPending, oldCommit, filepath.Dir(oldCommit)} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("abandoned %s is still staged after checkpoints completed (%v)", p, err)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("staged output younger than staging_max_age was deleted: %v", err)
	}
	if ob.SweptStaged != 2 {
		t.Errorf("SweptStaged %d, want the 2 abandoned files", ob.SweptStaged)
	}
	checkWindows(t, dir, count, keys)
}
