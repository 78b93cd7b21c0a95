package blob

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// Layout under the prefix, the same names as storage.Local's directory:
//
//	<prefix>chk-0000000007/            one key prefix per checkpoint, id zero-padded to 10 digits
//	<prefix>chk-0000000007/<name>      state files
//	<prefix>chk-0000000007/_metadata   present only once checkpoint 7 is complete
//	<prefix>.lease                     the lock object (see lock.go), while a job holds it
//
// Every object is its payload followed by storage's checksum trailer.

// Storage keeps checkpoints in an object store bucket (s3, file, mem; see bucket). It implements
// storage.Storage with storage.Local's semantics and storage.Locker with a lease (see Lock). It is
// safe for concurrent use.
//
// Atomicity: an object store's PUT is atomic (an object is visible whole or not at all), so no
// temporary object is needed. The metadata object is written last, with a conditional create
// (IfNotExist), so the metadata of a complete checkpoint is never replaced, and a retried write
// whose first attempt landed is recognised by reading back the same bytes.
type Storage struct {
	bucket bucket    // immutable
	owned  bool      // immutable; Close closes bucket
	loc    *location // immutable
	opts   Options   // immutable
	// slow reports calls that hang, and the lease's lapses (ReportSlowCalls).
	slow storage.SlowCalls

	mu sync.Mutex
	// held is the lock taken by Lock, nil when none is held.
	held *lease // guarded by mu
}

var (
	_ storage.Storage          = (*Storage)(nil)
	_ storage.Locker           = (*Storage)(nil)
	_ storage.SlowCallReporter = (*Storage)(nil)
)

// ReportSlowCalls implements storage.SlowCallReporter: a call whose requests hang (a store that
// stops answering) is reported while it hangs, and so are the lock's lapses and renewals.
func (s *Storage) ReportSlowCalls(log *slog.Logger, after time.Duration) {
	s.slow.Report(log, s.loc.base, after)
}

func newStorage(b bucket, owned bool, loc *location, opts Options) *Storage {
	return &Storage{bucket: b, owned: owned, loc: loc, opts: opts}
}

// Location returns where the checkpoints live, as scheme://bucket/prefix: without credentials and
// without the URL's parameters.
func (s *Storage) Location() string { return s.loc.base }

// Close releases the bucket (a named mem:// bucket stays, for the next Open of its URL). A lock
// taken by Lock is not released: call its release function.
func (s *Storage) Close() error {
	if !s.owned {
		return nil
	}
	return s.bucket.close()
}

// isNotExist reports whether err is a driver's "no such object".
func isNotExist(err error) bool { return errors.Is(err, errNotExist) }

// dirKey returns the key prefix of checkpoint id, ending in "/".
func (s *Storage) dirKey(id int64) string {
	return s.loc.prefix + storage.CheckpointDirName(id) + "/"
}

// where returns the location of key for messages.
func (s *Storage) where(key string) string {
	return s.loc.base + "/" + strings.TrimPrefix(key, s.loc.prefix)
}

// fail wraps err with what was being done and removes any secret from the message.
func (s *Storage) fail(err error, format string, args ...any) error {
	return scrub(fmt.Errorf("storage/blob: "+format+": %w", append(args, err)...), s.loc.secrets)
}

// notFound reports a missing object as storage.ErrNotFound (and fs.ErrNotExist, as Local does).
func (s *Storage) notFound(key string) error {
	return fmt.Errorf("%w: %s: %w", storage.ErrNotFound, s.where(key), fs.ErrNotExist)
}

// timeout returns ctx bounded by Options.Timeout.
func (s *Storage) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// usable returns nil if this Storage may be used: it holds no lock, or a valid one. A process whose
// lock lapsed or was lost (another may have taken over) must not write or delete anything, and must
// not read either: a job's restart begins with List and Latest, and refusing them keeps the restart from
// reaching the recovery step that abandons staged sink output, which would delete the new
// holder's.
func (s *Storage) usable() error {
	s.mu.Lock()
	l := s.held
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.valid()
}

// put stores payload with its trailer under key. With ifNotExist the object must not exist (the
// error then wraps errExists). Cancelling ctx aborts the upload, leaving no object.
func (s *Storage) put(ctx context.Context, key string, payload []byte, ifNotExist bool) error {
	// Two parts rather than one appended copy: state files can be large.
	return s.bucket.put(ctx, key, [][]byte{payload, storage.Trailer(payload)}, ifNotExist)
}

