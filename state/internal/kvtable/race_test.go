package kvtable

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// TestConcurrentFrozen reads Frozen views on other goroutines while the
// owner keeps writing the table (same-length updates of frozen and unfrozen
// entries, Modify, inserts, deletes, further Freezes) and releases views as
// the readers finish, so compaction runs between rounds. Run it with -race:
// the detector reports any arena byte or slot a reader reads that the owner
// writes without the Release/views handshake ordering them. Each reader also
// checks that its view holds exactly the entries of its round.
//
// No sleeps: the readers start with a go statement (which orders only the
// writes before it) and report on a channel when done, after their reads.
func TestConcurrentFrozen(t *testing.T) {
	const keys = 4000
	var tab Table
	tab.cfg = config{minChunk: 256, maxChunk: 4096, minCompact: 256, offHeapMin: 1024} // many chunks, frequent compaction, most off the heap
	var kb [8]byte
	val := func(dst []byte, round, k int64) []byte {
		dst = binary.LittleEndian.AppendUint64(dst[:0], uint64(round))
		return binary.LittleEndian.AppendUint64(dst, uint64(k))
	}
	var vb [16]byte
	// present: key → round of its value; the model each view is checked
	// against is a copy.
	present := map[int64]int64{}
	for k := range int64(keys) {
		if err := tab.Put(hash8(k), key8(kb[:], k), val(vb[:], 0, k)); err != nil {
			t.Fatal(err)
		}
		present[k] = 0
	}
	type result struct {
		round int64
		err   error
	}
	done := make(chan result)
	reader := func(f *Frozen, round int64, want map[int64]int64) {
		err := func() error {
			n := 0
			for pass := range 2 {
				for k, v := range f.All() {
					key := int64(binary.BigEndian.Uint64(k))
					r, ok := want[key]
					if !ok || len(v) != 16 || int64(binary.LittleEndian.Uint64(v)) != r || int64(binary.LittleEndian.Uint64(v[8:])) != key {
						return fmt.Errorf("pass %d: view of round %d has key %d = %x, want round %d (present %v)", pass, round, key, v, r, ok)
					}
					n++
				}
			}
			if n != 2*len(want) || f.Len() != len(want) {
				return fmt.Errorf("view of round %d: %d entries over two passes, Len %d, want %d", round, n, f.Len(), len(want))
			}
			return nil
		}()
		f.Release() // on the reader's goroutine, as Encode would
		done <- result{round, err}
	}
	live := 0
	for round := int64(1); round <= 30; round++ {
		want := make(map[int64]int64, len(present))
		for k, r := range present {
			want[k] = r
		}
		go reader(tab.Freeze(), round, want)
		live++
		for k := range int64(keys) {
			h, key := hash8(k), key8(kb[:], k)
			switch {
			case k%7 == int64(round%7):
				if tab.Delete(h, key) {
					delete(present, k)
				}
			case k%5 == 0:
				v, ok, err := tab.Modify(h, key)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					val(v[:0], round, k)
					present[k] = round
				}
			default:
				if err := tab.Put(h, key, val(vb[:], round, k)); err != nil {
					t.Fatal(err)
				}
				present[k] = round
			}
		}
		// Keep up to two readers going while the next round writes; wait
		// for the older one. Every third round, wait for both and write
		// again with no view live, so compaction runs right after a reader
		// released on its goroutine.
		keep := 1
		if round%3 == 0 {
			keep = 0
		}
		for live > keep {
			if r := <-done; r.err != nil {
				t.Fatal(r.err)
			}
			live--
		}
		if live == 0 {
			for k := range present {
				if err := tab.Put(hash8(k), key8(kb[:], k), val(vb[:], round, k)); err != nil {
					t.Fatal(err)
				}
				present[k] = round
			}
		}
	}
	// Deletes alone leave a seventh of the live bytes dead per round, so
	// some write with no view live (at the latest in a third round's
	// pass) must have compacted.
	if tab.compactions == 0 {
		t.Fatal("no compaction: the test does not exercise it")
	}
	for ; live > 0; live-- {
		if r := <-done; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}
