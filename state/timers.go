package state

import "fmt"

// Timers holds event-time timers per key: each timer is a (key, namespace,
// timestamp) triple, where the namespace lets one operator keep timers for
// several purposes per key (a window's end, for example). Timers are keyed
// state: they live in the key group of their key, are copied on write like
// the other tables, and are snapshotted and restored (and rescaled) with the
// backend. Create them with NewTimers. Like its Backend, Timers must be used
// only from the task goroutine.
type Timers[K comparable] struct {
	keyRouter[K]
	meta   stateInfo
	kc     Codec[K]
	tables []timerTable[K] // indexed by key group - Start

	// queue orders pending timers by (ts, seq, key group index). It may hold
	// stale items (deleted or fired timers, or an older registration of a
	// timer deleted and registered again), recognised by seq.
	// INVARIANT: every pending timer has exactly one item in queue whose seq
	// equals the seq its table stores.
	queue timerHeap[K]
	// live is the number of pending timers (the sum of the tables' sizes).
	live int
	// nextSeq numbers registrations.
	// INVARIANT: greater than every seq stored in tables.
	nextSeq uint64

	// lsm and lt are set on an LSM backend: the timers are in its store
	// (see lsmTimers), and tables and queue stay empty.
	lsm *lsmState
	lt  *lsmTimers
}

// timerID identifies a timer within its key group.
type timerID[K comparable] struct {
	key K
	ns  int64
	ts  int64
}

// timerTable is one key group's pending timers, each with the sequence number
// of its registration, which orders timers with equal timestamps and is
// stored in snapshots so the order survives recovery.
type timerTable[K comparable] struct {
	m map[timerID[K]]uint64
	// epoch is the copy-on-write epoch m belongs to.
	// INVARIANT: if epoch <= Backend.frozen, a Snapshot may reference m and m
	// must be copied before it is written.
	epoch uint64
}

// NewTimers registers (or, if this name is already registered with the same
// key type and codec, returns) the timer set called name, and loads its
// restored timers. Timers share the state namespace: a timer set and a state
// cannot have the same name. Errors are as for NewValueState.
func NewTimers[K comparable](b *Backend, name string, kc Codec[K]) (*Timers[K], error) {
	if err := checkCodecs(b, name, kc == nil); err != nil {
		return nil, err
	}
	info := &stateInfo{name: name, kind: KindTimers, codecs: []string{kc.Name()}}
	return register(b, info, func() (*Timers[K], error) {
		r, err := newKeyRouter[K](b, name)
		if err != nil {
			return nil, err
		}
		return &Timers[K]{keyRouter: r, meta: *info, kc: kc, tables: make([]timerTable[K], r.n)}, nil
	})
}

// Register adds a timer firing at event time ts for (key, namespace).
// Registering a pending timer again does nothing (it keeps its place in the
// order of equal timestamps).
func (t *Timers[K]) Register(key K, namespace int64, ts int64) {
	i, ok := t.index(key)
	if !ok {
		return
	}
	if t.lsm != nil {
		t.lsmRegister(i, key, namespace, ts)
		return
	}
	tab := &t.tables[i]
	id := timerID[K]{key: key, ns: namespace, ts: ts}
	if _, ok := tab.m[id]; ok {
		return
	}
	if tab.epoch != t.b.epoch {
		tab.m = ownTable(t.b, tab.m, &tab.epoch)
	}
	seq := t.nextSeq
	t.nextSeq++
	tab.m[id] = seq
	t.live++
	t.queue.push(timerItem[K]{id: id, seq: seq, kgi: int32(i)})
}

// Delete removes the timer (key, namespace, ts) if it is pending.
func (t *Timers[K]) Delete(key K, namespace int64, ts int64) {
	i, ok := t.index(key)
	if !ok {
		return
	}
	if t.lsm != nil {
		t.lsmDelete(i, key, namespace, ts)
		return
	}
	tab := &t.tables[i]
	id := timerID[K]{key: key, ns: namespace, ts: ts}
	if _, ok := tab.m[id]; !ok {
		return
	}
	if tab.epoch != t.b.epoch {
		tab.m = ownTable(t.b, tab.m, &tab.epoch)
	}
	delete(tab.m, id)
	t.live--
	// The queue item stays (lazy deletion). Rebuild the queue when stale
	// items dominate, so churn (delete and re-register) cannot grow it
	// without bound; amortised O(1) per Delete.
	if len(t.queue) > 2*t.live+64 {
		t.rebuildQueue()
	}
}

