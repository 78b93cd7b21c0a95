package join_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// step is what the runtime would hand a join subtask between two
// checkpoints: a left batch, a right batch, then the minimum watermark.
type step struct {
	left  []runtime.Record[lrec]
	right []runtime.Record[rrec]
	wm    int64
}

// steps cuts in into n-record batches per side; each side's watermark lags
// its largest emitted time by in.delay, and the join sees their minimum.
func steps(in input, n int) []step {
	var out []step
	lwm, rwm := runtime.MinWatermark, runtime.MinWatermark
	lmax, rmax := int64(math.MinInt64), int64(math.MinInt64)
	for i, k := 0, 0; i < len(in.left) || k < len(in.right); i, k = i+n, k+n {
		var s step
		if i < len(in.left) {
			s.left = in.left[i:min(i+n, len(in.left))]
			for _, r := range s.left {
				lmax = max(lmax, r.Time)
			}
			lwm = lmax - in.delay
		} else {
			lwm = runtime.MaxWatermark // exhausted
		}
		if k < len(in.right) {
			s.right = in.right[k:min(k+n, len(in.right))]
			for _, r := range s.right {
				rmax = max(rmax, r.Time)
			}
			rwm = rmax - in.delay
		} else {
			rwm = runtime.MaxWatermark
		}
		s.wm = min(lwm, rwm)
		out = append(out, s)
	}
	return out
}

func (h *harness[L, R, O]) run(t testing.TB, s step) {
	t.Helper()
	if len(s.left) > 0 {
		if err := h.op.ProcessBatch(0, runtime.Batch[lrec](s.left)); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.right) > 0 {
		if err := h.op.ProcessBatch(1, runtime.Batch[rrec](s.right)); err != nil {
			t.Fatal(err)
		}
	}
	h.watermark(t, s.wm)
}

// harnessSpecs are the joins the harness tests run, with parameters that
// make buckets, windows and expiry matter at the inputs' time scale (records
// every 1ms per side, out of order by up to 20ms).
func harnessSpecs() []spec {
	return []spec{
		intervalSpec(-7*time.Millisecond, 12*time.Millisecond),
		intervalSpec(3*time.Millisecond, 3*time.Millisecond),
		intervalSpec(-30*time.Millisecond, -10*time.Millisecond),
		windowSpec(25 * time.Millisecond),
		innerSpec(15 * time.Millisecond),
		innerSpec(0),
		untilSpec(0),
		untilSpec(-8 * time.Millisecond),
	}
}

// Driven directly, with out-of-order input and watermarks, every join
// produces exactly the brute-force result, and drops nothing as late.
func TestJoinsMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, sp := range harnessSpecs() {
		t.Run(sp.name, func(t *testing.T) {
			in := generate(rng, 600, 500, 7, time.Millisecond, 1200*time.Microsecond, 20*time.Millisecond)
			if sp.name == "inner[ttl=0s]" {
				in = generate(rng, 150, 120, 7, time.Millisecond, time.Millisecond, 20*time.Millisecond)
			}
			newOp := newOp(t, sp.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			h := open[lrec, rrec, pair](t, newOp, nil)
			for _, s := range steps(in, 17) {
				h.run(t, s)
			}
			h.watermark(t, runtime.MaxWatermark)
			want := sp.expect(in)
			if len(want) < 20 {
				t.Fatalf("only %d expected results: the input does not exercise the join", len(want))
			}
			if got := timedOf(h.out.recs); !slices.Equal(got, want) {
				t.Fatalf("%s", diff(got, want))
			}
			if l, r, _ := join.Late(h.op); l+r != 0 {
				t.Fatalf("dropped %d+%d late records from input that respects its watermarks", l, r)
			}
			// Everything was cleaned at the final watermark (Inner with ttl
			// 0 keeps everything, by design).
			n := entries(t, h.snapshot(t, 1))
			if sp.name != "inner[ttl=0s]" && len(n) != 0 {
				t.Fatalf("state left after the final watermark: %v", n)
			}
		})
	}
}

