package kvtable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"
)

// ErrFull is returned by a write that needs arena space the table cannot
// address: its 32-bit addresses are used up (about 4 GiB of entries in one
// table, see maxChunks) even after compaction. The table is unchanged.
var ErrFull = errors.New("kvtable: table full")

const (
	// minSlots is the smallest slot array: a table with one entry costs
	// 64 bytes of slots.
	minSlots = 8
	// maxSlotsLog2 bounds the slot array at 2^31 slots (16 GiB); indexes
	// and homes are computed in uint32.
	maxSlotsLog2 = 31
)

// Table holds one key group's entries: encoded key bytes → encoded value
// bytes, in a Robin Hood hash table of 64-bit slots over an append-only
// arena (see the package documentation for the design and its invariants).
//
// The zero value is an empty table ready to use. A Table must not be copied
// after first use. It is not safe for concurrent use: all methods but those
// of the Frozen views it hands out must be called from one goroutine (the
// owner). A Frozen view may be read on any goroutine.
//
// Every key must always come with the same hash (the caller's 64-bit hash of
// the key); the table never hashes key bytes itself.
type Table struct {
	// The fields a lookup reads come first, in one cache line.

	// slots is the hash table: 0 for an empty slot, else tag<<32 | address
	// of the entry in the arena. len(slots) is 0 or a power of two ≥
	// minSlots.
	// INVARIANT (Robin Hood): walking from an entry's home slot
	// (tag>>shift) to the slot holding it crosses no empty slot and no
	// slot whose own distance from its home is smaller, so probe
	// sequences are sorted by home and a lookup stops at the first slot
	// poorer than itself.
	// INVARIANT: n < len(slots) (an empty slot ends every probe), and
	// n ≤ len(slots)·7/8 after every insert.
	slots []uint64
	// chunks is the arena: pointer-free byte chunks, so the garbage
	// collector never scans entries; len(chunks[i]) == cap(chunks[i]). An
	// entry is: tag (4 bytes, little-endian) | uvarint key length |
	// uvarint value length | key | value. The tag is the one in the
	// entry's slot; it lets compaction, which walks the arena, find the
	// slot of an entry without the key's hash.
	// INVARIANT: a chunk's bytes below its data end (ends[i], or fill for
	// the last chunk) are a sequence of whole entries, live or dead; no
	// chunk is ever reallocated, and bytes a live Frozen view can reach
	// are never written (see frozenMark, views).
	chunks [][]byte
	// shift is 32 - log2(len(slots)): an entry's home slot is tag >> shift.
	shift uint8
	// shared records that a Frozen view may hold slots.
	// INVARIANT: while shared, slots is never written; the first write
	// replaces it with a copy (ownSlots).
	shared bool
	// n is the number of entries (non-zero slots).
	n int

	// frozenMark is the arena end at the last Freeze or Mark (number
	// markSeq), moved by compaction with the entries.
	// INVARIANT: an entry at an address below frozenMark is never written
	// (a live Frozen view may see it); writing its key appends a new
	// version. This holds after the views are released too, so the
	// entries at or above it are exactly those written since the last
	// Mark (Frozen.Changes); compaction, which keeps the entries' order,
	// moves it to the new address of the first of them. Addresses grow
	// with appends, so entries appended after the last Freeze are at or
	// above the mark and are written in place.
	frozenMark uint64
	markSeq    uint64
	// untracked says the writes since the last Mark are not tracked
	// (Mark): frozenMark protects only what live views see, as if the
	// INVARIANT above did not hold, and lastUntracked is the seq of the
	// last Mark after which writes were not tracked (0: none), so no
	// Changes since a Mark at or before it. skipLeft is how many more
	// Marks start untracked intervals; rewrites counts the entries given a
	// new version because they lay below the mark, since the last Mark.
	untracked     bool
	lastUntracked uint64
	skipLeft      int
	rewrites      int
	// used is the arena bytes consumed: the capacity of every chunk but
	// the last (a chunk's unused tail counts as dead once the next one is
	// started) plus fill.
	used int
	// live is the total size of the entries the slots reference.
	// INVARIANT: used - live is the dead bytes compaction can reclaim.
	// (Between PutFresh and FinishFresh, live and used also count the
	// entries appended and not yet indexed, and n does not.)
	live int
	// deadBase is the dead bytes right after the last compaction: the
	// tails of chunks whose next entry did not fit (each under the size of
	// that live entry) and chunks skipped whole because they were smaller
	// than the next live entry (with chunks growing by an eighth, under 8
	// times the largest entry), so it is a bounded multiple of live then.
	deadBase int
	// fill is the data end of the last chunk.
	fill int
	// views counts the Frozen views not yet released. Release (on any
	// goroutine) decrements it; the owner reads it before reusing frozen
	// memory (lazily, on the next write that would need to), so the
	// atomic orders the reader's last reads before the owner's writes.
	views atomic.Int64

	// ends[i] is the data end of chunks[i] for every chunk but the last.
	ends []uint32
	// chunkBytes is the total capacity of chunks.
	chunkBytes int
	// compactions counts compactions, for tests and statistics.
	compactions int
	// off holds the chunks and slot arrays mapped outside the Go heap; nil
	// until the first (see offHeap).
	off *offHeap
	// retired holds the mapped slot arrays the table replaced while a
	// Frozen view could still hold them (ownSlots, resize while shared).
	// INVARIANT: each is in off and referenced by no slots field of the
	// table; it is unmapped only once the owner has seen views == 0
	// (freeRetired), after which no view can read it.
	retired [][]byte
	// spare is a mapped slot array no view holds any more, kept for the
	// next copy or resize of that size: its pages are already faulted in,
	// where a new mapping costs a page fault per 4 KiB (a checkpoint copies
	// every written table's slots). INVARIANT: nil, or in off and not the
	// table's slots nor retired.
	spare []byte
	// fresh counts the entries PutFresh appended and FinishFresh has not
	// indexed yet (bulk.go).
	fresh int
	cfg   config
}

