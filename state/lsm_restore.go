package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// RestoreLSM loads an LSM backend's state from the manifests (see
// lsm_manifest.go) of one checkpoint: one when parallelism is unchanged, or
// those of every old subtask whose range overlaps the backend's after a
// rescaling. Like Restore it runs once, before any state is registered.
//
// With one manifest of the backend's own range, the store is the
// checkpoint's: its data files are fetched on up to lsmUploadWorkers
// goroutines — from the local copy a previous run on this machine kept of
// that checkpoint when each file there has the size and CRC-32C the
// manifest records (local recovery), else from files — and the next
// checkpoint builds on them, uploading only what is new. After a rescaling,
// each overlapping manifest's store is fetched into a temporary directory
// and the entries of the backend's key groups are copied into a new store;
// the next checkpoint uploads everything.
//
// It fails, changing nothing the backend keeps, with an error wrapping
// ErrCorrupt when a manifest does not verify (storage verifies each file's
// checksum), ErrStateMismatch when a manifest belongs to another operator or
// max parallelism, or when the manifests overlap or leave key groups
// uncovered.
func (b *Backend) RestoreLSM(ctx context.Context, files Files, manifests ...[]byte) error {
	if b.lsm == nil {
		return fmt.Errorf("%w: operator %q: the checkpoint holds state of the pebble backend; this pipeline keeps state in memory (state.backend: memory): run it with the backend that wrote the checkpoint, or start from an empty checkpoint directory", ErrStateMismatch, b.operator)
	}
	if b.restoreCalled {
		return fmt.Errorf("state: operator %q: Restore called twice", b.operator)
	}
	if len(b.states) > 0 {
		return fmt.Errorf("state: operator %q: Restore called after states were registered: restore before the operator opens", b.operator)
	}
	ms := make([]*lsmManifest, 0, len(manifests))
	for i, data := range manifests {
		ctx := fmt.Sprintf("operator %q: state manifest %d of %d", b.operator, i+1, len(manifests))
		m, err := decodeLSMManifest(data, ctx)
		if err != nil {
			return err
		}
		if m.operator != b.operator {
			return fmt.Errorf("%w: %s was written by operator %q", ErrStateMismatch, ctx, m.operator)
		}
		if m.maxParallelism != b.maxParallelism {
			return fmt.Errorf("%w: %s has max parallelism %d, the operator now has %d: max parallelism cannot change without discarding state",
				ErrStateMismatch, ctx, m.maxParallelism, b.maxParallelism)
		}
		ms = append(ms, m)
	}
	// Every key group of the range comes from exactly one manifest.
	var covering []*lsmManifest
	for kg := b.kgRange.Start; kg < b.kgRange.End; kg++ {
		var from *lsmManifest
		for _, m := range ms {
			if m.kgRange.Contains(kg) {
				if from != nil {
					return fmt.Errorf("state: operator %q: key group %d is in the state of two subtasks (%v and %v): manifests of different checkpoints or subtasks were mixed", b.operator, kg, from.kgRange, m.kgRange)
				}
				from = m
			}
		}
		if from == nil {
			return fmt.Errorf("state: operator %q: no state manifest covers key group %d: a state file is missing", b.operator, kg)
		}
		if !slices.Contains(covering, from) {
			covering = append(covering, from)
		}
	}
	b.restoreCalled = true
	if len(covering) == 1 && covering[0].kgRange == b.kgRange {
		return b.lsmRestoreWhole(ctx, files, covering[0])
	}
	return b.lsmRestoreRanges(ctx, files, covering)
}