// A checkpoint at any point loses and duplicates nothing: run to a cut,
// capture the snapshot, keep processing (that output is lost, as an
// exactly-once sink never commits it) and only then encode the snapshot (as
// the asynchronous part may), restore a fresh subtask from it, replay from
// the cut and compare with the brute-force result.
func TestJoinsRestoreAtEveryCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, sp := range harnessSpecs() {
		t.Run(sp.name, func(t *testing.T) {
			in := generate(rng, 300, 300, 5, time.Millisecond, time.Millisecond, 20*time.Millisecond)
			if sp.name == "inner[ttl=0s]" {
				in = generate(rng, 100, 100, 5, time.Millisecond, time.Millisecond, 20*time.Millisecond)
			}
			want := sp.expect(in)
			newOp := newOp(t, sp.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			ss := steps(in, 13)
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
				if got := timedOf(append(committed, r.out.recs...)); !slices.Equal(got, want) {
					t.Fatalf("checkpoint after step %d: %s", cut, diff(got, want))
				}
			}
		})
	}
}

// Snapshots of two subtasks restore into one (rescaling 2 -> 1): every
// bucket and timer lands in the key group of its key, and the result is
// exact.
func TestJoinsRestoreRescaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, sp := range harnessSpecs() {
		t.Run(sp.name, func(t *testing.T) {
			in := generate(rng, 200, 200, 9, time.Millisecond, time.Millisecond, 20*time.Millisecond)
			want := sp.expect(in)
			newOp := newOp(t, sp.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			ranges := []state.KeyGroupRange{state.KeyGroupRangeFor(128, 2, 0), state.KeyGroupRangeFor(128, 2, 1)}
			var hs []*harness[lrec, rrec, pair]
			for _, kg := range ranges {
				h, err := tryOpen[lrec, rrec, pair](newOp, kg, nil)
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			route := func(key int64) int {
				return state.SubtaskForKeyGroup(128, 2, state.KeyGroupFor(state.HashKey(key), 128))
			}
			ss := steps(in, 11)
			cut := len(ss) / 2
			for _, s := range ss[:cut] {
				var parts [2]step
				for _, r := range s.left {
					parts[route(r.Value.Key)].left = append(parts[route(r.Value.Key)].left, r)
				}
				for _, r := range s.right {
					parts[route(r.Value.Key)].right = append(parts[route(r.Value.Key)].right, r)
				}
				for i, h := range hs {
					parts[i].wm = s.wm
					h.run(t, parts[i])
				}
			}
			snaps := [][]byte{hs[0].snapshot(t, 1), hs[1].snapshot(t, 1)}
			committed := append(slices.Clone(hs[0].out.recs), hs[1].out.recs...)
			r := open[lrec, rrec, pair](t, newOp, &checkpoint.SubtaskState{Watermark: ss[cut-1].wm}, snaps...)
			for _, s := range ss[cut:] {
				r.run(t, s)
			}
			r.watermark(t, runtime.MaxWatermark)
			if got := timedOf(append(committed, r.out.recs...)); !slices.Equal(got, want) {
				t.Fatalf("%s", diff(got, want))
			}
		})
	}
}

// Interval bounds are inclusive at both ends, the output's event time is the
// later of the two, and arrival order does not matter.
func TestIntervalBoundsInclusive(t *testing.T) {
	newOp := newOp(t, intervalSpec(-2, 3).build, keyL, keyR)
	want := []timed{{1, 2, 10}, {1, 3, 13}}
	// Rights first, then the left.
	h := open[lrec, rrec, pair](t, newOp, nil)
	h.right(t, rr(1, 7, 7), rr(2, 7, 8), rr(3, 7, 13), rr(4, 7, 14), rr(5, 8, 10))
	if got := timedOf(h.left(t, lr(1, 7, 10))); !slices.Equal(got, want) {
		t.Fatalf("left after rights: %v, want %v", got, want)
	}
	// The left first, then the rights.
	h = open[lrec, rrec, pair](t, newOp, nil)
	h.left(t, lr(1, 7, 10))
	got := timedOf(h.right(t, rr(1, 7, 7), rr(2, 7, 8), rr(3, 7, 13), rr(4, 7, 14), rr(5, 8, 10)))
	if !slices.Equal(got, want) {
		t.Fatalf("rights after left: %v, want %v", got, want)
	}
}

// Negative bounds: r.Time in [l.Time-5, l.Time-1].
func TestIntervalNegativeBounds(t *testing.T) {
	h := open[lrec, rrec, pair](t, newOp(t, intervalSpec(-5, -1).build, keyL, keyR), nil)
	h.right(t, rr(1, 1, 94), rr(2, 1, 95), rr(3, 1, 99), rr(4, 1, 100))
	got := timedOf(h.left(t, lr(1, 1, 100)))
	if want := []timed{{1, 2, 100}, {1, 3, 100}}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Flink's IntervalJoinOperator drops a record whose time is below the
// watermark; one at exactly the watermark is not late and still meets
// partners at the edge of its interval, because buffers are kept until the
// watermark is strictly past their last match.
func TestIntervalLateRecords(t *testing.T) {
	h := open[lrec, rrec, pair](t, newOp(t, intervalSpec(0, 10).build, keyL, keyR), nil)
	h.right(t, rr(1, 1, 105), rr(2, 1, 110))
	h.left(t, lr(9, 1, 100))
	h.watermark(t, 100)
	if got := h.left(t, lr(1, 1, 99)); len(got) != 0 {
		t.Fatalf("a late left record (99 < watermark 100) joined: %v", got)
	}
	got := timedOf(h.left(t, lr(2, 1, 100)))
	if want := []timed{{2, 1, 105}, {2, 2, 110}}; !slices.Equal(got, want) {
		t.Fatalf("left at the watermark: %v, want %v", got, want)
	}
	// Left 9 at 100 matches rights up to 110; at watermark 110 a right at
	// 110 is not late and must still find it.
	h.watermark(t, 110)
	got = timedOf(h.right(t, rr(3, 1, 110)))
	if want := []timed{{2, 3, 110}, {9, 3, 110}}; !slices.Equal(got, want) {
		t.Fatalf("right at watermark 110: %v, want %v", got, want)
	}
	if got := h.right(t, rr(4, 1, 109)); len(got) != 0 {
		t.Fatalf("a late right record joined: %v", got)
	}
	if l, r, err := join.Late(h.op); err != nil || l != 1 || r != 1 {
		t.Fatalf("late counts %d, %d (%v), want 1, 1", l, r, err)
	}
}

// The edges of lateness and cleanup: a record whose last possible partner
// is exactly at the watermark is still stored, and a bucket is kept until
// the watermark is strictly past the last match of its last instant, so a
// partner arriving exactly at the watermark finds it.
func TestIntervalEdgesAtTheWatermark(t *testing.T) {
	// [0, 10]: buckets are 10 wide, [100, 110) is one.
	h := open[lrec, rrec, pair](t, newOp(t, intervalSpec(0, 10).build, keyL, keyR), nil)
	h.watermark(t, 100)
	h.left(t, lr(1, 1, 109)) // the bucket's last instant: matches rights up to 119
	h.watermark(t, 119)
	got := timedOf(h.right(t, rr(1, 1, 119)))
	if want := []timed{{1, 1, 119}}; !slices.Equal(got, want) {
		t.Fatalf("right at watermark 119: %v, want %v (left 109's bucket dropped too early)", got, want)
	}
	// Left 2 at 120 matches rights up to 130: at watermark 130 a right at
	// exactly 130 is not late and must still find it.
	h.watermark(t, 120)
	h.left(t, lr(2, 1, 120)) // hi = 130
	h.watermark(t, 130)
	got = timedOf(h.right(t, rr(2, 1, 130)))
	if want := []timed{{2, 2, 130}}; !slices.Equal(got, want) {
		t.Fatalf("right at watermark 130: %v, want %v", got, want)
	}
	h = open[lrec, rrec, pair](t, newOp(t, intervalSpec(0, 10).build, keyL, keyR), nil)
	h.watermark(t, 100)
	h.left(t, lr(3, 1, 100)) // not late (== watermark), hi = 110
	h.watermark(t, 110)
	h.left(t, lr(4, 1, 110)) // hi = 120 > 110: stored
	h.left(t, lr(5, 1, 100)) // late
	got = timedOf(h.right(t, rr(3, 1, 110)))
	if want := []timed{{3, 3, 110}, {4, 3, 110}}; !slices.Equal(got, want) {
		t.Fatalf("right at watermark 110: %v, want %v", got, want)
	}
	// A left whose hi equals the watermark at its arrival must be stored:
	// a right at exactly the watermark is not late.
	h = open[lrec, rrec, pair](t, newOp(t, intervalSpec(-20, -10).build, keyL, keyR), nil)
	h.watermark(t, 100)
	h.left(t, lr(6, 1, 110)) // matches rights in [90, 100]: only one at 100 can still come
	got = timedOf(h.right(t, rr(4, 1, 100)))
	if want := []timed{{6, 4, 110}}; !slices.Equal(got, want) {
		t.Fatalf("right at the watermark after a left with hi == watermark: %v, want %v", got, want)
	}
}

// A record that can match nothing still to come is joined but not stored;
// everything stored is dropped once the watermark passes it.
func TestIntervalStateIsCleaned(t *testing.T) {
	h := open[lrec, rrec, pair](t, newOp(t, intervalSpec(-10, -5).build, keyL, keyR), nil)
	h.right(t, rr(1, 1, 95))
	h.watermark(t, 100)
	// Left at 103 matches rights in [93, 98]: right 1 at 95. Every right to
	// come is at >= 100, so left 1 is useless afterwards.
	if got := timedOf(h.left(t, lr(1, 1, 103))); !slices.Equal(got, []timed{{1, 1, 103}}) {
		t.Fatalf("got %v", got)
	}
	if n := entries(t, h.snapshot(t, 1)); n["left"] != 0 || n["left-cleanup"] != 0 {
		t.Fatalf("a left record that cannot match anything to come was stored: %v", n)
	}
	h.left(t, lr(2, 1, 110)) // matches rights in [100, 105]: kept until the watermark passes 105
	h.watermark(t, 105)
	if n := entries(t, h.snapshot(t, 2)); n["left"] != 1 {
		t.Fatalf("left 2 dropped while it can still match: %v", n)
	}
	h.watermark(t, 1000)
	if n := entries(t, h.snapshot(t, 3)); len(n) != 0 {
		t.Fatalf("state left after the watermark passed everything: %v", n)
	}
}

// Inner with a ttl joins a pair iff |l.Time - r.Time| < ttl, whichever
// arrives first.
func TestInnerTTLIsSymmetricInEventTime(t *testing.T) {
	newOp := newOp(t, innerSpec(10).build, keyL, keyR)
	rights := []runtime.Record[rrec]{rr(1, 1, 89), rr(2, 1, 90), rr(3, 1, 91), rr(4, 1, 109), rr(5, 1, 110), rr(6, 1, 111)}
	want := []timed{{1, 3, 100}, {1, 4, 109}}
	h := open[lrec, rrec, pair](t, newOp, nil)
	h.left(t, lr(1, 1, 100))
	if got := timedOf(h.right(t, rights...)); !slices.Equal(got, want) {
		t.Fatalf("left first: %v, want %v", got, want)
	}
	h = open[lrec, rrec, pair](t, newOp, nil)
	h.right(t, rights...)
	if got := timedOf(h.left(t, lr(1, 1, 100))); !slices.Equal(got, want) {
		t.Fatalf("rights first: %v, want %v", got, want)
	}
	// Expired state is cleaned: after the watermark passes every record's
	// expiry, nothing is left.
	h.watermark(t, 200)
	if n := entries(t, h.snapshot(t, 1)); len(n) != 0 {
		t.Fatalf("state left after every record expired: %v", n)
	}
}

// Inner with ttl 0 keeps every record and joins even records far behind the
// watermark: nothing is ever cleaned, so nothing is late.
func TestInnerWithoutTTLKeepsEverything(t *testing.T) {
	h := open[lrec, rrec, pair](t, newOp(t, innerSpec(0).build, keyL, keyR), nil)
	h.left(t, lr(1, 1, 5))
	h.watermark(t, 1_000_000)
	got := timedOf(h.right(t, rr(1, 1, 2), rr(2, 1, 2_000_000)))
	if want := []timed{{1, 1, 5}, {1, 2, 2_000_000}}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	h.watermark(t, runtime.MaxWatermark)
	if n := entries(t, h.snapshot(t, 1)); n["left"] != 1 || n["right"] != 1 {
		t.Fatalf("state %v, want both sides kept", n)
	}
	if w := join.BucketWidth(h.op); w != 0 {
		t.Fatalf("bucket width %d, want 0 (one bucket per key)", w)
	}
}

// A self-join (L == R) tells its inputs apart by input index.
func TestSelfJoinSameType(t *testing.T) {
	build := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[lrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.Interval(lk, rk, id, 0, 0, func(_ int64, a, b lrec) pair { return pair{a.ID, b.ID} }, opts...)
	}
	h := open[lrec, lrec, pair](t, newOp(t, build, keyL, keyL), nil)
	if err := h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(1, 1, 10)}); err != nil {
		t.Fatal(err)
	}
	if err := h.op.ProcessBatch(1, runtime.Batch[lrec]{lr(2, 1, 10)}); err != nil {
		t.Fatal(err)
	}
	if got := timedOf(h.out.recs); !slices.Equal(got, []timed{{1, 2, 10}}) {
		t.Fatalf("got %v, want left 1 with right 2", got)
	}
}

