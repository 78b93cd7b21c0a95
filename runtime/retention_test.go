package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

// This file checks reference-counted retention under storage faults
// (docs/reliability.md, "Storage faults"): a checkpoint that left the
// retained set and whose files a retained one builds on (incremental
// snapshots) is trimmed to those files; a failed or interrupted trim costs
// nothing but space until the next recovery, which trims again.

// retentionState is what storage holds, as retention sees it.
type retentionState struct {
	// held are the files of every checkpoint without metadata, by checkpoint.
	held map[int64][]string
	// complete are the complete checkpoints.
	complete []int64
	// refs are the files the complete checkpoints reference, by checkpoint,
	// sorted.
	refs map[int64][]string
}

// readRetention reads the retention state of st, whose directory is dir. It
// returns errors rather than failing a test: it runs inside storage calls.
func readRetention(dir string, st storage.Storage) (retentionState, error) {
	ctx := context.Background()
	r := retentionState{held: map[int64][]string{}, refs: map[int64][]string{}}
	entries, err := st.List(ctx)
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		if e.Complete {
			r.complete = append(r.complete, e.ID)
			data, err := st.ReadMetadata(ctx, e.ID)
			if err != nil {
				return r, err
			}
			m, err := checkpoint.DecodeMetadata(data)
			if err != nil {
				return r, err
			}
			for _, f := range m.SharedFiles() {
				r.refs[f.Checkpoint] = append(r.refs[f.Checkpoint], f.Name)
			}
			continue
		}
		des, err := os.ReadDir(filepath.Join(dir, storage.CheckpointDirName(e.ID)))
		if err != nil {
			return r, err
		}
		r.held[e.ID] = []string{}
		for _, de := range des {
			r.held[e.ID] = append(r.held[e.ID], de.Name())
		}
	}
	for id, names := range r.refs {
		slices.Sort(names)
		r.refs[id] = slices.Compact(names)
	}
	return r, nil
}

// stopBeforeFinalCommit makes the commit of the final checkpoint fail, as
// produce does: the job stops with the final checkpoint complete, the one
// before it retained, and the earlier ones it builds on held. It returns the
// function that disables the failpoint.
func stopBeforeFinalCommit(st storage.Storage, job **runtime.Job) func() {
	return failpoint.Enable("job/after-metadata-before-commit", func() error {
		latest := (*job).Stats().Latest
		if latest == 0 {
			return nil
		}
		data, err := st.ReadMetadata(context.Background(), latest)
		if err != nil {
			return err
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			return err
		}
		if m.Final {
			return fmt.Errorf("crash before the final checkpoint's commit: %w", failpoint.ErrInjected)
		}
		return nil
	})
}

// trimEvents is the input of the trim tests: each checkpoint writes the key
// groups of two keys of 40, in one window over the whole run, so that
// checkpoints reference the files of earlier ones for the rest and
// retention holds and trims them. (A state that each checkpoint replaces
// whole, like corruptionPipeline's short windows, is written in full.)
var trimEvents = pacedEvents{count: cCount, per: cPer, hot: 40}

