package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// The LSM backend keeps an operator subtask's keyed state in a Pebble store
// on local disk instead of in memory, for state larger than memory. Every
// state kind (ValueState, MapState, ListState, NamespacedValueState, Timers)
// works on it unchanged: the state types check Backend.lsm and read and
// write encoded entries in the store.
//
// # Keys
//
// Every key starts with its key group (2 bytes, big endian) and the state's
// id (2 bytes, big endian; the catalog maps names to ids), so one key
// group's entries are contiguous and a key-group range is one key range:
// rescaling restores ranges. What follows depends on the kind:
//
//	value:      kc(key)                                  → vc(value)
//	map:        uvarint(len kc(key)) kc(key) ukc(userKey) → uvc(userValue)
//	list:       kc(key)                                  → vc(v1) vc(v2) … (Pebble's concatenating merge)
//	namespaced: ns(namespace) kc(key)                    → vc(value)
//	timers:     0 ns(ts) u64be(seq)                      → varint(namespace) kc(key)   (the queue)
//	            1 uvarint(len kc(key)) kc(key) ns(namespace) ns(ts) → u64be(seq)   (the index)
//	            2                                         → uvarint(count) uvarint(next seq) (per key group, written at each snapshot)
//
// where ns(x) is x as 8 bytes big endian with the sign bit flipped, so that
// byte order is numeric order. Keys are compared by their encoding: the key
// codecs must be canonical (equal keys encode to equal bytes).
//
// # Checkpoints
//
// The synchronous part flushes the memtable and takes a Pebble checkpoint
// (hard links of the immutable SST files, a copy of the small MANIFEST and
// OPTIONS) into a local directory; the asynchronous part uploads the SST
// files no complete checkpoint uploaded before and writes a manifest (see
// lsm_manifest.go) naming every file, so that what a checkpoint writes
// follows what changed (new SSTs from flushes and compactions), not the size
// of the state. The local copy of the newest complete checkpoint stays on
// disk for local recovery.

// LSMOptions configures the LSM (Pebble) state backend of a job.
type LSMOptions struct {
	// Dir is the local directory for the working stores and the local copies
	// of checkpoints. Each job uses a directory of its own below it (by job
	// id). Required.
	Dir string
	// CacheBytes is the block cache all of the job's stores share: the
	// memory budget for reading state. The default value is 512 MiB.
	CacheBytes int64
	// Log receives the stores' background errors; nil discards them.
	Log *slog.Logger
}

// DefaultLSMCacheBytes is LSMOptions.CacheBytes's default.
const DefaultLSMCacheBytes = 512 << 20

// LSMEnv is what the LSM backends of one job share: the block cache and the
// job's directory. Create it with NewLSMEnv when the job starts and close it
// when every backend using it is closed.
type LSMEnv struct {
	dir      string
	cache    *pebble.Cache
	memtable uint64
	// writeBudget bounds each backend's write-back cache (see writeCache).
	writeBudget int
	// noCompactions turns Pebble's automatic compactions off: tests that
	// count the files a checkpoint writes.
	noCompactions bool
	log           *slog.Logger
	closed        sync.Once
}

// NewLSMEnv creates the shared environment of a job's LSM backends, in
// opts.Dir/job.
func NewLSMEnv(opts LSMOptions, job string) (*LSMEnv, error) {
	if opts.Dir == "" {
		return nil, errors.New("state: the pebble backend needs a directory (state.dir)")
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = DefaultLSMCacheBytes
	}
	if opts.CacheBytes < 0 {
		return nil, fmt.Errorf("state: pebble cache size %d is negative", opts.CacheBytes)
	}
	dir := filepath.Join(opts.Dir, pathSafe(job))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: creating the pebble state directory: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A memtable holds the writes between two checkpoints (each flushes
	// it): an eighth of the cache, between 4 and 64 MiB.
	mt := uint64(min(max(opts.CacheBytes/8, 4<<20), 64<<20))
	// Each backend's write-back cache: an eighth of the block cache,
	// between 1 and 64 MiB.
	wb := int(min(max(opts.CacheBytes/8, 1<<20), 64<<20))
	return &LSMEnv{dir: dir, cache: pebble.NewCache(opts.CacheBytes), memtable: mt, writeBudget: wb, log: log}, nil
}

// Dir returns the job's directory.
func (e *LSMEnv) Dir() string { return e.dir }

// Close releases the block cache. Backends still open keep it until they
// close.
func (e *LSMEnv) Close() { e.closed.Do(e.cache.Unref) }

// pathSafe turns a name into one path component: letters, digits, '-',
// '_' and '.' are kept, everything else is escaped as %XX.
func pathSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return "%"
	}
	return b.String()
}

