package kvtable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// key8 is the 8-byte encoding of an int64 key, as a fixed-width key codec
// would write it, and hash8 the engine's hash of the integer
// (state.HashKey: splitmix64).
func key8(dst []byte, k int64) []byte { return binary.BigEndian.AppendUint64(dst[:0], uint64(k)) }
func hash8(k int64) uint64            { return splitmix(uint64(k)) }

// fmix64 is murmur3's finalizer, which state.KeyGroupFor applies to the hash
// before taking it modulo the max parallelism.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func TestZeroTable(t *testing.T) {
	var tab Table
	if _, ok := tab.Get(1, []byte("k")); ok || tab.Len() != 0 || tab.Delete(1, []byte("k")) {
		t.Fatal("an empty table has an entry")
	}
	if _, ok, err := tab.Modify(1, []byte("k")); ok || err != nil {
		t.Fatalf("Modify on an empty table = %v, %v", ok, err)
	}
	f := tab.Freeze()
	if f.Len() != 0 {
		t.Fatalf("view of an empty table has Len %d", f.Len())
	}
	if err := tab.Put(1, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for k := range f.All() {
		t.Fatalf("view of an empty table yields %q", k)
	}
	f.Release()
	if v, ok := tab.Get(1, []byte("k")); !ok || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, ok)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// TestInPlace checks the fixed-size aggregate path: same-length Puts and