// config holds the arena's geometry. A zero field means the default; tests
// shrink them to reach chunk boundaries, big entries, ErrFull and
// compaction in a few operations.
type config struct {
	minChunk, maxChunk, maxChunks, minCompact int
	// offHeapMin is the smallest chunk mapped off the heap.
	offHeapMin int
}

// tagOf returns the 32-bit tag of a caller-supplied hash: the high half of
// hash·φ (Fibonacci hashing), never 0 so that 0 means an empty slot. The
// multiplication makes every bit of the hash count, so a weak caller hash
// (small integers) still spreads, and it decorrelates the tag from the key
// group, which the engine picks from another mix (murmur3's fmix64) of the
// same hash modulo the max parallelism. The home slot is the tag's top
// log2(len(slots)) bits, so growing the slot array never needs the hash
// again: the tag in the slot is enough.
func tagOf(hash uint64) uint32 {
	t := uint32((hash * 0x9e3779b97f4a7c15) >> 32)
	if t == 0 {
		t = 1 // home slot unchanged: the top bits of 1 and 0 are the same
	}
	return t
}

func slotOf(tag uint32, addr uint32) uint64 { return uint64(tag)<<32 | uint64(addr) }
func slotTag(s uint64) uint32               { return uint32(s >> 32) }
func slotAddr(s uint64) uint32              { return uint32(s) }

// Len returns the number of entries.
func (t *Table) Len() int { return t.n }

// Bytes returns the memory the table holds: its slot array, its arena
// chunks (allocated capacity, used or not) and the arena's chunk index. A
// slot array or chunk that only a Frozen view still holds is not counted.
func (t *Table) Bytes() int {
	return 8*len(t.slots) + t.chunkBytes + 24*cap(t.chunks) + 4*cap(t.ends)
}

// Get returns the value of key, a view into the table valid until the next
// write (Put, Delete, Modify) or Freeze; the caller must not modify it.
func (t *Table) Get(hash uint64, key []byte) ([]byte, bool) {
	_, c, vs, vl, ok := t.lookup(tagOf(hash), key)
	if !ok {
		return nil, false
	}
	return c[vs : vs+vl : vs+vl], true
}

// Put sets the value of key. When key has a value of the same length that
// no Frozen view may see, it is overwritten in place: no allocation, no slot
// write. Otherwise the entry is appended to the arena and its slot updated
// (the old version, if any, becomes dead bytes for compaction). It fails
// only with ErrFull, leaving the table unchanged.
//
// key and value may alias memory of this table (a Get result): they are
// copied before anything moves.
func (t *Table) Put(hash uint64, key, value []byte) error {
	err := t.put(hash, key, value)
	if err != nil && t.views.Load() == 0 && t.used-t.live > t.deadBase {
		// Compaction may make room. It moves the arena, which key and
		// value may alias: copy them first (only on this rare path).
		key, value = slices.Clone(key), slices.Clone(value)
		if t.reclaim(true) {
			err = t.put(hash, key, value) // at most once: the arena is compact now
		}
	}
	return err
}

