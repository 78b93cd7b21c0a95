package state

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"

	"github.com/ingest-engine/ingest/state/internal/kvtable"
)

// NamespacedValueState holds one value of type V per (namespace, key): the
// state of an operator whose keys share an int64 namespace that comes and
// goes for every key at once, such as a window's start. Create it with
// NewNamespacedValueState. Like its Backend, it must be used only from the
// task goroutine.
//
// Unlike ValueState, it keeps entries encoded, key bytes → value bytes, in
// compact hash tables (package kvtable), one per key group and namespace: an
// entry costs its encoded size plus about 20 bytes, holds no pointer the
// garbage collector scans, and dropping a namespace (a window that fired)
// frees its tables at once. Reading a value decodes it and writing one
// encodes it, so the codecs run on every access: give it binary codecs, not
// JSON. A value whose encoding keeps its length is rewritten in place.
//
// Keys are compared by their encoding: the key codec must be canonical
// (equal keys encode to equal bytes, unequal ones to unequal bytes). The
// value codec must decode what it encoded to an equal value.
//
// Copy-on-write: Snapshot freezes each table in O(1) (see kvtable.Table.
// Freeze); a write afterwards copies only what it changes. The snapshot
// must be released (Snapshot.Release) for the tables to reclaim the old
// versions.
//
// Deltas: a checkpoint snapshot writes a changed key group's changes since
// the last complete checkpoint instead of all its entries (see
// CheckpointSnapshot): the namespaces dropped since, the keys deleted since
// (each table logs them) and the entries written since (kvtable.Frozen.
// Changes). A table that is new, compacted since, or whose log of deletes
// restarted is written whole (its namespace dropped, then its entries set).
//
// In a snapshot, an entry is kc(key) ++ zigzag varint(namespace), then
// vc(value): a ValueState whose key codec writes that encoding (a window's
// (key, start) codec) holds the same bytes, so either restores the other's
// checkpoints when the codec names match (see NewNamespacedValueState).
type NamespacedValueState[K comparable, V any] struct {
	keyRouter[K]
	meta stateInfo
	kc   Codec[K]
	vc   Codec[V]
	// into is vc as an IntoDecoder, or nil: Apply then decodes into
	// scratch, reusing its memory, instead of allocating a value.
	into    IntoDecoder[V]
	scratch V
	// groups holds the entries, by key group - Start.
	groups []nsGroup
	// spaces counts, per namespace, the key groups holding a table for it.
	// INVARIANT: spaces[ns] is the number of groups g with g.tables[ns]
	// present, and namespaces is the keys of spaces, increasing.
	spaces     map[int64]int
	namespaces []int64
	// kbuf and vbuf are reused encoding buffers of the task goroutine.
	kbuf, vbuf []byte
	// lsm and lns are set on an LSM backend: the entries are in its
	// store, groups stay empty, and spaces and namespaces follow lns.
	lsm *lsmState
	lns *lsmNamespaced
}

// nsGroup is one key group's entries.
type nsGroup struct {
	// tables holds the key group's entries per namespace.
	// INVARIANT: no table in it is empty: a Clear that empties one removes
	// it (and a namespace with no table is not listed).
	tables map[int64]*nsTable
	// last caches the table of namespace lastNS: the records of a batch
	// mostly go to one namespace (the newest window). INVARIANT: last is
	// nil or tables[lastNS].
	lastNS int64
	last   *nsTable
	// written is the backend epoch of the group's last write (see
	// writtenSince).
	written uint64
}

// nsTable is one key group's table of one namespace, with the keys deleted
// from it, for incremental snapshots.
type nsTable struct {
	kvtable.Table
	// id tells this table from every other one, of any state, ever: a
	// baseline names tables by id, not by pointer, so that it does not keep
	// a dropped namespace's tables in memory.
	id uint64
	// deleted logs the encoded keys deleted from the table, each prefixed
	// with its uvarint length; deletedOff is the log position of
	// deleted[0], so a position (deletedOff + len at a Freeze) stays valid
	// across a reset, which starts a new log at a higher position.
	// INVARIANT: bytes of deleted below its length are never written again
	// (a snapshot reads them on another goroutine): a reset allocates a new
	// log. A baseline whose position is below deletedOff predates the
	// reset and cannot have a delta: the table is written in full.
	deleted    []byte
	deletedOff int
}

