package file

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// Encoder appends one record's encoding (without the newline) to dst. An
// error fails the sink subtask: a record is never replaced or dropped.
type Encoder[T any] func(dst []byte, v T) ([]byte, error)

// Sink writes records of type T under a directory, committed with
// checkpoints, one staging file per subtask per checkpoint in its format
// (JSON Lines or Parquet).
type Sink[T any] struct {
	dir    string
	format format[T]
}

// New returns a sink writing JSON Lines under dir, each record encoded with
// encode.
func New[T any](dir string, encode Encoder[T]) *Sink[T] {
	return &Sink[T]{dir: dir, format: jsonLines[T]{encode: encode}}
}

// JSONLines returns a sink that encodes records with encoding/json, one per
// line.
func JSONLines[T any](dir string) *Sink[T] {
	return New(dir, func(dst []byte, v T) ([]byte, error) {
		b, err := json.Marshal(v)
		return append(dst, b...), err
	})
}

// Describe names the directory and the format.
func (s *Sink[T]) Describe() string {
	return "file " + s.dir + " (" + s.format.describe() + ", committed per checkpoint)"
}

// Committer returns the sink's committer.
func (s *Sink[T]) Committer() runtime.Committer { return committer{dir: s.dir} }

// NewSubtask creates one writer subtask.
func (s *Sink[T]) NewSubtask() runtime.SinkSubtask[T] {
	return &writer[T]{sink: s, enc: s.format.newEncoder(s.dir)}
}

func pendingDir(dir string) string { return filepath.Join(dir, "_staging", "pending") }

// writer is one sink subtask.
type writer[T any] struct {
	sink *Sink[T]
	enc  encoder[T]
	name string // prefix of this subtask's staging files
	seq  int
	f    *os.File
	w    *bufio.Writer
	// sum counts and checksums what w writes to f: the committable records
	// both, and the commit verifies them.
	sum  checksumWriter
	dir  string // the sink's directory, absolute
	file string // current staging file name, "" when none is open
	// pending are the files prepared and not yet known committed.
	// INVARIANT: reported in every Snapshot until NotifyComplete(id >= PreparedAt).
	pending []checkpoint.Committable
}

func (w *writer[T]) Open(ctx *runtime.Context) error {
	if err := os.MkdirAll(pendingDir(w.sink.dir), 0o755); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	var token [4]byte
	_, _ = rand.Read(token[:])
	w.name = fmt.Sprintf("part-%d-%s-%s", ctx.Task.Subtask, ctx.JobID, hex.EncodeToString(token[:]))
	w.dir = absDir(w.sink.dir)
	return nil
}

// BorrowsBatches implements runtime.BorrowingSink: records are encoded
// before Write returns.
func (w *writer[T]) BorrowsBatches() {}

func (w *writer[T]) Write(batch runtime.Batch[T]) error {
	if w.f == nil {
		w.file = fmt.Sprintf("%s-%06d%s", w.name, w.seq, w.sink.format.ext())
		w.seq++
		f, err := os.OpenFile(filepath.Join(pendingDir(w.sink.dir), w.file), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("file sink: opening staging file: %w", err)
		}
		w.f = f
		w.sum = checksumWriter{w: f}
		if w.w == nil {
			w.w = bufio.NewWriterSize(&w.sum, 256<<10)
		} else {
			w.w.Reset(&w.sum)
		}
		w.enc.reset(w.w)
	}
	if err := w.enc.write(batch); err != nil {
		return fmt.Errorf("file sink: writing %s: %w", w.file, err)
	}
	return nil
}

func (w *writer[T]) ProcessWatermark(int64) error { return nil }

