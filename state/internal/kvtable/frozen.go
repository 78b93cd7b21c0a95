package kvtable

import (
	"iter"
	"sync/atomic"
)

// Frozen is an immutable view of a Table's entries as of one Freeze. Any
// goroutine may read it (several at once) while the table's owner keeps
// writing the table. Call Release when done; a view must not be used after.
type Frozen struct {
	// slots and chunks are the table's as of Freeze.
	// INVARIANT: until Release, neither the slot array nor any arena byte
	// a slot here references is written: the table copies its slots before
	// its first write after Freeze (Table.shared), appends a new version
	// instead of writing a frozen entry (Table.frozenMark), appends new
	// entries past the frozen end, adds chunks beyond len(chunks) (which
	// this slice cannot see) and compacts only when no view is live.
	slots  []uint64
	chunks [][]byte
	n      int
	// views is the table's count of live views, decremented once by
	// Release.
	views    *atomic.Int64
	released atomic.Bool
	// mark is the table's Mark at the Freeze, and prev the Mark before it
	// with its end as of the Freeze (moved by compactions since).
	mark, prev Mark
	// lastUntracked is the table's as of the Freeze: Changes since a
	// Mark at or before it are unknown.
	lastUntracked uint64
}

// Mark returns the Mark the Freeze took: a later view's Changes since it
// are the entries written after this view.
func (f *Frozen) Mark() Mark { return f.mark }

// Changes returns an iterator over the view's entries written after since
// (a Mark of the same table taken at or before this view's Freeze): those
// inserted or given a new value; an entry deleted since is not among them.
// ok is false when since is not the table's Mark before this view's and
// the table compacted after since, which moves entries, or when the table
// did not track its writes for a while after since (see Table.Mark): then
// only All tells the state. The slices are as All's.
func (f *Frozen) Changes(since Mark) (changes iter.Seq2[[]byte, []byte], ok bool) {
	switch {
	case since.seq <= f.lastUntracked:
		return nil, false // writes after since were not all tracked
	case since.seq == f.prev.seq && since.seq != 0:
		since = f.prev // its end moved with the compactions since
	case since.compactions != f.mark.compactions || since.end > f.mark.end:
		return nil, false
	}
	return f.from(since.end), true
}

// Len returns the number of entries in the view.
func (f *Frozen) Len() int { return f.n }

// All returns an iterator over the view's entries: each (key, value) once,
// in no particular order. The slices alias the table's arena: they stay valid
// until Release and must not be modified.
func (f *Frozen) All() iter.Seq2[[]byte, []byte] { return f.from(0) }

// from returns an iterator over the view's entries at arena addresses at or
// above end, in scrambled slot order (see scrambledBlocks).
func (f *Frozen) from(end uint64) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		if f.released.Load() {
			return
		}
		for lo := range scrambledBlocks(len(f.slots)) {
			for _, s := range f.slots[lo : lo+min(len(f.slots), scrambleBlock)] {
				if s == 0 || uint64(slotAddr(s)) < end {
					continue
				}
				addr := slotAddr(s)
				c := f.chunks[addr>>posBits]
				ks, kl, vl := parseEntry(c, int(addr&posMask))
				vs := ks + kl
				if !yield(c[ks:vs:vs], c[vs:vs+vl:vs+vl]) {
					return
				}
			}
		}
	}
}

// scrambleBlock is the number of slots (4 KiB) iterated in order before
// scrambledBlocks jumps elsewhere in the array.
const scrambleBlock = 512

// scrambledBlocks yields the first index of every scrambleBlock-slot block
// of a slot array of n slots (n a power of two, or 0; one block when n is
// smaller), each once, in an order that spreads over the array: block
// i·stride mod blocks, with an odd stride near blocks/φ (a Fibonacci
// sequence: every prefix of it is close to evenly spread).
//
// Why: slot order is sorted by tag, hence by home slot, and a table filled
// from a stream sorted by home, one Put at a time — a restore applying a
// delta section that adds many keys to a table that must grow — piles the
// stream's prefix into the low end of the array, so that every insert walks
// one ever longer cluster (quadratic: when full sections were also loaded
// that way, a 1 GiB restore took 539 s). Blocks keep the reads sequential
// within 4 KiB, so that a delta's scan of every slot for the few written
// since its mark stays a near-sequential pass (scrambling single slots made
// it 2-5 times slower).
func scrambledBlocks(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		blocks := n / scrambleBlock
		if blocks <= 1 {
			if n > 0 {
				yield(0)
			}
			return
		}
		stride := int(float64(blocks)*0.6180339887498949) | 1
		for i, b := 0, 0; i < blocks; i++ {
			if !yield(b * scrambleBlock) {
				return
			}
			b = (b + stride) & (blocks - 1)
		}
	}
}

// Release tells the table that this view will not be read again, so the
// memory it pins can be reused once every view is released: the table's
// owner notices on its next write that needs it. Release may be called on
// any goroutine, after the view's last read; calling it again does nothing.
func (f *Frozen) Release() {
	if f.released.CompareAndSwap(false, true) {
		f.views.Add(-1)
	}
}
