package join_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// IntervalUntil over records spread across many cleanup grains (a record
// every 30ms for 18s, out of order by up to 2s, bounds up to 5s after a
// left record): exactly the brute-force result, with a checkpoint taken
// and restored at every cut, and nothing left in state after the final
// watermark.
func TestIntervalUntilOverLongSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	const step = 30 * time.Millisecond
	until := func(l lrec) (int64, bool) {
		return base + l.ID*int64(step) + (l.ID%6)*int64(time.Second) - int64(500*time.Millisecond), l.ID%11 != 0
	}
	for _, lower := range []time.Duration{0, -1700 * time.Millisecond, 400 * time.Millisecond} {
		sp := spec{
			name: "until-buckets",
			build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
				return join.IntervalUntil(lk, rk, id, lower, until, "id-bound", pairOf, opts...)
			},
			matchRec: func(l runtime.Record[lrec], r runtime.Record[rrec]) bool {
				u, ok := until(l.Value)
				return ok && r.Time >= l.Time+int64(lower) && r.Time <= u
			},
			at: maxTime,
		}
		in := generate(rng, 600, 600, 9, step, step, 2*time.Second)
		want := sp.expect(in)
		if len(want) < 200 {
			t.Fatalf("lower %v: %d expected pairs: the input does not exercise the join", lower, len(want))
		}
		newOp := newOp(t, sp.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
		ss := steps(in, 23)
		for cut := range ss {
			h := open[lrec, rrec, pair](t, newOp, nil)
			for _, s := range ss[:cut+1] {
				h.run(t, s)
			}
			if _, err := h.op.Snapshot(1); err != nil {
				t.Fatal(err)
			}
			captured := h.backend.Snapshot()
			committed := slices.Clone(h.out.recs)
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
			if got := timedOf(append(committed, r.out.recs...)); !slices.Equal(got, want) {
				t.Fatalf("lower %v, checkpoint after step %d: %s", lower, cut, diff(got, want))
			}
			if cut == len(ss)-1 {
				if n := entries(t, r.snapshot(t, 2)); len(n) != 0 {
					t.Fatalf("lower %v: state left after the final watermark: %v", lower, n)
				}
			}
		}
	}
}