// A batch of the wrong type, or on an input a join does not have, is an
// error, not a panic.
func TestWrongInputIsAnError(t *testing.T) {
	for _, sp := range []spec{intervalSpec(0, 1), windowSpec(10)} {
		h := open[lrec, rrec, pair](t, newOp(t, sp.build, keyL, keyR), nil)
		for _, c := range []struct {
			input int
			batch runtime.Records
		}{{0, runtime.Batch[rrec]{}}, {1, runtime.Batch[lrec]{}}, {2, runtime.Batch[lrec]{}}} {
			err := h.op.ProcessBatch(c.input, c.batch)
			if err == nil {
				t.Errorf("%s: input %d with a %T: no error", sp.name, c.input, c.batch)
				continue
			}
			// A wrong type is a mismatch no restart cures, naming both types.
			var tm *runtime.TypeMismatchError
			if c.input < 2 && (!errors.As(err, &tm) || !errors.Is(err, runtime.ErrUnrecoverable) || !strings.Contains(err.Error(), "join_test.") || tm.Want == tm.Got) {
				t.Errorf("%s: input %d with a %T: %v, want a TypeMismatchError naming both types", sp.name, c.input, c.batch, err)
			}
		}
	}
}

// A checkpoint of a join with other parameters is refused with
// state.ErrStateMismatch, naming the parameters, instead of being misread.
func TestRestoreWithChangedParametersRefused(t *testing.T) {
	cases := []struct {
		name     string
		from, to spec
		want     string
	}{
		{"interval upper", intervalSpec(0, 10*time.Second), intervalSpec(0, 20*time.Second), "upper=20s"},
		{"interval lower", intervalSpec(0, 10*time.Second), intervalSpec(-time.Second, 10*time.Second), "lower=-1s"},
		{"window size", windowSpec(10 * time.Second), windowSpec(5 * time.Second), "size=5s"},
		{"ttl", innerSpec(time.Minute), innerSpec(time.Hour), "ttl=1h0m0s"},
		{"ttl to forever", innerSpec(time.Minute), innerSpec(0), "ttl=0s"},
		{"interval to inner", intervalSpec(-time.Minute, time.Minute), innerSpec(time.Minute), "inner-join"},
		{"record codec", intervalSpec(0, 10*time.Second), intervalSpec(0, 10*time.Second), "json:join_test.lrec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := open[lrec, rrec, pair](t, newOp(t, c.from.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{})), nil)
			h.left(t, lr(1, 1, base))
			h.right(t, rr(1, 1, base+int64(2*time.Hour)))
			snap := h.snapshot(t, 1)
			toOpts := []join.Option{join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{})}
			if c.name == "record codec" {
				toOpts = toOpts[1:] // left records with the default JSON codec
			}
			_, err := tryOpen[lrec, rrec, pair](newOp(t, c.to.build, keyL, keyR, toOpts...), fullRange(), &checkpoint.SubtaskState{}, snap)
			if !errors.Is(err, state.ErrStateMismatch) {
				t.Fatalf("restore = %v, want an error wrapping state.ErrStateMismatch", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name the new parameter %q", err, c.want)
			}
		})
	}
	// Switching a window join to a cogroup of the same size keeps the state.
	h := open[lrec, rrec, pair](t, newOp(t, windowSpec(time.Second).build, keyL, keyR), nil)
	h.left(t, lr(1, 1, base))
	snap := h.snapshot(t, 1)
	cogroup := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.WindowCoGroup(lk, rk, id, time.Second, func(int64, windowT, []lrec, []rrec, func(pair)) {}, opts...)
	}
	if _, err := tryOpen[lrec, rrec, pair](newOp(t, cogroup, keyL, keyR), fullRange(), &checkpoint.SubtaskState{}, snap); err != nil {
		t.Fatalf("a cogroup of the same window size refused a window join's state: %v", err)
	}
}

