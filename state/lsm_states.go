package state

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"slices"
)

// The state kinds on the LSM backend (see the key layout in lsm.go). Each
// state type's exported methods check its lsm field and call these; the
// memory path stays as it was.

// lsmAttacher is implemented by every state type: register hands it its
// handle on the store when the backend is an LSM backend.
type lsmAttacher interface {
	attachLSM(l *lsmState) error
}

// decodeAll decodes src with c, which must consume all of it.
func decodeAll[T any](c Codec[T], src []byte) (T, error) {
	v, n, err := c.Decode(src)
	if err = readBack(c, n, len(src), err); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// --- ValueState ---

func (s *ValueState[K, V]) attachLSM(l *lsmState) error {
	s.lsm = l
	s.hot = &valueCache[K, V]{m: map[K]*valueCacheEntry[V]{}, max: max(l.s.env.writeBudget/256, 1024)}
	l.s.persisters[s.name] = s
	return nil
}

// valueCache is a ValueState's cache of decoded values on an LSM backend:
// the hot keys (an aggregate's open windows, a query's active auctions) are
// read and written as values, and encoded into the store once per
// checkpoint (persist, from the snapshot's synchronous part) or when the
// cache is full, instead of at every access.
//
// INVARIANT: an entry, dirty or not, is the key's value (ok: present);
// the store holds it too unless the entry is dirty.
type valueCache[K comparable, V any] struct {
	m   map[K]*valueCacheEntry[V]
	max int // entries; past it persist writes them and the cache empties
	// dirty lists the keys whose entries became dirty since the last
	// persist, so that persist costs what changed, not the cache's size.
	// INVARIANT: every dirty entry's key is in it.
	dirty []K
}

// touch marks key's entry e dirty.
func (c *valueCache[K, V]) touch(key K, e *valueCacheEntry[V]) {
	if !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, key)
	}
}

type valueCacheEntry[V any] struct {
	v     V
	ok    bool
	dirty bool
	i     int // key group index
}