// nsTableIDs numbers the nsTables created (load creates them on several
// goroutines).
var nsTableIDs atomic.Uint64

func newNSTable() *nsTable { return &nsTable{id: nsTableIDs.Add(1)} }

// deletedLogFull reports whether a table's log of deleted keys, of log
// bytes, should restart: past 4 KiB and the table's own size, writing the
// table in full at its next delta is smaller than the deletes. A variable
// for tests.
var deletedLogFull = func(log, table int) bool { return log > 4096 && log > table }

// logDelete records key as deleted.
func (t *nsTable) logDelete(key []byte) {
	if deletedLogFull(len(t.deleted), t.Bytes()) {
		t.deletedOff += len(t.deleted)
		t.deleted = nil
	}
	t.deleted = binary.AppendUvarint(t.deleted, uint64(len(key)))
	t.deleted = append(t.deleted, key...)
}

// IntoDecoder is implemented by codecs that can decode into an existing
// value, reusing its memory (a slice's backing array): NamespacedValueState
// then updates a value without allocating one. DecodeInto decodes one value
// from the front of src into *dst and returns the bytes consumed, with the
// same contract as Codec.Decode but that *dst, which the caller owns, may be
// reused: no other value may share memory with it. Like Decode, it may be
// called on several goroutines at once (a restore decodes key groups in
// parallel), each with its own dst.
type IntoDecoder[T any] interface {
	DecodeInto(dst *T, src []byte) (n int, err error)
}

// NewNamespacedValueState registers (or returns, if this name is already
// registered with the same types and codecs) the namespaced value state
// called name, and loads its restored entries. keyName is the name
// checkpoints record for the entry key encoding, kc(key) ++ zigzag
// varint(namespace): it must change whenever the meaning of a namespace or
// key does (a window's size); a ValueState whose key codec has that name and
// writes that encoding reads and writes the same checkpoints. Errors are as
// for NewValueState.
func NewNamespacedValueState[K comparable, V any](b *Backend, name, keyName string, kc Codec[K], vc Codec[V]) (*NamespacedValueState[K, V], error) {
	if err := checkCodecs(b, name, kc == nil, vc == nil); err != nil {
		return nil, err
	}
	if keyName == "" {
		return nil, fmt.Errorf("state: operator %q state %q: the key encoding's name is empty", b.operator, name)
	}
	info := &stateInfo{name: name, kind: KindValue, codecs: []string{keyName, vc.Name()}}
	return register(b, info, func() (*NamespacedValueState[K, V], error) {
		r, err := newKeyRouter[K](b, name)
		if err != nil {
			return nil, err
		}
		s := &NamespacedValueState[K, V]{keyRouter: r, meta: *info, kc: kc, vc: vc, groups: make([]nsGroup, r.n), spaces: map[int64]int{}}
		s.into, _ = vc.(IntoDecoder[V])
		return s, nil
	})
}

// locate returns key's group, its hash and its encoding (in kbuf, valid
// until the next call), or false when key is outside the backend's range
// (the routing error is recorded).
func (s *NamespacedValueState[K, V]) locate(key K) (*nsGroup, uint64, []byte, bool) {
	h := s.hash(key)
	i := KeyGroupFor(h, s.maxP) - s.start
	if uint(i) >= uint(s.n) {
		s.misrouted(key, i+s.start)
		return nil, 0, nil, false
	}
	s.kbuf = s.kc.Append(s.kbuf[:0], key)
	return &s.groups[i], h, s.kbuf, true
}