// lsmCatalogEntry is one state of an LSM backend: its id in keys, and its
// schema.
type lsmCatalogEntry struct {
	sid  uint16
	meta stateInfo
}

// lsmStore is an LSM backend's store: the Pebble database and what the
// backend knows about it. Like the Backend, it is used from the task
// goroutine, except what a snapshot's upload reads (see lsmSnapshot).
type lsmStore struct {
	env *LSMEnv
	// dir is the backend's directory: the working store (db-*) and the
	// local checkpoint copies (ckpt-*).
	dir   string
	db    *pebble.DB
	dbDir string

	// catalog holds every state the store has entries for, registered or
	// restored and unclaimed, by name. INVARIANT: ids are unique.
	catalog map[string]*lsmCatalogEntry
	// claimed marks the names of catalog that a registration took.
	claimed map[string]bool
	// nextSID is the id the next new state takes. INVARIANT: above every id
	// in catalog, and above every id a dropped state had (their entries may
	// still be in the store until the range deletion compacts away).
	nextSID uint16

	// base is the upload of the last complete checkpoint (or the restore):
	// the SST files it names, by local name, which a later checkpoint
	// references instead of uploading again. nil: upload everything.
	base map[string]lsmFile
	// baseID is the checkpoint of base's local copy (0: none).
	baseID int64
	// pending are the snapshots of checkpoints not yet complete or aborted.
	pending   map[int64]*lsmSnapshot
	completed int64

	// cache holds the entries read and written lately (see writeCache).
	cache *writeCache
	// bgErr is the first error Pebble reported from its background work
	// (a failed flush or compaction, corruption it found). Once set, the
	// store takes no more writes (they could block on a flush that keeps
	// failing): every access fails the backend.
	bgErr atomic.Pointer[error]
	// bgFailed is closed when bgErr is set.
	bgFailed chan struct{}
	// ctx ends when the subtask's attempt does: waits for Pebble (a
	// checkpoint's flush) end with it.
	ctx context.Context
	// kbuf is a reused key buffer of the task goroutine.
	kbuf []byte
	// direct is the batch the states with a decoded cache of their own
	// (value, list) write their changes into, bypassing the write-back
	// cache (see lsmState.getDirect); nil when empty.
	// INVARIANT: direct is committed (commitDirect) before the task reads
	// the store again: at the end of every persist and spill.
	direct *pebble.Batch
	// persisters are the registered Timers by name, whose per key group
	// counts a snapshot writes into the store (see Timers.persist).
	persisters map[string]lsmPersister
}

// lsmPersister is implemented by states that write bookkeeping into the
// store before a snapshot (Timers: counts and sequence numbers).
type lsmPersister interface{ persist() error }

// NewLSMBackend returns an empty backend of the LSM kind (see lsm.go) for
// the subtask of operator that owns kgRange. Its store lives below env's
// directory; it is opened at the first registration, or by RestoreLSM.
// Close it when the subtask ends. Waits for the store (a checkpoint's
// flush) end when ctx does: pass the subtask's attempt context. Panics are as
// for NewBackend.
func NewLSMBackend(ctx context.Context, env *LSMEnv, operator string, maxParallelism int, kgRange KeyGroupRange) *Backend {
	b := NewBackend(operator, maxParallelism, kgRange)
	b.lsm = &lsmStore{
		ctx:        ctx,
		bgFailed:   make(chan struct{}),
		env:        env,
		dir:        backendDir(env.dir, operator, kgRange),
		catalog:    map[string]*lsmCatalogEntry{},
		claimed:    map[string]bool{},
		nextSID:    1,
		pending:    map[int64]*lsmSnapshot{},
		persisters: map[string]lsmPersister{},
		cache:      newWriteCache(env.writeBudget),
	}
	return b
}