// readVerified reads key and returns its verified payload; a missing object wraps ErrNotFound.
func (s *Storage) readVerified(ctx context.Context, key string) ([]byte, error) {
	b, err := s.bucket.get(ctx, key)
	if isNotExist(err) {
		return nil, s.notFound(key)
	}
	if err != nil {
		return nil, s.fail(err, "read %s", s.where(key))
	}
	return storage.Decode(s.where(key), b)
}

// WriteFile stores data as state file name of checkpoint id. name may not contain a path
// separator or "..", nor start with '.' or '_'. An existing object of that name is replaced.
func (s *Storage) WriteFile(ctx context.Context, id int64, name string, data []byte) (storage.Handle, error) {
	if err := ctx.Err(); err != nil {
		return storage.Handle{}, fmt.Errorf("storage/blob: write %s of checkpoint %d: %w", name, id, err)
	}
	if err := storage.CheckID(id); err != nil {
		return storage.Handle{}, err
	}
	if err := storage.ValidName(name); err != nil {
		return storage.Handle{}, err
	}
	if err := s.usable(); err != nil {
		return storage.Handle{}, err
	}
	defer s.slow.Begin(fmt.Sprintf("write state file %s of checkpoint %d", name, id))()
	key := s.dirKey(id) + name
	if err := s.put(ctx, key, data, false); err != nil {
		return storage.Handle{}, s.fail(err, "write %s", s.where(key))
	}
	return storage.Handle{Name: name, Checkpoint: id, Size: int64(len(data)), CRC: storage.Checksum(data)}, nil
}

// ReadFile returns the payload of the state file h names after verifying its trailer, its
// checksum, and that its size and checksum are the ones h records.
func (s *Storage) ReadFile(ctx context.Context, h storage.Handle) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/blob: read %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	if err := storage.CheckID(h.Checkpoint); err != nil {
		return nil, err
	}
	if err := storage.ValidName(h.Name); err != nil {
		return nil, err
	}
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("storage/blob: read %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	defer s.slow.Begin(fmt.Sprintf("read state file %s of checkpoint %d", h.Name, h.Checkpoint))()
	key := s.dirKey(h.Checkpoint) + h.Name
	payload, err := s.readVerified(ctx, key)
	if err != nil {
		return nil, err
	}
	if size, crc := int64(len(payload)), storage.Checksum(payload); size != h.Size || crc != h.CRC {
		return nil, &storage.CorruptError{Path: s.where(key), Reason: fmt.Sprintf(
			"does not match its handle: handle says %d bytes crc 0x%08x, file holds %d bytes crc 0x%08x",
			h.Size, h.CRC, size, crc)}
	}
	return payload, nil
}

// StatFile checks that the object of the state file h names exists (object stores tell the size
// only with another request: a missing object is what it finds).
func (s *Storage) StatFile(ctx context.Context, h storage.Handle) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/blob: stat %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	if err := storage.CheckID(h.Checkpoint); err != nil {
		return err
	}
	if err := storage.ValidName(h.Name); err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return fmt.Errorf("storage/blob: stat %s of checkpoint %d: %w", h.Name, h.Checkpoint, err)
	}
	key := s.dirKey(h.Checkpoint) + h.Name
	ok, err := s.bucket.exists(ctx, key)
	if err != nil {
		return s.fail(err, "stat %s", s.where(key))
	}
	if !ok {
		return s.notFound(key)
	}
	return nil
}

