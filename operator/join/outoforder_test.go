package join_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Seeded out-of-order tests: each side is emitted by a source with a
// bounded-out-of-orderness watermark (maxSeen - maxDelay - 1ns) in a random
// order that keeps every record at most maxDelay behind that side's running
// maximum (often exactly, on a coarse time grid with ties across keys and on
// window and bucket boundaries); the join sees the minimum of the two
// watermarks, and a side that ended stops holding it back. No record is
// late, so every join must produce exactly the brute-force result.
//
// Run many seeds: go test ./operator/join -run '^TestJoinsOutOfOrder$' -seeds=2000
// Replay one:     go test ./operator/join -run '^TestJoinsOutOfOrder$' -seed=N -v

var (
	oooSeed  = flag.Int64("seed", 0, "TestJoinsOutOfOrder: run only this seed")
	oooSeeds = flag.Int("seeds", testkit.DefaultSeeds(20), "TestJoinsOutOfOrder: number of seeds to run (1..N); a fifth of the default under -race")
)

// cogroupSpec is a window cogroup that emits, for every record of a key's
// window, the record and how many records the other side has there (as a
// negative id): it checks that apply sees exactly the window's records of
// both sides, for keys with records on one side too.
func cogroupSpec(size time.Duration) spec {
	sz := int64(size)
	start := func(t int64) int64 { return t - ((t%sz)+sz)%sz }
	return spec{
		name: fmt.Sprintf("cogroup[%v]", size),
		build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.WindowCoGroup(lk, rk, id, size, func(_ int64, _ windowT, ls []lrec, rs []rrec, emit func(pair)) {
				for _, l := range ls {
					emit(pair{l.ID, -int64(len(rs)) - 1})
				}
				for _, r := range rs {
					emit(pair{-int64(len(ls)) - 1, r.ID})
				}
			}, opts...)
		},
		// Not a pairwise join: expectCogroup computes its reference.
		match: func(l, r int64) bool { return start(l) == start(r) },
		at:    func(l, _ int64) int64 { return start(l) + sz - 1 },
	}
}

// expectCogroup is cogroupSpec's reference.
func expectCogroup(in input, size int64) []timed {
	type wk struct{ key, start int64 }
	start := func(t int64) int64 { return t - ((t%size)+size)%size }
	nl, nr := map[wk]int64{}, map[wk]int64{}
	for _, l := range in.left {
		nl[wk{l.Value.Key, start(l.Time)}]++
	}
	for _, r := range in.right {
		nr[wk{r.Value.Key, start(r.Time)}]++
	}
	var out []timed
	for _, l := range in.left {
		k := wk{l.Value.Key, start(l.Time)}
		out = append(out, timed{l.Value.ID, -nr[k] - 1, k.start + size - 1})
	}
	for _, r := range in.right {
		k := wk{r.Value.Key, start(r.Time)}
		out = append(out, timed{-nl[k] - 1, r.Value.ID, k.start + size - 1})
	}
	return sorted(out)
}

// oooSpecs are the joins of the seeded tests, with bounds, windows and ttls
// on the input's grid (so records sit exactly on them) and off it.
func oooSpecs(grid int64) []spec {
	g := time.Duration(grid)
	return []spec{
		intervalSpec(-3*g, 5*g),
		intervalSpec(0, 0),
		intervalSpec(2*g, 2*g),
		intervalSpec(-7*g, -2*g),
		intervalSpec(-g-1, g+1),
		windowSpec(4 * g),
		windowSpec(10*g + 3),
		cogroupSpec(4 * g),
		innerSpec(3 * g),
		innerSpec(g + 1),
		innerSpec(0),
	}
}