// IsLSM reports whether the backend keeps its state in an LSM store.
func (b *Backend) IsLSM() bool { return b.lsm != nil }

// Close releases what the backend holds: the LSM store (its working
// directory is removed; the local copy of the newest complete checkpoint
// stays for a local recovery). The memory backend has nothing to release.
// The backend must not be used afterwards.
func (b *Backend) Close() error {
	if b.lsm == nil || b.lsm.db == nil {
		return nil
	}
	s := b.lsm
	err := s.db.Close()
	s.db = nil
	if rmErr := os.RemoveAll(s.dbDir); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("state: operator %q: closing the pebble store: %w", b.operator, err)
	}
	return nil
}

// pebbleOptions returns the options of a working store.
//
// Pebble's background errors (a failed flush or compaction) and the
// corruption it detects go to onErr instead of its defaults (a log line, and
// a process exit for corruption): the backend records the first and fails,
// and the job restarts from its last complete checkpoint.
func (e *LSMEnv) pebbleOptions(readOnly bool, onErr func(error)) *pebble.Options {
	el := &pebble.EventListener{
		BackgroundError: onErr,
		DataCorruption: func(i pebble.DataCorruptionInfo) {
			onErr(fmt.Errorf("%w: pebble found on-disk corruption in %s: %w", ErrCorrupt, i.Path, i.Details))
		},
	}
	o := &pebble.Options{
		EventListener:               el,
		Cache:                       e.cache,
		DisableWAL:                  true, // checkpoints are the durability: each flushes the memtable
		MemTableSize:                e.memtable,
		MemTableStopWritesThreshold: 4,
		MaxManifestFileSize:         512 << 10, // the manifest travels inside every checkpoint
		ReadOnly:                    readOnly,
		DisableAutomaticCompactions: e.noCompactions,
		// L0 compactions after 8 files (Pebble's default: 4): each
		// checkpoint flushes the memtable into L0, and a compaction into
		// Lbase rewrites every Lbase file a flushed key falls in, which
		// the next checkpoint uploads again. Waiting for more flushes
		// uploads less (BenchmarkLSMIncrementalCheckpoint, 10% of 1 M keys
		// updated per checkpoint: 63% -> 37% of the state per checkpoint
		// spread over every key group, 45% -> 27% within a tenth of
		// them) for more files a read may look into (the caches serve
		// the hot keys).
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 24,
		Logger:                pebbleLogger{e.log},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Files at most 32 MiB: an upload reads one into memory.
	o.TargetFileSizes[0] = 4 << 20
	for i := 1; i < len(o.TargetFileSizes); i++ {
		o.TargetFileSizes[i] = min(o.TargetFileSizes[i-1]*2, 32<<20)
	}
	return o
}

// pebbleLogger sends Pebble's messages to the job's log: errors as errors,
// informational ones at debug level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	// Pebble calls Fatalf on invariant violations and on failures it
	// cannot undo (its MANIFEST not written or synced during a flush or
	// compaction, e.g. on a full disk), often on its own goroutines, and
	// expects it not to return: the process ends. The state on disk is a
	// working copy, so a restart recovers from the last complete
	// checkpoint like after kill -9; the log says why first.
	msg := fmt.Sprintf("pebble: "+format, args...)
	l.log.Error("the pebble state store failed in a way it cannot continue from (disk full or unwritable?); the process exits and recovers from its last complete checkpoint when restarted", "err", msg)
	panic(msg)
}

// open opens a new, empty working store, removing those earlier processes
// or attempts left behind.
func (s *lsmStore) open(operator string) error {
	if s.db != nil {
		return nil
	}
	dbDir, err := s.newDBDir()
	if err != nil {
		return fmt.Errorf("state: operator %q: %w", operator, err)
	}
	return s.openAt(operator, dbDir)
}

