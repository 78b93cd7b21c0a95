package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// This file checks incremental checkpoints end to end: a checkpoint writes
// only the key groups written since the last complete one and references the
// earlier files for the rest, and recovery from such a chain is exact.

// hotPipeline counts each key's records in one window spanning the whole run
// (so its state lives until the end) at parallelism 2, into a file sink.
func hotPipeline(src pacedEvents, outDir string) *stream.Pipeline {
	p := stream.New("incremental")
	events := stream.From[cEvent](p, "events", src, stream.Parallelism(1))
	keyed := stream.KeyBy(events, func(e cEvent) int64 { return e.Key })
	counts := window.Tumbling(keyed, "w", time.Hour, window.CountOf[cEvent](),
		func(k int64, w window.Window, n int64) wCount { return wCount{Key: k, Start: w.Start, Count: n} },
		stream.Parallelism(2))
	stream.To(counts, "out", stream.Sink[wCount](file.JSONLines[wCount](outDir)), stream.Parallelism(1))
	return p
}

// hotExpected is hotPipeline's exact output.
func hotExpected(s pacedEvents) map[wCount]int {
	n := map[int64]int64{}
	for i := range s.count {
		n[s.key(i)]++
	}
	out := map[wCount]int{}
	for k, c := range n {
		out[wCount{Key: k, Count: c}]++
	}
	return out
}

// The job crashes (a failure injected after subtasks acknowledged, and
// while state is written) at several checkpoints and recovers each time
// from the latest complete one, whose keyed state is an incremental chain:
// the committed output is exactly the expected counts, and checkpoints did
// reuse earlier files.
func TestIncrementalCheckpointsExactUnderCrashes(t *testing.T) {
	src := pacedEvents{count: 3000, per: 60, hot: 40}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	st, err := storage.NewLocal(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	var acks, writes atomic.Int64
	defer failpoint.Enable("task/after-ack", func() error {
		if n := acks.Add(1); n%23 == 0 {
			return fmt.Errorf("crash after ack %d: %w", n, failpoint.ErrInjected)
		}
		return nil
	})()
	defer failpoint.Enable("task/during-async-write", func() error {
		if n := writes.Add(1); n%31 == 0 {
			return fmt.Errorf("crash during state write %d: %w", n, failpoint.ErrInjected)
		}
		return nil
	})()
	o := fastCheckpoints(2 * time.Millisecond)
	o.Retain = 2
	job := newJob(t, hotPipeline(src, out), st, o, quickRestarts(1000))
	if err := runBounded(t, job); err != nil {
		t.Fatalf("run: %v", err)
	}
	if s := job.Stats(); s.Restarts < 3 {
		t.Fatalf("%d restarts: the crashes were not injected", s.Restarts)
	}
	if d := diffMultisets(multiset(committedOutput(t, out)), hotExpected(src)); d != "" {
		t.Fatalf("committed output differs from the exact counts:\n%s", d)
	}
	reused := 0
	for _, r := range job.Checkpoints() {
		if r.Status == runtime.CheckpointCompleted && r.FilesReused > 0 {
			reused++
			if r.StateSizeIncremental >= r.StateSizeFull {
				t.Fatalf("checkpoint %d reuses %d files but wrote %d of %d bytes", r.ID, r.FilesReused, r.StateSizeIncremental, r.StateSizeFull)
			}
		}
	}
	if reused == 0 {
		t.Fatal("no completed checkpoint reused an earlier state file: the checkpoints were not incremental")
	}
	// The first checkpoint after a restore builds on the files restored
	// from instead of rewriting all state.
	first := map[int]runtime.CheckpointRecord{}
	for _, r := range job.Checkpoints() {
		if f, ok := first[r.Attempt]; r.Attempt > 1 && r.Status == runtime.CheckpointCompleted && (!ok || r.ID < f.ID) {
			first[r.Attempt] = r
		}
	}
	afterRestore := 0
	for _, r := range first {
		if r.FilesReused > 0 {
			afterRestore++
		}
	}
	if afterRestore == 0 {
		t.Fatalf("none of the %d attempts' first checkpoints built on the restored files", len(first))
	}
}

// A shared state file that the latest checkpoint needs and storage lost is
// found before any state is used and named (the checkpoint and the file);
// the recovery falls back to an older checkpoint, and the output stays
// exact.
func TestMissingSharedStateFileIsNamed(t *testing.T) {
	src := pacedEvents{count: 1500, per: 60, hot: 40}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	st, err := storage.NewLocal(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	o := fastCheckpoints(2 * time.Millisecond)
	o.Retain = 3
	// The first run stops (its commits fail for good) once a checkpoint
	// whose state builds on an earlier file is complete.
	var victim storage.Handle
	var owner int64
	disable := failpoint.Enable("job/after-metadata-before-commit", func() error {
		_, data, _, err := storage.Latest(context.Background(), st)
		if err != nil {
			return nil
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			return err
		}
		for _, s := range m.Tasks {
			for _, h := range s.Shared {
				if h.Checkpoint < m.ID && m.ID > 5 {
					victim, owner = h, m.ID
					return fmt.Errorf("stop with checkpoint %d complete: %w", m.ID, failpoint.ErrInjected)
				}
			}
		}
		return nil
	})
	job := newJob(t, hotPipeline(src, out), st, o, quickRestarts(0))
	err = runBounded(t, job)
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("first run: %v, want the injected stop", err)
	}
	// Storage loses the shared file.
	if err := os.Remove(filepath.Join(dir, "ck", storage.CheckpointDirName(victim.Checkpoint), victim.Name)); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	job, err = hotPipeline(src, out).NewJob(stream.RunOptions{Storage: st, Checkpoint: o, Restart: quickRestarts(0), Log: slog.New(slog.NewTextHandler(&logs, nil)), LSM: testLSM})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job); err != nil {
		t.Fatalf("second run: %v\nlog:\n%s", err, logs.String())
	}
	want := fmt.Sprintf("written by checkpoint %d, which checkpoint %d's incremental state builds on", victim.Checkpoint, owner)
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), victim.Name) {
		t.Fatalf("log does not name the missing shared file %s (%q):\n%s", victim.Name, want, logs.String())
	}
	if got := job.Stats().RestoredFrom; got >= owner {
		t.Fatalf("restored from checkpoint %d, want one older than %d, whose shared file is missing", got, owner)
	}
	if d := diffMultisets(multiset(committedOutput(t, out)), hotExpected(src)); d != "" {
		t.Fatalf("committed output differs from the exact counts:\n%s", d)
	}
}
