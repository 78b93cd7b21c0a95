package connector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Dir is a transactional sink of integers, one per line. Each subtask
// stages what it received before a checkpoint's barrier as one file under
// <dir>/_staging; once the checkpoint is complete, the committer publishes
// the checkpoint's files by renaming them into <dir>. A reader that lists
// <dir> (leaving out _staging) sees each number once.
type Dir struct{ dir string }

// NewDir returns a sink writing into dir, which it creates.
func NewDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(dir, "_staging"), 0o755); err != nil {
		return nil, fmt.Errorf("dir sink: %w", err)
	}
	return &Dir{dir: dir}, nil
}

// Descriptor: output is staged per checkpoint and published after it
// completes, so the sink is transactional. Each file appears at once (a
// rename), but a checkpoint's files one after the other (and a subtask's
// files of several checkpoints too, when it staged them while earlier
// checkpoints failed): a reader may see part of a checkpoint's output
// before the rest, so the commit scope is no wider than the subtask.
func (d *Dir) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "dir", Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeSubtask}}
}

// Describe is the one line plans show.
func (d *Dir) Describe() string { return "dir " + d.dir }

// NewSubtask makes a subtask; it does no I/O (Open does).
func (d *Dir) NewSubtask() runtime.SinkSubtask[int64] { return &dirSubtask{dir: d.dir} }

// Committer publishes complete checkpoints' files.
func (d *Dir) Committer() runtime.Committer { return dirCommitter{dir: d.dir} }

// dirSubtask is one subtask of Dir.
type dirSubtask struct {
	dir  string
	name string // job-subtask, the prefix of its staged files
	buf  []byte // lines received since the last barrier
	// pending are the files staged and not yet known published.
	// INVARIANT: reported in every Snapshot until NotifyComplete(id >= PreparedAt)
	// (checkpoint.Committable).
	pending []checkpoint.Committable
}

// Open names the subtask's files after the job and the subtask.
func (w *dirSubtask) Open(ctx *runtime.Context) error {
	w.name = fmt.Sprintf("%s-%d", ctx.JobID, ctx.Task.Subtask)
	return nil
}

// Write keeps the lines until the barrier. Buffering in memory keeps the
// example short; a real sink writes to its staging file as records come.
func (w *dirSubtask) Write(batch runtime.Batch[int64]) error {
	for _, r := range batch {
		w.buf = strconv.AppendInt(w.buf, r.Value, 10)
		w.buf = append(w.buf, '\n')
	}
	return nil
}

// ProcessWatermark does nothing: the sink's output does not depend on time.
func (w *dirSubtask) ProcessWatermark(int64) error { return nil }

// Snapshot stages the lines received since the previous barrier as the
// file of checkpoint id, durably, and reports every file not yet known
// published. Checkpoint ids are never reused, so the name is new.
func (w *dirSubtask) Snapshot(id int64) (runtime.Snapshot, error) {
	if len(w.buf) > 0 {
		name := fmt.Sprintf("%s-%d.txt", w.name, id)
		if err := writeSynced(filepath.Join(w.dir, "_staging", name), w.buf); err != nil {
			return runtime.Snapshot{}, fmt.Errorf("dir sink: staging checkpoint %d: %w", id, err)
		}
		w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: []byte(name)})
		w.buf = w.buf[:0]
	}
	return runtime.Snapshot{Committables: append([]checkpoint.Committable(nil), w.pending...)}, nil
}

// NotifyComplete forgets the files checkpoint id published.
func (w *dirSubtask) NotifyComplete(id int64) error {
	kept := w.pending[:0]
	for _, c := range w.pending {
		if c.PreparedAt > id {
			kept = append(kept, c)
		}
	}
	w.pending = kept
	return nil
}

// Close drops the lines after the last barrier: the source replays them.
func (w *dirSubtask) Close() error { return nil }

// writeSynced writes a new file and makes it and its name durable.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// dirCommitter publishes staged files. The job calls it from one goroutine.
type dirCommitter struct{ dir string }

// Commit renames each staged file of c into the directory. It is
// idempotent: after a crash between two renames the recovery commits c
// again, and a file already published (staged copy gone, published one
// there) is skipped. A file in neither place is lost output: an error no
// restart cures.
func (c dirCommitter) Commit(_ context.Context, _ string, commit checkpoint.Commit) error {
	for _, data := range commit.Committables {
		name := string(data)
		staged, published := filepath.Join(c.dir, "_staging", name), filepath.Join(c.dir, name)
		err := os.Rename(staged, published)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(published); serr == nil {
				continue // published before a crash
			}
			return fmt.Errorf("%w: dir sink: checkpoint %d: staged file %s is gone and was never published", runtime.ErrUnrecoverable, commit.Checkpoint, name)
		}
		if err != nil {
			return fmt.Errorf("dir sink: publishing %s of checkpoint %d: %w", name, commit.Checkpoint, err)
		}
	}
	return syncDir(c.dir)
}

// Abandon deletes the job's staged files. It runs at the start of every
// attempt (the job's and each restart's), after the restored checkpoint's
// files were published, so what the job still has staged belongs to
// checkpoints that never completed: their records are replayed. Files of
// other jobs are left alone: a sink that must own its directory says so as
// a connector.DestinationClaimer.
func (c dirCommitter) Abandon(_ context.Context, jobID string) (int, error) {
	entries, err := os.ReadDir(filepath.Join(c.dir, "_staging"))
	if err != nil {
		return 0, fmt.Errorf("dir sink: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), jobID+"-") {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, "_staging", e.Name())); err != nil {
			return n, fmt.Errorf("dir sink: abandoning %s: %w", e.Name(), err)
		}
		n++
	}
	return n, nil
}