// newDBDir removes the working stores left in the backend's directory and
// returns the path of a new one (not created).
func (s *lsmStore) newDBDir() (string, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the pebble state directory: %w", err)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return "", fmt.Errorf("reading the pebble state directory: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "db-") || strings.HasPrefix(e.Name(), "tmp-") {
			if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
				return "", fmt.Errorf("removing a stale working store: %w", err)
			}
		}
	}
	return os.MkdirTemp(s.dir, "db-")
}

// openAt opens the store in dbDir (created, possibly holding restored
// files).
func (s *lsmStore) openAt(operator, dbDir string) error {
	// dbDir is set before Open: a restored store with many L0 files starts
	// compacting inside Open, and a failure reports it from Pebble's
	// goroutine (setBgErr).
	s.dbDir = dbDir
	db, err := pebble.Open(dbDir, s.env.pebbleOptions(false, s.setBgErr))
	if err != nil {
		return fmt.Errorf("state: operator %q: opening the pebble store in %s: %w", operator, dbDir, err)
	}
	s.db = db
	return nil
}

// setBgErr records a background error of the store (the first one).
func (s *lsmStore) setBgErr(err error) {
	if s.bgErr.CompareAndSwap(nil, &err) {
		s.env.log.Error("state: the pebble store failed; the job restarts from its last complete checkpoint", "dir", s.dbDir, "err", err)
		close(s.bgFailed)
	}
}

// failure returns the store's background error, nil while there is none.
func (s *lsmStore) failure() error {
	if e := s.bgErr.Load(); e != nil {
		return fmt.Errorf("the pebble store in %s failed: %w", s.dbDir, *e)
	}
	return nil
}

// flush flushes the memtable and waits until the flush is done, Pebble
// reports a background error (a flush that keeps failing on a full or
// vanished disk would otherwise hold the task forever), or the attempt ends.
func (s *lsmStore) flush() error {
	if err := s.failure(); err != nil {
		return err
	}
	done, err := s.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return s.failure()
	case <-s.bgFailed:
		return s.failure()
	case <-s.ctx.Done():
		return fmt.Errorf("waiting for a pebble flush: %w", context.Cause(s.ctx))
	}
}

// lsmState is a registered state's handle on the store.
type lsmState struct {
	b   *Backend
	s   *lsmStore
	sid uint16
}

// key returns the key prefix of the state in key group kg (4 bytes),
// appended to dst.
func (l *lsmState) prefix(dst []byte, kg int) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(dst, uint16(kg)), l.sid)
}

// failed reports whether the store failed in the background, recording
// that as the backend's error: an access then reads nothing and writes
// nothing (see Backend.Err).
func (l *lsmState) failed(name string) bool {
	if l.s.bgErr.Load() == nil {
		return false
	}
	l.fail(name, "accessing", l.s.failure())
	return true
}

// fail records a store error as the backend's error (see Backend.Err).
func (l *lsmState) fail(name, what string, err error) {
	l.b.fail(fmt.Errorf("state: operator %q state %q: %s: %w", l.b.operator, name, what, err))
}

// get returns the value of key, or false. The slice must not be modified
// (it may be the cache's). A store error is recorded (fail) and reads as
// absent.
func (l *lsmState) get(name string, key []byte) ([]byte, bool) {
	if l.failed(name) {
		return nil, false
	}
	c := l.s.cache
	if e := c.lookup(key); e != nil {
		return e.val, !e.deleted
	}
	out, found, err := l.read(key)
	if err != nil {
		l.fail(name, "reading", err)
		return nil, false
	}
	c.put(key, out, !found, false)
	l.evict(name)
	return out, found
}

// read reads key from Pebble, returning a copy of its value.
func (l *lsmState) read(key []byte) (val []byte, found bool, err error) {
	v, closer, err := l.s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val = append([]byte(nil), v...)
	return val, true, closer.Close()
}

// cached returns the write cache's entry for key, without reading the
// store: for a reader that knows the cache holds every entry of key's
// that the store has (see lsmNamespaced.present).
func (l *lsmState) cached(name string, key []byte) ([]byte, bool) {
	if l.failed(name) {
		return nil, false
	}
	if e := l.s.cache.lookup(key); e != nil {
		return e.val, !e.deleted
	}
	return nil, false
}

