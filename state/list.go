package state

import "slices"

// ListState holds a list of V per key. Create it with NewListState. Like its
// Backend, it must be used only from the task goroutine.
type ListState[K comparable, V any] struct {
	keyRouter[K]
	meta   stateInfo
	kc     Codec[K]
	vc     Codec[V]
	tables []listTable[K, V] // indexed by key group - Start
	// lsm is set on an LSM backend (see ValueState.lsm); hot holds the
	// lists read and added to lately, decoded (see listCache).
	lsm *lsmState
	hot *listCache[K, V]
}

// listTable is one key group's keys.
type listTable[K comparable, V any] struct {
	// m holds each key's list. INVARIANT: no list is empty.
	m map[K]*list[V]
	// epoch is the copy-on-write epoch m belongs to.
	// INVARIANT: if epoch <= Backend.frozen, a Snapshot may reference m and m
	// must be copied before it is written.
	epoch uint64
	// log holds the keys written, for deltas (see keylog.go).
	// INVARIANT: every key written to m since position p is logged after p.
	log keyLog[K]
}

// list is one key's list.
type list[V any] struct {
	vs []V
	// epoch is the copy-on-write epoch of this list.
	// INVARIANT: if epoch <= Backend.frozen, a frozen key-group table may
	// point at this list: neither vs's backing array (even its spare
	// capacity, which a frozen view could later be appended into) nor any
	// field is written again; Add installs a fresh list holding a copy.
	// INVARIANT: elements vs[:len(vs)] are never overwritten, even in the
	// current epoch, so slices returned by Get stay valid.
	epoch uint64
}

// NewListState registers (or, if this name is already registered with the
// same types and codecs, returns) the list state called name, and loads its
// restored entries. Errors are as for NewValueState.
func NewListState[K comparable, V any](b *Backend, name string, kc Codec[K], vc Codec[V]) (*ListState[K, V], error) {
	if err := checkCodecs(b, name, kc == nil, vc == nil); err != nil {
		return nil, err
	}
	info := &stateInfo{name: name, kind: KindList, codecs: []string{kc.Name(), vc.Name()}}
	return register(b, info, func() (*ListState[K, V], error) {
		r, err := newKeyRouter[K](b, name)
		if err != nil {
			return nil, err
		}
		return &ListState[K, V]{keyRouter: r, meta: *info, kc: kc, vc: vc, tables: make([]listTable[K, V], r.n)}, nil
	})
}

// Get returns key's list, nil if it has none. The slice is a read-only view
// of the state, not a copy: the caller must not modify its elements (they are
// the stored values, and may be part of a snapshot being encoded). The view
// stays as it is: later Add, Update and Clear never write into it, and
// appending to it copies (its capacity equals its length).
func (s *ListState[K, V]) Get(key K) []V {
	i, ok := s.index(key)
	if !ok {
		return nil
	}
	if s.lsm != nil {
		return s.lsmGet(i, key)
	}
	if l := s.tables[i].m[key]; l != nil {
		return l.vs[:len(l.vs):len(l.vs)]
	}
	return nil
}

// Add appends v to key's list.
func (s *ListState[K, V]) Add(key K, v V) {
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmAdd(i, key, v)
		return
	}
	t := &s.tables[i]
	epoch := s.b.epoch
	if t.epoch != epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	l := t.m[key]
	switch {
	case l == nil:
		l = &list[V]{vs: make([]V, 0, 4), epoch: epoch}
		t.m[key] = l
	case l.epoch != epoch && l.epoch > s.b.frozen:
		l.epoch = epoch // no Snapshot references it (restored)
	case l.epoch != epoch:
		// A snapshot may see l.vs: appending, even into spare capacity,
		// could overwrite what a later append through that view sees.
		l = &list[V]{vs: slices.Grow(slices.Clone(l.vs), len(l.vs)+1), epoch: epoch}
		t.m[key] = l
	}
	l.vs = append(l.vs, v)
	t.log.add(key, len(t.m))
}

// Update replaces key's list with a copy of vs; an empty vs clears it.
func (s *ListState[K, V]) Update(key K, vs []V) {
	if len(vs) == 0 {
		s.Clear(key)
		return
	}
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmUpdate(i, key, vs)
		return
	}
	t := &s.tables[i]
	if t.epoch != s.b.epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	t.m[key] = &list[V]{vs: slices.Clone(vs), epoch: s.b.epoch}
	t.log.add(key, len(t.m))
}

// All calls f for every key and its list (a read-only view, as Get gives),
// in unspecified order, until f returns false. f may Clear or Update the key
// it is called with; any other write during All has unspecified effect on
// which keys All then visits.
func (s *ListState[K, V]) All(f func(K, []V) bool) {
	if s.lsm != nil {
		s.lsmAll(f)
		return
	}
	for i := range s.tables {
		for k, l := range s.tables[i].m {
			if !f(k, l.vs[:len(l.vs):len(l.vs)]) {
				return
			}
		}
	}
}