func (t *Table) put(hash uint64, key, value []byte) error {
	tag := tagOf(hash)
	if j, c, vs, vl, found := t.lookup(tag, key); found {
		addr := slotAddr(t.slots[j])
		if vl == len(value) && !t.frozen(addr) {
			copy(c[vs:vs+vl], value)
			// Dead bytes left by writes while views were live are
			// reclaimed once they are released, even if every later
			// write is in place.
			t.maybeCompact(true)
			return nil
		}
		naddr, err := t.appendEntry(tag, key, value)
		if err != nil {
			return err
		}
		if uint64(addr) < t.frozenMark {
			t.rewrites++
		}
		t.ownSlots()
		t.slots[j] = slotOf(tag, naddr)
		t.live += entrySize(len(key), len(value)) - entrySize(len(key), vl)
		t.maybeCompact(true)
		return nil
	}
	if len(t.slots) == 0 {
		t.resize(minSlots)
	}
	grow := t.n+1 > maxLoad(len(t.slots))
	if grow && len(t.slots) >= 1<<maxSlotsLog2 {
		return fmt.Errorf("%w: %d entries", ErrFull, t.n)
	}
	// Appending before touching the slots keeps the table unchanged on
	// ErrFull.
	naddr, err := t.appendEntry(tag, key, value)
	if err != nil {
		return err
	}
	if grow {
		t.resize(2 * len(t.slots)) // a new array: the copy-on-write too
	} else {
		t.ownSlots()
	}
	t.insert(slotOf(tag, naddr))
	t.n++
	t.live += entrySize(len(key), len(value))
	t.maybeCompact(true)
	return nil
}

// Modify returns a writable view of key's current value, for a
// read-modify-write of a fixed-size value in one lookup: the caller reads
// the old value from it and writes the new one into it. If a Frozen view may
// see the entry, the entry is first copied to a new version (so the view
// keeps the old bytes). found is false, with no change to the table, when
// key has no value. The view is valid until the next write or Freeze. It
// fails only with ErrFull (copying a frozen entry), leaving the table
// unchanged.
func (t *Table) Modify(hash uint64, key []byte) (value []byte, found bool, err error) {
	tag := tagOf(hash)
	j, c, vs, vl, found := t.lookup(tag, key)
	if !found {
		return nil, false, nil
	}
	if t.used-t.live-t.deadBase >= t.live {
		// Compaction may run: it keeps slot indexes (no resize), and key
		// is not read again, but the entry may move.
		t.compactIfDue(false)
		_, v := t.entry(slotAddr(t.slots[j]))
		c, vs = v[:cap(v)], 0
	}
	if addr := slotAddr(t.slots[j]); t.frozen(addr) {
		k, v := t.entry(addr)
		naddr, err := t.appendEntry(tag, k, v) // k, v are below the arena end: not overwritten
		if err != nil {
			// With no view live (the entry is below the mark for
			// Changes), compaction may make room; it keeps slot
			// indexes (no resize).
			if !t.reclaim(false) {
				return nil, false, err
			}
			k, v = t.entry(slotAddr(t.slots[j]))
			if naddr, err = t.appendEntry(tag, k, v); err != nil {
				return nil, false, err
			}
		}
		t.rewrites++
		t.ownSlots()
		t.slots[j] = slotOf(tag, naddr)
		_, v = t.entry(naddr)
		c, vs = v[:cap(v)], 0
	}
	return c[vs : vs+vl : vs+vl], true, nil
}

// Delete removes key and reports whether it had a value. The entry's bytes
// stay in the arena as dead bytes until compaction.
func (t *Table) Delete(hash uint64, key []byte) bool {
	if t.n == 0 {
		return false
	}
	j, _, _, vl, found := t.lookup(tagOf(hash), key)
	if !found {
		return false
	}
	t.ownSlots()
	t.removeAt(j)
	t.n--
	t.live -= entrySize(len(key), vl)
	t.maybeCompact(true)
	return true
}

// reclaim handles ErrFull from an append: when dead bytes can be reclaimed
// now (no live views), it compacts and reports true so the write is retried
// once.
func (t *Table) reclaim(mayShrink bool) bool {
	if t.used-t.live <= t.deadBase || t.views.Load() != 0 {
		return false
	}
	t.unfreeze()
	before := t.used
	t.compact(mayShrink)
	return t.used < before
}