// getDirect is get for the states with a decoded cache (value, list):
// they hold the entries they read, so it reads the store without caching
// what it read in the write-back cache, which holds no entry of theirs
// (they write through setDirect, delDirect and mergeDirect).
func (l *lsmState) getDirect(name string, key []byte) ([]byte, bool) {
	if l.failed(name) {
		return nil, false
	}
	out, found, err := l.read(key)
	if err != nil {
		l.fail(name, "reading", err)
		return nil, false
	}
	return out, found
}

// directBatch returns the store's direct batch, committing it first when
// it holds 4 MiB (a persist of many entries writes in steps).
func (l *lsmState) directBatch(name string) *pebble.Batch {
	s := l.s
	if s.direct != nil && s.direct.Len() >= 4<<20 {
		l.commitDirect(name)
	}
	if s.direct == nil {
		s.direct = s.db.NewBatch()
	}
	return s.direct
}

// setDirect writes val for key into the direct batch (see getDirect).
func (l *lsmState) setDirect(name string, key, val []byte) {
	if l.failed(name) {
		return
	}
	if err := l.directBatch(name).Set(key, val, nil); err != nil {
		l.fail(name, "writing", err)
	}
}

// delDirect deletes key in the direct batch (see getDirect).
func (l *lsmState) delDirect(name string, key []byte) {
	if l.failed(name) {
		return
	}
	if err := l.directBatch(name).Delete(key, nil); err != nil {
		l.fail(name, "writing", err)
	}
}

// mergeDirect appends val to key's value in the direct batch (a list's
// elements, see the key layout).
func (l *lsmState) mergeDirect(name string, key, val []byte) {
	if l.failed(name) {
		return
	}
	if err := l.directBatch(name).Merge(key, val, nil); err != nil {
		l.fail(name, "writing", err)
	}
}

// commitDirect commits the direct batch into the store.
func (l *lsmState) commitDirect(name string) {
	s := l.s
	if s.direct == nil {
		return
	}
	b := s.direct
	s.direct = nil
	if l.failed(name) {
		_ = b.Close()
		return
	}
	if err := commit(b); err != nil {
		l.fail(name, "writing", err)
	}
}

// view calls f with the value of key, and reports whether there was one.
func (l *lsmState) view(name string, key []byte, f func([]byte)) bool {
	v, ok := l.get(name, key)
	if ok {
		f(v)
	}
	return ok
}

func (l *lsmState) set(name string, key, val []byte) {
	if l.failed(name) {
		return
	}
	l.s.cache.put(key, append([]byte(nil), val...), false, true)
	l.evict(name)
}

func (l *lsmState) del(name string, key []byte) {
	if l.failed(name) {
		return
	}
	l.s.cache.put(key, nil, true, true)
	l.evict(name)
}

// delRange deletes the keys in [start, end), which share their 4-byte
// prefix (end may be that prefix's end).
func (l *lsmState) delRange(name string, start, end []byte) {
	if l.failed(name) {
		return
	}
	l.s.cache.dropRange(start, end)
	if err := l.s.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		l.fail(name, "deleting", err)
	}
}

// evict writes the cache's dirty entries to the store and empties it when
// it is past its budget.
func (l *lsmState) evict(name string) {
	if l.s.cache.full() && !l.failed(name) {
		if err := l.s.cache.flush(l.s.db, true); err != nil {
			l.fail(name, "writing", err)
		}
	}
}

// scan calls f for every entry whose key starts with prefix (at least the
// 4-byte prefix of a key group and state), in key order, with the key after
// the prefix and the value (both valid only during f), until f returns
// false. Writes during the scan are not seen by it.
func (l *lsmState) scan(name string, prefix []byte, f func(k, v []byte) bool) {
	if l.failed(name) {
		return
	}
	if err := l.s.cache.flushBucket(l.s.db, prefix); err != nil {
		l.fail(name, "writing", err)
		return
	}
	it, err := l.s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		l.fail(name, "reading", err)
		return
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			l.fail(name, "reading", err)
			break
		}
		if !f(it.Key()[len(prefix):], v) {
			break
		}
	}
	if err := it.Close(); err != nil {
		l.fail(name, "reading", err)
	}
}

