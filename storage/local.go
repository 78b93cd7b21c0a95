package storage

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/internal/failpoint"
)

// Layout of a Local directory:
//
//	<dir>/chk-0000000007/            one directory per checkpoint, id zero-padded to 10 digits
//	<dir>/chk-0000000007/<name>      state files
//	<dir>/chk-0000000007/_metadata   present only once checkpoint 7 is complete
//	<dir>/chk-0000000007/.tmp-*      metadata being written, or left over by a crash
const (
	dirPrefix = "chk-"
	tmpPrefix = ".tmp-"
)

// Local is the local-directory backend: checkpoints live in a directory of the local filesystem.
// It is the default storage of the embedded engine. It is safe for concurrent use.
//
// Durability: a state file is written and fsynced; its directory entry becomes durable when
// WriteMetadata fsyncs the checkpoint directory, which happens before the checkpoint is complete.
// A checkpoint directory is fsynced into the parent directory when it is created.
type Local struct {
	dir string // immutable
	fs  FS     // immutable

	// slow reports calls that hang (ReportSlowCalls).
	slow SlowCalls

	mu sync.Mutex
	// synced holds the checkpoint ids whose directory exists and whose entry in dir has been fsynced.
	// INVARIANT: an id is added only after MkdirAll and SyncDir(dir) both returned nil.
	synced map[int64]bool // guarded by mu
}

var (
	_ Storage          = (*Local)(nil)
	_ SlowCallReporter = (*Local)(nil)
)

// ReportSlowCalls implements SlowCallReporter: a call whose filesystem
// operations hang (a stuck disk, an unresponsive network filesystem) is
// reported while it hangs.
func (l *Local) ReportSlowCalls(log *slog.Logger, after time.Duration) {
	l.slow.Report(log, l.dir, after)
}

// NewLocal returns storage in directory dir, creating it (and fsyncing it into its parent) if it
// does not exist.
func NewLocal(dir string) (*Local, error) { return NewLocalFS(dir, osFS{}) }

// NewLocalFS is NewLocal on the filesystem fsy: tests give an in-memory one that simulates power
// losses, or one that injects failures (storagetest.CrashFS, storagetest.FaultFS).
func NewLocalFS(dir string, fsy FS) (*Local, error) {
	if dir == "" {
		return nil, errors.New("storage: checkpoint directory is empty")
	}
	dir = filepath.Clean(dir)
	info, err := fsy.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsy.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("storage: create checkpoint directory: %w", err)
		}
		if err := fsy.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("storage: create checkpoint directory %s: sync parent: %w", dir, err)
		}
	case err != nil:
		return nil, fmt.Errorf("storage: checkpoint directory: %w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("storage: checkpoint directory %s is not a directory", dir)
	}
	return &Local{dir: dir, fs: fsy, synced: make(map[int64]bool)}, nil
}

// Location returns the directory the checkpoints live in.
func (l *Local) Location() string { return l.dir }

// chkDir returns the directory of checkpoint id.
func (l *Local) chkDir(id int64) string {
	return filepath.Join(l.dir, CheckpointDirName(id))
}

// ParseCheckpointDirName returns the id a checkpoint directory name stands for. Only the exact name
// CheckpointDirName produces is accepted: a hand-made "chk-7" would otherwise be listed as
// checkpoint 7 while every other method looks in chk-0000000007.
func ParseCheckpointDirName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, dirPrefix)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || fmt.Sprintf("%010d", id) != digits {
		return 0, false
	}
	return id, true
}

