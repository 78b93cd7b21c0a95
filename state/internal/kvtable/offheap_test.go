package kvtable

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestOffHeapChunksAreUnmapped: a table's mapped chunks are unmapped when
// compaction drops them and, for the rest, once the table (and every view,
// which keeps it reachable) is unreachable.
func TestOffHeapChunksAreUnmapped(t *testing.T) {
	// Other tests' tables may still be awaiting their cleanup: only this
	// table's chunks are counted on it, and the global count only has to
	// come back down to what it was.
	runtime.GC()
	before := MappedChunks()
	fill := func(tab *Table, n int) {
		var kb [8]byte
		for i := range n {
			binary.LittleEndian.PutUint64(kb[:], uint64(i))
			if err := tab.Put(splitmix(uint64(i)), kb[:], make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab := &Table{cfg: config{minChunk: 4096, maxChunk: 4096, offHeapMin: 4096}}
	fill(tab, 10000)
	if tab.off == nil {
		t.Skip("no anonymous mappings on this platform: every chunk is on the heap")
	}
	view := tab.Freeze()
	n := 0
	for range view.All() {
		n++
	}
	if n != 10000 {
		t.Fatalf("view yields %d entries, want 10000", n)
	}
	view.Release()
	// Deleting most entries makes compaction drop chunks, unmapping them.
	var kb [8]byte
	mapped := len(tab.off.chunks)
	for i := range 9000 {
		binary.LittleEndian.PutUint64(kb[:], uint64(i))
		tab.Delete(splitmix(uint64(i)), kb[:])
	}
	if got := len(tab.off.chunks); got >= mapped {
		t.Fatalf("compaction left %d mapped chunks of %d", got, mapped)
	}
	if err := checkInvariants(tab); err != nil {
		t.Fatal(err)
	}
	// A view keeps its table, and so its chunks, alive.
	held := tab.Freeze()
	tab = nil
	runtime.GC()
	runtime.GC()
	n = 0
	for range held.All() {
		n++
	}
	if n != 1000 {
		t.Fatalf("a view of a table no longer referenced yields %d entries, want 1000", n)
	}
	runtime.KeepAlive(held)
	held = nil
	deadline := time.Now().Add(time.Minute)
	for MappedChunks() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d chunks still mapped a minute after their table became unreachable (%d before it)", MappedChunks(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOffHeapSlotArraysAreUnmapped: a large slot array lives off the heap;
// the copy a write makes while a view holds the array leaves the old one to
// the view, which still reads it whole, and the old one is unmapped once
// every view is released, so checkpoint after checkpoint the mappings do
// not pile up.
func TestOffHeapSlotArraysAreUnmapped(t *testing.T) {
	tab := &Table{cfg: config{offHeapMin: 4096}}
	var kb [8]byte
	put := func(i int) {
		binary.LittleEndian.PutUint64(kb[:], uint64(i))
		if err := tab.Put(splitmix(uint64(i)), kb[:], make([]byte, 20)); err != nil { // not in place: a new version
			t.Fatal(err)
		}
	}
	for i := range 10000 {
		put(i)
	}
	if tab.off == nil {
		t.Skip("no anonymous mappings on this platform")
	}
	slotsMapped := func() bool {
		_, ok := tab.off.chunks[(*byte)(unsafe.Pointer(&tab.slots[0]))]
		return ok
	}
	if !slotsMapped() {
		t.Fatalf("a slot array of %d bytes is on the Go heap", 8*len(tab.slots))
	}
	baseline := len(tab.off.chunks)
	for round := range 50 {
		v := tab.Freeze()
		old := &v.slots[0]
		put(round) // copies the slot array: the view keeps the old one
		if &tab.slots[0] == old || len(tab.retired) == 0 {
			t.Fatalf("round %d: a write while a view is live did not copy the slot array", round)
		}
		n := 0
		for range v.All() {
			n++
		}
		if n != 10000 {
			t.Fatalf("round %d: the view yields %d entries, want 10000", round, n)
		}
		v.Release()
		if err := checkInvariants(tab); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	tab.Freeze().Release() // the next Freeze sees no view: unmaps what they held
	if len(tab.retired) != 0 {
		t.Fatalf("%d retired slot arrays still mapped with no view live", len(tab.retired))
	}
	if got := len(tab.off.chunks); got > baseline+3 { // the spare, and the arena may have grown a chunk or two
		t.Fatalf("%d mappings after 50 rounds of Freeze, write, Release; %d before", got, baseline)
	}
	if err := checkInvariants(tab); err != nil {
		t.Fatal(err)
	}
}