// persist writes the dirty entries into the store (one Pebble batch).
func (c *valueCache[K, V]) persist(s *ValueState[K, V]) {
	for _, k := range c.dirty {
		e := c.m[k]
		if e == nil || !e.dirty {
			continue
		}
		if e.ok {
			s.lsmStore(e.i, k, e.v)
		} else {
			s.lsm.delDirect(s.name, s.lsmKey(e.i, k))
		}
		e.dirty = false
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	s.lsm.commitDirect(s.name)
}

// persist implements lsmPersister: a snapshot's synchronous part writes the
// decoded values changed since into the store.
func (s *ValueState[K, V]) persist() error {
	s.hot.persist(s)
	return s.b.err
}

// entry returns key's cache entry, reading it from the store when absent
// (unless blind: the caller replaces the value without reading it).
func (s *ValueState[K, V]) entry(i int, key K, blind bool) *valueCacheEntry[V] {
	if e := s.hot.m[key]; e != nil {
		return e
	}
	if len(s.hot.m) >= s.hot.max {
		s.hot.persist(s)
		clear(s.hot.m)
	}
	e := &valueCacheEntry[V]{i: i}
	if blind {
		s.hot.m[key] = e
		return e
	}
	if val, ok := s.lsm.getDirect(s.name, s.lsmKey(i, key)); ok {
		v, err := decodeAll(s.vc, val)
		if err != nil {
			s.lsm.fail(s.name, "decoding a stored value", err)
		} else {
			e.v, e.ok = v, true
		}
	}
	s.hot.m[key] = e
	return e
}

// lsmKey returns the store key of key in key group index i, in the store's
// key buffer (valid until the next lsmKey of any state).
func (s *ValueState[K, V]) lsmKey(i int, key K) []byte {
	l := s.lsm
	l.s.kbuf = s.kc.Append(l.prefix(l.s.kbuf[:0], s.start+i), key)
	return l.s.kbuf
}

func (s *ValueState[K, V]) lsmGet(i int, key K) (V, bool) {
	e := s.entry(i, key, false)
	return e.v, e.ok
}

func (s *ValueState[K, V]) lsmUpdate(i int, key K, v V) {
	e := s.entry(i, key, true)
	e.v, e.ok = v, true
	s.hot.touch(key, e)
}

func (s *ValueState[K, V]) lsmClear(i int, key K) {
	e := s.entry(i, key, true)
	var zero V
	e.v, e.ok = zero, false
	s.hot.touch(key, e)
}

// lsmStore encodes key's value into the store's direct batch (the caller
// commits it).
func (s *ValueState[K, V]) lsmStore(i int, key K, v V) {
	s.vbuf = s.vc.Append(s.vbuf[:0], v)
	s.lsm.setDirect(s.name, s.lsmKey(i, key), s.vbuf)
}

func (s *ValueState[K, V]) lsmAll(f func(K, V) bool) {
	s.hot.persist(s)
	for kg := s.start; kg < s.start+s.n; kg++ {
		goOn := true
		s.lsm.scan(s.name, s.lsm.prefix(nil, kg), func(kb, vb []byte) bool {
			k, err := decodeAll(s.kc, slices.Clone(kb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored key", err)
				goOn = false
				return false
			}
			v, err := decodeAll(s.vc, slices.Clone(vb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored value", err)
				goOn = false
				return false
			}
			goOn = f(k, v)
			return goOn
		})
		if !goOn {
			return
		}
	}
}

// lsmCount counts the entries of a state whose keys are all directly under
// its prefix (value, list, map: one per user entry).
func lsmCount(l *lsmState, name string, start, n int) int {
	c := 0
	for kg := start; kg < start+n; kg++ {
		l.scan(name, l.prefix(nil, kg), func(_, _ []byte) bool { c++; return true })
	}
	return c
}

// --- MapState ---

func (s *MapState[K, UK, UV]) attachLSM(l *lsmState) error { s.lsm = l; return nil }

// lsmKeyPrefix returns the prefix of every entry of key's map (a new slice).
func (s *MapState[K, UK, UV]) lsmKeyPrefix(i int, key K) []byte {
	kb := s.kc.Append(nil, key)
	p := s.lsm.prefix(make([]byte, 0, 4+binary.MaxVarintLen64+len(kb)+16), s.start+i)
	p = binary.AppendUvarint(p, uint64(len(kb)))
	return append(p, kb...)
}

func (s *MapState[K, UK, UV]) lsmGet(i int, key K, uk UK) (UV, bool) {
	var zero UV
	val, ok := s.lsm.get(s.name, s.ukc.Append(s.lsmKeyPrefix(i, key), uk))
	if !ok {
		return zero, false
	}
	v, err := decodeAll(s.uvc, val)
	if err != nil {
		s.lsm.fail(s.name, "decoding a stored value", err)
		return zero, false
	}
	return v, true
}

func (s *MapState[K, UK, UV]) lsmPut(i int, key K, uk UK, uv UV) {
	s.lsm.set(s.name, s.ukc.Append(s.lsmKeyPrefix(i, key), uk), s.uvc.Append(nil, uv))
}

func (s *MapState[K, UK, UV]) lsmRemove(i int, key K, uk UK) {
	s.lsm.del(s.name, s.ukc.Append(s.lsmKeyPrefix(i, key), uk))
}

func (s *MapState[K, UK, UV]) lsmClear(i int, key K) {
	p := s.lsmKeyPrefix(i, key)
	s.lsm.delRange(s.name, p, prefixEnd(p))
}

func (s *MapState[K, UK, UV]) lsmAll(i int, key K) iter.Seq2[UK, UV] {
	p := s.lsmKeyPrefix(i, key)
	return func(yield func(UK, UV) bool) {
		s.lsm.scan(s.name, p, func(kb, vb []byte) bool {
			uk, err := decodeAll(s.ukc, slices.Clone(kb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored user key", err)
				return false
			}
			uv, err := decodeAll(s.uvc, slices.Clone(vb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored user value", err)
				return false
			}
			return yield(uk, uv)
		})
	}
}

func (s *MapState[K, UK, UV]) lsmLen(i int, key K) int {
	n := 0
	s.lsm.scan(s.name, s.lsmKeyPrefix(i, key), func(_, _ []byte) bool { n++; return true })
	return n
}

// --- ListState ---

func (s *ListState[K, V]) attachLSM(l *lsmState) error {
	s.lsm = l
	s.hot = &listCache[K, V]{m: map[K]*listCacheEntry[V]{}, max: max(l.s.env.writeBudget/256, 1024), maxElems: max(l.s.env.writeBudget/64, 4096)}
	l.s.persisters[s.name] = s
	return nil
}

// listCache is a ListState's cache of decoded lists on an LSM backend: a
// list read once stays decoded, an element added is appended in memory
// (to the list, or, for a list not read, to the elements the store has not
// seen), and the store gets the changes once per checkpoint (persist, from
// the snapshot's synchronous part) or when the cache is full: a join's
// buckets are read and appended to at every record.
//
// INVARIANT: for a loaded entry, vs is the key's whole list; for one not
// loaded, the key's list is the store's followed by vs. The store holds
// the list unless the entry is dirty.
type listCache[K comparable, V any] struct {
	m map[K]*listCacheEntry[V]
	// max bounds the entries and maxElems the elements they hold: past
	// either, persist writes them and the cache empties.
	max, maxElems int
	elems         int
	// dirty lists the keys whose entries became dirty since the last
	// persist. INVARIANT: every dirty entry's key is in it.
	dirty []K
}

type listCacheEntry[V any] struct {
	vs     []V
	loaded bool
	dirty  bool
	i      int // key group index
}

func (c *listCache[K, V]) touch(key K, e *listCacheEntry[V]) {
	if !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, key)
	}
}

// persist writes the dirty entries into the store (one Pebble batch): a
// loaded list whole, the elements added to one not loaded as a merge.
func (c *listCache[K, V]) persist(s *ListState[K, V]) {
	for _, k := range c.dirty {
		e := c.m[k]
		if e == nil || !e.dirty {
			continue
		}
		switch {
		case e.loaded && len(e.vs) == 0:
			s.lsm.delDirect(s.name, s.lsmKey(e.i, k))
		case e.loaded:
			s.lsmStore(e.i, k, e.vs)
		default:
			var val []byte
			for _, v := range e.vs {
				val = s.vc.Append(val, v)
			}
			s.lsm.mergeDirect(s.name, s.lsmKey(e.i, k), val)
			c.elems -= len(e.vs)
			e.vs = nil
		}
		e.dirty = false
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	s.lsm.commitDirect(s.name)
}

// persist implements lsmPersister.
func (s *ListState[K, V]) persist() error {
	s.hot.persist(s)
	return s.b.err
}

// entry returns key's cache entry, making room first when the cache is full.
func (s *ListState[K, V]) entry(i int, key K) *listCacheEntry[V] {
	if e := s.hot.m[key]; e != nil {
		return e
	}
	if len(s.hot.m) >= s.hot.max || s.hot.elems >= s.hot.maxElems {
		s.hot.persist(s)
		clear(s.hot.m)
		s.hot.elems = 0
	}
	e := &listCacheEntry[V]{i: i}
	s.hot.m[key] = e
	return e
}

// loadList makes e hold key's whole list, reading the store's part.
func (s *ListState[K, V]) loadList(i int, key K, e *listCacheEntry[V]) {
	if e.loaded {
		return
	}
	var stored []V
	if val, ok := s.lsm.getDirect(s.name, s.lsmKey(i, key)); ok {
		vs, err := s.decodeList(val)
		if err != nil {
			s.lsm.fail(s.name, "decoding a stored list", err)
		}
		stored = vs
	}
	s.hot.elems += len(stored)
	e.vs = append(stored, e.vs...)
	e.loaded = true
}

func (s *ListState[K, V]) lsmKey(i int, key K) []byte {
	l := s.lsm
	l.s.kbuf = s.kc.Append(l.prefix(l.s.kbuf[:0], s.start+i), key)
	return l.s.kbuf
}

// decodeList decodes a stored list: its elements' encodings, concatenated.
func (s *ListState[K, V]) decodeList(src []byte) ([]V, error) {
	var out []V
	for len(src) > 0 {
		v, n, err := s.vc.Decode(src)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", len(out), err)
		}
		if n <= 0 || n > len(src) {
			return nil, fmt.Errorf("element %d: codec %s reports %d bytes consumed of %d", len(out), s.vc.Name(), n, len(src))
		}
		out = append(out, v)
		src = src[n:]
	}
	return slices.Clip(out), nil
}

func (s *ListState[K, V]) lsmGet(i int, key K) []V {
	e := s.entry(i, key)
	s.loadList(i, key, e)
	if len(e.vs) == 0 {
		return nil
	}
	return e.vs[:len(e.vs):len(e.vs)]
}

func (s *ListState[K, V]) lsmAdd(i int, key K, v V) {
	e := s.entry(i, key)
	e.vs = append(e.vs, v)
	s.hot.elems++
	s.hot.touch(key, e)
}

func (s *ListState[K, V]) lsmUpdate(i int, key K, vs []V) {
	e := s.entry(i, key)
	s.hot.elems += len(vs) - len(e.vs)
	e.vs, e.loaded = slices.Clone(vs), true
	s.hot.touch(key, e)
}

func (s *ListState[K, V]) lsmClear(i int, key K) {
	e := s.entry(i, key)
	s.hot.elems -= len(e.vs)
	e.vs, e.loaded = nil, true
	s.hot.touch(key, e)
}

// lsmStore encodes key's whole list into the store's direct batch (the
// caller commits it).
func (s *ListState[K, V]) lsmStore(i int, key K, vs []V) {
	var val []byte
	for _, v := range vs {
		val = s.vc.Append(val, v)
	}
	s.lsm.setDirect(s.name, s.lsmKey(i, key), val)
}

func (s *ListState[K, V]) lsmAll(f func(K, []V) bool) {
	s.hot.persist(s)
	for kg := s.start; kg < s.start+s.n; kg++ {
		goOn := true
		s.lsm.scan(s.name, s.lsm.prefix(nil, kg), func(kb, vb []byte) bool {
			k, err := decodeAll(s.kc, slices.Clone(kb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored key", err)
				goOn = false
				return false
			}
			vs, err := s.decodeList(slices.Clone(vb))
			if err != nil {
				s.lsm.fail(s.name, "decoding a stored list", err)
				goOn = false
				return false
			}
			goOn = f(k, vs)
			return goOn
		})
		if !goOn {
			return
		}
	}
}

// --- NamespacedValueState ---

// lsmNamespaced is a NamespacedValueState's bookkeeping on the LSM
// backend: which key groups hold entries of which namespaces, so that
// Namespaces is exact without a scan.
type lsmNamespaced struct {
	// present is, by key group - Start, the namespaces the key group holds
	// entries of. INVARIANT: ns is in present[i] iff the store holds an
	// entry of namespace ns in key group Start+i, and the state's spaces[ns]
	// counts the key groups that hold ns (namespaces lists them).
	//
	// Each namespace's mark is fresh(cache) when the namespace came into the
	// key group through this store's write cache, as of the cache's drop
	// count then, else 0 (restored, spilled). INVARIANT: while the mark
	// equals fresh(cache), Pebble holds no entry of ns in the key group that
	// the write cache does not hold too, so the cache alone answers a read:
	// a namespace came in empty and every write since went through the
	// cache, whose entries stay (clean once written) until it drops them.
	// A new window's keys, read once each before their first write, are
	// then never looked up in Pebble.
	present []map[int64]uint64
}

// fresh returns the mark of a namespace that comes into a key group now
// (see lsmNamespaced.present).
func fresh(c *writeCache) uint64 { return c.drops + 1 }

// attachLSM rebuilds the namespaces from the store (restored entries): one
// seek per key group and namespace.
func (s *NamespacedValueState[K, V]) attachLSM(l *lsmState) error {
	s.lsm = l
	s.lns = &lsmNamespaced{present: make([]map[int64]uint64, s.n)}
	for i := range s.n {
		p := l.prefix(nil, s.start+i)
		var from []byte
		for {
			k, _, ok := l.first(s.name, p, from)
			if !ok {
				break
			}
			if len(k) < 8 {
				return fmt.Errorf("%w: operator %q state %q key group %d: a stored key of %d bytes has no namespace", ErrCorrupt, s.b.operator, s.name, s.start+i, len(k))
			}
			ns := readOrdered(k)
			s.lsmMark(i, ns, 0)
			if ns == math.MaxInt64 {
				break
			}
			from = appendOrdered(nil, ns+1)
		}
	}
	return s.b.err
}

// lsmMark records that key group index i holds entries of ns, with mark
// (see lsmNamespaced.present) if it held none.
func (s *NamespacedValueState[K, V]) lsmMark(i int, ns int64, mark uint64) {
	m := s.lns.present[i]
	if m == nil {
		m = map[int64]uint64{}
		s.lns.present[i] = m
	}
	if _, ok := m[ns]; !ok {
		m[ns] = mark
		s.addSpace(ns)
	}
}

// holds reports whether key group index i holds entries of ns.
func (s *NamespacedValueState[K, V]) holds(i int, ns int64) bool {
	_, ok := s.lns.present[i][ns]
	return ok
}

// lsmRead returns the stored value of key k of namespace ns in key group
// index i: from the write cache alone when the namespace is fresh there.
func (s *NamespacedValueState[K, V]) lsmRead(i int, ns int64, k []byte) ([]byte, bool) {
	mark, ok := s.lns.present[i][ns]
	if !ok {
		return nil, false
	}
	if mark == fresh(s.lsm.s.cache) {
		return s.lsm.cached(s.name, k)
	}
	return s.lsm.get(s.name, k)
}

// lsmUnmark records that key group index i holds no entry of ns.
func (s *NamespacedValueState[K, V]) lsmUnmark(i int, ns int64) {
	if !s.holds(i, ns) {
		return
	}
	delete(s.lns.present[i], ns)
	if s.spaces[ns]--; s.spaces[ns] == 0 {
		delete(s.spaces, ns)
		if j, ok := slices.BinarySearch(s.namespaces, ns); ok {
			s.namespaces = slices.Delete(s.namespaces, j, j+1)
		}
	}
}

// lsmPrefix returns the prefix of namespace ns's entries in key group
// index i (a new slice).
func (s *NamespacedValueState[K, V]) lsmPrefix(i int, ns int64) []byte {
	return appendOrdered(s.lsm.prefix(make([]byte, 0, 12+16), s.start+i), ns)
}

// lsmLocate returns key's key group index and its store key in namespace
// ns (a new slice), or false when key is outside the range.
func (s *NamespacedValueState[K, V]) lsmLocate(ns int64, key K) (int, []byte, bool) {
	i, ok := s.index(key)
	if !ok {
		return 0, nil, false
	}
	return i, s.kc.Append(s.lsmPrefix(i, ns), key), true
}

func (s *NamespacedValueState[K, V]) lsmGet(ns int64, key K) (V, bool) {
	var zero V
	i, k, ok := s.lsmLocate(ns, key)
	if !ok {
		return zero, false
	}
	val, ok := s.lsmRead(i, ns, k)
	if !ok {
		return zero, false
	}
	return s.decode(ns, val)
}

func (s *NamespacedValueState[K, V]) lsmUpdate(ns int64, key K, v V) {
	i, k, ok := s.lsmLocate(ns, key)
	if !ok {
		return
	}
	mark := fresh(s.lsm.s.cache) // before set: it may drop the cache
	s.vbuf = s.vc.Append(s.vbuf[:0], v)
	s.lsm.set(s.name, k, s.vbuf)
	s.lsmMark(i, ns, mark)
}

func (s *NamespacedValueState[K, V]) lsmApply(ns int64, key K, init []byte, f func(v V, found bool) V) {
	i, k, ok := s.lsmLocate(ns, key)
	if !ok {
		return
	}
	val, found := s.lsmRead(i, ns, k)
	mark := fresh(s.lsm.s.cache) // before set: it may drop the cache
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
	s.lsm.set(s.name, k, s.vbuf)
	if !found {
		s.lsmMark(i, ns, mark)
	}
}

func (s *NamespacedValueState[K, V]) lsmClear(ns int64, key K) {
	i, k, ok := s.lsmLocate(ns, key)
	if !ok || !s.holds(i, ns) {
		return
	}
	s.lsm.del(s.name, k)
	p := s.lsmPrefix(i, ns)
	if _, _, more := s.lsm.first(s.name, p, nil); !more {
		s.lsmUnmark(i, ns)
	}
}

func (s *NamespacedValueState[K, V]) lsmEntries(ns int64, f func(K, V) bool) {
	if s.spaces[ns] == 0 {
		return
	}
	for i := range s.n {
		if !s.holds(i, ns) {
			continue
		}
		goOn := true
		s.lsm.scan(s.name, s.lsmPrefix(i, ns), func(kb, vb []byte) bool {
			k, err := decodeAll(s.kc, slices.Clone(kb))
			if err != nil {
				s.fail(ns, fmt.Errorf("decoding a stored key: %w", err))
				goOn = false
				return false
			}
			v, ok := s.decode(ns, slices.Clone(vb))
			goOn = ok && f(k, v)
			return goOn
		})
		if !goOn {
			return
		}
	}
}

func (s *NamespacedValueState[K, V]) lsmDropNamespace(ns int64) {
	if s.spaces[ns] == 0 {
		return
	}
	for i := range s.n {
		if s.holds(i, ns) {
			p := s.lsmPrefix(i, ns)
			s.lsm.delRange(s.name, p, prefixEnd(p))
			s.lsmUnmark(i, ns)
		}
	}
}

func (s *NamespacedValueState[K, V]) lsmLen() int {
	n := 0
	for i := range s.n {
		for ns := range s.lns.present[i] {
			s.lsm.scan(s.name, s.lsmPrefix(i, ns), func(_, _ []byte) bool { n++; return true })
		}
	}
	return n
}

// --- Timers ---

// Tags after a timer set's prefix (see the key layout in lsm.go).
const (
	timerQueueTag byte = 0
	timerIndexTag byte = 1
	timerMetaTag  byte = 2
)

// lsmTimers is a Timers' bookkeeping on the LSM backend: per key group the
// number of timers and the earliest one (its head), so that Next and
// Advance find the earliest timer across key groups without a scan.
type lsmTimers struct {
	heads  []lsmTimerHead // by key group - Start
	counts []int
	// dirty marks the key groups whose count changed since the last persist.
	dirty   []bool
	live    int
	nextSeq uint64
}

// lsmTimerHead is the earliest timer of a key group, as far as known.
// INVARIANT: when known, has reports whether the key group holds a timer,
// and (ts, seq) is its earliest by (ts, seq), whose queue value is val.
type lsmTimerHead struct {
	known, has bool
	ts         int64
	seq        uint64
	val        []byte // varint(namespace) kc(key)
}

// attachLSM reads each key group's count and next sequence number, which
// the last snapshot wrote (persist); heads are found when first needed.
func (t *Timers[K]) attachLSM(l *lsmState) error {
	t.lsm = l
	lt := &lsmTimers{heads: make([]lsmTimerHead, t.n), counts: make([]int, t.n), dirty: make([]bool, t.n)}
	t.lt = lt
	for i := range t.n {
		val, ok := l.get(t.name, append(l.prefix(nil, t.start+i), timerMetaTag))
		if !ok {
			continue
		}
		count, n := binary.Uvarint(val)
		next, m := binary.Uvarint(val[max(n, 0):])
		if n <= 0 || m <= 0 || count > math.MaxInt32 {
			return fmt.Errorf("%w: operator %q timers %q key group %d: bookkeeping entry of %d bytes does not decode", ErrCorrupt, t.b.operator, t.name, t.start+i, len(val))
		}
		lt.counts[i] = int(count)
		lt.live += int(count)
		lt.nextSeq = max(lt.nextSeq, next)
	}
	l.s.persisters[t.name] = t
	return t.b.err
}

// persist writes the count and next sequence number of every key group
// whose count changed since the last persist: a snapshot's synchronous part
// calls it before flushing, so the checkpoint holds them.
func (t *Timers[K]) persist() error {
	if t.lt == nil {
		return nil
	}
	for i, d := range t.lt.dirty {
		if !d {
			continue
		}
		k := append(t.lsm.prefix(nil, t.start+i), timerMetaTag)
		v := binary.AppendUvarint(binary.AppendUvarint(nil, uint64(t.lt.counts[i])), t.lt.nextSeq)
		t.lsm.set(t.name, k, v)
		t.lt.dirty[i] = false
	}
	return t.b.err
}

// lsmQueueKey returns the queue key of timer (ts, seq) in key group index i.
func (t *Timers[K]) lsmQueueKey(i int, ts int64, seq uint64) []byte {
	k := append(t.lsm.prefix(make([]byte, 0, 4+1+16), t.start+i), timerQueueTag)
	return binary.BigEndian.AppendUint64(appendOrdered(k, ts), seq)
}

// lsmIndexKey returns the index key of timer (key, ns, ts) in key group
// index i; kb is kc(key).
func (t *Timers[K]) lsmIndexKey(i int, kb []byte, ns, ts int64) []byte {
	k := append(t.lsm.prefix(make([]byte, 0, 4+1+binary.MaxVarintLen64+len(kb)+16), t.start+i), timerIndexTag)
	k = binary.AppendUvarint(k, uint64(len(kb)))
	k = append(k, kb...)
	return appendOrdered(appendOrdered(k, ns), ts)
}

func (t *Timers[K]) lsmRegister(i int, key K, ns, ts int64) {
	kb := t.kc.Append(nil, key)
	ik := t.lsmIndexKey(i, kb, ns, ts)
	if t.lsm.view(t.name, ik, func([]byte) {}) {
		return // pending already: it keeps its place
	}
	lt := t.lt
	seq := lt.nextSeq
	lt.nextSeq++
	val := binary.AppendVarint(make([]byte, 0, binary.MaxVarintLen64+len(kb)), ns)
	val = append(val, kb...)
	t.lsm.set(t.name, t.lsmQueueKey(i, ts, seq), val)
	t.lsm.set(t.name, ik, binary.BigEndian.AppendUint64(nil, seq))
	lt.counts[i]++
	lt.live++
	lt.dirty[i] = true
	if h := &lt.heads[i]; h.known && (!h.has || ts < h.ts || (ts == h.ts && seq < h.seq)) {
		*h = lsmTimerHead{known: true, has: true, ts: ts, seq: seq, val: val}
	}
}

func (t *Timers[K]) lsmDelete(i int, key K, ns, ts int64) {
	ik := t.lsmIndexKey(i, t.kc.Append(nil, key), ns, ts)
	val, ok := t.lsm.get(t.name, ik)
	if !ok {
		return
	}
	if len(val) != 8 {
		t.lsm.fail(t.name, "reading the timer index", fmt.Errorf("%w: an index entry of %d bytes", ErrCorrupt, len(val)))
		return
	}
	seq := binary.BigEndian.Uint64(val)
	t.lsm.del(t.name, ik)
	t.lsm.del(t.name, t.lsmQueueKey(i, ts, seq))
	t.lsmRemoved(i, ts, seq)
}

// lsmRemoved counts the removal of timer (ts, seq) of key group index i.
func (t *Timers[K]) lsmRemoved(i int, ts int64, seq uint64) {
	lt := t.lt
	lt.counts[i]--
	lt.live--
	lt.dirty[i] = true
	if h := &lt.heads[i]; h.known && h.has && h.ts == ts && h.seq == seq {
		h.known = false
	}
}

// lsmHead returns the index of the key group whose head is the earliest
// timer by (ts, seq, key group), or -1 when no timer is pending. It finds
// the heads not known (one seek each).
func (t *Timers[K]) lsmHead() int {
	lt := t.lt
	if lt.live == 0 {
		return -1
	}
	best := -1
	for i := range lt.heads {
		h := &lt.heads[i]
		if !h.known {
			if lt.counts[i] == 0 {
				*h = lsmTimerHead{known: true}
			} else {
				p := append(t.lsm.prefix(nil, t.start+i), timerQueueTag)
				k, v, ok := t.lsm.first(t.name, p, nil)
				if ok && len(k) == 16 {
					*h = lsmTimerHead{known: true, has: true, ts: readOrdered(k), seq: binary.BigEndian.Uint64(k[8:]), val: v}
				} else if ok {
					t.lsm.fail(t.name, "reading the timer queue", fmt.Errorf("%w: a queue key of %d bytes", ErrCorrupt, len(k)))
					return -1
				} else {
					*h = lsmTimerHead{known: true}
				}
			}
		}
		if !h.has {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &lt.heads[best]
		if h.ts < b.ts || (h.ts == b.ts && h.seq < b.seq) {
			best = i
		}
	}
	return best
}

func (t *Timers[K]) lsmNext() (int64, bool) {
	i := t.lsmHead()
	if i < 0 {
		return 0, false
	}
	return t.lt.heads[i].ts, true
}

func (t *Timers[K]) lsmAdvance(watermark int64, fire func(key K, namespace int64, ts int64) error) error {
	for {
		i := t.lsmHead()
		if i < 0 || t.b.err != nil {
			return nil
		}
		h := t.lt.heads[i]
		if h.ts > watermark {
			return nil
		}
		ns, n := binary.Varint(h.val)
		if n <= 0 {
			t.lsm.fail(t.name, "reading the timer queue", fmt.Errorf("%w: a queue value of %d bytes", ErrCorrupt, len(h.val)))
			return nil
		}
		kb := h.val[n:]
		key, err := decodeAll(t.kc, kb)
		if err != nil {
			t.lsm.fail(t.name, "decoding a timer's key", err)
			return nil
		}
		t.lsm.del(t.name, t.lsmQueueKey(i, h.ts, h.seq))
		t.lsm.del(t.name, t.lsmIndexKey(i, kb, ns, h.ts))
		t.lsmRemoved(i, h.ts, h.seq)
		if err := fire(key, ns, h.ts); err != nil {
			return err
		}
	}
}
