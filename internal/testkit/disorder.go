package testkit

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Disorder returns recs in a random order that a source with a
// bounded-out-of-orderness watermark of maxDelay may emit without a late
// record: every record is at most maxDelay behind the largest time emitted
// before it (exactly maxDelay behind is allowed, and on a coarse time grid
// happens often). The watermark after a prefix is BoundedWatermark of the
// prefix's largest time, so no record is at or below the watermark in force
// when it comes.
//
// Records with equal times keep their relative order only by chance; which
// ones come early is the random part. maxDelay 0 returns recs sorted by
// time (ties in input order).
//
// Each pick is uniform among the records not yet emitted whose time is at
// most maxDelay after the earliest one not yet emitted, so the earliest
// pending record is never stranded: the running maximum stays within
// maxDelay of it.
func Disorder[T any](rng *rand.Rand, recs []T, timeOf func(T) int64, maxDelay int64) []T {
	s := slices.Clone(recs)
	slices.SortStableFunc(s, func(a, b T) int { return cmp.Compare(timeOf(a), timeOf(b)) })
	out := make([]T, 0, len(s))
	used := make([]bool, len(s))
	var cands []int
	first, hi := 0, 0 // s[first] is the earliest pending record; s[:hi] are within maxDelay of it
	for len(out) < len(s) {
		for used[first] {
			first++
		}
		limit := timeOf(s[first]) + maxDelay
		for hi < len(s) && timeOf(s[hi]) <= limit {
			hi++
		}
		cands = cands[:0]
		for j := first; j < hi; j++ {
			if !used[j] {
				cands = append(cands, j)
			}
		}
		j := cands[rng.IntN(len(cands))]
		used[j] = true
		out = append(out, s[j])
	}
	return out
}

// BoundedWatermark is the watermark of a bounded-out-of-orderness source
// whose largest emitted time is maxSeen: maxSeen - maxDelay - 1ns, as Flink's
// BoundedOutOfOrdernessWatermarks and the engine's sources compute it. A
// record maxDelay behind maxSeen is after it, so on time.
func BoundedWatermark(maxSeen, maxDelay int64) int64 { return maxSeen - maxDelay - 1 }

// CheckDisorder returns an error naming the first record of recs (in
// order) more than maxDelay behind the largest time before it.
func CheckDisorder[T any](recs []T, timeOf func(T) int64, maxDelay int64) error {
	var m int64
	for i, r := range recs {
		t := timeOf(r)
		if i > 0 && t < m-maxDelay {
			return fmt.Errorf("record %d at %d is %d behind the running maximum %d, more than the allowed %d", i, t, m-t, m, maxDelay)
		}
		if i == 0 || t > m {
			m = t
		}
	}
	return nil
}

// DefaultSeeds returns n, or a fifth of it (at least 1) under the race
// detector, which makes seeded tests several times slower: the default seed
// count of a seeded test keeps its package within a few seconds either way.
func DefaultSeeds(n int) int {
	if RaceEnabled {
		return max(1, n/5)
	}
	return n
}

// RunSeeds runs fn once per seed as a subtest named "seed=N": the one seed
// when one is not 0, else seeds 1..n. A failing seed's log says how to run
// it alone: replay is the command without the seed flag, for example
// "go test ./operator/window -run '^TestWindowsOutOfOrder$'", and the seed
// flag is -seed.
func RunSeeds(t *testing.T, replay string, one int64, n int, fn func(t *testing.T, seed uint64)) {
	t.Helper()
	seeds := []int64{one}
	if one == 0 {
		seeds = nil
		for s := range int64(n) {
			seeds = append(seeds, s+1)
		}
	}
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { fn(t, uint64(seed)) }) {
			t.Logf("seed %d failed; replay it alone: %s -seed=%d -v", seed, replay, seed)
		}
	}
}
