package kvtable

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestPutFresh bulk loads random tables and checks them against a model:
// every key found with the value appended last, the Robin Hood and arena
// invariants, and ordinary writes working on the loaded table. Keys are
// drawn from a small set (so keys repeat and the last value must win), and
// a few keys share one hash (equal tags, different keys), which must stay
// distinct entries; small tables make entries run past the slot array's end
// and wrap round; small chunks spread the entries over many.
func TestPutFresh(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			keys := 1 + rng.IntN(2000)
			if seed%3 == 0 {
				keys = 1 + rng.IntN(12) // a handful: the smallest arrays, wrapping
			}
			hash := func(k []byte) uint64 {
				if k[0]%16 == 0 {
					return 42 // a shared hash: one tag for several keys
				}
				return fnv(k)
			}
			key := func() []byte { return fmt.Appendf(nil, "%c-key-%d", 'a'+rng.IntN(26), rng.IntN(keys)) }
			model := map[string][]byte{}
			var tab Table
			if seed%2 == 1 {
				// Small chunks: the bulk load reads its entries back
				// from many chunks, some ending with an unused tail.
				tab.cfg = config{minChunk: 32, maxChunk: 100}
			}
			for range 1 + rng.IntN(3*keys) {
				k, v := key(), fmt.Appendf(nil, "v%d", rng.IntN(1000))
				if err := tab.PutFresh(hash(k), k, v); err != nil {
					t.Fatal(err)
				}
				model[string(k)] = v
			}
			tab.FinishFresh()
			check := func(when string) {
				t.Helper()
				if err := checkInvariants(&tab); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if tab.Len() != len(model) {
					t.Fatalf("%s: Len %d, the model has %d", when, tab.Len(), len(model))
				}
				for k, want := range model {
					if got, ok := tab.Get(hash([]byte(k)), []byte(k)); !ok || !bytes.Equal(got, want) {
						t.Fatalf("%s: Get(%q) = %q, %v; want %q", when, k, got, ok, want)
					}
				}
			}
			check("after the bulk load")
			view, frozen := tab.Freeze(), maps.Clone(model) // a checkpoint right after a restore
			for range 200 {
				k := key()
				if rng.IntN(3) == 0 {
					tab.Delete(hash(k), k)
					delete(model, string(k))
					continue
				}
				v := fmt.Appendf(nil, "w%d", rng.IntN(100000))
				if err := tab.Put(hash(k), k, v); err != nil {
					t.Fatal(err)
				}
				model[string(k)] = v
			}
			check("after writes on the loaded table")
			seen := map[string]bool{}
			for k, v := range view.All() {
				if want, ok := frozen[string(k)]; !ok || !bytes.Equal(v, want) || seen[string(k)] {
					t.Fatalf("the view taken after the load yields %q = %q (want %q, %v; seen before: %v)", k, v, want, ok, seen[string(k)])
				}
				seen[string(k)] = true
			}
			if len(seen) != len(frozen) {
				t.Fatalf("the view taken after the load yields %d entries, want %d", len(seen), len(frozen))
			}
			view.Release()
			check("after the view's release")
		})
	}
}

// TestPutFreshOnAFilledTable checks that PutFresh on a table that already
// has entries is an ordinary Put (the bulk path is for empty tables only).
func TestPutFreshOnAFilledTable(t *testing.T) {
	var tab Table
	if err := tab.Put(fnv([]byte("a")), []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := tab.PutFresh(fnv([]byte("a")), []byte("a"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := tab.PutFresh(fnv([]byte("b")), []byte("b"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	tab.FinishFresh() // nothing pending: does nothing
	for k, want := range map[string]string{"a": "2", "b": "3"} {
		if got, ok := tab.Get(fnv([]byte(k)), []byte(k)); !ok || string(got) != want {
			t.Fatalf("Get(%q) = %q, %v; want %q", k, got, ok, want)
		}
	}
	if err := checkInvariants(&tab); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkFrozenChanges measures what a delta checkpoint's encoding does
// per table: iterate a view's changes since the last mark, 10% of 1 M
// entries rewritten, and, for comparison, all of its entries.
func BenchmarkFrozenChanges(b *testing.B) {
	const n = 1 << 20
	var tab Table
	var kb [8]byte
	for i := range int64(n) {
		if err := tab.Put(hash8(i), key8(kb[:], i), []byte("01234567")); err != nil {
			b.Fatal(err)
		}
	}
	tab.Freeze().Release()
	mark := tab.Freeze()
	mark.Release()
	for i := int64(0); i < n; i += 10 {
		if err := tab.Put(hash8(i), key8(kb[:], i), []byte("76543210")); err != nil {
			b.Fatal(err)
		}
	}
	f := tab.Freeze()
	defer f.Release()
	b.Run("changes", func(b *testing.B) {
		for b.Loop() {
			changes, ok := f.Changes(mark.Mark())
			if !ok {
				b.Fatal("changes unknown")
			}
			k := 0
			for range changes {
				k++
			}
			if k != n/10+1 {
				b.Fatalf("%d changes, want %d", k, n/10+1)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(f.slots)), "ns/slot")
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			for range f.All() {
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(f.Len()), "ns/entry")
	})
}