// first returns a copy of the first key (after prefix) and value under
// prefix at or after from (a key suffix; nil: the first), or false.
func (l *lsmState) first(name string, prefix, from []byte) (k, v []byte, ok bool) {
	if l.failed(name) {
		return nil, nil, false
	}
	if err := l.s.cache.flushBucket(l.s.db, prefix); err != nil {
		l.fail(name, "writing", err)
		return nil, nil, false
	}
	it, err := l.s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		l.fail(name, "reading", err)
		return nil, nil, false
	}
	var found bool
	if from == nil {
		found = it.First()
	} else {
		found = it.SeekGE(append(append([]byte(nil), prefix...), from...))
	}
	if found {
		val, err := it.ValueAndErr()
		if err != nil {
			l.fail(name, "reading", err)
		} else {
			k = append([]byte(nil), it.Key()[len(prefix):]...)
			v = append([]byte(nil), val...)
			ok = true
		}
	}
	if err := it.Close(); err != nil {
		l.fail(name, "reading", err)
		return nil, nil, false
	}
	return k, v, ok
}

// prefixEnd returns the smallest key above every key that starts with
// prefix (nil when there is none: prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// appendOrdered appends x as 8 bytes whose byte order is x's numeric order
// (big endian, sign bit flipped).
func appendOrdered(dst []byte, x int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(x)^(1<<63))
}

// readOrdered reads what appendOrdered wrote.
func readOrdered(src []byte) int64 {
	return int64(binary.BigEndian.Uint64(src) ^ (1 << 63))
}

// lsmRegister attaches a newly built state to the store: the id of the
// restored state of that name (whose kind and codecs register checked), or
// a new one.
func (b *Backend) lsmRegister(info *stateInfo) (*lsmState, error) {
	s := b.lsm
	if err := s.open(b.operator); err != nil {
		return nil, err
	}
	e := s.catalog[info.name]
	if e == nil {
		if s.nextSID == 0xffff {
			return nil, fmt.Errorf("state: operator %q: too many states", b.operator)
		}
		e = &lsmCatalogEntry{sid: s.nextSID, meta: *info}
		e.meta.codecs = append([]string(nil), info.codecs...)
		s.nextSID++
		s.catalog[info.name] = e
	}
	s.claimed[info.name] = true
	return &lsmState{b: b, s: s, sid: e.sid}, nil
}

// lsmCheckRestored returns the restored, unclaimed state called name, if
// any, for register to check its kind and codecs.
func (b *Backend) lsmCheckRestored(info *stateInfo) error {
	e := b.lsm.catalog[info.name]
	if e == nil || b.lsm.claimed[info.name] {
		return nil
	}
	if e.meta.kind != info.kind || !equalStrings(e.meta.codecs, info.codecs) {
		return fmt.Errorf("%w: operator %q state %q: the snapshot holds a %v, the operator registers a %v",
			ErrStateMismatch, b.operator, info.name, &e.meta, info)
	}
	return nil
}

// lsmDrop deletes every entry of the state called name from the store and
// forgets it.
func (b *Backend) lsmDrop(name string) bool {
	s := b.lsm
	e := s.catalog[name]
	if e == nil {
		return false
	}
	if s.db == nil {
		if err := s.open(b.operator); err != nil {
			b.fail(err)
			return true
		}
	}
	l := &lsmState{b: b, s: s, sid: e.sid}
	for kg := b.kgRange.Start; kg < b.kgRange.End; kg++ {
		p := l.prefix(nil, kg)
		l.delRange(name, p, prefixEnd(p))
	}
	delete(s.catalog, name)
	delete(s.claimed, name)
	delete(s.persisters, name)
	return true
}

// lsmUnclaimed returns the names of restored states no registration took.
func (b *Backend) lsmUnclaimed() []string {
	var out []string
	for name := range b.lsm.catalog {
		if !b.lsm.claimed[name] {
			out = append(out, name)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