// Advance fires every pending timer with ts <= watermark, in increasing ts
// order; timers with equal ts fire in the order they were registered (across
// recoveries too; after rescaling, timers from different key groups that
// were registered in different subtasks are ordered by sequence number, then
// key group). Each timer is removed before fire is called for it, so fire may
// register it again or register others: those with ts <= watermark fire in
// this same Advance (so a fire that always registers a timer at or before the
// watermark never returns). It stops at the first error fire returns and returns it;
// the timer that failed stays removed.
//
// Cost: O(log n) per fired timer.
func (t *Timers[K]) Advance(watermark int64, fire func(key K, namespace int64, ts int64) error) error {
	if t.lsm != nil {
		return t.lsmAdvance(watermark, fire)
	}
	for len(t.queue) > 0 && t.queue[0].id.ts <= watermark {
		it := t.queue.pop()
		tab := &t.tables[it.kgi]
		if seq, ok := tab.m[it.id]; !ok || seq != it.seq {
			continue // stale
		}
		if tab.epoch != t.b.epoch {
			tab.m = ownTable(t.b, tab.m, &tab.epoch)
		}
		delete(tab.m, it.id)
		t.live--
		if err := fire(it.id.key, it.id.ns, it.id.ts); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of pending timers.
func (t *Timers[K]) Len() int {
	if t.lt != nil {
		return t.lt.live
	}
	return t.live
}

// Next returns the earliest pending timer's timestamp; ok is false when no
// timer is pending. It may discard stale queue items but changes no state.
func (t *Timers[K]) Next() (ts int64, ok bool) {
	if t.lsm != nil {
		return t.lsmNext()
	}
	for len(t.queue) > 0 {
		it := t.queue[0]
		if seq, ok := t.tables[it.kgi].m[it.id]; ok && seq == it.seq {
			return it.id.ts, true
		}
		t.queue.pop()
	}
	return 0, false
}

// rebuildQueue recreates the queue from the tables, dropping stale items.
func (t *Timers[K]) rebuildQueue() {
	t.queue = t.queue[:0]
	for i := range t.tables {
		for id, seq := range t.tables[i].m {
			t.queue = append(t.queue, timerItem[K]{id: id, seq: seq, kgi: int32(i)})
		}
	}
	t.queue.init()
}

func (t *Timers[K]) info() *stateInfo { return &t.meta }

func (t *Timers[K]) freeze() frozenState {
	f := &frozenTimers[K]{meta: &t.meta, kc: t.kc, maps: make([]map[timerID[K]]uint64, len(t.tables))}
	for i := range t.tables {
		f.maps[i] = t.tables[i].m
	}
	return f
}

// Payload of one key group: count × (key, varint namespace, varint ts, uvarint seq).
// load fills that key group's table only (it may run concurrently for other
// key groups, see registered): the queue, live and nextSeq span key groups,
// so loaded builds them.
func (t *Timers[K]) load(p restoredPart) error {
	r := t.b.partReader(t.name, p)
	i := p.kg - t.start
	m := make(map[timerID[K]]uint64, r.sizeHint(p.count))
	for range p.count {
		k, err := readValue(r, t.kc, "key")
		if err != nil {
			return err
		}
		if err := t.checkKeyGroup(k, p.kg); err != nil {
			return err
		}
		ns, err := r.varint("namespace")
		if err != nil {
			return err
		}
		ts, err := r.varint("timestamp")
		if err != nil {
			return err
		}
		seq, err := r.uvarint("sequence")
		if err != nil {
			return err
		}
		if seq == ^uint64(0) {
			return r.corrupt("sequence", fmt.Errorf("sequence number %d out of range", seq))
		}
		m[timerID[K]{key: k, ns: ns, ts: ts}] = seq
	}
	if err := r.finish(len(m), p.count); err != nil {
		return err
	}
	t.tables[i] = timerTable[K]{m: m, epoch: t.b.restoreEpoch}
	return nil
}

// loaded counts the restored timers, sets nextSeq past every restored
// sequence number and builds the queue (one heapify, O(n)), after every key
// group is loaded (see register).
func (t *Timers[K]) loaded() {
	t.live = 0
	for i := range t.tables {
		t.live += len(t.tables[i].m)
	}
	t.queue = make(timerHeap[K], 0, t.live)
	for i := range t.tables {
		for id, seq := range t.tables[i].m {
			t.nextSeq = max(t.nextSeq, seq+1)
			t.queue = append(t.queue, timerItem[K]{id: id, seq: seq, kgi: int32(i)})
		}
	}
	t.queue.init()
}

// frozenTimers is a Timers as of a Snapshot.
type frozenTimers[K comparable] struct {
	meta *stateInfo
	kc   Codec[K]
	maps []map[timerID[K]]uint64 // INVARIANT: never written
}

func (f *frozenTimers[K]) info() *stateInfo { return f.meta }
func (f *frozenTimers[K]) count(i int) int  { return len(f.maps[i]) }
func (f *frozenTimers[K]) appendEntries(dst []byte, i int) []byte {
	for id, seq := range f.maps[i] {
		dst = f.kc.Append(dst, id.key)
		dst = appendVarint(dst, id.ns)
		dst = appendVarint(dst, id.ts)
		dst = appendUvarint(dst, seq)
	}
	return dst
}

// timerItem is a queue entry.
type timerItem[K comparable] struct {
	id  timerID[K]
	seq uint64
	kgi int32 // key group index (key group - Start)
}

// before is the firing order: timestamp, then registration sequence, then
// key group (sequences restored from different subtasks may coincide).
func (a *timerItem[K]) before(b *timerItem[K]) bool {
	if a.id.ts != b.id.ts {
		return a.id.ts < b.id.ts
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.kgi < b.kgi
}

// timerHeap is a binary min-heap of timerItems under before. It is written
// out rather than using container/heap, whose interface boxes every item.
type timerHeap[K comparable] []timerItem[K]

func (h *timerHeap[K]) push(it timerItem[K]) {
	*h = append(*h, it)
	h.up(len(*h) - 1)
}

func (h *timerHeap[K]) pop() timerItem[K] {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = timerItem[K]{} // drop references to the key
	*h = q[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h timerHeap[K]) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h timerHeap[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h timerHeap[K]) down(i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h[r].before(&h[c]) {
			c = r
		}
		if !h[c].before(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// writtenSince reports whether key group index i was written after the
// snapshot taken at epoch: its table's copy-on-write epoch is the last epoch
// with a write (see Backend.epoch).
func (t *Timers[K]) writtenSince(i int, epoch uint64) bool { return t.tables[i].epoch > epoch }
