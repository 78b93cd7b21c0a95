package state

import (
	"iter"
	"maps"
)

// MapState holds a map from user key UK to user value UV per key. Create it
// with NewMapState. Like its Backend, it must be used only from the task
// goroutine.
type MapState[K comparable, UK comparable, UV any] struct {
	keyRouter[K]
	meta   stateInfo
	kc     Codec[K]
	ukc    Codec[UK]
	uvc    Codec[UV]
	tables []mapTable[K, UK, UV] // indexed by key group - Start
	// lsm is set on an LSM backend (see ValueState.lsm).
	lsm *lsmState
}

// mapTable is one key group's keys.
type mapTable[K comparable, UK comparable, UV any] struct {
	// m holds each key's user map. INVARIANT: no user map is empty.
	m map[K]*userMap[UK, UV]
	// epoch is the copy-on-write epoch m belongs to.
	// INVARIANT: if epoch <= Backend.frozen, a Snapshot may reference m and m
	// must be copied before it is written.
	epoch uint64
}

// userMap is one key's map.
type userMap[UK comparable, UV any] struct {
	m map[UK]UV
	// epoch is the copy-on-write epoch of this userMap.
	// INVARIANT: if epoch <= Backend.frozen, a frozen key-group table may
	// point at this userMap: neither m nor any field is written again; a
	// write installs a fresh userMap holding a copy instead.
	epoch uint64
}

// NewMapState registers (or, if this name is already registered with the
// same types and codecs, returns) the map state called name, and loads its
// restored entries. Errors are as for NewValueState.
func NewMapState[K comparable, UK comparable, UV any](b *Backend, name string, kc Codec[K], ukc Codec[UK], uvc Codec[UV]) (*MapState[K, UK, UV], error) {
	if err := checkCodecs(b, name, kc == nil, ukc == nil, uvc == nil); err != nil {
		return nil, err
	}
	info := &stateInfo{name: name, kind: KindMap, codecs: []string{kc.Name(), ukc.Name(), uvc.Name()}}
	return register(b, info, func() (*MapState[K, UK, UV], error) {
		r, err := newKeyRouter[K](b, name)
		if err != nil {
			return nil, err
		}
		return &MapState[K, UK, UV]{keyRouter: r, meta: *info, kc: kc, ukc: ukc, uvc: uvc, tables: make([]mapTable[K, UK, UV], r.n)}, nil
	})
}

// Get returns the value of user key uk in key's map and whether it is set.
func (s *MapState[K, UK, UV]) Get(key K, uk UK) (UV, bool) {
	i, ok := s.index(key)
	if !ok {
		var zero UV
		return zero, false
	}
	if s.lsm != nil {
		return s.lsmGet(i, key, uk)
	}
	if um := s.tables[i].m[key]; um != nil {
		v, ok := um.m[uk]
		return v, ok
	}
	var zero UV
	return zero, false
}

// Put sets uk to uv in key's map.
func (s *MapState[K, UK, UV]) Put(key K, uk UK, uv UV) {
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmPut(i, key, uk, uv)
		return
	}
	s.own(&s.tables[i], key).m[uk] = uv
}

// Remove deletes uk from key's map; removing the last entry removes the key.
func (s *MapState[K, UK, UV]) Remove(key K, uk UK) {
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmRemove(i, key, uk)
		return
	}
	t := &s.tables[i]
	if um := t.m[key]; um == nil {
		return
	} else if _, ok := um.m[uk]; !ok {
		return // nothing to remove: copy nothing
	}
	um := s.own(t, key)
	delete(um.m, uk)
	if len(um.m) == 0 {
		delete(t.m, key)
	}
}

// Clear removes key's whole map.
func (s *MapState[K, UK, UV]) Clear(key K) {
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
}

// All iterates over key's map in unspecified order. The iterator reads the
// map when it runs. Writing to the same key's map while iterating is allowed,
// with Go's map semantics (an entry added during iteration may or may not be
// seen); it never corrupts state or a snapshot.
func (s *MapState[K, UK, UV]) All(key K) iter.Seq2[UK, UV] {
	return func(yield func(UK, UV) bool) {
		i, ok := s.index(key)
		if !ok {
			return
		}
		if s.lsm != nil {
			s.lsmAll(i, key)(yield)
			return
		}
		um := s.tables[i].m[key]
		if um == nil {
			return
		}
		for uk, uv := range um.m {
			if !yield(uk, uv) {
				return
			}
		}
	}
}

