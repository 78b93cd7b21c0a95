package window_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// specs are the windows the randomized tests cover: every kind, sliding with
// size a multiple of slide and not, with and without panes, with size <
// slide (gaps), with and without allowed lateness.
var windowSpecs = []spec{
	{kind: "tumbling", size: 100},
	{kind: "tumbling", size: 100, lateness: 250},
	{kind: "sliding", size: 100, slide: 25, merge: true},
	{kind: "sliding", size: 100, slide: 25},
	{kind: "sliding", size: 100, slide: 40, merge: true}, // panes of 20
	{kind: "sliding", size: 100, slide: 40},
	{kind: "sliding", size: 30, slide: 50, merge: true}, // gaps between windows
	{kind: "sliding", size: 30, slide: 50},
	{kind: "sliding", size: 100, slide: 25, merge: true, lateness: 150},
	{kind: "sliding", size: 90, slide: 60, lateness: 100},
	{kind: "session", gap: 30},
	{kind: "session", gap: 30, lateness: 200},
}

// inputs: in order within the watermark delay (no late records), and with
// records behind the watermark, some within the allowed lateness and some
// beyond.
func inputs(seed uint64) map[string]gen {
	return map[string]gen{
		"in-delay": {n: 3000, keys: 5, batch: 17, stepT: 3, jitter: 40, start: -2000, seed: seed},
		"late":     {n: 3000, keys: 5, batch: 17, stepT: 3, jitter: 40, lateFrac: 0.05, lateBy: 600, start: -2000, seed: seed},
		"sparse":   {n: 800, keys: 7, batch: 5, stepT: 11, jitter: 25, lateFrac: 0.02, lateBy: 300, start: 5, seed: seed},
	}
}

// Every window kind's output equals the model's, without and with
// checkpoints and restores at random points (each snapshot encoded after the
// operator went on processing, as an asynchronous checkpoint write is).
func TestWindowsMatchModel(t *testing.T) {
	for _, s := range windowSpecs {
		t.Run(s.String(), func(t *testing.T) {
			newOp := s.newOp(t)
			for name, g := range inputs(uint64(len(s.String()))) {
				steps := g.steps()
				want, late := s.expected(steps)
				if len(want) == 0 {
					t.Fatalf("%s: the model produced no output", name)
				}
				got, op := runPlain(t, newOp, steps)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: output differs from the model\n%s", name, diffOuts(got, want))
				}
				if dropped, _ := op.(window.LateCounter).LateRecords(); dropped != int64(late) {
					t.Errorf("%s: %d late records dropped, the model says %d", name, dropped, late)
				}
				if name == "late" && late == 0 {
					t.Errorf("%s: no late records: the input does not test lateness", name)
				}
				if e, tm := window.StateSize(op); e != 0 || tm != 0 {
					t.Errorf("%s: after the maximum watermark %d state entries and %d timers remain", name, e, tm)
				}
				rng := rand.New(rand.NewPCG(uint64(len(name)), 3))
				for trial := range 4 {
					var cuts []int
					for c := rng.IntN(20); c < len(steps)-1; c += 1 + rng.IntN(len(steps)/5) {
						cuts = append(cuts, c)
					}
					if got := runRestoring(t, newOp, steps, cuts); !slices.Equal(got, want) {
						t.Fatalf("%s trial %d (checkpoints after steps %v): restored output differs from the model\n%s", name, trial, cuts, diffOuts(got, want))
					}
				}
			}
		})
	}
}

// Every window kind's output on the pebble backend equals the model's. That
// backend encodes a value when it is written, so an operator that changes a
// state's value in place after writing it (the memory backend keeps the
// value itself) must write it again.
func TestWindowsMatchModelOnPebble(t *testing.T) {
	for _, s := range windowSpecs {
		t.Run(s.String(), func(t *testing.T) {
			newOp := s.newOp(t)
			for _, name := range []string{"in-delay", "late"} {
				steps := inputs(uint64(len(s.String())))[name].steps()
				want, _ := s.expected(steps)
				env, err := state.NewLSMEnv(state.LSMOptions{Dir: t.TempDir(), CacheBytes: 8 << 20}, "job")
				if err != nil {
					t.Fatal(err)
				}
				b := state.NewLSMBackend(context.Background(), env, opID, 128, fullRange())
				h := openOn[ev, res](t, newOp, b, fullRange(), nil)
				for _, st := range steps {
					h.process(t, st.recs...)
					h.watermark(t, st.wm)
				}
				h.watermark(t, runtime.MaxWatermark)
				err = b.Err()
				_ = h.op.Close()
				if cerr := b.Close(); cerr != nil {
					t.Error(cerr)
				}
				env.Close()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got := outsOf(h.out.recs); !slices.Equal(got, want) {
					t.Fatalf("%s: output on the pebble backend differs from the model\n%s", name, diffOuts(got, want))
				}
			}
		})
	}
}

// Sliding windows with and without Merge (panes or a state entry per window)
// give the same output.
func TestSlidingPanesEqualPerWindow(t *testing.T) {
	for _, sw := range [][2]int64{{100, 25}, {100, 30}, {60, 45}, {20, 50}} {
		steps := inputs(9)["late"].steps()
		a := spec{kind: "sliding", size: sw[0], slide: sw[1], lateness: 120}
		b := a
		b.merge = true
		ga, _ := runPlain(t, a.newOp(t), steps)
		gb, _ := runPlain(t, b.newOp(t), steps)
		if !slices.Equal(ga, gb) {
			t.Fatalf("sliding %v: per-window and pane output differ\n%s", sw, diffOuts(gb, ga))
		}
	}
}
