package state

// ValueState holds one value of type V per key. Create it with NewValueState.
// Like its Backend, it must be used only from the task goroutine.
//
// On the memory backend Get returns the stored value itself; on an LSM
// backend it returns a value decoded from the store. Code that changes a
// value (a pointer's target, a slice's elements) must store it again with
// Update for the change to be kept on every backend.
type ValueState[K comparable, V any] struct {
	keyRouter[K]
	meta   stateInfo
	kc     Codec[K]
	vc     Codec[V]
	tables []valueTable[K, V] // indexed by key group - Start
	// lsm is set on an LSM backend: the entries are in its store and
	// tables stay empty; hot holds the values read and written lately,
	// decoded (see valueCache).
	lsm *lsmState
	hot *valueCache[K, V]
	// vbuf is a reused encoding buffer of the task goroutine.
	vbuf []byte
}

// valueTable is one key group's entries.
type valueTable[K comparable, V any] struct {
	m map[K]V
	// epoch is the copy-on-write epoch m belongs to.
	// INVARIANT: if epoch <= Backend.frozen, a Snapshot may reference m and m
	// must be copied before it is written (see Backend.epoch).
	epoch uint64
	// log holds the keys written, for deltas (see keylog.go).
	// INVARIANT: every key written to m since position p is logged after p.
	log keyLog[K]
}

// NewValueState registers (or, if this name is already registered with the
// same types and codecs, returns) the value state called name, and loads its
// restored entries. It fails if K cannot be hashed stably, if the name is
// registered as something else, or (wrapping ErrStateMismatch) if restored
// state of that name has a different kind or codecs.
func NewValueState[K comparable, V any](b *Backend, name string, kc Codec[K], vc Codec[V]) (*ValueState[K, V], error) {
	if err := checkCodecs(b, name, kc == nil, vc == nil); err != nil {
		return nil, err
	}
	info := &stateInfo{name: name, kind: KindValue, codecs: []string{kc.Name(), vc.Name()}}
	return register(b, info, func() (*ValueState[K, V], error) {
		r, err := newKeyRouter[K](b, name)
		if err != nil {
			return nil, err
		}
		return &ValueState[K, V]{keyRouter: r, meta: *info, kc: kc, vc: vc, tables: make([]valueTable[K, V], r.n)}, nil
	})
}

// Get returns the value of key and whether it is set.
func (s *ValueState[K, V]) Get(key K) (V, bool) {
	i, ok := s.index(key)
	if !ok {
		var zero V
		return zero, false
	}
	if s.lsm != nil {
		return s.lsmGet(i, key)
	}
	v, ok := s.tables[i].m[key]
	return v, ok
}

// Update sets the value of key.
func (s *ValueState[K, V]) Update(key K, v V) {
	i, ok := s.index(key)
	if !ok {
		return
	}
	if s.lsm != nil {
		s.lsmUpdate(i, key, v)
		return
	}
	t := &s.tables[i]
	if t.epoch != s.b.epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	t.m[key] = v
	t.log.add(key, len(t.m))
}

// Clear removes the value of key.
func (s *ValueState[K, V]) Clear(key K) {
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
		return // nothing to remove: do not copy a frozen table for nothing
	}
	if t.epoch != s.b.epoch {
		t.m = ownTable(s.b, t.m, &t.epoch)
	}
	delete(t.m, key)
	t.log.add(key, len(t.m))
}

// All calls f for every key and its value, in unspecified order, until f
// returns false. f may Clear the key it is called with, and Update it; any
// other write during All has unspecified effect on which entries All then
// visits. (A Clear or Update that copies a frozen key group's table, see
// Backend, leaves the table All is reading untouched.)
func (s *ValueState[K, V]) All(f func(K, V) bool) {
	if s.lsm != nil {
		s.lsmAll(f)
		return
	}
	for i := range s.tables {
		for k, v := range s.tables[i].m {
			if !f(k, v) {
				return
			}
		}
	}
}