// table returns the group's table of ns, nil if it has none.
func (g *nsGroup) table(ns int64) *nsTable {
	if g.last != nil && g.lastNS == ns {
		return g.last
	}
	t := g.tables[ns]
	if t != nil {
		g.lastNS, g.last = ns, t
	}
	return t
}

// put stores an entry in g's table of ns, creating the table (and listing
// the namespace) if needed.
func (s *NamespacedValueState[K, V]) put(g *nsGroup, ns int64, h uint64, k, v []byte) {
	t := g.table(ns)
	if t == nil {
		t = newNSTable()
		if err := t.Put(h, k, v); err != nil {
			s.fail(ns, err) // a new table stays empty: not installed
			return
		}
		if g.tables == nil {
			g.tables = map[int64]*nsTable{}
		}
		g.tables[ns] = t
		g.lastNS, g.last = ns, t
		s.addSpace(ns)
		return
	}
	if err := t.Put(h, k, v); err != nil {
		s.fail(ns, err)
	}
}

// addSpace counts a new table of ns.
func (s *NamespacedValueState[K, V]) addSpace(ns int64) {
	s.spaces[ns]++
	if s.spaces[ns] > 1 {
		return
	}
	if n := len(s.namespaces); n == 0 || s.namespaces[n-1] < ns {
		s.namespaces = append(s.namespaces, ns) // the usual case: a newer window
		return
	}
	i, _ := slices.BinarySearch(s.namespaces, ns)
	s.namespaces = slices.Insert(s.namespaces, i, ns)
}

// removeTable forgets g's table of ns.
func (s *NamespacedValueState[K, V]) removeTable(g *nsGroup, ns int64) {
	delete(g.tables, ns)
	if g.lastNS == ns {
		g.last = nil
	}
	if s.spaces[ns]--; s.spaces[ns] == 0 {
		delete(s.spaces, ns)
		if i, ok := slices.BinarySearch(s.namespaces, ns); ok {
			s.namespaces = slices.Delete(s.namespaces, i, i+1)
		}
	}
}

// fail records a write the tables could not take (or a value the codec
// could not read back) as the backend's error: state is then incomplete, so
// the runtime fails the job (see Backend.Err).
func (s *NamespacedValueState[K, V]) fail(ns int64, err error) {
	s.b.fail(fmt.Errorf("state: operator %q state %q namespace %d: %w", s.b.operator, s.name, ns, err))
}

// decode decodes a stored value into a new V.
func (s *NamespacedValueState[K, V]) decode(ns int64, val []byte) (V, bool) {
	v, n, err := s.vc.Decode(val)
	if err = readBack(s.vc, n, len(val), err); err != nil {
		s.fail(ns, fmt.Errorf("decoding a stored value: %w", err))
		var zero V
		return zero, false
	}
	return v, true
}

// readBack is a codec's result reading back a value it wrote: err, or an
// error when it read other than all size bytes. It asks the codec's name
// only then: some codecs build it with Sprintf, too slow for every read.
func readBack(codec interface{ Name() string }, n, size int, err error) error {
	if err == nil && n != size {
		err = fmt.Errorf("codec %s read %d of the %d bytes it wrote", codec.Name(), n, size)
	}
	return err
}

// Get returns the value of key in namespace ns and whether it is set. The
// value is freshly decoded: the caller may keep it.
func (s *NamespacedValueState[K, V]) Get(ns int64, key K) (V, bool) {
	if s.lsm != nil {
		return s.lsmGet(ns, key)
	}
	var zero V
	g, h, k, ok := s.locate(key)
	if !ok {
		return zero, false
	}
	t := g.table(ns)
	if t == nil {
		return zero, false
	}
	val, ok := t.Get(h, k)
	if !ok {
		return zero, false
	}
	return s.decode(ns, val)
}

// Update sets the value of key in namespace ns.
func (s *NamespacedValueState[K, V]) Update(ns int64, key K, v V) {
	if s.lsm != nil {
		s.lsmUpdate(ns, key, v)
		return
	}
	g, h, k, ok := s.locate(key)
	if !ok {
		return
	}
	g.written = s.b.epoch
	s.vbuf = s.vc.Append(s.vbuf[:0], v)
	s.put(g, ns, h, k, s.vbuf)
}