// WriteMetadata makes checkpoint id complete: it writes data with its trailer to the _metadata
// object with a conditional create (IfNotExist). It refuses to replace the metadata of a complete
// checkpoint (the error wraps fs.ErrExist).
//
// A failed request does not say whether the object was stored (the response may be lost after the
// store committed it, and the client may retry a request that landed, getting "already exists").
// WriteMetadata settles it by reading the object back: if it holds exactly the bytes written, the
// write happened and the call succeeds; if it is absent, the call fails and nothing is visible; if
// the read fails too, it deletes the object (best effort) so that a checkpoint reported as failed
// does not become a recovery point, and returns the error.
//
// ctx can abandon the write only before the put starts; the put itself runs to its request
// timeout whatever ctx does (the put is the commit point, see Storage.WriteMetadata).
func (s *Storage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	if err := storage.ContextErr(ctx); err != nil {
		return fmt.Errorf("storage/blob: write metadata of checkpoint %d: %w", id, err)
	}
	if err := storage.CheckID(id); err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return fmt.Errorf("storage/blob: write metadata of checkpoint %d: %w", id, err)
	}
	defer s.slow.Begin(fmt.Sprintf("write metadata of checkpoint %d", id))()
	key := s.dirKey(id) + storage.MetadataName
	want := append(bytes.Clone(data), storage.Trailer(data)...)

	// The put is the commit point: once it started, the caller's context no longer cuts it off (a
	// store may commit a request its client abandoned), only the request timeout does; a caller
	// that gave up earlier was refused above.
	wctx, cancel := s.timeout(context.WithoutCancel(ctx))
	err := s.put(wctx, key, data, true)
	cancel()
	if err == nil {
		return nil
	}
	// Settle the outcome: a landed write must not be left unknown.
	rctx, cancel := s.timeout(context.WithoutCancel(ctx))
	defer cancel()
	got, rerr := s.bucket.get(rctx, key)
	switch {
	case rerr == nil && bytes.Equal(got, want):
		return nil // this call's write landed
	case rerr == nil:
		return fmt.Errorf("storage/blob: write metadata of checkpoint %d: already complete (%s exists): %w", id, s.where(key), fs.ErrExist)
	case isNotExist(rerr):
		return s.fail(err, "write metadata %s", s.where(key))
	}
	if derr := s.bucket.del(rctx, key); derr != nil {
		return s.fail(err, "write metadata %s (outcome unknown: reading it back failed: %v; deleting it failed: %v)", s.where(key), rerr, derr)
	}
	return s.fail(err, "write metadata %s (outcome unknown: reading it back failed: %v; deleted it)", s.where(key), rerr)
}

// ReadMetadata returns the verified metadata payload of checkpoint id. A checkpoint that is not
// complete yields an error wrapping storage.ErrNotFound.
func (s *Storage) ReadMetadata(ctx context.Context, id int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/blob: read metadata of checkpoint %d: %w", id, err)
	}
	if err := storage.CheckID(id); err != nil {
		return nil, err
	}
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("storage/blob: read metadata of checkpoint %d: %w", id, err)
	}
	defer s.slow.Begin(fmt.Sprintf("read metadata of checkpoint %d", id))()
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	return s.readVerified(ctx, s.dirKey(id)+storage.MetadataName)
}

// List returns every checkpoint in increasing id order: the key prefixes under the storage's
// prefix that are exactly a checkpoint directory name, listed with the delimiter "/". A
// checkpoint is Complete iff its _metadata object exists (one existence check per checkpoint).
// Other keys are ignored.
func (s *Storage) List(ctx context.Context) ([]storage.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/blob: list %s: %w", s.loc.base, err)
	}
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("storage/blob: list %s: %w", s.loc.base, err)
	}
	defer s.slow.Begin("list checkpoints")()
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	objs, err := s.bucket.list(ctx, s.loc.prefix, true)
	if err != nil {
		return nil, s.fail(err, "list %s", s.loc.base)
	}
	var entries []storage.Entry
	for _, obj := range objs {
		if !obj.isDir {
			continue
		}
		id, ok := storage.ParseCheckpointDirName(strings.TrimSuffix(strings.TrimPrefix(obj.key, s.loc.prefix), "/"))
		if !ok {
			continue
		}
		entries = append(entries, storage.Entry{ID: id, Path: strings.TrimSuffix(s.where(s.dirKey(id)), "/")})
	}
	// One existence check per checkpoint, a few at a time: a store answers each in a round trip.
	err = parallel(len(entries), func(i int) error {
		complete, err := s.bucket.exists(ctx, s.dirKey(entries[i].ID)+storage.MetadataName)
		if err != nil {
			return s.fail(err, "list %s", s.loc.base)
		}
		entries[i].Complete = complete
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b storage.Entry) int { return cmp.Compare(a.ID, b.ID) })
	return entries, nil
}

// requestParallelism bounds the concurrent requests of one List, Discard or Trim: an object store
// answers one object per request, and both run on the queue metadata writes wait in.
const requestParallelism = 16

// parallel calls fn(0..n-1) with at most requestParallelism calls at a time and returns every
// error.
func parallel(n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, requestParallelism)
		mu   sync.Mutex
		errs []error
	)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Discard deletes every object of checkpoint id, recursively. It deletes the metadata first, so a
