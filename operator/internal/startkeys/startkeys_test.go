package startkeys

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Fire fires keys in increasing time, in the order they were added
// within a time, also keys added at a later time by a fire of the same
// advance; nothing after wm fires, and everything fires exactly once.
func TestIndex(t *testing.T) {
	var d Index[string]
	d.Add(30, "c")
	d.Add(10, "a")
	d.Add(20, "b1")
	d.Add(20, "b2")
	d.Add(40, "late")
	var got []string
	err := d.Fire(30, func(k string, ts int64) error {
		got = append(got, k)
		if k == "a" {
			d.Add(25, "from-a") // due within this advance
			d.Add(50, "after")  // beyond wm
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b1", "b2", "from-a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if n := d.Entries(); n != 2 {
		t.Fatalf("%d entries left, want 2 (late, after)", n)
	}
	got = nil
	_ = d.Fire(1<<62, func(k string, _ int64) error { got = append(got, k); return nil })
	if want := []string{"late", "after"}; !slices.Equal(got, want) {
		t.Fatalf("then fired %v, want %v", got, want)
	}
}

// Against a sorted reference: random adds, advances in random steps.
func TestIndexOrderMatchesSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for range 200 {
		var d Index[int]
		type item struct {
			ts  int64
			seq int
		}
		var pending []item
		var fired []item
		seq := 0
		wm := int64(0)
		for range 200 {
			if rng.IntN(3) > 0 {
				ts := wm + 1 + rng.Int64N(50)
				d.Add(ts, seq)
				pending = append(pending, item{ts, seq})
				seq++
				continue
			}
			wm += rng.Int64N(30)
			_ = d.Fire(wm, func(k int, ts int64) error { fired = append(fired, item{ts, k}); return nil })
		}
		_ = d.Fire(1<<62, func(k int, ts int64) error { fired = append(fired, item{ts, k}); return nil })
		slices.SortStableFunc(pending, func(a, b item) int {
			if a.ts != b.ts {
				return int(a.ts - b.ts)
			}
			return a.seq - b.seq
		})
		// Fired in time order overall; all of them, once.
		if len(fired) != len(pending) {
			t.Fatalf("fired %d of %d", len(fired), len(pending))
		}
		if !slices.IsSortedFunc(fired, func(a, b item) int { return int(a.ts - b.ts) }) {
			t.Fatalf("fired out of time order: %v", fired)
		}
		got := slices.Clone(fired)
		slices.SortStableFunc(got, func(a, b item) int { return int(a.ts - b.ts) })
		if !slices.Equal(got, pending) {
			t.Fatalf("within a time, keys fired out of the order they were added")
		}
	}
}

// AddOnce lists a (start, key) once however often it is added, forgets it
// when its start is dropped or fired (so that it can be listed again), and
// knows the entries Add made before its first call.
func TestAddOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var d Index[int]
	listed := map[[2]int64]bool{}
	d.Add(5, 1) // before the first AddOnce
	listed[[2]int64{5, 1}] = true
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 8:
			start, key := int64(rng.IntN(8)), rng.IntN(20)
			want := !listed[[2]int64{start, int64(key)}]
			if got := d.AddOnce(start, key); got != want {
				t.Fatalf("step %d: AddOnce(%d, %d) = %v, want %v", step, start, key, got, want)
			}
			listed[[2]int64{start, int64(key)}] = true
		case op < 9:
			if starts := d.Starts(); len(starts) > 0 {
				n := rng.IntN(len(starts)) + 1 // a watermark fires several windows
				dropped := slices.Clone(starts[:n])
				d.DropFirst(n)
				for k := range listed {
					if slices.Contains(dropped, k[0]) {
						delete(listed, k)
					}
				}
			}
		default:
			limit := int64(rng.IntN(8))
			err := d.Fire(limit, func(key int, start int64) error {
				if !listed[[2]int64{start, int64(key)}] {
					t.Fatalf("step %d: fired (%d, %d), which was not listed", step, start, key)
				}
				delete(listed, [2]int64{start, int64(key)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if d.Entries() != len(listed) || len(d.listed) != len(listed) {
			t.Fatalf("step %d: %d entries, %d in the set; the model has %d", step, d.Entries(), len(d.listed), len(listed))
		}
	}
}