// Apply replaces the value of key in namespace ns with f(value, found), in
// one lookup: the read-modify-write of an aggregate. When key has no value
// there, f gets found false and init decoded (the encoding of the value a
// new entry starts from, such as an empty accumulator; the zero V when init
// is nil). The value f gets may reuse memory across calls (see
// IntoDecoder): f may modify and return it but must not keep it, and must
// not use the state.
func (s *NamespacedValueState[K, V]) Apply(ns int64, key K, init []byte, f func(v V, found bool) V) {
	if s.lsm != nil {
		s.lsmApply(ns, key, init, f)
		return
	}
	g, h, k, ok := s.locate(key)
	if !ok {
		return
	}
	g.written = s.b.epoch
	t := g.table(ns)
	var (
		val   []byte
		found bool
		err   error
	)
	if t != nil {
		if val, found, err = t.Modify(h, k); err != nil {
			s.fail(ns, err)
			return
		}
	}
	src := val
	if !found {
		src = init
	}
	var v V
	if src != nil {
		if v, ok = s.decodeReusing(ns, src); !ok {
			return
		}
	}
	s.vbuf = s.vc.Append(s.vbuf[:0], f(v, found))
	switch {
	case found && len(s.vbuf) == len(val):
		copy(val, s.vbuf) // in place: Modify made the entry writable
	case t == nil:
		s.put(g, ns, h, k, s.vbuf)
	default:
		if err := t.Put(h, k, s.vbuf); err != nil {
			s.fail(ns, err)
		}
	}
}

// decodeReusing decodes src into the scratch value when the codec can
// (IntoDecoder), else into a new one.
func (s *NamespacedValueState[K, V]) decodeReusing(ns int64, src []byte) (V, bool) {
	if s.into == nil {
		return s.decode(ns, src)
	}
	n, err := s.into.DecodeInto(&s.scratch, src)
	if err = readBack(s.vc, n, len(src), err); err != nil {
		s.fail(ns, fmt.Errorf("decoding a stored value: %w", err))
		var zero V
		return zero, false
	}
	return s.scratch, true
}

// Clear removes the value of key in namespace ns.
func (s *NamespacedValueState[K, V]) Clear(ns int64, key K) {
	if s.lsm != nil {
		s.lsmClear(ns, key)
		return
	}
	g, h, k, ok := s.locate(key)
	if !ok {
		return
	}
	if t := g.table(ns); t != nil && t.Delete(h, k) {
		g.written = s.b.epoch
		t.logDelete(k)
		if t.Len() == 0 {
			s.removeTable(g, ns)
		}
	}
}

// Namespaces returns the namespaces holding entries, increasing. The slice
// is valid until the next write and must not be modified.
func (s *NamespacedValueState[K, V]) Namespaces() []int64 { return s.namespaces }

// Entries calls f for every key of namespace ns and its value, in
// unspecified order (by key group, then by hash), until f returns false.
// Keys and values are freshly decoded: f may keep them. f must not write
// the state.
func (s *NamespacedValueState[K, V]) Entries(ns int64, f func(K, V) bool) {
	if s.lsm != nil {
		s.lsmEntries(ns, f)
		return
	}
	if s.spaces[ns] == 0 {
		return
	}
	for i := range s.groups {
		t := s.groups[i].tables[ns]
		if t == nil {
			continue
		}
		for kb, vb := range t.All() {
			k, n, err := s.kc.Decode(kb)
			if err = readBack(s.kc, n, len(kb), err); err != nil {
				s.fail(ns, fmt.Errorf("decoding a stored key: %w", err))
				return
			}
			v, ok := s.decode(ns, vb)
			if !ok || !f(k, v) {
				return
			}
		}
	}
}