// validName says why name cannot be a state file name, or returns nil.
func validName(name string) error {
	why := ""
	switch {
	case name == "":
		why = "empty"
	case len(name) > 255:
		why = "longer than 255 bytes"
	case strings.ContainsAny(name, `/\`+string(os.PathSeparator)):
		why = "contains a path separator"
	case strings.Contains(name, ".."):
		why = `contains ".."`
	case strings.ContainsRune(name, 0):
		why = "contains a NUL byte"
	case name[0] == '.':
		why = `starts with "." (reserved for temporary files)`
	case name[0] == '_':
		why = `starts with "_" (reserved for metadata)`
	default:
		return nil
	}
	return fmt.Errorf("storage: invalid state file name %q: %s", name, why)
}

// ensureDir creates the directory of checkpoint id if needed and makes its entry durable.
//
// A metadata write passes its fence: once the write is abandoned it creates no directory, so it
// cannot recreate one the caller discarded after the abandonment (Discard forgets the id under mu).
func (l *Local) ensureDir(id int64, fence *renameFence) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.synced[id] {
		return nil
	}
	if fence.isAbandoned() {
		return errAbandoned
	}
	dir := l.chkDir(id)
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: create %s: %w", dir, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("storage: create %s: sync %s: %w", dir, l.dir, err)
	}
	l.synced[id] = true
	return nil
}

// writeSynced writes payload and its trailer to path and fsyncs it. With excl the file must not
// exist; otherwise an existing file is replaced. On failure it removes what it wrote.
func (l *Local) writeSynced(path string, payload []byte, excl bool) error {
	flag := os.O_WRONLY | os.O_CREATE
	if excl {
		flag |= os.O_EXCL
	} else {
		flag |= os.O_TRUNC
	}
	f, err := l.fs.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	// Two writes rather than one appended copy: state files can be large.
	_, err = f.Write(payload)
	if err == nil {
		_, err = f.Write(trailer(payload))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = l.fs.Remove(path) // best effort: a partial file fails its checksum anyway
		return err
	}
	return nil
}

// WriteFile stores data as state file name of checkpoint id and fsyncs it. name may not contain a
// path separator or "..", nor start with '.' or '_'. An existing file of that name is replaced.
func (l *Local) WriteFile(ctx context.Context, id int64, name string, data []byte) (Handle, error) {
	if err := ctx.Err(); err != nil {
		return Handle{}, fmt.Errorf("storage: write %s of checkpoint %d: %w", name, id, err)
	}
	if err := checkID(id); err != nil {
		return Handle{}, err
	}
	if err := validName(name); err != nil {
		return Handle{}, err
	}
	defer l.slow.Begin(fmt.Sprintf("write state file %s of checkpoint %d", name, id))()
	if err := l.ensureDir(id, nil); err != nil {
		return Handle{}, err
	}
	path := filepath.Join(l.chkDir(id), name)
	if err := l.writeSynced(path, data, false); err != nil {
		return Handle{}, fmt.Errorf("storage: write %s: %w", path, err)
	}
	return Handle{Name: name, Checkpoint: id, Size: int64(len(data)), CRC: checksum(data)}, nil
}

// ReadFile returns the payload of the state file h names after verifying its trailer, its checksum,
// and that its size and checksum are the ones h records.
func (l *Local) ReadFile(ctx context.Context, h Handle) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: read %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	if err := checkID(h.Checkpoint); err != nil {
		return nil, err
	}
	if err := validName(h.Name); err != nil {
		return nil, err
	}
	defer l.slow.Begin(fmt.Sprintf("read state file %s of checkpoint %d", h.Name, h.Checkpoint))()
	path := filepath.Join(l.chkDir(h.Checkpoint), h.Name)
	payload, err := l.readVerified(path)
	if err != nil {
		return nil, err
	}
	if size, crc := int64(len(payload)), checksum(payload); size != h.Size || crc != h.CRC {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf(
			"does not match its handle: handle says %d bytes crc 0x%08x, file holds %d bytes crc 0x%08x",
			h.Size, h.CRC, size, crc)}
	}
	return payload, nil
}

// StatFile checks that the file h names exists with the size of h's payload and its trailer.
func (l *Local) StatFile(ctx context.Context, h Handle) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: stat %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	if err := checkID(h.Checkpoint); err != nil {
		return err
	}
	if err := validName(h.Name); err != nil {
		return err
	}
	path := filepath.Join(l.chkDir(h.Checkpoint), h.Name)
	fi, err := l.fs.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("storage: stat %s: %w", path, err)
	}
	if want := h.Size + trailerSize; fi.Size() != want {
		return &CorruptError{Path: path, Reason: fmt.Sprintf("%d bytes, its handle says %d (payload and trailer)", fi.Size(), want)}
	}
	return nil
}

// readVerified reads path and returns its verified payload.
func (l *Local) readVerified(path string) ([]byte, error) {
	b, err := l.fs.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read %s: %w", path, err)
	}
	return decode(path, b)
}

// WriteMetadata makes checkpoint id complete: it writes data with its trailer to a temporary file in
// the checkpoint directory, fsyncs it, renames it to _metadata and fsyncs the directory. If the
// directory fsync fails, it removes _metadata again, so that a checkpoint reported as failed does
// not become a recovery point. It refuses to replace the metadata of a complete checkpoint.
//
// The rename is the commit point, and ctx fences it: if ctx ends while the temporary file is still
// being written or synced (a stuck disk), WriteMetadata returns at once with an error wrapping the
// context's cause, and the write, which finishes in the background, removes its temporary file
// instead of renaming it. A checkpoint reported as failed therefore never becomes complete later.
// Once the rename has started, WriteMetadata waits for its outcome whatever ctx does.
func (l *Local) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	if err := ContextErr(ctx); err != nil {
		return fmt.Errorf("storage: write metadata of checkpoint %d: %w", id, err)
	}
	if err := checkID(id); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return l.writeMetadata(id, data, nil)
	}
	f := &renameFence{}
	done := make(chan error, 1)
	go func() { done <- l.writeMetadata(id, data, f) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if f.abandon() {
			return fmt.Errorf("storage: write metadata of checkpoint %d: abandoned before the rename, it can no longer complete: %w", id, ContextErr(ctx))
		}
		return <-done // the rename started: its outcome is the write's
	}
}

// renameFence decides, once, between a metadata write's rename and its abandonment: whichever
// comes first wins, and the other is refused. It is the invariant behind WriteMetadata's ctx: an
// abandoned write never renames.
type renameFence struct {
	mu        sync.Mutex
	abandoned bool
	renaming  bool
}

// rename reports whether the write may rename (it was not abandoned); after it, abandon fails.
func (f *renameFence) rename() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renaming = !f.abandoned
	return f.renaming
}

// abandon reports whether the write is abandoned (its rename had not started); after it, rename
// fails.
func (f *renameFence) abandon() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandoned = !f.renaming
	return f.abandoned
}

// isAbandoned reports whether the write was abandoned; a nil fence never is. The write checks it
// before each step, so an abandoned write stops touching the checkpoint's directory as soon as it
// can. (A step already under way, such as creating the temporary file, may still race a Discard of
// the directory: what it leaves is an incomplete checkpoint's file, which the next recovery
// deletes, like a late state file's.)
func (f *renameFence) isAbandoned() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.abandoned
}

// errAbandoned is what an abandoned metadata write returns to no one: WriteMetadata has already
// returned the context's error.
var errAbandoned = errors.New("storage: metadata write abandoned before the rename")

// writeMetadata is WriteMetadata's work; a nil fence never refuses the rename.
func (l *Local) writeMetadata(id int64, data []byte, fence *renameFence) error {
	// Watched here rather than in WriteMetadata: an abandoned write goes on
	// in the background, and a disk that hangs it is what to report.
	defer l.slow.Begin(fmt.Sprintf("write metadata of checkpoint %d", id))()
	dir := l.chkDir(id)
	final := filepath.Join(dir, MetadataName)
	if fence.isAbandoned() {
		return errAbandoned
	}
	if _, err := l.fs.Stat(final); err == nil {
		return fmt.Errorf("storage: write metadata of checkpoint %d: already complete (%s exists): %w", id, final, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: write metadata of checkpoint %d: %w", id, err)
	}
	if err := l.ensureDir(id, fence); err != nil {
		return err
	}
	if fence.isAbandoned() {
		return errAbandoned
	}
	tmp := filepath.Join(dir, tmpPrefix+MetadataName+"-"+rand.Text())
	if err := l.writeSynced(tmp, data, true); err != nil {
		return fmt.Errorf("storage: write metadata %s: %w", tmp, err)
	}
	if fence != nil && !fence.rename() {
		_ = l.fs.Remove(tmp) // best effort: temporary files never count, and recovery deletes them
		return errAbandoned
	}
	// The temporary file's contents are durable before the rename, so whichever name survives a
	// crash holds complete data.
	if err := l.fs.Rename(tmp, final); err != nil {
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("storage: write metadata of checkpoint %d: %w", id, err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		// The metadata is visible but may not survive a crash. The caller will treat the checkpoint
		// as failed and may abort its sink output, so it must not look complete to a later restore.
		if rerr := l.fs.Remove(final); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return fmt.Errorf("storage: write metadata of checkpoint %d: sync %s: %w (and removing %s failed: %v)", id, dir, err, final, rerr)
		}
		_ = l.fs.SyncDir(dir) // best effort, as the previous sync just failed
		return fmt.Errorf("storage: write metadata of checkpoint %d: sync %s: %w", id, dir, err)
	}
	return nil
}

// ReadMetadata returns the verified metadata payload of checkpoint id. A checkpoint that is not
// complete yields an error wrapping ErrNotFound.
func (l *Local) ReadMetadata(ctx context.Context, id int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: read metadata of checkpoint %d: %w", id, err)
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	defer l.slow.Begin(fmt.Sprintf("read metadata of checkpoint %d", id))()
	return l.readVerified(filepath.Join(l.chkDir(id), MetadataName))
}

// List returns every checkpoint directory in increasing id order. Other entries of the directory are
// ignored. A checkpoint is Complete iff its _metadata file exists; temporary files do not count.
func (l *Local) List(ctx context.Context) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	defer l.slow.Begin("list checkpoints")()
	des, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	var entries []Entry
	for _, de := range des {
		id, ok := ParseCheckpointDirName(de.Name())
		if !ok || !de.IsDir() {
			continue
		}
		dir := l.chkDir(id)
		_, err := l.fs.Stat(filepath.Join(dir, MetadataName))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
		}
		entries = append(entries, Entry{ID: id, Complete: err == nil, Path: dir})
	}
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	return entries, nil
}

// Discard deletes the directory of checkpoint id. It removes the metadata first and makes that
// durable, so a crash part-way leaves an incomplete checkpoint rather than a complete one with state
// files missing. Discarding an absent id is not an error.
func (l *Local) Discard(ctx context.Context, id int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: discard checkpoint %d: %w", id, err)
	}
	if err := checkID(id); err != nil {
		return err
	}
	defer l.slow.Begin(fmt.Sprintf("discard checkpoint %d", id))()
	l.mu.Lock()
	delete(l.synced, id)
	l.mu.Unlock()

	dir := l.chkDir(id)
	if _, err := l.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("storage: discard checkpoint %d: %w", id, err)
	}
	err := l.fs.Remove(filepath.Join(dir, MetadataName))
	if err == nil {
		err = l.fs.SyncDir(dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: discard checkpoint %d: %w", id, err)
	}
	// The checkpoint is no longer complete; a crash here leaves its files,
	// which the next recovery deletes as those of an incomplete checkpoint.
	if err := failpoint.Inject("storage/discard-mid-delete"); err != nil {
		return fmt.Errorf("storage: discard checkpoint %d: %w", id, err)
	}
	if err := l.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("storage: discard checkpoint %d: %w", id, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("storage: discard checkpoint %d: sync %s: %w", id, l.dir, err)
	}
	return nil
}

// Trim reduces checkpoint id's directory to the state files named in keep (see Storage.Trim). It
// removes the metadata and fsyncs the directory before it removes anything else, so no crash can
// leave a complete checkpoint with files missing; then it removes every other entry of the
// directory (temporary files too) and fsyncs it again, so the space is reclaimed for good. With
// keep empty it is Discard. Trimming an absent id is not an error.
func (l *Local) Trim(ctx context.Context, id int64, keep []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
	}
	if err := checkID(id); err != nil {
		return err
	}
	kept := make(map[string]bool, len(keep))
	for _, name := range keep {
		if err := validName(name); err != nil {
			return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
		}
		kept[name] = true
	}
	if len(keep) == 0 {
		return l.Discard(ctx, id)
	}
	defer l.slow.Begin(fmt.Sprintf("trim checkpoint %d to %d files", id, len(keep)))()
	dir := l.chkDir(id)
	if _, err := l.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
	}
	// The directory is synced even when the metadata is already gone: a Trim that removed it and
	// then failed to sync is retried this way.
	if err := l.fs.Remove(filepath.Join(dir, MetadataName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("storage: trim checkpoint %d: sync %s: %w", id, dir, err)
	}
	// The checkpoint is no longer complete; a crash from here on leaves some of the files not in
	// keep, which the next recovery's retention pass trims again (Retain).
	des, err := l.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // discarded meanwhile
	}
	if err != nil {
		return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
	}
	removed := false
	for _, de := range des {
		if kept[de.Name()] {
			continue
		}
		if err := l.fs.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("storage: trim checkpoint %d: %w", id, err)
		}
		removed = true
	}
	if !removed {
		return nil
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("storage: trim checkpoint %d: sync %s: %w", id, dir, err)
	}
	return nil
}

// WriteLedger replaces <dir>/_ledger: a temporary file in dir, fsynced, renamed over it, and dir
// fsynced, so a crash leaves the old ledger or the new one, whole.
func (l *Local) WriteLedger(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: write ledger in %s: %w", l.dir, err)
	}
	final := filepath.Join(l.dir, LedgerName)
	tmp := filepath.Join(l.dir, tmpPrefix+LedgerName+"-"+rand.Text())
	if err := l.writeSynced(tmp, data, true); err != nil {
		return fmt.Errorf("storage: write ledger %s: %w", tmp, err)
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		_ = l.fs.Remove(tmp)
		return fmt.Errorf("storage: write ledger %s: %w", final, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("storage: write ledger %s: sync %s: %w", final, l.dir, err)
	}
	return nil
}

// ReadLedger returns the verified payload of <dir>/_ledger.
func (l *Local) ReadLedger(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: read ledger in %s: %w", l.dir, err)
	}
	return l.readVerified(filepath.Join(l.dir, LedgerName))
}
