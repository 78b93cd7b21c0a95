package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ingest-engine/ingest/storage"
)

// Files is where an LSM backend's checkpoint files go and where a restore
// reads them from: a storage.Storage.
type Files interface {
	WriteFile(ctx context.Context, id int64, name string, data []byte) (storage.Handle, error)
	ReadFile(ctx context.Context, h storage.Handle) ([]byte, error)
	StatFile(ctx context.Context, h storage.Handle) error
}

// lsmUploadWorkers bounds the files one upload or download moves at once.
// Each holds one file in memory (at most 32 MiB, see pebbleOptions).
const lsmUploadWorkers = 4

// lsmSmallFileMax bounds a store file the manifest carries whole.
const lsmSmallFileMax = 64 << 20

// lsmSnapshot is the synchronous part of an LSM checkpoint: a Pebble
// checkpoint in a local directory, which the upload reads. INVARIANT: the
// directory holds exactly the store as of the barrier (taken on the task
// goroutine after a flush, with no write in between), and nothing writes it
// until the upload is done with it.
type lsmSnapshot struct {
	id  int64
	dir string
	// catalog and nextSID are the store's states at the barrier.
	catalog []lsmCatalogEntry
	nextSID uint16
	// base is the store's base at the barrier: files a complete checkpoint
	// uploaded, which the upload references instead of uploading again.
	base map[string]lsmFile
	// spans are the key groups each data file of the store spans, by
	// local name, as the store listed them after the checkpoint (a file
	// missing from it spans the subtask's whole range).
	spans map[string][2]int
	err   error

	// mu guards result: the files the upload named, which Complete makes
	// the store's base.
	mu     sync.Mutex
	result map[string]lsmFile
}