// DropNamespace removes every entry of namespace ns, in O(key groups): its
// tables go to the garbage collector once no snapshot holds them.
func (s *NamespacedValueState[K, V]) DropNamespace(ns int64) {
	if s.lsm != nil {
		s.lsmDropNamespace(ns)
		return
	}
	if s.spaces[ns] == 0 {
		return
	}
	for i := range s.groups {
		if g := &s.groups[i]; g.tables[ns] != nil {
			g.written = s.b.epoch
			s.removeTable(g, ns)
		}
	}
}

// Len returns the number of entries, in O(key groups × namespaces) (on an
// LSM backend in O(entries): it counts them).
func (s *NamespacedValueState[K, V]) Len() int {
	if s.lsm != nil {
		return s.lsmLen()
	}
	n := 0
	for i := range s.groups {
		for _, t := range s.groups[i].tables {
			n += t.Len()
		}
	}
	return n
}

func (s *NamespacedValueState[K, V]) info() *stateInfo { return &s.meta }

func (s *NamespacedValueState[K, V]) freeze() frozenState {
	f := &frozenNamespaced{meta: &s.meta, groups: make([][]frozenSpace, len(s.groups)), counts: make([]int, len(s.groups))}
	for i := range s.groups {
		g := &s.groups[i]
		if len(g.tables) == 0 {
			continue
		}
		spaces := make([]frozenSpace, 0, len(g.tables))
		for _, ns := range s.namespaces {
			if t := g.tables[ns]; t != nil {
				spaces = append(spaces, frozenSpace{ns: ns, id: t.id, view: t.Freeze(), deleted: t.deleted, deletedOff: t.deletedOff})
				f.counts[i] += t.Len()
			}
		}
		f.groups[i] = spaces
	}
	return f
}

// load installs one restored key group's entries: count × (kc(key) ++
// zigzag varint(namespace), value), then applies the part's deltas in
// order. It writes only that key group's tables; loaded then lists the
// namespaces.
func (s *NamespacedValueState[K, V]) load(p restoredPart) error {
	r := s.b.partReader(s.name, p)
	g := &s.groups[p.kg-s.start]
	g.written = s.b.restoreEpoch
	var kb []byte // load runs concurrently for other key groups: not s.kbuf
	if err := s.loadEntries(r, g, p.count, &kb); err != nil {
		return err
	}
	n := 0
	for _, t := range g.tables {
		n += t.Len()
	}
	if err := r.finish(n, p.count); err != nil {
		return err
	}
	for _, d := range p.deltas {
		r.src = d
		if err := s.applyDelta(r, g, &kb); err != nil {
			return err
		}
	}
	g.last = nil
	return nil
}

// loadEntries puts count entries read from r into g's tables, encoding
// keys in *kb. Empty tables (all of a full section's, and those a delta
// section creates) are bulk loaded (kvtable's PutFresh) and indexed before
// it returns, also when it fails; entries for a table that already has
// some are ordinary Puts.
func (s *NamespacedValueState[K, V]) loadEntries(r *partReader, g *nsGroup, count int, kb *[]byte) error {
	defer func() {
		for _, t := range g.tables {
			t.FinishFresh()
		}
	}()
	var scratch V // each value is decoded (checked) into it and dropped
	for range count {
		k, ns, err := s.readEntryKey(r, g)
		if err != nil {
			return err
		}
		raw := r.src
		if err := readValueInto(r, s.vc, s.into, &scratch, "value"); err != nil {
			return err
		}
		raw = raw[:len(raw)-len(r.src)]
		if g.tables == nil {
			g.tables = map[int64]*nsTable{}
		}
		t := g.tables[ns]
		if t == nil {
			t = newNSTable()
			g.tables[ns] = t
		}
		// The key is stored re-encoded, so lookups, which encode, find it;
		// the value as the snapshot holds it, which its codec just read.
		*kb = s.kc.Append((*kb)[:0], k)
		if err := t.PutFresh(s.hash(k), *kb, raw); err != nil {
			return r.corrupt("entries", err)
		}
	}
	return nil
}

