package window_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
)

// Seeded out-of-order tests: input that a bounded-out-of-orderness source
// may emit without a single late record (every record at most maxDelay
// behind the running maximum, often exactly; times on a coarse grid with
// ties across keys and on window boundaries; the watermark maxSeen -
// maxDelay - 1ns after every batch) must give exactly the output of the
// straightforward reference, which sees all records at once and knows
// nothing of watermarks: on-time input in any order has one right answer.
//
// Run many seeds: go test ./operator/window -run '^TestWindowsOutOfOrder$' -seeds=2000
// Replay one:     go test ./operator/window -run '^TestWindowsOutOfOrder$' -seed=N -v

var (
	oooSeed  = flag.Int64("seed", 0, "TestWindowsOutOfOrder: run only this seed")
	oooSeeds = flag.Int("seeds", testkit.DefaultSeeds(25), "TestWindowsOutOfOrder: number of seeds to run (1..N); a fifth of the default under -race")
)

// disordered is one seed's input: records, the steps a source emits them in
// and the delay they respect.
type disordered struct {
	recs     []runtime.Record[ev]
	steps    []step
	maxDelay int64
	grid     int64
}

func (d disordered) String() string {
	return fmt.Sprintf("%d records on a grid of %d, max delay %d, %d steps", len(d.recs), d.grid, d.maxDelay, len(d.steps))
}

// disorderedInput draws a grid, a delay and records on the grid (with some
// at an instant before or after a grid point, so MaxTimestamps and window
// ends are hit exactly), and cuts a permutation within the delay into steps
// of 1..8 records, each followed by the bounded-out-of-orderness watermark.
// n and keys are the number of records and keys, drawn when 0.
func disorderedInput(rng *rand.Rand, n, keys int) disordered {
	grid := []int64{1, 5, 10, 25}[rng.IntN(4)]
	d := disordered{grid: grid, maxDelay: []int64{0, grid, 4 * grid, 37, 100, 250}[rng.IntN(6)]}
	if n == 0 {
		n = 300 + rng.IntN(400)
	}
	if keys == 0 {
		keys = 1 + rng.IntN(4)
	}
	start := []int64{0, -2000, 1_000_000}[rng.IntN(3)]
	span := int64(n/3 + 1) // grid points: about three records per point
	for range n {
		t := start + rng.Int64N(span)*grid
		switch rng.IntN(10) {
		case 0:
			t--
		case 1:
			t++
		}
		d.recs = append(d.recs, runtime.Record[ev]{Value: ev{Key: fmt.Sprintf("k%d", rng.IntN(keys)), V: rng.Int64N(100)}, Time: t})
	}
	timeOf := func(r runtime.Record[ev]) int64 { return r.Time }
	order := testkit.Disorder(rng, d.recs, timeOf, d.maxDelay)
	maxSeen := order[0].Time
	for i := 0; i < len(order); {
		j := min(len(order), i+1+rng.IntN(8))
		st := step{recs: order[i:j]}
		for _, r := range st.recs {
			maxSeen = max(maxSeen, r.Time)
		}
		st.wm = testkit.BoundedWatermark(maxSeen, d.maxDelay)
		d.steps = append(d.steps, st)
		i = j
	}
	return d
}

// reference computes the windows of recs from scratch: every aligned window
// a record falls into, or the sessions of each key's sorted times (records at
// most gap apart are in one session), each result once with event time
// end-1 (end for a session).
func (s spec) reference(recs []runtime.Record[ev]) []out {
	type wk struct {
		key        string
		start, end int64
	}
	acc := map[wk]*out{}
	add := func(k wk, v int64) {
		o := acc[k]
		if o == nil {
			o = &out{Key: k.key, Start: k.start, End: k.end, Time: k.end - 1}
			if s.kind == "session" {
				o.Time = k.end
			}
			acc[k] = o
		}
		o.N++
		o.Sum += v
	}
	if s.kind == "session" {
		byKey := map[string][]runtime.Record[ev]{}
		for _, r := range recs {
			byKey[r.Value.Key] = append(byKey[r.Value.Key], r)
		}
		for key, rs := range byKey {
			slices.SortFunc(rs, func(a, b runtime.Record[ev]) int { return int(a.Time - b.Time) })
			var cur []runtime.Record[ev]
			end := int64(0)
			flush := func() {
				k := wk{key, cur[0].Time, end}
				for _, r := range cur {
					add(k, r.Value.V)
				}
			}
			for _, r := range rs {
				if len(cur) > 0 && r.Time > end {
					flush()
					cur = nil
				}
				if len(cur) == 0 {
					end = r.Time + s.gap
				}
				cur = append(cur, r)
				end = max(end, r.Time+s.gap)
			}
			flush()
		}
	} else {
		slide := s.slide
		if s.kind == "tumbling" {
			slide = s.size
		}
		for _, r := range recs {
			// Every multiple of slide in (t-size, t].
			for st := r.Time - mod(r.Time, slide); st > r.Time-s.size; st -= slide {
				add(wk{r.Value.Key, st, st + s.size}, r.Value.V)
			}
		}
	}
	var res []out
	for _, o := range acc {
		res = append(res, *o)
	}
	return sortOuts(res)
}