// disorderedJoinInput draws both sides on a grid (some records one instant
// off it), disorders each within maxDelay and cuts them into steps of up to
// 6 records per side with the minimum watermark after each.
func disorderedJoinInput(rng *rand.Rand, grid int64) (input, []step) {
	maxDelay := []int64{0, grid, 3 * grid, 10 * grid, 7}[rng.IntN(5)]
	in := input{delay: maxDelay}
	keys := int64(1 + rng.IntN(4))
	span := int64(40 + rng.IntN(80))
	at := func() int64 {
		t := base + rng.Int64N(span)*grid
		switch rng.IntN(10) {
		case 0:
			t--
		case 1:
			t++
		}
		return t
	}
	for i := range 80 + rng.IntN(120) {
		in.left = append(in.left, lr(int64(i), rng.Int64N(keys), at()))
	}
	for i := range 80 + rng.IntN(120) {
		in.right = append(in.right, rr(int64(i), rng.Int64N(keys), at()))
	}
	ls := testkit.Disorder(rng, in.left, func(r runtime.Record[lrec]) int64 { return r.Time }, maxDelay)
	rs := testkit.Disorder(rng, in.right, func(r runtime.Record[rrec]) int64 { return r.Time }, maxDelay)
	var ss []step
	lwm, rwm := runtime.MinWatermark, runtime.MinWatermark
	lmax, rmax := ls[0].Time, rs[0].Time
	for i, k := 0, 0; i < len(ls) || k < len(rs); {
		var s step
		if n := min(len(ls)-i, rng.IntN(7)); n > 0 {
			s.left = ls[i : i+n]
			i += n
			for _, r := range s.left {
				lmax = max(lmax, r.Time)
			}
			lwm = testkit.BoundedWatermark(lmax, maxDelay)
		}
		if i == len(ls) {
			lwm = runtime.MaxWatermark
		}
		if n := min(len(rs)-k, rng.IntN(7)); n > 0 {
			s.right = rs[k : k+n]
			k += n
			for _, r := range s.right {
				rmax = max(rmax, r.Time)
			}
			rwm = testkit.BoundedWatermark(rmax, maxDelay)
		}
		if k == len(rs) {
			rwm = runtime.MaxWatermark
		}
		s.wm = min(lwm, rwm)
		ss = append(ss, s)
	}
	return in, ss
}

// Every join, fed on-time input in a random order on both sides, gives the
// brute-force result without and with a checkpoint and restore at random
// cuts, drops nothing as late and leaves no state after the final
// watermark.
func TestJoinsOutOfOrder(t *testing.T) {
	testkit.RunSeeds(t, "go test ./operator/join -run '^TestJoinsOutOfOrder$'", *oooSeed, *oooSeeds, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 14))
		grid := []int64{1, 5, 10}[rng.IntN(3)]
		in, ss := disorderedJoinInput(rng, grid)
		what := fmt.Sprintf("%d+%d records on a grid of %d, max delay %d, %d steps", len(in.left), len(in.right), grid, in.delay, len(ss))
		for _, sp := range oooSpecs(grid) {
			want := sp.expect(in)
			if sp.name == cogroupSpec(time.Duration(4*grid)).name {
				want = expectCogroup(in, 4*grid)
			}
			if len(want) == 0 {
				t.Fatalf("%s over %s: the reference has no results: the test proves nothing", sp.name, what)
			}
			newOp := newOp(t, sp.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			h := open[lrec, rrec, pair](t, newOp, nil)
			for _, s := range ss {
				h.run(t, s)
			}
			h.watermark(t, runtime.MaxWatermark)
			if got := timedOf(h.out.recs); !slices.Equal(got, want) {
				t.Errorf("%s over %s: %s", sp.name, what, diff(got, want))
				continue
			}
			if l, r, _ := join.Late(h.op); l+r != 0 {
				t.Errorf("%s over %s: dropped %d+%d late records from input that respects its watermarks", sp.name, what, l, r)
			}
			if n := entries(t, h.snapshot(t, 1)); sp.name != "inner[ttl=0s]" && len(n) != 0 {
				t.Errorf("%s over %s: state left after the final watermark: %v", sp.name, what, n)
			}
			for range 2 {
				cut := rng.IntN(len(ss))
				if got := restoredAt(t, newOp, ss, cut); !slices.Equal(got, want) {
					t.Errorf("%s over %s, checkpoint after step %d: %s", sp.name, what, cut, diff(got, want))
				}
			}
		}
	})
}

// restoredAt runs ss to cut, captures a snapshot, keeps processing a few
// steps (output lost in the crash), encodes the snapshot only then, restores
// a fresh subtask from it, replays from the cut and returns the output as
// committed: before the cut from the first subtask, after it from the
// second.
func restoredAt(t *testing.T, newOp func() runtime.Operator, ss []step, cut int) []timed {
	t.Helper()
	h := open[lrec, rrec, pair](t, newOp, nil)
	for _, s := range ss[:cut+1] {
		h.run(t, s)
	}
	if _, err := h.op.Snapshot(1); err != nil {
		t.Fatal(err)
	}
	captured := h.backend.Snapshot()
	committed := slices.Clone(h.out.recs)
	for _, s := range ss[cut+1 : min(cut+4, len(ss))] {
		h.run(t, s)
	}
	snap, err := captured.Encode()
	if err != nil {
		t.Fatal(err)
	}
	_ = h.op.Close()
	r := open[lrec, rrec, pair](t, newOp, &checkpoint.SubtaskState{Watermark: ss[cut].wm}, snap)
	for _, s := range ss[cut+1:] {
		r.run(t, s)
	}
	r.watermark(t, runtime.MaxWatermark)
	return timedOf(append(committed, r.out.recs...))
}
