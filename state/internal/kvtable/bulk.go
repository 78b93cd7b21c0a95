package kvtable

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"
)

// This file is the bulk load of an empty table: a restore appends a
// snapshot's entries with PutFresh and indexes them all at once with
// FinishFresh, which sizes the slot array once and places the entries in
// home order, writing it front to back. Inserting them one by one instead
// reads and writes the slot array at random (a cache miss per entry once it
// outgrows the caches: half of a large restore's time) and resizes it as it
// grows.

// PutFresh appends key's entry to a table being bulk loaded, without
// indexing it: until FinishFresh, no other method may be called and the
// entry cannot be found. A later PutFresh of the same key replaces it, as
// Put would. On a table that is not empty (or not bulk loading and already
// sized) it is Put. It fails only with ErrFull.
func (t *Table) PutFresh(hash uint64, key, value []byte) error {
	if t.n != 0 || len(t.slots) != 0 {
		return t.Put(hash, key, value)
	}
	if _, err := t.appendEntry(tagOf(hash), key, value); err != nil {
		return err
	}
	t.fresh++
	t.live += entrySize(len(key), len(value))
	return nil
}

// bulkBuffers holds the scratch slices FinishFresh sorts in, reused from
// one table's load to the next (a restore loads thousands).
var bulkBuffers sync.Pool // of *[]uint64

// freshSlots returns the slots of the entries PutFresh appended, in
// append order, read back from the arena (a fresh table's arena holds
// exactly them, in order), in dst's array when it has room.
func (t *Table) freshSlots(dst []uint64) []uint64 {
	dst = dst[:0]
	for addr := range t.arenaEntries() {
		c, p := t.locate(addr)
		dst = append(dst, slotOf(binary.LittleEndian.Uint32(c[p:]), addr))
	}
	return dst
}

// FinishFresh indexes the entries PutFresh appended: it sizes the slot
// array for all of them, repeated keys included (as Put would have grown
// it for that many distinct keys), sorts their slots by home
// slot (a radix sort on the tag's top bits), keeps the last of each key
// appended more than once, and places them in order, each at its home or
// just after the entry placed before it (which is the Robin Hood order);
// the few that run past the array's end wrap round by ordinary insertion.
func (t *Table) FinishFresh() {
	if t.fresh == 0 {
		return
	}
	count := t.fresh
	t.fresh = 0
	bufs := [2]*[]uint64{}
	for i := range bufs {
		if b, ok := bulkBuffers.Get().(*[]uint64); ok && cap(*b) >= count {
			bufs[i] = b
		} else {
			b := make([]uint64, 0, count)
			bufs[i] = &b
		}
		defer bulkBuffers.Put(bufs[i])
	}
	pending := t.freshSlots(*bufs[0])
	n := minSlots
	for maxLoad(n) < count && n < 1<<maxSlotsLog2 {
		n *= 2
	}
	t.slots = t.newSlots(n)
	clear(t.slots)
	t.shift = uint8(32 - bits.TrailingZeros(uint(n)))
	pending = sortByHome(pending, (*bufs[1])[:count], 32-int(t.shift))
	t.dropDuplicates(pending)

	mask := uint32(n - 1)
	next := uint32(0) // the first slot not yet written
	var wrapped []uint64
	for _, s := range pending {
		if s == 0 { // a replaced duplicate
			continue
		}
		t.n++
		j := max(slotTag(s)>>t.shift, next)
		if j > mask {
			wrapped = append(wrapped, s)
			continue
		}
		t.slots[j] = s
		next = j + 1
	}
	for _, s := range wrapped {
		t.insert(s)
	}
}

// sortByHome sorts slots by the top homeBits bits of their tags (their
// home slot) with a stable least-significant-digit radix sort, using tmp (of
// the same length) as scratch, and returns the sorted slice (slots or tmp).
// Stable: entries of one key stay in the order they were appended.
func sortByHome(slots, tmp []uint64, homeBits int) []uint64 {
	const digit = 8
	var count [1 << digit]int
	for lo := 64 - homeBits; lo < 64; lo += digit {
		w := min(digit, 64-lo)
		clear(count[:])
		for _, s := range slots {
			count[(s>>lo)&(1<<w-1)]++
		}
		sum := 0
		for i := range count[:1<<w] {
			count[i], sum = sum, sum+count[i]
		}
		for _, s := range slots {
			d := (s >> lo) & (1<<w - 1)
			tmp[count[d]] = s
			count[d]++
		}
		slots, tmp = tmp, slots
	}
	return slots
}

// dropDuplicates zeroes, in slots sorted by home, each entry whose key an
// entry appended later also has (equal keys have equal tags, hence equal
// homes: they sit in one run of equal homes, in append order), and takes
// its size out of live: the later one replaced it, as Put would have.
func (t *Table) dropDuplicates(slots []uint64) {
	for i := 0; i < len(slots); {
		home := slotTag(slots[i]) >> t.shift
		k := i + 1
		for k < len(slots) && slotTag(slots[k])>>t.shift == home {
			k++
		}
		for a := i; a < k-1; a++ {
			for b := a + 1; b < k; b++ {
				if slotTag(slots[b]) != slotTag(slots[a]) {
					continue
				}
				ka, va := t.entry(slotAddr(slots[a]))
				if kb, _ := t.entry(slotAddr(slots[b])); slices.Equal(ka, kb) {
					t.live -= entrySize(len(ka), len(va))
					slots[a] = 0
					break
				}
			}
		}
		i = k
	}
}
