package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Tests of the barrier Aligner against checkpointing.txt "Barrier alignment":
// "During alignment, the operator waits for the same barrier on all required
// inputs and temporarily holds later records from inputs that have already
// reached it. Once all inputs are aligned, the operator snapshots one
// consistent state and resumes normal processing." and DESIGN §3 Alignment.

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// blocked returns Blocked(i) for every input.
func blocked(a *Aligner, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = a.Blocked(i)
	}
	return out
}

func wantBlocked(t *testing.T, a *Aligner, want ...bool) {
	t.Helper()
	if got := blocked(a, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("blocked = %v, want %v", got, want)
	}
}

func wantNothing(t *testing.T, res Alignment) {
	t.Helper()
	if res != (Alignment{}) {
		t.Fatalf("alignment result = %+v, want none", res)
	}
}

func wantComplete(t *testing.T, res Alignment, id int64, d time.Duration) {
	t.Helper()
	if !res.Complete || res.ID != id || res.Duration != d {
		t.Fatalf("alignment result = %+v, want Complete ID %d Duration %v", res, id, d)
	}
}

// ExactlyOnce: "an input that delivered barrier N is not read again until
// every input has delivered N"; Alignment.Duration: "the time from the first
// barrier of ID to the last" (from the times passed in).
func TestAligner_ExactlyOnceBlocksUntilEveryInputDelivered(t *testing.T) {
	a := NewAligner(ExactlyOnce, 3)
	wantBlocked(t, a, false, false, false)
	wantNothing(t, a.Barrier(ms(100), 1, 7))
	wantBlocked(t, a, false, true, false)
	if a.Aligning() != 7 {
		t.Fatalf("Aligning() = %d, want 7", a.Aligning())
	}
	// A duplicate barrier on an input that already delivered it counts once.
	wantNothing(t, a.Barrier(ms(150), 1, 7))
	wantNothing(t, a.Barrier(ms(300), 0, 7))
	wantBlocked(t, a, true, true, false)
	wantComplete(t, a.Barrier(ms(1100), 2, 7), 7, time.Second)
	wantBlocked(t, a, false, false, false)
	if a.Aligning() != 0 {
		t.Fatalf("Aligning() = %d after completion, want 0", a.Aligning())
	}
	// The next checkpoint aligns afresh, its duration from its own first barrier.
	wantNothing(t, a.Barrier(ms(5000), 2, 8))
	wantBlocked(t, a, false, false, true)
	wantNothing(t, a.Barrier(ms(5001), 0, 8))
	wantComplete(t, a.Barrier(ms(5250), 1, 8), 8, 250*time.Millisecond)
}

// AtLeastOnce: "inputs keep flowing after their barrier"; the subtask
// snapshots when the last barrier arrives.
func TestAligner_AtLeastOnceNeverBlocks(t *testing.T) {
	a := NewAligner(AtLeastOnce, 3)
	wantNothing(t, a.Barrier(ms(0), 0, 1))
	wantBlocked(t, a, false, false, false)
	wantNothing(t, a.Barrier(ms(10), 2, 1))
	wantBlocked(t, a, false, false, false)
	wantComplete(t, a.Barrier(ms(40), 1, 1), 1, 40*time.Millisecond)
	wantBlocked(t, a, false, false, false)
}

// A subtask with one input is aligned as soon as its barrier arrives.
func TestAligner_SingleInputCompletesAtOnce(t *testing.T) {
	for _, mode := range []Mode{ExactlyOnce, AtLeastOnce} {
		a := NewAligner(mode, 1)
		for id := int64(1); id <= 3; id++ {
			wantComplete(t, a.Barrier(ms(int(id)), 0, id), id, 0)
			wantBlocked(t, a, false)
		}
	}
}