// lsmCheckpointSnapshot is CheckpointSnapshot on an LSM backend: it writes
// the timers' bookkeeping, flushes the memtable and takes a Pebble
// checkpoint (hard links of the SST files) into ckpt-<id>. Its cost follows
// the writes since the last flush, not the size of the state. Errors are
// carried to Upload (the checkpoint declines).
func (b *Backend) lsmCheckpointSnapshot(id int64) *Snapshot {
	st := b.lsm
	s := &Snapshot{operator: b.operator, maxParallelism: b.maxParallelism, kgRange: b.kgRange, err: b.err, sizeHint: &b.sizeHint}
	ls := &lsmSnapshot{id: id, dir: filepath.Join(st.dir, fmt.Sprintf("ckpt-%d", id)), base: st.base, nextSID: st.nextSID}
	s.lsm = ls
	s.schemas = b.Schemas()
	for _, name := range slices.Sorted(mapKeys(st.catalog)) {
		e := *st.catalog[name]
		e.meta.codecs = slices.Clone(e.meta.codecs)
		ls.catalog = append(ls.catalog, e)
	}
	st.pending[id] = ls
	if len(b.restored) > 0 {
		// A memory backend's state not registered yet is not in the store.
		ls.err = fmt.Errorf("state: operator %q: state %q restored from the memory backend's checkpoint is not registered: register it (or drop it) before a checkpoint", b.operator, slices.Sorted(mapKeys(b.restored))[0])
		return s
	}
	if err := st.open(b.operator); err != nil {
		ls.err = err
		return s
	}
	// A failure while the caches are written out fails the backend, not
	// only this checkpoint: entries may be marked written that the store
	// never got, and a later checkpoint would then miss them. The task sees
	// Err after its next record and the job restarts from the last
	// complete checkpoint.
	for _, name := range slices.Sorted(mapKeys(st.persisters)) {
		if err := st.persisters[name].persist(); err != nil {
			ls.err = err
			b.fail(err)
			return s
		}
	}
	if s.err != nil {
		return s
	}
	if err := st.failure(); err != nil {
		ls.err = fmt.Errorf("state: operator %q: %w", b.operator, err)
		return s
	}
	if err := st.cache.flush(st.db, false); err != nil {
		ls.err = fmt.Errorf("state: operator %q: writing cached entries: %w", b.operator, err)
		b.fail(ls.err)
		return s
	}
	if err := st.flush(); err != nil {
		ls.err = fmt.Errorf("state: operator %q: flushing the pebble store: %w", b.operator, err)
		b.fail(ls.err)
		return s
	}
	if err := os.RemoveAll(ls.dir); err != nil {
		ls.err = fmt.Errorf("state: operator %q: removing an old local checkpoint copy: %w", b.operator, err)
		return s
	}
	if err := st.db.Checkpoint(ls.dir); err != nil {
		ls.err = fmt.Errorf("state: operator %q: pebble checkpoint into %s: %w", b.operator, ls.dir, err)
		return s
	}
	ls.spans = map[string][2]int{}
	if levels, err := st.db.SSTables(); err == nil {
		for _, level := range levels {
			for _, t := range level {
				if t.Virtual || len(t.Smallest.UserKey) < 2 || len(t.Largest.UserKey) < 2 {
					continue
				}
				lo := int(t.Smallest.UserKey[0])<<8 | int(t.Smallest.UserKey[1])
				hi := int(t.Largest.UserKey[0])<<8 | int(t.Largest.UserKey[1])
				ls.spans[t.BackingSSTNum.String()+".sst"] = [2]int{lo, hi}
			}
		}
	}
	return s
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Uploaded is what Snapshot.Upload stored for a checkpoint of an LSM
// backend.
type Uploaded struct {
	// Manifest is the subtask's state file for the checkpoint: the caller
	// stores it as it stores Encoded.Data.
	Manifest []byte
	// Files are the handles of every data file the manifest names: those
	// the upload wrote (of this checkpoint) and those of earlier checkpoints
	// it references. None may be deleted while the checkpoint is kept.
	Files []storage.Handle
	// Written is the bytes of the files the upload wrote; Reused those of
	// the earlier checkpoints' files it references.
	Written, Reused int64
}

// IsLSM reports whether the snapshot is of an LSM backend: it is stored
// with Upload, not EncodeCheckpoint.
func (s *Snapshot) IsLSM() bool { return s.lsm != nil }

// Upload is the asynchronous part of an LSM backend's checkpoint: it stores
// every data file of the snapshot that no complete checkpoint stored before
// as a file of checkpoint id named prefix-<file> (on up to
// lsmUploadWorkers goroutines), references the others, and returns the
// manifest naming them all. It runs off the task goroutine. It fails if the
// synchronous part failed, or a file cannot be read or stored; the error
// names the file.
func (s *Snapshot) Upload(ctx context.Context, files Files, prefix string) (*Uploaded, error) {
	ls := s.lsm
	if ls == nil {
		return nil, fmt.Errorf("state: operator %q: Upload of a snapshot of a memory backend", s.operator)
	}
	if s.err != nil {
		return nil, fmt.Errorf("state: operator %q: refusing to upload a snapshot of a backend with an access error: %w", s.operator, s.err)
	}
	if ls.err != nil {
		return nil, ls.err
	}
	ents, err := os.ReadDir(ls.dir)
	if err != nil {
		return nil, fmt.Errorf("state: operator %q: reading the local checkpoint copy: %w", s.operator, err)
	}
	m := &lsmManifest{operator: s.operator, maxParallelism: s.maxParallelism, kgRange: s.kgRange, checkpoint: ls.id, nextSID: ls.nextSID, states: ls.catalog}
	var data []string
	for _, e := range ents {
		name := e.Name()
		if isDataFile(name) {
			data = append(data, name)
			continue
		}
		if e.IsDir() {
			return nil, fmt.Errorf("state: operator %q: unexpected directory %s in the local checkpoint copy", s.operator, name)
		}
		b, err := os.ReadFile(filepath.Join(ls.dir, name))
		if err != nil {
			return nil, fmt.Errorf("state: operator %q: reading %s of the local checkpoint copy: %w", s.operator, name, err)
		}
		if len(b) > lsmSmallFileMax {
			return nil, fmt.Errorf("state: operator %q: store file %s is %d bytes, more than a manifest carries", s.operator, name, len(b))
		}
		m.small = append(m.small, lsmSmallFile{name: name, data: b})
	}
	m.files = make([]lsmFile, len(data))
	written := make([]bool, len(data))
	err = parallel(ctx, len(data), func(i int) error {
		name := data[i]
		f := lsmFile{local: name, kgLo: s.kgRange.Start, kgHi: s.kgRange.End - 1}
		if sp, ok := ls.spans[name]; ok {
			f.kgLo, f.kgHi = max(sp[0], f.kgLo), min(sp[1], f.kgHi)
		}
		path := filepath.Join(ls.dir, name)
		if prev, ok := ls.base[name]; ok {
			fi, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("state: operator %q: %w", s.operator, err)
			}
			if fi.Size() == prev.handle.Size {
				f.handle, f.kgLo, f.kgHi = prev.handle, prev.kgLo, prev.kgHi
				m.files[i] = f
				return nil
			}
			// Never expected: a file number reused with other content.
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("state: operator %q: reading %s of the local checkpoint copy: %w", s.operator, name, err)
		}
		h, err := files.WriteFile(ctx, ls.id, prefix+"-"+name, b)
		if err != nil {
			return fmt.Errorf("state: operator %q: storing %s: %w", s.operator, name, err)
		}
		f.handle = h
		m.files[i] = f
		written[i] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	up := &Uploaded{Manifest: m.encode(), Files: m.handles()}
	result := make(map[string]lsmFile, len(m.files))
	for i, f := range m.files {
		result[f.local] = f
		if written[i] {
			up.Written += f.handle.Size
		} else {
			up.Reused += f.handle.Size
		}
	}
	ls.mu.Lock()
	ls.result = result
	ls.mu.Unlock()
	return up, nil
}

// isDataFile reports whether a store file is immutable data that
// checkpoints share (an SST or a blob file), as opposed to the small files
// a manifest carries whole.
func isDataFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// parallel runs f(0..n-1) on up to lsmUploadWorkers goroutines and returns
// the error of the lowest index that failed; after a failure, or when ctx
// ends, it starts no more.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	errs := make([]error, n)
	var (
		mu   sync.Mutex
		next int
		stop bool
		wg   sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stop || next >= n {
			return 0, false
		}
		if err := ctx.Err(); err != nil {
			errs[next], stop = storage.ContextErr(ctx), true
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(lsmUploadWorkers, n) {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := f(i); err != nil {
					errs[i] = err
					mu.Lock()
					stop = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return firstNonNil(errs)
}

func firstNonNil(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lsmComplete is Complete on an LSM backend: the snapshot of checkpoint id,
// if its upload succeeded, becomes the base, and its local copy replaces the
// previous one (kept for a local recovery).
func (b *Backend) lsmComplete(id int64) {
	st := b.lsm
	ls := st.pending[id]
	for pid, p := range st.pending {
		if pid < id {
			delete(st.pending, pid)
			_ = os.RemoveAll(p.dir)
		}
	}
	delete(st.pending, id)
	if id <= st.completed {
		return
	}
	st.completed = id
	var result map[string]lsmFile
	if ls != nil {
		ls.mu.Lock()
		result = ls.result
		ls.mu.Unlock()
	}
	prev := st.baseID
	if result == nil {
		st.base, st.baseID = nil, 0
	} else {
		st.base, st.baseID = result, id
	}
	if prev != 0 && prev != st.baseID {
		_ = os.RemoveAll(filepath.Join(st.dir, fmt.Sprintf("ckpt-%d", prev)))
	}
	if result == nil && ls != nil {
		_ = os.RemoveAll(ls.dir)
	}
}

// lsmAbort is Abort on an LSM backend: the snapshot's local copy goes.
func (b *Backend) lsmAbort(id int64) {
	if ls := b.lsm.pending[id]; ls != nil {
		delete(b.lsm.pending, id)
		_ = os.RemoveAll(ls.dir)
	}
}