// maxLoad is the most entries a slot array of n slots holds: 7/8 of it.
func maxLoad(n int) int { return n - n/8 }

// lookup finds key: the slot holding it and where its value is,
// c[vs:vs+vl]. It is the hot path of every operation, kept to what stays
// in registers: tags first, the arena only on a tag match, and the one-byte
// lengths of small entries decoded inline.
func (t *Table) lookup(tag uint32, key []byte) (j uint32, c []byte, vs, vl int, found bool) {
	slots := t.slots
	mask := uint32(len(slots) - 1)
	if len(slots) == 0 {
		return 0, nil, 0, 0, false
	}
	shift := t.shift
	j = tag >> shift
	for dist := uint32(0); ; dist++ {
		s := slots[j&mask]
		if st := slotTag(s); st == tag {
			// Same tag, same home, same distance: compare the key.
			c, p := t.locate(slotAddr(s))
			if h := c[p+tagSize : p+tagSize+2]; h[0]|h[1] < 0x80 {
				ks, kl := p+tagSize+2, int(h[0])
				if kl == len(key) && equal(c[ks:ks+kl], key) {
					return j & mask, c, ks + kl, int(h[1]), true
				}
			} else if ks, kl, vl := parseEntrySlow(c, p); string(c[ks:ks+kl]) == string(key) {
				return j & mask, c, ks + kl, vl, true
			}
		} else if s == 0 || (j-st>>shift)&mask < dist {
			// Empty, or a slot closer to its home than key would be
			// to its own: key is absent (Robin Hood order).
			return 0, nil, 0, 0, false
		}
		j++
	}
}

// equal reports whether a and b, of equal lengths, are equal: 8-byte keys
// (integers) as one word, without the call to memequal.
func equal(a, b []byte) bool {
	if len(a) == 8 && len(b) == 8 {
		return binary.LittleEndian.Uint64(a) == binary.LittleEndian.Uint64(b)
	}
	return string(a) == string(b)
}

// findAddr returns the slot holding the entry with this tag at addr.
func (t *Table) findAddr(tag, addr uint32) (uint32, bool) {
	mask := uint32(len(t.slots) - 1)
	want := slotOf(tag, addr)
	j := tag >> t.shift
	for dist := uint32(0); ; dist++ {
		s := t.slots[j&mask]
		switch {
		case s == want:
			return j & mask, true
		case s == 0:
			return 0, false
		case (j-slotTag(s)>>t.shift)&mask < dist:
			return 0, false
		}
		j++
	}
}

// insert places slot s, whose key is absent, by Robin Hood insertion from
// its home slot.
func (t *Table) insert(s uint64) { t.insertAt(slotTag(s)>>t.shift, 0, s) }

// insertAt places slot s starting at slot j, dist from its home: each slot
// it passes that is closer to its own home than s is to its home is
// displaced forward (Robin Hood), keeping probe sequences sorted by home.
func (t *Table) insertAt(j, dist uint32, s uint64) {
	mask := uint32(len(t.slots) - 1)
	for {
		cur := t.slots[j]
		if cur == 0 {
			t.slots[j] = s
			return
		}
		if cd := (j - slotTag(cur)>>t.shift) & mask; cd < dist {
			t.slots[j], s, dist = s, cur, cd
		}
		j = (j + 1) & mask
		dist++
	}
}

// removeAt empties slot j by backward-shift deletion: the following slots
// of its cluster move back one place until an empty slot or one at its home,
// so no tombstone is needed and the Robin Hood invariant holds.
func (t *Table) removeAt(j uint32) {
	mask := uint32(len(t.slots) - 1)
	for {
		k := (j + 1) & mask
		cur := t.slots[k]
		if cur == 0 || (k-slotTag(cur)>>t.shift)&mask == 0 {
			t.slots[j] = 0
			return
		}
		t.slots[j] = cur
		j = k
	}
}

// resize replaces the slot array with one of n slots (a power of two)
// holding the same entries. It reads the old array only, so it is also the
// copy-on-write of a shared one. Homes come from the tags: no hash needed.
func (t *Table) resize(n int) {
	old, held := t.slots, t.shared && t.viewsLive()
	t.slots = t.newSlots(n)
	clear(t.slots) // a spare holds old slots
	t.shift = uint8(32 - bits.TrailingZeros(uint(n)))
	for _, s := range old {
		if s != 0 {
			t.insert(s)
		}
	}
	t.shared = false
	t.dropSlots(old, held)
	if t.spare != nil && len(t.spare) != 8*n {
		t.dropChunk(t.spare) // of the old size
		t.spare = nil
	}
}