// Clear removes key's list.
func (s *ListState[K, V]) Clear(key K) {
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmClear(i, key)
		return
	}
	t := &s.tables[i]
	if _, ok := t.m[key]; !ok {
		return
	}
	if t.epoch != s.b.epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	delete(t.m, key)
	t.log.add(key, len(t.m))
}

func (s *ListState[K, V]) info() *stateInfo { return &s.meta }

func (s *ListState[K, V]) freeze() frozenState {
	f := &frozenList[K, V]{meta: &s.meta, kc: s.kc, vc: s.vc, maps: make([]map[K]*list[V], len(s.tables)), logs: make([]keyLog[K], len(s.tables))}
	for i := range s.tables {
		f.maps[i] = s.tables[i].m
		f.logs[i] = s.tables[i].log.frozen()
	}
	return f
}

// Payload of one key group: count × (key, uvarint n, n × value), then the
// part's deltas applied in order (see keylog.go).
func (s *ListState[K, V]) load(p restoredPart) error {
	r := s.b.partReader(s.name, p)
	m := make(map[K]*list[V], r.sizeHint(p.count))
	for range p.count {
		k, err := readKey(r, s.kc, &s.keyRouter, p.kg)
		if err != nil {
			return err
		}
		vs, err := s.readList(r)
		if err != nil {
			return err
		}
		m[k] = &list[V]{vs: vs, epoch: s.b.restoreEpoch}
	}
	if err := r.finish(len(m), p.count); err != nil {
		return err
	}
	for _, d := range p.deltas {
		r.src = d
		err := readMapDelta(r, &s.keyRouter, s.kc, func(k K) { delete(m, k) }, func(k K) error {
			vs, err := s.readList(r)
			m[k] = &list[V]{vs: vs, epoch: s.b.restoreEpoch}
			return err
		})
		if err != nil {
			return err
		}
	}
	s.tables[p.kg-s.start] = listTable[K, V]{m: m, epoch: s.b.restoreEpoch}
	return nil
}

func (s *ListState[K, V]) loadsDeltas() {}

// trimLog trims each key group's log to base, a complete checkpoint's
// baseline (see keylog.go).
func (s *ListState[K, V]) trimLog(base any) {
	for i, p := range base.(*logBaseline).pos {
		s.tables[i].log.trim(p)
	}
}

// readList reads a list as a payload holds it: uvarint n > 0, n × value.
func (s *ListState[K, V]) readList(r *partReader) ([]V, error) {
	n, err := r.length("list length")
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, r.corrupt("list length", errEmptyContainer)
	}
	vs := make([]V, 0, r.sizeHint(n))
	for range n {
		v, err := readValue(r, s.vc, "value")
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// frozenList is a ListState as of a Snapshot.
type frozenList[K comparable, V any] struct {
	meta *stateInfo
	kc   Codec[K]
	vc   Codec[V]
	maps []map[K]*list[V] // INVARIANT: never written, nor the lists they point to
	logs []keyLog[K]
}

func (f *frozenList[K, V]) baseline() any { return logPositions(f.logs) }

func (f *frozenList[K, V]) hasDelta(i int, base any) bool {
	return f.logs[i].holds(base.(*logBaseline).pos[i])
}

// appendDelta writes key group index i's keys written since base: each
// set to its list now, or deleted.
func (f *frozenList[K, V]) appendDelta(dst []byte, i int, base any) []byte {
	keys, _ := f.logs[i].since(base.(*logBaseline).pos[i])
	m := f.maps[i]
	return appendMapDelta(dst, keys, f.kc, func(k K) bool { return m[k] != nil }, func(dst []byte, k K) []byte {
		return f.appendList(f.kc.Append(dst, k), m[k])
	})
}

func (f *frozenList[K, V]) info() *stateInfo { return f.meta }
func (f *frozenList[K, V]) count(i int) int  { return len(f.maps[i]) }
func (f *frozenList[K, V]) appendEntries(dst []byte, i int) []byte {
	for k, l := range f.maps[i] {
		dst = f.appendList(f.kc.Append(dst, k), l)
	}
	return dst
}

// appendList appends l as a payload holds it: uvarint n, n × value.
func (f *frozenList[K, V]) appendList(dst []byte, l *list[V]) []byte {
	dst = appendUvarint(dst, len(l.vs))
	for _, v := range l.vs {
		dst = f.vc.Append(dst, v)
	}
	return dst
}

// writtenSince reports whether key group index i was written after the
// snapshot taken at epoch: its table's copy-on-write epoch is the last epoch
// with a write (see Backend.epoch).
func (s *ListState[K, V]) writtenSince(i int, epoch uint64) bool { return s.tables[i].epoch > epoch }