// EndOfInput: "it delivers no more barriers, so it no longer holds an
// alignment back" — an ended input counts as aligned.
func TestAligner_EndOfInputCountsAsAligned(t *testing.T) {
	t.Run("ends during alignment", func(t *testing.T) {
		a := NewAligner(ExactlyOnce, 2)
		wantNothing(t, a.Barrier(ms(0), 0, 4))
		wantBlocked(t, a, true, false)
		wantComplete(t, a.EndOfInput(ms(30), 1), 4, 30*time.Millisecond)
		wantBlocked(t, a, false, false)
		// Later checkpoints no longer wait for it.
		wantComplete(t, a.Barrier(ms(50), 0, 5), 5, 0)
	})
	t.Run("ended before alignment", func(t *testing.T) {
		a := NewAligner(ExactlyOnce, 3)
		wantNothing(t, a.EndOfInput(ms(0), 2))
		wantNothing(t, a.Barrier(ms(10), 0, 1))
		wantBlocked(t, a, true, false, false)
		wantComplete(t, a.Barrier(ms(20), 1, 1), 1, 10*time.Millisecond)
	})
	t.Run("input that delivered the barrier ends", func(t *testing.T) {
		a := NewAligner(ExactlyOnce, 3)
		wantNothing(t, a.Barrier(ms(0), 0, 1))
		wantNothing(t, a.EndOfInput(ms(5), 0)) // still waiting for 1 and 2
		wantBlocked(t, a, false, false, false)
		wantNothing(t, a.Barrier(ms(10), 1, 1))
		wantBlocked(t, a, false, true, false)
		wantComplete(t, a.Barrier(ms(20), 2, 1), 1, 20*time.Millisecond)
		wantBlocked(t, a, false, false, false)
	})
	t.Run("repeated end", func(t *testing.T) {
		a := NewAligner(ExactlyOnce, 2)
		wantNothing(t, a.Barrier(ms(0), 0, 1))
		wantComplete(t, a.EndOfInput(ms(1), 1), 1, time.Millisecond)
		wantNothing(t, a.EndOfInput(ms(2), 1))
		wantComplete(t, a.Barrier(ms(3), 0, 2), 2, 0)
	})
}

// Alignment.Abandoned: "a checkpoint whose alignment was given up because a
// newer barrier arrived on an input that had not delivered it; the task
// declines it." The newer checkpoint's alignment starts with that barrier.
func TestAligner_NewerBarrierAbandonsCurrentAlignment(t *testing.T) {
	a := NewAligner(ExactlyOnce, 3)
	wantNothing(t, a.Barrier(ms(0), 0, 3))
	wantNothing(t, a.Barrier(ms(1), 1, 3))
	res := a.Barrier(ms(100), 2, 5) // input 2 skipped 3 (aborted upstream)
	if res.Abandoned != 3 || res.Complete {
		t.Fatalf("newer barrier: %+v, want Abandoned 3, not complete", res)
	}
	if a.Aligning() != 5 {
		t.Fatalf("Aligning() = %d, want 5", a.Aligning())
	}
	// Only the input that delivered 5 is held.
	wantBlocked(t, a, false, false, true)
	// Barriers of the abandoned checkpoint are stale now.
	wantNothing(t, a.Barrier(ms(110), 0, 3))
	wantBlocked(t, a, false, false, true)
	wantNothing(t, a.Barrier(ms(150), 0, 5))
	wantComplete(t, a.Barrier(ms(400), 1, 5), 5, 300*time.Millisecond)
}

// "barriers at or below [last] are stale": a barrier of a checkpoint this
// subtask already completed or gave up is ignored and blocks nothing.
func TestAligner_StaleBarriersIgnored(t *testing.T) {
	a := NewAligner(ExactlyOnce, 2)
	wantNothing(t, a.Barrier(ms(0), 0, 6))
	wantComplete(t, a.Barrier(ms(1), 1, 6), 6, time.Millisecond)
	for _, id := range []int64{6, 5, 1} {
		wantNothing(t, a.Barrier(ms(2), 0, id))
		wantBlocked(t, a, false, false)
		if a.Aligning() != 0 {
			t.Fatalf("stale barrier %d started an alignment", id)
		}
	}
	// Older than the one being aligned.
	wantNothing(t, a.Barrier(ms(3), 0, 8))
	wantNothing(t, a.Barrier(ms(4), 1, 7))
	wantBlocked(t, a, true, false)
	if a.Aligning() != 8 {
		t.Fatalf("Aligning() = %d, want 8", a.Aligning())
	}
}

// Aligner.Abort: "gives up the alignment of checkpoint id, if it is the
// current one, and unblocks every input" (Abort: "Subtasks that were aligning
// … for it may drop that work").
func TestAligner_AbortUnblocks(t *testing.T) {
	a := NewAligner(ExactlyOnce, 3)
	wantNothing(t, a.Barrier(ms(0), 0, 2))
	wantNothing(t, a.Barrier(ms(1), 2, 2))
	a.Abort(1) // not the current one: no effect
	wantBlocked(t, a, true, false, true)
	a.Abort(2)
	wantBlocked(t, a, false, false, false)
	if a.Aligning() != 0 {
		t.Fatalf("Aligning() = %d after Abort, want 0", a.Aligning())
	}
	// The aborted checkpoint's remaining barrier is stale; the next aligns normally.
	wantNothing(t, a.Barrier(ms(5), 1, 2))
	wantBlocked(t, a, false, false, false)
	wantNothing(t, a.Barrier(ms(10), 1, 3))
	wantNothing(t, a.Barrier(ms(11), 0, 3))
	wantComplete(t, a.Barrier(ms(30), 2, 3), 3, 20*time.Millisecond)
}