// newSlots returns a slot array of n slots, not necessarily zeroed (the
// spare): mapped off the Go heap when it is at least offHeapFrom bytes and
// the platform gives a mapping (so the garbage collector's heap goal does
// not double it, nor the copy a checkpoint makes of it), else a Go slice.
func (t *Table) newSlots(n int) []uint64 {
	if sp := t.spare; len(sp) == 8*n {
		t.spare = nil
		return unsafe.Slice((*uint64)(unsafe.Pointer(&sp[0])), n)
	}
	if 8*n >= t.cfg.offHeapFrom() {
		if c, ok := t.mapChunk(8 * n); ok {
			return unsafe.Slice((*uint64)(unsafe.Pointer(&c[0])), n)
		}
	}
	return make([]uint64, n)
}

// dropSlots releases a slot array the table no longer uses: a mapped one
// is unmapped now, or, when a live view may hold it (held), once the owner
// sees every view released (freeRetired). A Go slice is left to the
// garbage collector.
func (t *Table) dropSlots(s []uint64, held bool) {
	if len(s) == 0 || t.off == nil {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s))
	if _, mapped := t.off.chunks[&b[0]]; !mapped {
		return
	}
	if held {
		t.retired = append(t.retired, b)
		return
	}
	t.dropChunk(b)
}

// viewsLive reports whether a Frozen view may still be read. When none is
// (the atomic load that sees 0 orders every released view's reads before
// what follows), it unmaps the retired slot arrays.
func (t *Table) viewsLive() bool {
	if t.views.Load() != 0 {
		return true
	}
	for i, b := range t.retired {
		if t.spare == nil && len(b) == 8*len(t.slots) {
			t.spare = b
		} else {
			t.dropChunk(b)
		}
		t.retired[i] = nil
	}
	t.retired = t.retired[:0]
	return false
}

// ownSlots prepares slots for a write: a slot array a live Frozen view may
// hold is replaced by a copy (8 bytes per slot, the only copying after a
// Freeze); when every view is released, the table takes its array back.
func (t *Table) ownSlots() {
	if !t.shared {
		return
	}
	if !t.viewsLive() {
		t.unfreeze()
		return
	}
	old := t.slots
	t.slots = t.newSlots(len(old))
	copy(t.slots, old)
	t.shared = false
	t.dropSlots(old, true)
}

// frozen reports whether the entry at addr lies below the frozen mark, so
// must not be written in place: a live Frozen view may see it, and (views
// or not) a write to it must leave a new version above the mark, for
// Frozen.Changes. When the writes since the last Mark are not tracked
// (untracked) and every view is released, it forgets the mark instead.
func (t *Table) frozen(addr uint32) bool {
	if uint64(addr) >= t.frozenMark {
		return false
	}
	if t.untracked && t.views.Load() == 0 {
		t.unfreeze()
		t.frozenMark = 0
		return false
	}
	return true
}

// unfreeze takes back the slot array that released views shared. Only when
// views == 0: the atomic load that saw 0 orders every released view's reads
// before the writes it allows. The frozen mark stays (see frozenMark).
func (t *Table) unfreeze() { t.shared = false }

// compactFraction is the dead bytes, as a fraction 1/compactFraction of
// the live bytes, that make a compaction due. A quarter keeps the arena
// within 1.25 times its live bytes (plus deadBase) where half of it would
// be dead at worst with the live bytes as the threshold: every entry
// written after a checkpoint leaves a dead version, so at 10 M keys
// updated between checkpoints the arena would double. A compaction then
// moves at most about five bytes per dead byte reclaimed; it keeps the
// table's last Mark (its end moves with the entries), so the next
// checkpoint still writes a delta.
const compactFraction = 4