// Trims that storage refuses cost no correctness and no checkpoint: the job
// runs on and logs them, the checkpoints they were for stay whole (their
// metadata too, though they are no recovery points) and are counted as
// trimmed by nobody; the next recovery's retention pass trims them to
// exactly the files the retained checkpoints reference, before the new
// attempt's first checkpoint, and the output stays exact.
func TestFailedTrimsAreRedoneAtRecovery(t *testing.T) {
	dir := t.TempDir()
	ckDir, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	local, err := storage.NewLocal(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	f := storagetest.NewFaulty(local)
	errTrim := errors.New("injected: trim refused")
	var refused atomic.Int64
	f.FailWhen(func(op storagetest.Op, _ int64, _ string) error {
		if op == storagetest.OpTrim {
			refused.Add(1)
			return errTrim
		}
		return nil
	})
	var log testkit.SyncBuffer
	job, err := hotPipeline(trimEvents, out).NewJob(stream.RunOptions{
		Storage: f, Checkpoint: corruptionOptions(), Restart: quickRestarts(0), Log: slog.New(slog.NewTextHandler(&log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	disable := stopBeforeFinalCommit(local, &job)
	err = runBounded(t, job)
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Run = %v, want the injected commit failure", err)
	}
	if refused.Load() == 0 {
		t.Fatal("no trim was attempted: the checkpoints were not incremental")
	}
	if s := job.Stats(); s.Failed != 0 {
		t.Errorf("%d checkpoints failed: a refused trim must fail none", s.Failed)
	}
	if n := job.Observe().RetentionTrimmed; n != 0 {
		t.Errorf("RetentionTrimmed = %d, want 0: every trim failed", n)
	}
	if !strings.Contains(log.String(), "trimming checkpoint data failed") || !strings.Contains(log.String(), errTrim.Error()) {
		t.Errorf("the log does not report the failed trims:\n%s", log.String())
	}
	if r, err := readRetention(ckDir, local); err != nil || len(r.complete) <= 2 || len(r.held) > 0 {
		t.Fatalf("after the first run: %+v, %v; want the held checkpoints whole besides the 2 retained (their trims failed)", r, err)
	}

	// The next process: its recovery trims what the first could not, before
	// its first checkpoint writes anything.
	var once sync.Once
	var at retentionState
	var readErr error
	g := storagetest.NewFaulty(local)
	g.FailWhen(func(op storagetest.Op, _ int64, _ string) error {
		if op == storagetest.OpWriteFile {
			once.Do(func() { at, readErr = readRetention(ckDir, local) })
		}
		return nil
	})
	job2, err := hotPipeline(trimEvents, out).NewJob(stream.RunOptions{
		Storage: g, Checkpoint: corruptionOptions(), Restart: quickRestarts(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job2); err != nil {
		t.Fatalf("Run after the failed trims = %v", err)
	}
	if readErr != nil || at.held == nil {
		t.Fatalf("storage at the second run's first state write: %+v, %v", at, readErr)
	}
	if len(at.complete) != 2 {
		t.Errorf("complete checkpoints at the second run's first checkpoint: %v, want the 2 retained", at.complete)
	}
	if len(at.refs) == 0 {
		t.Fatalf("the retained checkpoints %v reference nothing: nothing to trim", at.complete)
	}
	for id, names := range at.held {
		if !slices.Equal(names, at.refs[id]) {
			t.Errorf("held checkpoint %d holds %q after the recovery, want exactly the files the retained ones reference, %q", id, names, at.refs[id])
		}
	}
	for id := range at.refs {
		if _, ok := at.held[id]; !ok {
			t.Errorf("checkpoint %d, which a retained one references, is not held (no metadata, its files) after the recovery", id)
		}
	}
	if diff := diffMultisets(multiset(committedOutput(t, out)), hotExpected(trimEvents)); diff != "" {
		t.Errorf("published output:\n%s", diff)
	}
}

// A process killed in the middle of a trim (the checkpoint's metadata is
// gone, some of the files nothing references too, the others not yet) loses
// nothing: a new process on what is left restores the newest complete
// checkpoint, whose files are all there, trims the interrupted one again,
// and ends with exact output. (storage's TestTrimCrashAtEveryCall crashes a
// trim at every filesystem call with a power loss's model.)
func TestCrashMidTrim(t *testing.T) {
	dir := t.TempDir()
	ckDir, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
	f := storagetest.NewFaultFS(nil) // the operating system's: a crash is a process kill
	local, err := f.NewLocal(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	// Trim removes files one by one inside the checkpoint's directory;
	// Discard removes the whole directory.
	var trimmed atomic.Int64
	f.CrashWhen(func(op storagetest.FSOp, path string) bool {
		if op != storagetest.FSRemoveAll {
			return false
		}
		id, ok := storagetest.PathCheckpoint(path)
		if !ok || filepath.Base(path) == storage.CheckpointDirName(id) {
			return false
		}
		return trimmed.Add(1) == 3 // not the first: some trims completed before
	})
	job, err := hotPipeline(trimEvents, out).NewJob(stream.RunOptions{
		Storage: local, Checkpoint: corruptionOptions(), Restart: quickRestarts(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job); err == nil {
		t.Fatal("Run = nil: the crash did not happen")
	}
	select {
	case <-f.Crashed():
	default:
		t.Fatal("no crash")
	}
	interrupted, err := readRetention(ckDir, mustLocal(t, ckDir))
	if err != nil {
		t.Fatal(err)
	}
	survivor := mustLocal(t, ckDir)
	latest, _, _, err := storage.Latest(context.Background(), survivor)
	if err != nil {
		t.Fatalf("no recovery point survived the crash: %v", err)
	}
	// Every file the newest checkpoint reads survived.
	m := metadataOf(t, survivor, latest)
	for _, s := range m.Tasks {
		files := s.Shared
		if s.State != nil {
			files = append(files, *s.State)
		}
		for _, h := range files {
			if _, err := survivor.ReadFile(context.Background(), h); err != nil {
				t.Errorf("checkpoint %d, the recovery point after the crash, lost %s of checkpoint %d: %v", latest, h.Name, h.Checkpoint, err)
			}
		}
	}

	job2, err := hotPipeline(trimEvents, out).NewJob(stream.RunOptions{
		Storage: survivor, Checkpoint: corruptionOptions(), Restart: quickRestarts(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runBounded(t, job2); err != nil {
		t.Fatalf("Run on the surviving files = %v", err)
	}
	if s := job2.Stats(); s.RestoredFrom != latest {
		t.Errorf("restored %d, want %d", s.RestoredFrom, latest)
	}
	if diff := diffMultisets(multiset(committedOutput(t, out)), hotExpected(trimEvents)); diff != "" {
		t.Errorf("published output:\n%s", diff)
	}
	// The interrupted trim had left a checkpoint without metadata and with
	// files nothing references; what is left now is the retained
	// checkpoints, whole, and the held ones, each trimmed to exactly the
	// files the retained ones read.
	extra := false
	for id, names := range interrupted.held {
		extra = extra || !slices.Equal(names, interrupted.refs[id])
	}
	if !extra {
		t.Errorf("after the crash: %+v; want a checkpoint trimmed part-way (the crash hit too late)", interrupted)
	}
	r, err := readRetention(ckDir, survivor)
	if err != nil {
		t.Fatal(err)
	}
	for id, names := range r.held {
		if !slices.Equal(names, r.refs[id]) {
			t.Errorf("held checkpoint %d holds %q at the end, want exactly the files the retained ones reference, %q", id, names, r.refs[id])
		}
	}
}

// mustLocal opens a Local on dir.
func mustLocal(t *testing.T, dir string) *storage.Local {
	t.Helper()
	l, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// refsChecked checks, after every trim and discard (the job carries them
// out one at a time, so nothing else deletes meanwhile), that every file a
// complete checkpoint in storage references is there.
type refsChecked struct {
	storage.Storage
	local *storage.Local

	mu   sync.Mutex
	bad  []string
	seen int
}

func (c *refsChecked) Trim(ctx context.Context, id int64, keep []string) error {
	err := c.Storage.Trim(ctx, id, keep)
	c.check(fmt.Sprintf("after the trim of %d (err %v)", id, err))
	return err
}

func (c *refsChecked) Discard(ctx context.Context, id int64) error {
	err := c.Storage.Discard(ctx, id)
	c.check(fmt.Sprintf("after the discard of %d (err %v)", id, err))
	return err
}

func (c *refsChecked) check(when string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background()
	entries, err := c.local.List(ctx)
	if err != nil {
		c.bad = append(c.bad, fmt.Sprintf("%s: %v", when, err))
		return
	}
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		data, err := c.local.ReadMetadata(ctx, e.ID)
		if err == nil {
			var m *checkpoint.Metadata
			if m, err = checkpoint.DecodeMetadata(data); err == nil {
				for _, s := range m.Tasks {
					for _, h := range s.Shared {
						c.seen++
						if err := c.local.StatFile(ctx, h); err != nil {
							c.bad = append(c.bad, fmt.Sprintf("%s: complete checkpoint %d references %s: %v", when, e.ID, h.Ref(), err))
						}
					}
				}
			}
		}
		if err != nil {
			c.bad = append(c.bad, fmt.Sprintf("%s: checkpoint %d: %v", when, e.ID, err))
		}
	}
}

// A trim or discard that storage refuses leaves its checkpoint whole,
// metadata and all: it is still a complete checkpoint, though no recovery
// point the job will choose. The deletions of older checkpoints, whose files
// it may reference, wait until it succeeds (the job retries it before each
// later deletion, and the next recovery redoes it), so storage never holds a
// complete checkpoint with a referenced file missing; the output is exact.
// (Found by TestLongRetention: a failed trim of checkpoint N followed by the
// discard of the checkpoint whose files N read.)
func TestFailedDeletionKeepsReferencedFiles(t *testing.T) {
	for _, every := range []int64{2, 3} {
		t.Run(fmt.Sprintf("every %d refused", every), func(t *testing.T) {
			dir := t.TempDir()
			ckDir, out := filepath.Join(dir, "ck"), filepath.Join(dir, "out")
			local, err := storage.NewLocal(ckDir)
			if err != nil {
				t.Fatal(err)
			}
			f := storagetest.NewFaulty(local)
			var calls, refused atomic.Int64
			f.FailWhen(func(op storagetest.Op, id int64, _ string) error {
				if (op == storagetest.OpTrim || op == storagetest.OpDiscard) && calls.Add(1)%every == 0 {
					refused.Add(1)
					return fmt.Errorf("injected: %v of checkpoint %d refused", op, id)
				}
				return nil
			})
			c := &refsChecked{Storage: f, local: local}
			const count = 2000
			job, err := corruptionPipeline(pacedEvents{count: count, per: cPer}, out).NewJob(stream.RunOptions{
				Storage: c, Checkpoint: corruptionOptions(), Restart: quickRestarts(0),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := runBounded(t, job); err != nil {
				t.Fatalf("run: %v", err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if refused.Load() == 0 || c.seen == 0 {
				t.Fatalf("%d deletions refused, %d references checked: the test injected nothing", refused.Load(), c.seen)
			}
			if len(c.bad) > 0 {
				t.Errorf("%d deletions refused of %d; %d times a complete checkpoint lacked a file it references, first:\n  %s",
					refused.Load(), calls.Load(), len(c.bad), strings.Join(c.bad[:min(len(c.bad), 5)], "\n  "))
			}
			if diff := diffMultisets(multiset(committedOutput(t, out)), expectedCounts(count)); diff != "" {
				t.Errorf("published output:\n%s", diff)
			}
		})
	}
}