// Modifys of an unfrozen entry neither grow the arena nor touch the slots,
// and after a Freeze the first write of each entry appends one version and
// later ones are in place again.
func TestInPlace(t *testing.T) {
	var tab Table
	var kb [8]byte
	val := make([]byte, 16)
	for k := range int64(1000) {
		if err := tab.Put(hash8(k), key8(kb[:], k), val); err != nil {
			t.Fatal(err)
		}
	}
	used, bytesBefore := tab.used, tab.Bytes()
	for round := range 3 {
		for k := range int64(1000) {
			binary.LittleEndian.PutUint64(val, uint64(round))
			if err := tab.Put(hash8(k), key8(kb[:], k), val); err != nil {
				t.Fatal(err)
			}
			v, ok, err := tab.Modify(hash8(k), key8(kb[:], k))
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			v[8]++
		}
	}
	if tab.used != used || tab.Bytes() != bytesBefore {
		t.Fatalf("same-length writes grew the arena: used %d → %d, bytes %d → %d", used, tab.used, bytesBefore, tab.Bytes())
	}
	f := tab.Freeze()
	slots := &tab.slots[0]
	for k := range int64(1000) {
		for range 2 {
			if _, _, err := tab.Modify(hash8(k), key8(kb[:], k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if &tab.slots[0] == slots {
		t.Fatal("slots not copied after Freeze")
	}
	if grown := tab.used - used; grown != 1000*entrySize(8, 16) && grown > 1000*entrySize(8, 16)+tab.cfg.chunkMax() {
		t.Fatalf("after Freeze, two writes of each of 1000 entries appended %d bytes, want one version each (%d)", grown, 1000*entrySize(8, 16))
	}
	n := 0
	for _, v := range f.All() {
		if v[0] != 2 || v[8] != 1 { // round 2's Put, then its Modify
			t.Fatalf("view sees a write after its Freeze: %x", v)
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("view yields %d entries", n)
	}
	f.Release()
	// Released: the next write compacts the old versions away.
	if err := tab.Put(hash8(0), key8(kb[:], 0), val); err != nil {
		t.Fatal(err)
	}
	if tab.used-tab.live > tab.live/4 {
		t.Fatalf("no compaction after Release: %d dead bytes, %d live", tab.used-tab.live, tab.live)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// TestBigEntries mixes entries larger than a chunk (and than the largest
// start position) with small ones, in the default geometry.
func TestBigEntries(t *testing.T) {
	var tab Table
	big := bytes.Repeat([]byte{7}, 3<<20/2)
	model := map[string][]byte{}
	put := func(k string, v []byte) {
		t.Helper()
		if err := tab.Put(fnv([]byte(k)), []byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	check := func() {
		t.Helper()
		if err := checkInvariants(&tab); err != nil {
			t.Fatal(err)
		}
		for k, want := range model {
			if v, ok := tab.Get(fnv([]byte(k)), []byte(k)); !ok || !bytes.Equal(v, want) {
				t.Fatalf("Get %q: %d bytes, %v; want %d bytes", k, len(v), ok, len(want))
			}
		}
	}
	for i := range 6 {
		put(string(rune('a'+i)), []byte("small"))
		put(string(rune('A'+i)), big[:len(big)-i])
	}
	check()
	f := tab.Freeze()
	frozen := map[string]int{}
	for k, v := range f.All() {
		frozen[string(k)] = len(v)
	}
	for i := range 6 {
		put(string(rune('A'+i)), big[:len(big)-i]) // same length, frozen: new versions
		tab.Delete(fnv([]byte{byte('a' + i)}), []byte{byte('a' + i)})
		delete(model, string(rune('a'+i)))
	}
	check()
	for k, v := range f.All() {
		if frozen[string(k)] != len(v) {
			t.Fatalf("view changed for %q", k)
		}
	}
	f.Release()
	put("z", []byte("after release"))
	check()
	if tab.used-tab.live > tab.live/2 {
		t.Fatalf("no compaction after Release: %d dead bytes, %d live", tab.used-tab.live, tab.live)
	}
}

// TestFreezeMarkLastChunk fills the last chunk index with a big entry, so
// the arena end at Freeze is the first address past 32 bits. Entries below
// it must still count as frozen: a same-length Put must not write in place
// (it needs a new chunk and fails with ErrFull, leaving the view intact).
func TestFreezeMarkLastChunk(t *testing.T) {
	tab := Table{}
	tab.cfg = config{minChunk: 16, maxChunk: 16}
	var kb [8]byte
	k := int64(0)
	for ; len(tab.chunks) < defaultMaxChunks-1; k++ {
		if err := tab.Put(hash8(k), key8(kb[:], k), []byte{1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.Put(hash8(-1), key8(kb[:], -1), make([]byte, maxStart)); err != nil {
		t.Fatal(err)
	}
	if len(tab.chunks) != defaultMaxChunks || tab.fill < maxStart {
		t.Fatalf("%d chunks, last filled to %d: the test needs the last chunk index past its last start", len(tab.chunks), tab.fill)
	}
	f := tab.Freeze()
	err := tab.Put(hash8(0), key8(kb[:], 0), []byte{9, 9})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("Put of a frozen entry with no chunk left = %v, want ErrFull", err)
	}
	for key, v := range f.All() {
		if len(v) == 2 && v[0] != 1 {
			t.Fatalf("view of %x sees a write after Freeze: %x", key, v)
		}
	}
	f.Release()
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// TestErrFullLeavesTable checks that a write failing with ErrFull changes
// nothing, and that once views are released, compaction makes room again.
func TestErrFullLeavesTable(t *testing.T) {
	tab := Table{}
	tab.cfg = config{minChunk: 64, maxChunk: 64, maxChunks: 4, minCompact: 1 << 30}
	var kb [8]byte
	n := int64(0)
	for ; ; n++ {
		err := tab.Put(hash8(n), key8(kb[:], n), []byte("0123456789"))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if tab.Len() != int(n) {
		t.Fatalf("Len %d after %d successful Puts", tab.Len(), n)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
	// Free space by deleting; compaction is held off by minCompact, so only
	// ErrFull's reclaim can make room.
	tab.Delete(hash8(0), key8(kb[:], 0))
	tab.Delete(hash8(1), key8(kb[:], 1))
	f := tab.Freeze()
	if err := tab.Put(hash8(n), key8(kb[:], n), []byte("0123456789")); !errors.Is(err, ErrFull) {
		t.Fatalf("Put with a live view and a full arena = %v, want ErrFull", err)
	}
	f.Release()
	if err := tab.Put(hash8(n), key8(kb[:], n), []byte("0123456789")); err != nil {
		t.Fatalf("Put after Release, with deleted entries to reclaim = %v", err)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// TestKeyGroupSpread checks that the keys of one key group, as the engine
// routes them (fmix64 of the hash modulo 128), spread over the slots: the
// mean Robin Hood distance stays near that of random hashing (as for linear
// probing: (1/(1-load)-1)/2, 1.6 at a load of 0.76), for integer keys (splitmix hash) and string keys (FNV-1a).
func TestKeyGroupSpread(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(i int) []byte
		hash func([]byte) uint64
	}{
		{"int64", func(i int) []byte { var b [8]byte; return key8(b[:], int64(i)) },
			func(k []byte) uint64 { return hash8(int64(binary.BigEndian.Uint64(k))) }},
		{"string", func(i int) []byte { return []byte("user-" + string(rune('a'+i%26)) + itoa(i)) }, fnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tab Table
			for i := 0; tab.Len() < 50000; i++ {
				k := tc.key(i)
				h := tc.hash(k)
				if fmix64(h)%128 != 5 {
					continue
				}
				if err := tab.Put(h, k, nil); err != nil {
					t.Fatal(err)
				}
			}
			mask := uint32(len(tab.slots) - 1)
			sum, maxd := 0, uint32(0)
			for j, s := range tab.slots {
				if s != 0 {
					d := (uint32(j) - slotTag(s)>>tab.shift) & mask
					sum += int(d)
					maxd = max(maxd, d)
				}
			}
			mean := float64(sum) / float64(tab.Len())
			load := float64(tab.Len()) / float64(len(tab.slots))
			t.Logf("load %.2f, mean distance %.2f, max %d", load, mean, maxd)
			if mean > 2.5 || maxd > 64 {
				t.Fatalf("keys of one key group cluster: load %.2f, mean distance %.2f, max %d", load, mean, maxd)
			}
		})
	}
}

// distances returns the mean and largest distance of the table's entries
// from their home slots.
func distances(tab *Table) (mean float64, maxd uint32) {
	mask := uint32(len(tab.slots) - 1)
	sum := 0
	for j, s := range tab.slots {
		if s != 0 {
			d := (uint32(j) - slotTag(s)>>tab.shift) & mask
			sum += int(d)
			maxd = max(maxd, d)
		}
	}
	return float64(sum) / float64(max(tab.Len(), 1)), maxd
}

// TestRefillInViewOrder fills a fresh table one Put at a time from a view's
// iteration, as a restore applying a delta section that adds many keys does,
// and checks that entries stay near their homes at every size the growing
// table passes: slot order is sorted by home, and a table filled in that
// order piled each prefix into the low end of its array, so distances grew
// with the table (a mean of 496 at 1024 of 65536 entries; a 1 GiB restore
// took 539 s). Views iterate blocks of scrambleBlock slots in a scattered
// order: a distance is bounded by about a block whatever the table's size,
// and is small again once the table is as large as the view's.
func TestRefillInViewOrder(t *testing.T) {
	var src Table
	var kb [8]byte
	for i := range int64(1 << 17) {
		if err := src.Put(hash8(i), key8(kb[:], i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	f := src.Freeze()
	defer f.Release()

	var dst Table
	n := 0
	for k, v := range f.All() {
		if err := dst.Put(hash8(int64(binary.BigEndian.Uint64(k))), k, v); err != nil {
			t.Fatal(err)
		}
		if n++; n&(n-1) == 0 || n == src.Len() {
			mean, maxd := distances(&dst)
			t.Logf("after %d entries: mean distance %.2f, max %d (load %.2f)", n, mean, maxd, float64(dst.Len())/float64(len(dst.slots)))
			if maxd > 1024 { // two blocks of scrambleBlock (512) slots
				t.Fatalf("after %d of %d entries in view order: max distance %d (mean %.2f)", n, src.Len(), maxd, mean)
			}
		}
	}
	if mean, maxd := distances(&dst); mean > 2.5 || maxd > 64 {
		t.Fatalf("refilled table: mean distance %.2f, max %d", mean, maxd)
	}
}

func itoa(i int) string {
	var b [20]byte
	p := len(b)
	for {
		p--
		b[p] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[p:])
		}
	}
}

// TestBytes checks the accounting Bytes reports: slots and chunks, growing
// with entries and shrinking after deletes once compaction runs.
func TestBytes(t *testing.T) {
	var tab Table
	var kb [8]byte
	v := make([]byte, 16)
	for k := range int64(10000) {
		if err := tab.Put(hash8(k), key8(kb[:], k), v); err != nil {
			t.Fatal(err)
		}
	}
	full := tab.Bytes()
	if want := 8*len(tab.slots) + tab.chunkBytes; full < want || full > want+4096 {
		t.Fatalf("Bytes %d, slots and chunks hold %d", full, want)
	}
	if per := full / tab.Len(); per > 80 {
		t.Fatalf("%d bytes per entry of 8+16 bytes", per)
	}
	for k := range int64(9900) {
		tab.Delete(hash8(k), key8(kb[:], k))
	}
	if after := tab.Bytes(); after > full/10 {
		t.Fatalf("Bytes %d after deleting 99%% of %d bytes", after, full)
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// TestChunkGeometry pins the sizes the package documentation promises: a
// table of one entry under 400 bytes, a table of 1 M entries of 8+16 bytes
// in under 90 chunks with under 10% of its arena unused.
func TestChunkGeometry(t *testing.T) {
	var small Table
	if err := small.Put(hash8(1), key8(nil, 1), make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if b := small.Bytes(); b >= 400 {
		t.Fatalf("a one-entry table holds %d bytes", b)
	}
	if testing.Short() {
		t.Skip("-short: skipping the 1 M-entry table")
	}
	var tab Table
	var kb [8]byte
	v := make([]byte, 16)
	for k := range int64(1_000_000) {
		if err := tab.Put(hash8(k), key8(kb[:], k), v); err != nil {
			t.Fatal(err)
		}
	}
	slack := float64(tab.chunkBytes-tab.used) / float64(tab.chunkBytes)
	t.Logf("%d chunks, %d bytes of arena, %.1f%% unused, %.1f bytes per entry", len(tab.chunks), tab.chunkBytes, 100*slack, float64(tab.Bytes())/1e6)
	if len(tab.chunks) >= 90 || slack >= 0.10 {
		t.Fatalf("1 M entries in %d chunks with %.1f%% of the arena unused", len(tab.chunks), 100*slack)
	}
}