// Mistakes in building a join are pipeline errors, reported by Plan.
func TestBuilderErrors(t *testing.T) {
	type keyed struct {
		l stream.KeyedStream[lrec, int64]
		r stream.KeyedStream[rrec, int64]
		p *stream.Pipeline
	}
	mk := func() keyed {
		p := stream.New("test")
		return keyed{
			l: stream.KeyBy(stream.From[lrec](p, "left", nopSource[lrec]{}), keyL),
			r: stream.KeyBy(stream.From[rrec](p, "right", nopSource[rrec]{}), keyR),
			p: p,
		}
	}
	cases := []struct {
		name  string
		build func(k keyed) stream.Stream[pair]
		want  string
	}{
		{"lower after upper", func(k keyed) stream.Stream[pair] {
			return join.Interval(k.l, k.r, "j", time.Second, 0, pairOf)
		}, "lower bound 1s is after the upper bound 0s"},
		{"lower bound out of range", func(k keyed) stream.Stream[pair] {
			return join.Interval(k.l, k.r, "j", math.MinInt64, 0, pairOf)
		}, "the lower bound -2562047h47m16.854775808s is out of range"},
		{"negative ttl", func(k keyed) stream.Stream[pair] { return join.Inner(k.l, k.r, "j", -time.Second, pairOf) }, "ttl -1s is negative"},
		{"zero window", func(k keyed) stream.Stream[pair] { return join.Window(k.l, k.r, "j", 0, pairOf) }, "window size 0s must be positive"},
		{"nil output", func(k keyed) stream.Stream[pair] {
			return join.Interval[lrec, rrec, int64, pair](k.l, k.r, "j", 0, 1, nil)
		}, "output function is nil"},
		{"codec of another type", func(k keyed) stream.Stream[pair] {
			return join.Interval(k.l, k.r, "j", 0, 1, pairOf, join.LeftCodec(rrecCodec{}))
		}, "left codec join_test.rrecCodec does not encode join_test.lrec"},
		{"different key codecs", func(k keyed) stream.Stream[pair] {
			k.r.KeyCodec = state.JSONCodec[int64]()
			return join.Window(k.l, k.r, "j", time.Second, pairOf)
		}, `left key codec "int64" differs from the right key codec "json:int64"`},
		{"different pipelines", func(k keyed) stream.Stream[pair] {
			other := mk()
			return join.Inner(k.l, other.r, "j", 0, pairOf)
		}, "different pipelines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := mk()
			out := c.build(k)
			stream.To(out, "sink", discardSink[pair]{})
			_, err := k.p.Plan()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Plan = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// Event times at the ends of int64 neither wrap around nor panic.
func TestTimeArithmeticAtTheEdges(t *testing.T) {
	if got := join.SatAdd(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("SatAdd(max-1, 5) = %d", got)
	}
	if got := join.SatAdd(math.MinInt64+1, -5); got != math.MinInt64 {
		t.Errorf("SatAdd(min+1, -5) = %d", got)
	}
	if got := join.FloorDiv(-1, 10); got != -1 {
		t.Errorf("FloorDiv(-1, 10) = %d", got)
	}
	for _, c := range []struct{ t, size, start, last int64 }{
		{0, 10, 0, 9}, {-1, 10, -10, -1}, {-10, 10, -10, -1}, {9, 10, 0, 9},
		{math.MaxInt64, 10, math.MaxInt64 - 7, math.MaxInt64}, // 2^63-1 = 7 mod 10: the window reaches past the end
		{math.MinInt64, 10, math.MinInt64, math.MinInt64 + 7},
	} {
		if s, l := join.WindowOf(c.t, c.size); s != c.start || l != c.last {
			t.Errorf("WindowOf(%d, %d) = [%d, %d], want [%d, %d]", c.t, c.size, s, l, c.start, c.last)
		}
	}
	const hi, lo = math.MaxInt64, math.MinInt64
	// MinInt64 is 6 mod 7: its window's last instant is MinInt64 itself,
	// which even the minimum watermark has reached (a watermark W promises
	// nothing at or below W follows), so that record is late for a window
	// join, as for window.Tumbling.
	if _, last := join.WindowOf(lo, 7); last != lo {
		t.Fatalf("WindowOf(MinInt64, 7) ends at %d", last)
	}
	for _, c := range []struct {
		sp   spec
		want []timed
	}{
		// Only the pairs at equal times are within any interval: the
		// others are 2^64-1 apart.
		{intervalSpec(lo+1, hi), []timed{{1, 1, hi}, {2, 2, lo}}},
		{intervalSpec(-1, 1), []timed{{1, 1, hi}, {2, 2, lo}}},
		{innerSpec(hi), []timed{{1, 1, hi}, {2, 2, lo}}},
		{innerSpec(0), []timed{{1, 1, hi}, {1, 2, hi}, {2, 1, hi}, {2, 2, lo}}},
		{windowSpec(7), []timed{{1, 1, hi}}},
	} {
		h := open[lrec, rrec, pair](t, newOp(t, c.sp.build, keyL, keyR), nil)
		h.left(t, lr(1, 1, hi), lr(2, 1, lo))
		got := slices.Clone(h.right(t, rr(1, 1, hi), rr(2, 1, lo)))
		got = append(got, h.watermark(t, 0)...)
		got = append(got, h.watermark(t, runtime.MaxWatermark)...)
		if g := timedOf(got); !slices.Equal(g, sorted(c.want)) {
			t.Errorf("%s at the edges of time: %v, want %v", c.sp.name, g, sorted(c.want))
		}
	}
}

// A window [start, start+size) fires when the watermark reaches its last
// instant, emitting the cross product of its two sides with that event time;
// a record for a window that fired is late, dropped and counted.
func TestWindowFiresAtLastInstant(t *testing.T) {
	h := open[lrec, rrec, pair](t, newOp(t, windowSpec(10).build, keyL, keyR), nil)
	h.left(t, lr(1, 1, 0), lr(2, 1, 9), lr(3, 2, 5), lr(4, 1, 10))
	h.right(t, rr(1, 1, 3), rr(2, 1, 4), rr(3, 3, 5))
	if got := h.watermark(t, 8); len(got) != 0 {
		t.Fatalf("watermark 8 fired %v before [0,10) ended", got)
	}
	// Not late yet: the window's last instant is 9.
	h.right(t, rr(4, 1, 8))
	got := timedOf(h.watermark(t, 9))
	want := []timed{{1, 1, 9}, {1, 2, 9}, {1, 4, 9}, {2, 1, 9}, {2, 2, 9}, {2, 4, 9}}
	if !slices.Equal(got, want) {
		t.Fatalf("window [0,10): %v, want %v (keys 2 and 3 have one side only)", got, want)
	}
	h.right(t, rr(5, 1, 9)) // late: [0,10) fired
	h.right(t, rr(6, 1, 10))
	got = timedOf(h.watermark(t, runtime.MaxWatermark))
	if want := []timed{{4, 6, 19}}; !slices.Equal(got, want) {
		t.Fatalf("window [10,20): %v, want %v", got, want)
	}
	if l, r, _ := join.Late(h.op); l != 0 || r != 1 {
		t.Fatalf("late counts %d, %d, want 0, 1", l, r)
	}
}

// WindowCoGroup is called for every key with records on either side, with
// the window and both lists; emitted values get the window's last instant.
// Nexmark q8's shape: the persons (left) of a window who opened an auction
// (right) in the same window, each once however many auctions.
func TestWindowCoGroup(t *testing.T) {
	type call struct {
		key  int64
		w    windowT
		l, r int
	}
	var calls []call
	build := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.WindowCoGroup(lk, rk, id, 10, func(key int64, w windowT, ls []lrec, rs []rrec, emit func(pair)) {
			calls = append(calls, call{key, w, len(ls), len(rs)})
			if len(ls) > 0 && len(rs) > 0 { // a person with at least one auction
				emit(pair{ls[0].ID, -1})
			}
		}, opts...)
	}
	h := open[lrec, rrec, pair](t, newOp(t, build, keyL, keyR), nil)
	h.left(t, lr(1, 1, 2), lr(2, 2, 3))
	h.right(t, rr(1, 1, 4), rr(2, 1, 5), rr(3, 3, 6))
	got := timedOf(h.watermark(t, 9))
	if want := []timed{{1, -1, 9}}; !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
	slices.SortFunc(calls, func(a, b call) int { return int(a.key - b.key) })
	w := windowT{Start: 0, End: 10}
	if want := []call{{1, w, 1, 2}, {2, w, 1, 0}, {3, w, 0, 1}}; !slices.Equal(calls, want) {
		t.Fatalf("calls %+v, want %+v", calls, want)
	}
}

// The buffers a restore brings back go when the watermark passes their
// cleanup time, as those stored since: the bucket index is rebuilt from them
// at Open (no timer per key and bucket is kept).
func TestIntervalBuffersOfARestoreGo(t *testing.T) {
	mk := newOp(t, intervalSpec(0, 100).build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
	h := open[lrec, rrec, pair](t, mk, nil)
	h.left(t, lr(1, 5, 10))
	h.right(t, rr(2, 6, 20))
	snap := h.snapshot(t, 1)
	if n := entries(t, snap); n["left"] != 1 || n["right"] != 1 {
		t.Fatalf("snapshot entries %v, want a left and a right buffer", n)
	}
	r := open[lrec, rrec, pair](t, mk, &checkpoint.SubtaskState{Watermark: 0}, snap)
	r.left(t, lr(3, 7, 30))
	if got := r.watermark(t, 1_000); len(got) != 0 {
		t.Fatalf("the watermark emitted %v", got)
	}
	for _, c := range []struct {
		key, ts int64
		left    bool
	}{{5, 10, true}, {6, 20, false}, {7, 30, true}} {
		var n int
		if c.left {
			recs, err := join.BufferedLeft[lrec, rrec, int64, pair](r.op, c.key, c.ts)
			if err != nil {
				t.Fatal(err)
			}
			n = len(recs)
		} else {
			recs, err := join.BufferedRight[lrec, rrec, int64, pair](r.op, c.key, c.ts)
			if err != nil {
				t.Fatal(err)
			}
			n = len(recs)
		}
		if n != 0 {
			t.Errorf("key %d at %d: %d records still buffered after the watermark passed their cleanup time", c.key, c.ts, n)
		}
	}
	if n := entries(t, r.snapshot(t, 2)); len(n) != 0 {
		t.Errorf("snapshot after the cleanup holds %v", n)
	}
}