// Len returns the number of keys with a value, in O(key groups) (on an
// LSM backend in O(entries): it counts them).
func (s *ValueState[K, V]) Len() int {
	if s.lsm != nil {
		s.hot.persist(s)
		return lsmCount(s.lsm, s.name, s.start, s.n)
	}
	n := 0
	for i := range s.tables {
		n += len(s.tables[i].m)
	}
	return n
}

func (s *ValueState[K, V]) info() *stateInfo { return &s.meta }

func (s *ValueState[K, V]) freeze() frozenState {
	f := &frozenValue[K, V]{meta: &s.meta, kc: s.kc, vc: s.vc, maps: make([]map[K]V, len(s.tables)), logs: make([]keyLog[K], len(s.tables))}
	for i := range s.tables {
		f.maps[i] = s.tables[i].m
		f.logs[i] = s.tables[i].log.frozen()
	}
	return f
}

// Payload of one key group: count × (key, value), then the part's deltas
// applied in order (see keylog.go).
func (s *ValueState[K, V]) load(p restoredPart) error {
	r := s.b.partReader(s.name, p)
	m := make(map[K]V, r.sizeHint(p.count))
	for range p.count {
		k, err := readKey(r, s.kc, &s.keyRouter, p.kg)
		if err != nil {
			return err
		}
		v, err := readValue(r, s.vc, "value")
		if err != nil {
			return err
		}
		m[k] = v
	}
	if err := r.finish(len(m), p.count); err != nil {
		return err
	}
	for _, d := range p.deltas {
		r.src = d
		err := readMapDelta(r, &s.keyRouter, s.kc, func(k K) { delete(m, k) }, func(k K) error {
			v, err := readValue(r, s.vc, "value")
			m[k] = v
			return err
		})
		if err != nil {
			return err
		}
	}
	s.tables[p.kg-s.start] = valueTable[K, V]{m: m, epoch: s.b.restoreEpoch}
	return nil
}

func (s *ValueState[K, V]) loadsDeltas() {}

// trimLog trims each key group's log to base, a complete checkpoint's
// baseline (see keylog.go).
func (s *ValueState[K, V]) trimLog(base any) {
	for i, p := range base.(*logBaseline).pos {
		s.tables[i].log.trim(p)
	}
}

// frozenValue is a ValueState as of a Snapshot.
type frozenValue[K comparable, V any] struct {
	meta *stateInfo
	kc   Codec[K]
	vc   Codec[V]
	maps []map[K]V // INVARIANT: never written (see Backend.epoch)
	logs []keyLog[K]
}

func (f *frozenValue[K, V]) baseline() any { return logPositions(f.logs) }

func (f *frozenValue[K, V]) hasDelta(i int, base any) bool {
	return f.logs[i].holds(base.(*logBaseline).pos[i])
}

// appendDelta writes key group index i's keys written since base: each
// set to its value now, or deleted.
func (f *frozenValue[K, V]) appendDelta(dst []byte, i int, base any) []byte {
	keys, _ := f.logs[i].since(base.(*logBaseline).pos[i])
	m := f.maps[i]
	return appendMapDelta(dst, keys, f.kc, func(k K) bool { _, ok := m[k]; return ok }, func(dst []byte, k K) []byte {
		return f.vc.Append(f.kc.Append(dst, k), m[k])
	})
}

func (f *frozenValue[K, V]) info() *stateInfo { return f.meta }
func (f *frozenValue[K, V]) count(i int) int  { return len(f.maps[i]) }
func (f *frozenValue[K, V]) appendEntries(dst []byte, i int) []byte {
	for k, v := range f.maps[i] {
		dst = f.kc.Append(dst, k)
		dst = f.vc.Append(dst, v)
	}
	return dst
}

// writtenSince reports whether key group index i was written after the
// snapshot taken at epoch: its table's copy-on-write epoch is the last epoch
// with a write (see Backend.epoch).
func (s *ValueState[K, V]) writtenSince(i int, epoch uint64) bool { return s.tables[i].epoch > epoch }