// lsmRestoreWhole makes the checkpoint's store of manifest m the backend's
// store, and its files the base of the next checkpoint.
func (b *Backend) lsmRestoreWhole(ctx context.Context, files Files, m *lsmManifest) error {
	st := b.lsm
	dbDir, err := st.newDBDir()
	if err != nil {
		return fmt.Errorf("state: operator %q: %w", b.operator, err)
	}
	local := filepath.Join(st.dir, fmt.Sprintf("ckpt-%d", m.checkpoint))
	n, err := b.lsmFetch(ctx, files, m, dbDir, local)
	if err != nil {
		_ = os.RemoveAll(dbDir)
		return err
	}
	// Whether a recovery was local is otherwise invisible: say where the
	// files came from.
	st.env.log.Info("restored pebble state", "operator", b.operator, "key_groups", fmt.Sprintf("%d-%d", b.kgRange.Start, b.kgRange.End),
		"checkpoint", m.checkpoint, "files", len(m.files), "from_local_copy", n.local, "from_storage", n.stored)
	// The local copy of the restored checkpoint is what a local recovery
	// finds next time: the files just fetched, linked, until a newer
	// checkpoint completes.
	if err := b.lsmKeepLocal(m, dbDir, local); err != nil {
		st.env.log.Warn("state: cannot keep a local copy of the restored checkpoint", "operator", b.operator, "err", err)
		_ = os.RemoveAll(local)
	}
	b.lsmRemoveLocalCopies(m.checkpoint)
	if err := st.openAt(b.operator, dbDir); err != nil {
		_ = os.RemoveAll(dbDir)
		return err
	}
	for _, e := range m.states {
		e := e
		st.catalog[e.meta.name] = &e
	}
	st.nextSID = max(st.nextSID, m.nextSID)
	st.base = map[string]lsmFile{}
	for _, f := range m.files {
		st.base[f.local] = f
	}
	st.baseID = m.checkpoint
	st.completed = m.checkpoint
	return nil
}

// fetchCounts says where lsmFetch took a store's data files from.
type fetchCounts struct {
	// local counts the files linked from the local copy of the
	// checkpoint; stored those read from storage (by the verification
	// pass, or by lsmFetch itself).
	local, stored int
}

// lsmFetch writes manifest m's store into dir: its small files, and its
// data files from local's copy when they verify, else from files.
func (b *Backend) lsmFetch(ctx context.Context, files Files, m *lsmManifest, dir, local string) (fetchCounts, error) {
	var (
		mu sync.Mutex
		n  fetchCounts
	)
	count := func(fromLocal bool) {
		mu.Lock()
		defer mu.Unlock()
		if fromLocal {
			n.local++
		} else {
			n.stored++
		}
	}
	for _, f := range m.small {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return n, fmt.Errorf("state: operator %q: writing %s of the restored store: %w", b.operator, f.name, err)
		}
	}
	err := parallel(ctx, len(m.files), func(i int) error {
		f := m.files[i]
		dst := filepath.Join(dir, f.local)
		if local != "" && sameFile(filepath.Join(local, f.local), f) {
			if err := os.Link(filepath.Join(local, f.local), dst); err == nil {
				count(true)
				return nil
			}
		}
		// Verified and kept by this recovery's verification pass.
		if p := fetchedPath(filepath.Join(b.lsm.env.dir, fetchedDirName), f.handle); sameFile(p, f) {
			if err := os.Link(p, dst); err == nil {
				count(false)
				return nil
			}
		}
		data, err := files.ReadFile(ctx, f.handle)
		if err != nil {
			return fmt.Errorf("state: operator %q: reading %s (file %s of checkpoint %d): %w", b.operator, f.local, f.handle.Name, f.handle.Checkpoint, err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("state: operator %q: writing %s of the restored store: %w", b.operator, f.local, err)
		}
		count(false)
		return nil
	})
	return n, err
}

// sameFile reports whether the file at path has f's size and CRC-32C: a
// local copy that can stand for the stored file.
func sameFile(path string, f lsmFile) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.handle.Size {
		return false
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, fh); err != nil {
		return false
	}
	return h.Sum32() == f.handle.CRC
}

// lsmKeepLocal makes local a copy of manifest m's store from dir, the
// store just fetched before it is opened: data files linked, small files
// copied.
func (b *Backend) lsmKeepLocal(m *lsmManifest, dir, local string) error {
	tmp := local + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for _, f := range m.files {
		if err := os.Link(filepath.Join(dir, f.local), filepath.Join(tmp, f.local)); err != nil {
			return err
		}
	}
	for _, f := range m.small {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(local); err != nil {
		return err
	}
	return os.Rename(tmp, local)
}

// lsmRemoveLocalCopies removes the local checkpoint copies other than keep's.
func (b *Backend) lsmRemoveLocalCopies(keep int64) {
	st := b.lsm
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return
	}
	want := fmt.Sprintf("ckpt-%d", keep)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ckpt-") && e.Name() != want {
			_ = os.RemoveAll(filepath.Join(st.dir, e.Name()))
		}
	}
}