// readEntryKey reads an entry key, kc(key) ++ zigzag varint(namespace).
func (s *NamespacedValueState[K, V]) readEntryKey(r *partReader, g *nsGroup) (K, int64, error) {
	k, err := readKey(r, s.kc, &s.keyRouter, r.kg)
	if err != nil {
		return k, 0, err
	}
	ns, err := r.varint("namespace")
	return k, ns, err
}

// applyDelta applies one delta payload (see the format comment in
// snapshot.go) to g's tables: drops, deletes, then puts.
func (s *NamespacedValueState[K, V]) applyDelta(r *partReader, g *nsGroup, kb *[]byte) error {
	drops, err := r.u64count("dropped namespaces")
	if err != nil {
		return err
	}
	for range drops {
		ns, err := r.varint("dropped namespace")
		if err != nil {
			return err
		}
		delete(g.tables, ns)
	}
	deletes, err := r.u64count("deleted keys")
	if err != nil {
		return err
	}
	for range deletes {
		k, ns, err := s.readEntryKey(r, g)
		if err != nil {
			return err
		}
		if t := g.tables[ns]; t != nil {
			*kb = s.kc.Append((*kb)[:0], k)
			if t.Delete(s.hash(k), *kb) && t.Len() == 0 {
				delete(g.tables, ns)
			}
		}
	}
	puts, err := r.u64count("set entries")
	if err != nil {
		return err
	}
	if err := s.loadEntries(r, g, puts, kb); err != nil {
		return err
	}
	if len(r.src) != 0 {
		return r.corrupt("delta", fmt.Errorf("%d trailing bytes", len(r.src)))
	}
	return nil
}

func (s *NamespacedValueState[K, V]) loadsDeltas() {}

// loaded lists the namespaces of the restored tables, after every key group
// is loaded (see register).
func (s *NamespacedValueState[K, V]) loaded() {
	clear(s.spaces)
	for i := range s.groups {
		for ns := range s.groups[i].tables {
			s.spaces[ns]++
		}
	}
	s.namespaces = slices.Sorted(func(yield func(int64) bool) {
		for ns := range s.spaces {
			if !yield(ns) {
				return
			}
		}
	})
}

// frozenNamespaced is a NamespacedValueState as of a Snapshot.
type frozenNamespaced struct {
	meta *stateInfo
	// groups holds each key group's frozen tables, by namespace.
	// INVARIANT: the views are not released before the snapshot is.
	groups [][]frozenSpace
	counts []int
}

// frozenSpace is one key group's table of one namespace, frozen, with its
// log of deleted keys as of the Freeze.
type frozenSpace struct {
	ns         int64
	id         uint64
	view       *kvtable.Frozen
	deleted    []byte
	deletedOff int
}

func (f *frozenNamespaced) info() *stateInfo { return f.meta }
func (f *frozenNamespaced) count(i int) int  { return f.counts[i] }
func (f *frozenNamespaced) appendEntries(dst []byte, i int) []byte {
	for _, sp := range f.groups[i] {
		dst, _ = appendSpace(dst, sp.ns, sp.view.All())
	}
	return dst
}

// appendSpace appends entries of namespace ns as (entry key, value) pairs
// and returns how many.
func appendSpace(dst []byte, ns int64, entries iter.Seq2[[]byte, []byte]) ([]byte, uint64) {
	n := uint64(0)
	for k, v := range entries {
		dst = append(dst, k...)
		dst = binary.AppendVarint(dst, ns)
		dst = append(dst, v...)
		n++
	}
	return dst, n
}

// nsBaseline is what a delta of a NamespacedValueState since a snapshot
// builds on: by key group index, each table's id, Mark and position in its
// log of deleted keys at the snapshot, by increasing namespace. It holds no
// frozen view and no table, so it pins none of the state's memory.
type nsBaseline struct {
	groups [][]spaceMark
}

type spaceMark struct {
	ns      int64
	id      uint64 // the table's nsTable.id
	mark    kvtable.Mark
	deleted int // the log position at the Freeze
}