// maybeCompact compacts the arena when the dead bytes (old versions,
// deleted entries, chunk tails) added since the last compaction are at least
// a quarter of its live bytes (compactFraction) and at least minCompact, and
// no Frozen view is live. A compaction costs O(used bytes) = O(live +
// deadBase + new dead bytes), and deadBase, what the last compaction could
// not reclaim, is a bounded multiple of the live bytes (see deadBase), so
// each compaction costs a constant multiple of the dead bytes written since
// the last: amortised O(1) per byte written. Counting only the dead bytes
// added since keeps a geometry whose tails stay dead from compacting on
// every write. mayShrink allows shrinking a sparse slot array (which moves
// slots).
func (t *Table) maybeCompact(mayShrink bool) {
	if t.used-t.live-t.deadBase >= t.live/compactFraction { // inlined: two loads when there is nothing to do
		t.compactIfDue(mayShrink)
	}
}

func (t *Table) compactIfDue(mayShrink bool) {
	if t.used-t.live-t.deadBase < t.cfg.compactMin() || t.views.Load() != 0 {
		return
	}
	t.unfreeze()
	t.compact(mayShrink)
}

// compact rewrites the arena in place, live entries slid to its front in
// address order, and drops the chunks left empty. It requires views == 0
// (no Frozen view may read the bytes it moves) and an unfrozen table.
func (t *Table) compact(mayShrink bool) {
	if mayShrink && len(t.slots) > minSlots && t.n < len(t.slots)/8 {
		n := minSlots
		for maxLoad(n)/2 < t.n {
			n *= 2
		}
		t.resize(n)
	}
	t.slide()
	t.deadBase = t.used - t.live
	t.compactions++
	// Entries moved: the last Mark's end moved with them (slide), but an
	// earlier Mark's end no longer tells what was written since it
	// (Frozen.Changes reports it by the compaction count).
}

// Freeze returns an immutable view of the table's current entries, in O(1):
// it copies no entry and no slot. Until the view is released, the table
// keeps every byte the view can see unchanged: its first structural write
// copies the slot array, a write to a frozen entry appends a new version,
// and compaction waits. Several views may be live at once. Call Release on
// the view when done with it, or the arena can never be compacted.
func (t *Table) Freeze() *Frozen {
	t.viewsLive() // unmaps the slot arrays of released views
	f := &Frozen{slots: t.slots, chunks: t.chunks[:len(t.chunks):len(t.chunks)], n: t.n, views: &t.views}
	t.views.Add(1)
	t.shared = true
	f.prev = Mark{seq: t.markSeq, end: t.frozenMark, compactions: t.compactions}
	f.lastUntracked = t.lastUntracked
	f.mark = t.Mark()
	return f
}

// untrackedMarks is how many intervals between Marks a table leaves
// untracked after one in which most of its entries were written: for such
// a table a delta is about the whole table anyway, so it skips the cost of
// tracking (a new version of each entry written, then a compaction) and
// measures again after.
const untrackedMarks = 3

// Mark is a point in a table's history: the arena's end at a Freeze or a
// Table.Mark, and the compactions before it. Every entry written after it
// (inserted, or given a new value) lies at or above its end until the next
// compaction: see Frozen.Changes.
type Mark struct {
	// seq numbers the table's Marks (Freezes included) from 1.
	seq         uint64
	end         uint64
	compactions int
}

// Mark returns a Mark of the table's current state, as Freeze does but
// without a view: the entries it holds now are not written in place again
// (each write leaves a new version), so Frozen.Changes of a later view can
// tell what was written since.
//
// Tracking writes costs a new version of each entry written after a Mark.
// A table most of whose entries were written between two Marks stops
// tracking for untrackedMarks intervals (writes in place again once the
// views are released), and Frozen.Changes then reports that it cannot
// tell the changes since a Mark before such an interval.
func (t *Table) Mark() Mark {
	switch {
	case t.skipLeft > 0:
		t.skipLeft--
	case t.markSeq > 0 && 2*t.rewrites > t.n:
		t.skipLeft = untrackedMarks
	}
	t.rewrites = 0
	t.markSeq++
	if t.untracked = t.skipLeft > 0; t.untracked {
		t.lastUntracked = t.markSeq
	}
	t.frozenMark = t.end()
	return Mark{seq: t.markSeq, end: t.frozenMark, compactions: t.compactions}
}

// All returns an iterator over the table's entries, for the owner: each
// (key, value) once, in slot order (which follows the keys' hashes, not
// the order they were written). The slices alias the arena: they are valid
// until the next write or Freeze and must not be modified. The table must
// not be written during the iteration.
func (t *Table) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		for _, s := range t.slots {
			if s == 0 {
				continue
			}
			if !yield(t.entry(slotAddr(s))) {
				return
			}
		}
	}
}