// lsmRestoreRanges builds a new store from the key groups of the backend's
// range in the stores of manifests ms (a rescaling).
func (b *Backend) lsmRestoreRanges(ctx context.Context, files Files, ms []*lsmManifest) error {
	st := b.lsm
	b.lsmRemoveLocalCopies(-1)
	if err := st.open(b.operator); err != nil {
		return err
	}
	// The states of every manifest, by name, with the ids the new store
	// gives them.
	remap := make([]map[uint16]uint16, len(ms))
	for i, m := range ms {
		remap[i] = map[uint16]uint16{}
		for _, e := range m.states {
			have := st.catalog[e.meta.name]
			if have == nil {
				ne := e
				ne.sid = st.nextSID
				st.nextSID++
				st.catalog[e.meta.name] = &ne
				have = &ne
			} else if have.meta.kind != e.meta.kind || !slices.Equal(have.meta.codecs, e.meta.codecs) {
				return fmt.Errorf("%w: operator %q state %q is a %v in one subtask's state and a %v in another's", ErrCorrupt, b.operator, e.meta.name, &have.meta, &e.meta)
			}
			remap[i][e.sid] = have.sid
		}
	}
	for i, m := range ms {
		if err := b.lsmCopyRange(ctx, files, m, remap[i]); err != nil {
			return err
		}
	}
	if err := st.db.Flush(); err != nil {
		return fmt.Errorf("state: operator %q: flushing the restored store: %w", b.operator, err)
	}
	return nil
}

// lsmCopyRange copies the entries of the backend's key groups from manifest
// m's store (fetched into a temporary directory) into the backend's store,
// renumbering states with remap.
func (b *Backend) lsmCopyRange(ctx context.Context, files Files, m *lsmManifest, remap map[uint16]uint16) error {
	st := b.lsm
	tmp, err := os.MkdirTemp(st.dir, "tmp-")
	if err != nil {
		return fmt.Errorf("state: operator %q: %w", b.operator, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := b.lsmFetch(ctx, files, m, tmp, ""); err != nil {
		return err
	}
	var srcErr atomic.Pointer[error]
	src, err := pebble.Open(tmp, st.env.pebbleOptions(true, func(err error) { srcErr.CompareAndSwap(nil, &err) }))
	if err != nil {
		return fmt.Errorf("state: operator %q: opening the state of subtask range %v of checkpoint %d: %w", b.operator, m.kgRange, m.checkpoint, err)
	}
	defer src.Close()
	lo := max(b.kgRange.Start, m.kgRange.Start)
	hi := min(b.kgRange.End, m.kgRange.End)
	it, err := src.NewIter(&pebble.IterOptions{
		LowerBound: binary.BigEndian.AppendUint16(nil, uint16(lo)),
		UpperBound: prefixEnd(binary.BigEndian.AppendUint16(nil, uint16(hi-1))),
	})
	if err != nil {
		return fmt.Errorf("state: operator %q: %w", b.operator, err)
	}
	batch := st.db.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 4 {
			_ = it.Close()
			return fmt.Errorf("%w: operator %q: a stored key of %d bytes in checkpoint %d", ErrCorrupt, b.operator, len(k), m.checkpoint)
		}
		sid, ok := remap[binary.BigEndian.Uint16(k[2:4])]
		if !ok {
			_ = it.Close()
			return fmt.Errorf("%w: operator %q: checkpoint %d holds entries of state id %d, which its manifest does not name", ErrCorrupt, b.operator, m.checkpoint, binary.BigEndian.Uint16(k[2:4]))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("state: operator %q: reading checkpoint %d: %w", b.operator, m.checkpoint, err)
		}
		nk := binary.BigEndian.AppendUint16(append([]byte(nil), k[:2]...), sid)
		if err := batch.Set(append(nk, k[4:]...), v, nil); err != nil {
			_ = it.Close()
			return err
		}
		if batch.Len() >= 4<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				_ = it.Close()
				return fmt.Errorf("state: operator %q: writing the restored store: %w", b.operator, err)
			}
			batch = st.db.NewBatch()
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("state: operator %q: reading checkpoint %d: %w", b.operator, m.checkpoint, err)
	}
	if e := srcErr.Load(); e != nil {
		return fmt.Errorf("state: operator %q: reading checkpoint %d: %w", b.operator, m.checkpoint, *e)
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: operator %q: writing the restored store: %w", b.operator, err)
	}
	return ctx.Err()
}