// Every window kind, fed on-time input in a random order, without and with
// checkpoints and restores at random points, gives the reference's output,
// drops nothing as late and keeps no state after the final watermark.
func TestWindowsOutOfOrder(t *testing.T) {
	testkit.RunSeeds(t, "go test ./operator/window -run '^TestWindowsOutOfOrder$'", *oooSeed, *oooSeeds, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 14))
		in := disorderedInput(rng, 0, 0)
		for _, s := range windowSpecs {
			want := s.reference(in.recs)
			if len(want) == 0 {
				t.Fatalf("%v: the reference has no windows: the test proves nothing", s)
			}
			newOp := s.newOp(t)
			got, op := runPlain(t, newOp, in.steps)
			if !slices.Equal(got, want) {
				t.Errorf("%v over %v: output differs from the reference\n%s", s, in, diffOuts(got, want))
				continue
			}
			if dropped, _ := op.(window.LateCounter).LateRecords(); dropped != 0 {
				t.Errorf("%v over %v: %d records dropped as late, from input that respects its watermark", s, in, dropped)
			}
			if e, tm := window.StateSize(op); e != 0 || tm != 0 {
				t.Errorf("%v over %v: after the maximum watermark %d state entries and %d timers remain", s, in, e, tm)
			}
			var cuts []int
			for c := rng.IntN(10); c < len(in.steps)-1; c += 1 + rng.IntN(len(in.steps)/3+1) {
				cuts = append(cuts, c)
			}
			if got := runRestoring(t, newOp, in.steps, cuts); !slices.Equal(got, want) {
				t.Errorf("%v over %v, checkpoints after steps %v: restored output differs from the reference\n%s", s, in, cuts, diffOuts(got, want))
			}
		}
	})
}

// Through the runtime (two source subtasks, three window subtasks, hash
// partitioning, checkpoints every millisecond, a transactional sink) with
// two injected failures and restarts, a seed's out-of-order input commits
// exactly the reference's output.
func TestRuntimeWindowsOutOfOrderWithFailures(t *testing.T) {
	// Enough records and keys that every window subtask has some and the
	// run spans checkpoints before each failure.
	in := disorderedInput(rand.New(rand.NewPCG(1, 14)), 3000, 8)
	for _, s := range []spec{
		{kind: "tumbling", size: 100, lateness: 250},
		{kind: "sliding", size: 100, slide: 25, merge: true},
		{kind: "sliding", size: 100, slide: 40},
		{kind: "session", gap: 30},
		{kind: "session", gap: 30, lateness: 200},
	} {
		t.Run(s.String(), func(t *testing.T) {
			want := s.reference(in.recs)
			plan := failAt(in.steps, 0.4, 0.7)
			got, stats := job{spec: s, steps: in.steps, srcPar: 2, winPar: 3, perCheckpoint: 10,
				interval: time.Millisecond, fail: plan}.run(t)
			if !slices.Equal(got, want) {
				t.Fatalf("over %v: committed output differs from the reference\n%s", in, diffOuts(got, want))
			}
			if n := plan.injected(); n != 2 || stats.Restarts != 2 {
				t.Errorf("%d failures injected, %d restarts; want 2 and 2 (the run ended too soon?)", n, stats.Restarts)
			}
		})
	}
}