// crash part-way leaves an incomplete checkpoint rather than a complete one with state files
// missing. Discarding an absent id is not an error.
func (s *Storage) Discard(ctx context.Context, id int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/blob: discard checkpoint %d: %w", id, err)
	}
	if err := storage.CheckID(id); err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return fmt.Errorf("storage/blob: discard checkpoint %d: %w", id, err)
	}
	defer s.slow.Begin(fmt.Sprintf("discard checkpoint %d", id))()
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	dir := s.dirKey(id)
	if err := s.bucket.del(ctx, dir+storage.MetadataName); err != nil {
		return s.fail(err, "discard checkpoint %d: delete %s", id, s.where(dir+storage.MetadataName))
	}

	objs, err := s.bucket.list(ctx, dir, false)
	if err != nil {
		return s.fail(err, "discard checkpoint %d: list %s", id, s.where(dir))
	}
	var keys []string
	for _, obj := range objs {
		if !obj.isDir { // without a delimiter there are none; a driver that reports one has nothing to delete
			keys = append(keys, obj.key)
		}
	}
	err = parallel(len(keys), func(i int) error {
		if err := s.bucket.del(ctx, keys[i]); err != nil {
			return s.fail(err, "discard checkpoint %d: delete %s", id, s.where(keys[i]))
		}
		return nil
	})
	if err == nil && s.loc.scheme == "file" {
		// Deleting files leaves their directory, which List would show as an incomplete
		// checkpoint. Best effort: a directory that is not empty (a concurrent write) stays.
		_ = os.Remove(filepath.Join(s.loc.dir, storage.CheckpointDirName(id)))
	}
	return err
}

// Trim reduces checkpoint id to the state files named in keep (see storage.Storage.Trim): it
// deletes the metadata object first (a delete is durable when it returns, and listings see it at
// once), then every other object under the checkpoint's prefix. With keep empty it is Discard.
// Trimming an absent id is not an error.
func (s *Storage) Trim(ctx context.Context, id int64, keep []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/blob: trim checkpoint %d: %w", id, err)
	}
	if err := storage.CheckID(id); err != nil {
		return err
	}
	kept := make(map[string]bool, len(keep))
	for _, name := range keep {
		if err := storage.ValidName(name); err != nil {
			return fmt.Errorf("storage/blob: trim checkpoint %d: %w", id, err)
		}
		kept[name] = true
	}
	if len(keep) == 0 {
		return s.Discard(ctx, id)
	}
	if err := s.usable(); err != nil {
		return fmt.Errorf("storage/blob: trim checkpoint %d: %w", id, err)
	}
	defer s.slow.Begin(fmt.Sprintf("trim checkpoint %d to %d files", id, len(keep)))()
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	dir := s.dirKey(id)
	if err := s.bucket.del(ctx, dir+storage.MetadataName); err != nil {
		return s.fail(err, "trim checkpoint %d: delete %s", id, s.where(dir+storage.MetadataName))
	}
	// The checkpoint is no longer complete: a failure from here on leaves some of the objects not
	// in keep, which the next recovery's retention pass trims again (storage.Retain).
	objs, err := s.bucket.list(ctx, dir, false)
	if err != nil {
		return s.fail(err, "trim checkpoint %d: list %s", id, s.where(dir))
	}
	var keys []string
	for _, obj := range objs {
		if !obj.isDir && !kept[strings.TrimPrefix(obj.key, dir)] {
			keys = append(keys, obj.key)
		}
	}
	return parallel(len(keys), func(i int) error {
		if err := s.bucket.del(ctx, keys[i]); err != nil {
			return s.fail(err, "trim checkpoint %d: delete %s", id, s.where(keys[i]))
		}
		return nil
	})
}

// WriteLedger replaces the ledger object (<prefix>_ledger) with one unconditional put: a put is
// atomic, so a reader finds the old ledger or the new one. Like every write it needs the lease.
func (s *Storage) WriteLedger(ctx context.Context, data []byte) error {
	if err := storage.ContextErr(ctx); err != nil {
		return fmt.Errorf("storage/blob: write ledger: %w", err)
	}
	if err := s.usable(); err != nil {
		return fmt.Errorf("storage/blob: write ledger: %w", err)
	}
	key := s.loc.prefix + storage.LedgerName
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if err := s.put(ctx, key, data, false); err != nil {
		return s.fail(err, "write ledger %s", s.where(key))
	}
	return nil
}

// ReadLedger returns the verified payload of the ledger object.
func (s *Storage) ReadLedger(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/blob: read ledger: %w", err)
	}
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("storage/blob: read ledger: %w", err)
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	return s.readVerified(ctx, s.loc.prefix+storage.LedgerName)
}