// Len returns the number of entries in key's map.
func (s *MapState[K, UK, UV]) Len(key K) int {
	i, ok := s.index(key)
	if !ok {
		return 0
	}
	if s.lsm != nil {
		return s.lsmLen(i, key)
	}
	if um := s.tables[i].m[key]; um != nil {
		return len(um.m)
	}
	return 0
}

// own returns key's user map ready for writing, creating it if absent and
// copying the table and the user map if a Snapshot may reference them.
func (s *MapState[K, UK, UV]) own(t *mapTable[K, UK, UV], key K) *userMap[UK, UV] {
	epoch := s.b.epoch
	if t.epoch != epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	um := t.m[key]
	switch {
	case um == nil:
		um = &userMap[UK, UV]{m: make(map[UK]UV), epoch: epoch}
		t.m[key] = um
	case um.epoch != epoch && um.epoch > s.b.frozen:
		um.epoch = epoch // no Snapshot references it (restored)
	case um.epoch != epoch:
		um = &userMap[UK, UV]{m: maps.Clone(um.m), epoch: epoch}
		t.m[key] = um
	}
	return um
}

func (s *MapState[K, UK, UV]) info() *stateInfo { return &s.meta }

func (s *MapState[K, UK, UV]) freeze() frozenState {
	f := &frozenMap[K, UK, UV]{meta: &s.meta, kc: s.kc, ukc: s.ukc, uvc: s.uvc, maps: make([]map[K]*userMap[UK, UV], len(s.tables))}
	for i := range s.tables {
		f.maps[i] = s.tables[i].m
	}
	return f
}

// Payload of one key group: count × (key, uvarint n, n × (user key, user value)).
func (s *MapState[K, UK, UV]) load(p restoredPart) error {
	r := s.b.partReader(s.name, p)
	m := make(map[K]*userMap[UK, UV], r.sizeHint(p.count))
	for range p.count {
		k, err := readKey(r, s.kc, &s.keyRouter, p.kg)
		if err != nil {
			return err
		}
		n, err := r.length("map size")
		if err != nil {
			return err
		}
		if n == 0 {
			return r.corrupt("map size", errEmptyContainer)
		}
		um := &userMap[UK, UV]{m: make(map[UK]UV, r.sizeHint(n)), epoch: s.b.restoreEpoch}
		for range n {
			uk, err := readValue(r, s.ukc, "user key")
			if err != nil {
				return err
			}
			uv, err := readValue(r, s.uvc, "user value")
			if err != nil {
				return err
			}
			um.m[uk] = uv
		}
		if len(um.m) != n {
			return r.corrupt("user keys", errDuplicateKeys)
		}
		m[k] = um
	}
	if err := r.finish(len(m), p.count); err != nil {
		return err
	}
	s.tables[p.kg-s.start] = mapTable[K, UK, UV]{m: m, epoch: s.b.restoreEpoch}
	return nil
}

// frozenMap is a MapState as of a Snapshot.
type frozenMap[K comparable, UK comparable, UV any] struct {
	meta *stateInfo
	kc   Codec[K]
	ukc  Codec[UK]
	uvc  Codec[UV]
	maps []map[K]*userMap[UK, UV] // INVARIANT: never written, nor the userMaps they point to
}

func (f *frozenMap[K, UK, UV]) info() *stateInfo { return f.meta }
func (f *frozenMap[K, UK, UV]) count(i int) int  { return len(f.maps[i]) }
func (f *frozenMap[K, UK, UV]) appendEntries(dst []byte, i int) []byte {
	for k, um := range f.maps[i] {
		dst = f.kc.Append(dst, k)
		dst = appendUvarint(dst, len(um.m))
		for uk, uv := range um.m {
			dst = f.ukc.Append(dst, uk)
			dst = f.uvc.Append(dst, uv)
		}
	}
	return dst
}

// writtenSince reports whether key group index i was written after the
// snapshot taken at epoch: its table's copy-on-write epoch is the last epoch
// with a write (see Backend.epoch).
func (s *MapState[K, UK, UV]) writtenSince(i int, epoch uint64) bool {
	return s.tables[i].epoch > epoch
}