// Snapshot prepares: the open staging file is finished, flushed, fsynced
// and closed, and becomes a committable of checkpoint id.
func (w *writer[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	if w.f != nil {
		if err := w.closeFile(); err != nil {
			return runtime.Snapshot{}, err
		}
		if err := syncDir(pendingDir(w.sink.dir)); err != nil {
			return runtime.Snapshot{}, fmt.Errorf("file sink: %w", err)
		}
		staged := stagedFile{Dir: w.dir, File: w.file, Size: w.sum.n, CRC: w.sum.crc}
		w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: staged.encode()})
		w.file = ""
	}
	return runtime.Snapshot{Committables: slices.Clone(w.pending)}, nil
}

func (w *writer[T]) closeFile() error {
	err := w.enc.finish()
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if err == nil {
		err = failpoint.Inject("sink/file/prepare")
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return fmt.Errorf("file sink: staging %s: %w", w.file, err)
	}
	return nil
}

// NotifyComplete drops the files a complete checkpoint publishes.
func (w *writer[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	return nil
}

// Close closes an open staging file; what it holds belongs to no checkpoint
// and is abandoned at the next recovery.
func (w *writer[T]) Close() error {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	return nil
}

// Sweep deletes the files under <path>/_staging that another job left,
// last modified before before, and the commit directories left empty, while
// the job runs (see runtime.StagingSweeper). A subtask writes a staging file
// only after the barrier of the checkpoint it prepares it for, and closes it
// at that barrier; the runtime calls Sweep after a checkpoint published
// everything prepared up to it, with before no later than its trigger. So a
// file last written before then was prepared for that checkpoint or an
// earlier one and would have been moved out by the commit: it is abandoned
// (left by a crashed process of another job, or put there by hand). The
// directories the subtasks write into (pending) are kept.
//
// Files and commit directories named with this job's id are never swept:
// the job's recovery already abandoned everything staged before it started,
// so all of them belong to its running subtasks, and keeping them makes the
// job's own output independent of clocks and timestamps. Modification times
// are also coarser than the clock the trigger time was read from (a kernel
// tick, a second on some filesystems, two on FAT): Sweep keeps files up to
// mtimeSlack older than before.
func (c committer) Sweep(_ context.Context, jobID string, before time.Time) (int, error) {
	before = before.Add(-mtimeSlack)
	staging := filepath.Join(c.dir, "_staging")
	var files, dirs []string
	err := filepath.WalkDir(staging, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // nothing staged yet, or the entry went away
			}
			return err
		}
		if ownStaging(d.Name(), jobID) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case !info.ModTime().Before(before):
		case !d.IsDir():
			files = append(files, path)
		case path != staging && path != pendingDir(c.dir):
			// Judged by its age before its files go (deleting them
			// makes it look new).
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("file sink: listing %s: %w", staging, err)
	}
	n := 0
	for _, f := range files {
		err := os.Remove(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("file sink: deleting abandoned %s: %w", f, err)
		}
		n++
	}
	// Deepest first, so a directory whose subdirectories were emptied goes
	// too; one that is not empty stays (os.Remove refuses).
	slices.Reverse(dirs)
	for _, d := range dirs {
		_ = os.Remove(d)
	}
	if n > 0 {
		return n, syncDir(staging)
	}
	return 0, nil
}

// ownStaging reports whether a name under _staging belongs to job jobID: a
// staging file part-<subtask>-<job>-… or a commit directory commit-<job>-<N>.
func ownStaging(name, jobID string) bool {
	return (strings.HasPrefix(name, "part-") && strings.Contains(name, "-"+jobID+"-")) ||
		strings.HasPrefix(name, "commit-"+jobID+"-")
}

// mtimeSlack is how much earlier than the time it was written a file's
// modification time may read: the coarsest common timestamp granularity
// (FAT's two seconds), so Sweep never takes a file written after its cutoff.
const mtimeSlack = 2 * time.Second

// syncDir fsyncs a directory so renames and new entries in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// checksumWriter passes writes to w, counting the bytes and their CRC-32C.
type checksumWriter struct {
	w   io.Writer
	n   int64
	crc uint32
}

func (c *checksumWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}
