package testkit

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Disorder returns a permutation within the allowed delay that is really out
// of order, with records exactly maxDelay behind on a coarse grid.
func TestDisorder(t *testing.T) {
	id := func(v int64) int64 { return v }
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var in []int64
		for range 2000 {
			in = append(in, rng.Int64N(400)*10) // a coarse grid with ties
		}
		const delay = 50
		out := Disorder(rng, in, id, delay)
		if err := CheckDisorder(out, id, delay); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		a, b := slices.Clone(in), slices.Clone(out)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: not a permutation of the input", seed)
		}
		var exact, behind int
		m := out[0]
		for _, v := range out[1:] {
			if v < m {
				behind++
			}
			if v == m-delay {
				exact++
			}
			m = max(m, v)
		}
		if behind < len(out)/4 || exact == 0 {
			t.Fatalf("seed %d: %d records behind the running maximum, %d exactly the delay behind: not disordered enough", seed, behind, exact)
		}
		if wm := BoundedWatermark(m, delay); wm >= m-delay {
			t.Fatalf("the watermark %d does not admit a record exactly the delay behind %d", wm, m)
		}
	}
	if err := CheckDisorder([]int64{10, 30, 19}, id, 10); err == nil {
		t.Fatal("CheckDisorder accepted a record 11 behind with a delay of 10")
	}
	if got := Disorder(rand.New(rand.NewPCG(1, 1)), []int64{3, 1, 2}, id, 0); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("Disorder with no delay = %v, want sorted", got)
	}
}
