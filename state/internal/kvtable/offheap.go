package kvtable

import (
	"runtime"
	"sync/atomic"
)

// defaultOffHeapMin is the smallest chunk kept off the Go heap (see
// offHeap): smaller ones (tables of a few thousand entries) are Go slices,
// since a mapping costs whole pages.
const defaultOffHeapMin = 64 << 10

// mappedChunks counts the chunks mapped off the heap and not yet unmapped,
// in every table of the process.
var mappedChunks atomic.Int64

// MappedChunks returns the number of arena chunks mapped outside the Go
// heap and not yet unmapped, over all tables: it falls when compaction drops
// chunks and when unreachable tables are cleaned up.
func MappedChunks() int64 { return mappedChunks.Load() }

// offHeap holds a table's chunks that live outside the Go heap, in
// anonymous memory mappings (mmap), so that they do not count toward the
// garbage collector's heap goal: on the heap, GOGC=100 lets the process
// grow to twice its live heap, and a table's arena is nearly all of it, so
// the state would cost twice its size in memory. The bytes hold no
// pointers, so the collector never needed to see them.
//
// Lifetime: a mapping is unmapped when compaction drops its chunk (only when
// no Frozen view is live, so nothing can read it) or, for the chunks a table
// still has, by a cleanup once the table is unreachable. A Frozen view points
// into its table (its count of views), so the table stays reachable, and its
// chunks mapped, while any view is: a view never reads unmapped memory.
//
// INVARIANT: chunks holds exactly the mapped chunks of the table that has
// this offHeap, each once, keyed by the address of its first byte; only the
// owner goroutine changes it, and the cleanup reads it after the owner is
// unreachable.
type offHeap struct {
	chunks map[*byte][]byte
}

// mapChunk returns a chunk of n bytes off the heap, registering it (and,
// on the table's first, the cleanup that unmaps what is left), or false when
// this platform or the kernel gives none: the caller uses a Go slice.
func (t *Table) mapChunk(n int) ([]byte, bool) {
	c, err := mmapAnon(n)
	if err != nil {
		return nil, false
	}
	if t.off == nil {
		t.off = &offHeap{chunks: map[*byte][]byte{}}
		runtime.AddCleanup(t, func(o *offHeap) { o.unmapAll() }, t.off)
	}
	t.off.chunks[&c[0]] = c
	mappedChunks.Add(1)
	return c, true
}

// dropChunk releases c, which the table no longer references: unmapped if
// it is off the heap, else left to the garbage collector. No Frozen view
// may reference it.
func (t *Table) dropChunk(c []byte) {
	if t.off == nil || len(c) == 0 {
		return
	}
	if _, ok := t.off.chunks[&c[0]]; ok {
		delete(t.off.chunks, &c[0])
		munmap(c)
		mappedChunks.Add(-1)
	}
}

// unmapAll unmaps every chunk left, once its table is unreachable.
func (o *offHeap) unmapAll() {
	for k, c := range o.chunks {
		delete(o.chunks, k)
		munmap(c)
		mappedChunks.Add(-1)
	}
}