func (f *frozenNamespaced) baseline() any {
	bl := &nsBaseline{groups: make([][]spaceMark, len(f.groups))}
	for i, spaces := range f.groups {
		if len(spaces) == 0 {
			continue
		}
		marks := make([]spaceMark, len(spaces))
		for j, sp := range spaces {
			marks[j] = spaceMark{ns: sp.ns, id: sp.id, mark: sp.view.Mark(), deleted: sp.deletedOff + len(sp.deleted)}
		}
		bl.groups[i] = marks
	}
	return bl
}

// hasDelta reports true: a table that cannot write its changes is written
// whole inside the delta (its namespace dropped, then set).
func (f *frozenNamespaced) hasDelta(int, any) bool { return true }

// appendDelta writes key group index i's changes since base: the
// namespaces whose table is gone or was replaced (a new table, one that
// compacted, one whose log of deletes restarted) are dropped and the
// replacements' entries set; of the other tables, the keys deleted since
// are deleted and the entries written since set.
func (f *frozenNamespaced) appendDelta(dst []byte, i int, base any) []byte {
	was := base.(*nsBaseline).groups[i]
	now := f.groups[i]
	// changes[j] is now[j]'s entries written since the base and deletedAt[j]
	// where its deletes since start in its log; changes[j] is nil when the
	// table is written whole (replaced, or not in the base).
	changes := make([]iter.Seq2[[]byte, []byte], len(now))
	deletedAt := make([]int, len(now))
	for j := range now {
		sp := &now[j]
		k, ok := slices.BinarySearchFunc(was, sp.ns, func(m spaceMark, ns int64) int { return cmp.Compare(m.ns, ns) })
		if !ok || was[k].id != sp.id || was[k].deleted < sp.deletedOff {
			continue
		}
		changes[j], _ = sp.view.Changes(was[k].mark) // nil when it cannot tell
		deletedAt[j] = was[k].deleted - sp.deletedOff
	}
	dst = counted(dst, func(dst []byte) ([]byte, uint64) {
		n := uint64(0)
		for _, m := range was {
			k, ok := slices.BinarySearchFunc(now, m.ns, func(sp frozenSpace, ns int64) int { return cmp.Compare(sp.ns, ns) })
			if !ok || changes[k] == nil { // gone, or replaced
				dst = binary.AppendVarint(dst, m.ns)
				n++
			}
		}
		return dst, n
	})
	dst = counted(dst, func(dst []byte) ([]byte, uint64) {
		n := uint64(0)
		for j := range now {
			if changes[j] == nil {
				continue
			}
			for log := now[j].deleted[deletedAt[j]:]; len(log) > 0; {
				l, w := binary.Uvarint(log)
				dst = append(dst, log[w:w+int(l)]...)
				dst = binary.AppendVarint(dst, now[j].ns)
				log = log[w+int(l):]
				n++
			}
		}
		return dst, n
	})
	return counted(dst, func(dst []byte) ([]byte, uint64) {
		n := uint64(0)
		for j := range now {
			entries := changes[j]
			if entries == nil {
				entries = now[j].view.All()
			}
			var c uint64
			dst, c = appendSpace(dst, now[j].ns, entries)
			n += c
		}
		return dst, n
	})
}

// counted appends what add appends, preceded by the u64le count of items
// add reports (a delta's counts, known only once written).
func counted(dst []byte, add func([]byte) ([]byte, uint64)) []byte {
	at := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst, n := add(dst)
	binary.LittleEndian.PutUint64(dst[at:], n)
	return dst
}

// release releases every frozen table (see Snapshot.Release).
func (f *frozenNamespaced) release() {
	for _, g := range f.groups {
		for _, sp := range g {
			sp.view.Release()
		}
	}
}

// writtenSince reports whether key group index i was written after the
// snapshot taken at epoch.
func (s *NamespacedValueState[K, V]) writtenSince(i int, epoch uint64) bool {
	return s.groups[i].written > epoch
}