// Aligner.Abort: "if its barriers have not arrived yet they will be
// ignored" — an upstream subtask told of the abort while aligning never
// forwards the barrier, so a downstream subtask must not block an input for
// it.
func TestAligner_AbortBeforeBarriersMakesThemStale(t *testing.T) {
	a := NewAligner(ExactlyOnce, 2)
	a.Abort(4)
	wantNothing(t, a.Barrier(ms(0), 0, 4))
	wantBlocked(t, a, false, false)
	if a.Aligning() != 0 {
		t.Fatalf("barrier of aborted 4 started an alignment")
	}
	// Later checkpoints align normally, and so does a checkpoint below the
	// aborted one that was not aborted.
	wantNothing(t, a.Barrier(ms(1), 1, 3))
	wantComplete(t, a.Barrier(ms(3), 0, 3), 3, 2*time.Millisecond)
	wantNothing(t, a.Barrier(ms(4), 1, 5))
	wantBlocked(t, a, false, true)
	wantComplete(t, a.Barrier(ms(9), 0, 5), 5, 5*time.Millisecond)
}

// A model check over random barrier/end-of-input/abort sequences: each input
// delivers an increasing subsequence of checkpoint ids (aborted checkpoints
// may skip inputs), and the aligner must (ExactlyOnce) block exactly the
// inputs that delivered the current barrier, complete a checkpoint only once
// every live input delivered it, never complete one twice or out of order,
// and report durations from the times given.
func TestAligner_RandomModel(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		n := 1 + rng.IntN(4)
		mode := ExactlyOnce
		if rng.IntN(3) == 0 {
			mode = AtLeastOnce
		}
		a := NewAligner(mode, n)
		next := make([]int64, n)           // the next barrier id input i will deliver
		ended := make([]bool, n)           // input i ended
		seen := map[int64]map[int]bool{}   // barrier id -> inputs that delivered it
		aborted := map[int64]bool{}        // aborted before their alignment started
		first := map[int64]time.Duration{} // first barrier time
		var lastDone int64
		now := time.Duration(0)
		for range 60 {
			now += time.Duration(rng.IntN(50)) * time.Millisecond
			i := rng.IntN(n)
			if ended[i] {
				continue
			}
			if mode == ExactlyOnce && a.Blocked(i) {
				// The task does not read a blocked input; pick another.
				continue
			}
			var res Alignment
			if rng.IntN(12) == 0 {
				// The coordinator aborts the current or an upcoming checkpoint.
				x := a.Aligning()
				if x == 0 || rng.IntN(2) == 0 {
					x = lastDone + 1 + int64(rng.IntN(3))
				}
				if x == a.Aligning() {
					lastDone = x
				} else if x > lastDone {
					aborted[x] = true
				}
				a.Abort(x)
			} else if rng.IntN(15) == 0 {
				ended[i] = true
				res = a.EndOfInput(t0.Add(now), i)
			} else {
				if next[i] <= lastDone {
					next[i] = lastDone + 1
				}
				id := next[i] + int64(rng.IntN(2)) // sometimes skip one (aborted upstream)
				next[i] = id + 1
				cur := a.Aligning()
				res = a.Barrier(t0.Add(now), i, id)
				if id <= lastDone || (cur != 0 && id < cur) || aborted[id] {
					if res != (Alignment{}) {
						t.Fatalf("seed %d: stale barrier %d (last %d, aligning %d) gave %+v", seed, id, lastDone, cur, res)
					}
					continue
				}
				if cur != 0 && id > cur {
					if res.Abandoned != cur {
						t.Fatalf("seed %d: barrier %d while aligning %d gave %+v, want Abandoned %d", seed, id, cur, res, cur)
					}
					lastDone = cur
				}
				if seen[id] == nil {
					seen[id] = map[int]bool{}
					first[id] = now
				}
				seen[id][i] = true
			}
			if res.Complete {
				for j := range n {
					if !ended[j] && !seen[res.ID][j] {
						t.Fatalf("seed %d: checkpoint %d completed but input %d neither delivered it nor ended", seed, res.ID, j)
					}
				}
				if res.ID <= lastDone {
					t.Fatalf("seed %d: completed %d after %d", seed, res.ID, lastDone)
				}
				if want := now - first[res.ID]; res.Duration != want {
					t.Fatalf("seed %d: checkpoint %d duration %v, want %v", seed, res.ID, res.Duration, want)
				}
				lastDone = res.ID
			}
			for j := range n {
				want := mode == ExactlyOnce && a.Aligning() != 0 && seen[a.Aligning()][j] && !ended[j]
				if a.Blocked(j) != want {
					t.Fatalf("seed %d: Blocked(%d) = %v, want %v (aligning %d)", seed, j, a.Blocked(j), want, a.Aligning())
				}
			}
		}
	}
}
