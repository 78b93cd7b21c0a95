package join_test

import (
	"cmp"
	"errors"
	"fmt"
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

// This file tests join.UniqueLeft on IntervalUntil: declared unique left
// keys change what the join keeps, never what it emits.

// uniqueLower is the lower bound of the unique-left tests: a right record
// may come up to 8ms before its left one.
const uniqueLower = -8 * time.Millisecond

// uniqueUntil is each left record's bound, from its id (= its key): from
// 5ms before the record's nominal time (an empty interval) to 25ms after,
// and NULL for every ninth id, as untilSpec.
func uniqueUntil(l lrec) (int64, bool) {
	return base + l.ID*int64(time.Millisecond) + (l.ID%4)*int64(10*time.Millisecond) - int64(5*time.Millisecond), l.ID%9 != 0
}

// uniqueSpec is untilSpec(uniqueLower) with the bound above and, when
// unique, the UniqueLeft declaration.
func uniqueSpec(unique bool) spec {
	sp := untilSpec(uniqueLower)
	build := sp.build
	sp.build = func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		if unique {
			opts = append(slices.Clone(opts), join.UniqueLeft())
		}
		return build(lk, rk, id, opts...)
	}
	if unique {
		sp.name += "/unique-left"
	}
	return sp
}

// uniqueInput is an input whose left record i has key i (unique keys) and
// nominal time base + i ms; right records come every rightStep, each with
// the key of a left record whose interval its time may fall in (up to 35ms
// before its time, up to 8ms after: before its left record's). Records are
// out of order by less than delay, as generate's.
func uniqueInput(rng *rand.Rand, nLeft, nRight int, rightStep, delay time.Duration) input {
	in := generate(rng, nLeft, nRight, 1, time.Millisecond, rightStep, delay)
	ms := int64(time.Millisecond)
	for i := range in.left {
		in.left[i].Value.Key = int64(i)
	}
	for i := range in.right {
		nominal := (in.right[i].Time - base) / ms
		in.right[i].Value.Key = min(max(nominal-rng.Int64N(36)+8, 0), int64(nLeft-1))
	}
	return in
}

// arrival is one record as the join receives it: side 0 (left) or 1, at
// arrival time at (which orders the records; the watermark lags the latest
// arrival by the input's delay).
type arrival struct {
	side int
	l    runtime.Record[lrec]
	r    runtime.Record[rrec]
	at   int64
}

// arrivals is a two-sided input in arrival order, cut into steps of n
// records: each step a left batch, a right batch, then the watermark (the
// last arrival minus delay). lateL and lateR are the ids of the records
// that are below the watermark when they come, which the join must drop;
// atWM counts those exactly at it, which it must not.
type arrivals struct {
	in           input // the records that are not late
	steps        []step
	lateL, lateR map[int64]bool
	atWM         int
	// leftStep and rightStep are the step index at which each record came.
	leftStep, rightStep map[int64]int
}

// shuffledInput makes a unique-key input (uniqueInput's) arrive out of
// order: each record at its time plus up to delay (whole ms; a quarter
// exactly delay, so some are exactly at the watermark), and every 41st right
// record and 67th left one far later (late, if the watermark passed them).
func shuffledInput(rng *rand.Rand, nLeft, nRight int, delay time.Duration, n int) arrivals {
	raw := uniqueInput(rng, nLeft, nRight, 1500*time.Microsecond, time.Millisecond)
	ms := int64(time.Millisecond)
	d := int64(delay)
	jitter := func(i int, every int) int64 {
		if i%every == every-1 {
			return d + (5+rng.Int64N(40))*ms
		}
		if rng.IntN(4) == 0 {
			return d // exactly at the watermark, if first of its step
		}
		return rng.Int64N(d/ms+1) * ms
	}
	var evs []arrival
	for i, l := range raw.left {
		evs = append(evs, arrival{side: 0, l: l, at: l.Time + jitter(i, 67)})
	}
	for i, r := range raw.right {
		evs = append(evs, arrival{side: 1, r: r, at: r.Time + jitter(i, 41)})
	}
	slices.SortStableFunc(evs, func(a, b arrival) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.side, b.side))
	})
	a := arrivals{in: input{delay: d}, lateL: map[int64]bool{}, lateR: map[int64]bool{}, leftStep: map[int64]int{}, rightStep: map[int64]int{}}
	wm := runtime.MinWatermark
	for i := 0; i < len(evs); i += n {
		var s step
		for _, e := range evs[i:min(i+n, len(evs))] {
			if e.side == 0 {
				s.left = append(s.left, e.l)
				a.leftStep[e.l.Value.ID] = len(a.steps)
				switch {
				case e.l.Time < wm:
					a.lateL[e.l.Value.ID] = true
				default:
					if e.l.Time == wm {
						a.atWM++
					}
					a.in.left = append(a.in.left, e.l)
				}
			} else {
				s.right = append(s.right, e.r)
				a.rightStep[e.r.Value.ID] = len(a.steps)
				switch {
				case e.r.Time < wm:
					a.lateR[e.r.Value.ID] = true
				default:
					if e.r.Time == wm {
						a.atWM++
					}
					a.in.right = append(a.in.right, e.r)
				}
			}
		}
		// The watermark promises no record below it: the next step's
		// first arrival minus the delay.
		next := evs[len(evs)-1].at
		if i+n < len(evs) {
			next = evs[i+n].at
		}
		wm = max(wm, next-d)
		s.wm = wm
		a.steps = append(a.steps, s)
	}
	a.steps = append(a.steps, step{wm: runtime.MaxWatermark})
	return a
}

// The pairs of want that exercise the edges: a right record that came in
// an earlier step than its left one, one exactly at the left's bound, and
// one exactly at its lower bound.
func uniqueEdges(t *testing.T, a arrivals, want []timed) (early, atUntil, atLower int) {
	t.Helper()
	left := map[int64]runtime.Record[lrec]{}
	for _, l := range a.in.left {
		left[l.Value.ID] = l
	}
	right := map[int64]runtime.Record[rrec]{}
	for _, r := range a.in.right {
		right[r.Value.ID] = r
	}
	for _, p := range want {
		l, r := left[p.L], right[p.R]
		if a.rightStep[p.R] < a.leftStep[p.L] {
			early++
		}
		if u, _ := uniqueUntil(l.Value); r.Time == u {
			atUntil++
		}
		if r.Time == l.Time+int64(uniqueLower) {
			atLower++
		}
	}
	return early, atUntil, atLower
}

// On an input whose left keys are unique, out of order within the
// watermark's delay on both sides (right records coming before their left
// one, records exactly at the watermark and at both bounds) and with late
// records on both sides, the join with UniqueLeft emits exactly what the
// join without it emits, and both the brute-force result over the records
// that were not late. At every step the unique join keeps no more right
// records than the other, and, over the run, far fewer.
func TestUniqueLeftSameOutputLessState(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	a := shuffledInput(rng, 600, 400, 20*time.Millisecond, 23)
	want := uniqueSpec(false).expect(a.in)
	early, atUntil, atLower := uniqueEdges(t, a, want)
	t.Logf("%d pairs; %d right records came before their left one, %d at the bound, %d at the lower bound; %d+%d late; %d at the watermark",
		len(want), early, atUntil, atLower, len(a.lateL), len(a.lateR), a.atWM)
	if len(want) < 100 || early == 0 || atUntil == 0 || atLower == 0 || len(a.lateL) == 0 || len(a.lateR) == 0 || a.atWM == 0 {
		t.Fatal("the input does not exercise the join's edges")
	}
	opts := []join.Option{join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{})}
	plain := open[lrec, rrec, pair](t, newOp(t, uniqueSpec(false).build, keyL, keyR, opts...), nil)
	unique := open[lrec, rrec, pair](t, newOp(t, uniqueSpec(true).build, keyL, keyR, opts...), nil)
	var plainBytes, uniqueBytes int
	for i, s := range a.steps {
		plain.run(t, s)
		unique.run(t, s)
		if s.wm == runtime.MaxWatermark {
			break
		}
		pn, un := stateOf(t, plain.snapshot(t, int64(i+1))), stateOf(t, unique.snapshot(t, int64(i+1)))
		if un.entries["right"] > pn.entries["right"] || un.entries["left"] != pn.entries["left"] {
			t.Fatalf("step %d: the unique join keeps %v, the other %v: want the same left keys and no more right ones", i, un.entries, pn.entries)
		}
		plainBytes += pn.bytes["right"]
		uniqueBytes += un.bytes["right"]
	}
	if got := timedOf(plain.out.recs); !slices.Equal(got, want) {
		t.Fatalf("without UniqueLeft: %s", diff(got, want))
	}
	if got := timedOf(unique.out.recs); !slices.Equal(got, want) {
		t.Fatalf("with UniqueLeft: %s", diff(got, want))
	}
	t.Logf("right state over the steps: %d bytes without UniqueLeft, %d with it", plainBytes, uniqueBytes)
	if uniqueBytes*2 > plainBytes {
		t.Fatalf("the unique join kept %d bytes of right records over the run, the other %d: want less than half", uniqueBytes, plainBytes)
	}
	for _, h := range []*harness[lrec, rrec, pair]{plain, unique} {
		if n := entries(t, h.snapshot(t, 1000)); len(n) != 0 {
			t.Fatalf("state left after the final watermark: %v", n)
		}
	}
}

// stateSize is a snapshot's entries (keys) and payload bytes per state.
type stateSize struct{ entries, bytes map[string]int }

func stateOf(t *testing.T, snap []byte) stateSize {
	t.Helper()
	info, err := state.Inspect(snap)
	if err != nil {
		t.Fatal(err)
	}
	s := stateSize{entries: map[string]int{}, bytes: map[string]int{}}
	for _, sec := range info.Sections {
		for _, st := range sec.States {
			s.entries[st.Name] += st.Entries
			s.bytes[st.Name] += st.Bytes
		}
	}
	return s
}

// The saving, exactly: a right record that finds its key's left record
// held is joined and not kept, and a left record takes the right records
// that waited for it out of state; without UniqueLeft both are kept until
// the watermark passes them.
func TestUniqueLeftKeepsNoRightRecordItsLeftOneSaw(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := base
	bounds := map[int64]int64{1: t0 + 1000*ms, 2: t0 + 1000*ms}
	until := func(l lrec) (int64, bool) { u, ok := bounds[l.ID]; return u, ok }
	build := func(unique bool) func() runtime.Operator {
		b := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			if unique {
				opts = append(opts, join.UniqueLeft())
			}
			return join.IntervalUntil(lk, rk, id, 0, until, "bound", pairOf, opts...)
		}
		return newOp(t, b, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
	}
	var rights, waiting []runtime.Record[rrec]
	var want []timed
	for i := range int64(200) {
		// Key 1: the left record first; key 2: the right records first.
		rights = append(rights, rr(i, 1, t0+i*ms))
		waiting = append(waiting, rr(1000+i, 2, t0+i*ms))
		want = append(want, timed{1, i, t0 + i*ms}, timed{2, 1000 + i, t0 + i*ms})
	}
	want = sorted(want)
	sizes := map[bool]stateSize{}
	for _, unique := range []bool{false, true} {
		h := open[lrec, rrec, pair](t, build(unique), nil)
		h.left(t, lr(1, 1, t0))
		h.right(t, rights...)
		h.right(t, waiting...)
		before := stateOf(t, h.snapshot(t, 1))
		h.left(t, lr(2, 2, t0))
		h.watermark(t, t0)
		sizes[unique] = stateOf(t, h.snapshot(t, 2))
		if got := timedOf(h.out.recs); !slices.Equal(got, want) {
			t.Fatalf("unique=%v: %s", unique, diff(got, want))
		}
		if unique && before.entries["right"] != 1 {
			t.Fatalf("before key 2's left record came: the unique join keeps right records of %d keys, want 1 (key 2's, waiting)", before.entries["right"])
		}
	}
	if n := sizes[true].entries; n["left"] != 2 || n["right"] != 0 {
		t.Fatalf("with UniqueLeft: %v, want both left records and no right record", n)
	}
	if n := sizes[false].entries; n["left"] != 2 || n["right"] != 2 {
		t.Fatalf("without UniqueLeft: %v, want both left records and the right records of both keys", n)
	}
	if sizes[false].bytes["right"] < 400*4 {
		t.Fatalf("without UniqueLeft the 400 right records take %d bytes: the comparison proves nothing", sizes[false].bytes["right"])
	}
}

// A second left record of a key while the first is held fails the job
// with an error wrapping runtime.ErrUnrecoverable that names the key,
// whether it comes in a later batch or the same one; without UniqueLeft
// both join.
func TestUniqueLeftDuplicateKeyFails(t *testing.T) {
	ms := int64(time.Millisecond)
	bounds := map[int64]int64{1: base + 100*ms, 2: base + 200*ms}
	until := func(l lrec) (int64, bool) { u, ok := bounds[l.ID]; return u, ok }
	build := func(unique bool) func() runtime.Operator {
		b := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			if unique {
				opts = append(opts, join.UniqueLeft())
			}
			return join.IntervalUntil(lk, rk, id, 0, until, "bound", pairOf, opts...)
		}
		return newOp(t, b, keyL, keyR)
	}
	check := func(err error) {
		t.Helper()
		if !errors.Is(err, runtime.ErrUnrecoverable) {
			t.Fatalf("a second left record of key 4242: %v, want an error wrapping runtime.ErrUnrecoverable", err)
		}
		if !strings.Contains(err.Error(), "share key 4242") {
			t.Fatalf("the error does not name the key 4242: %v", err)
		}
		t.Logf("refused: %v", err)
	}
	h := open[lrec, rrec, pair](t, build(true), nil)
	h.left(t, lr(1, 4242, base), lr(3, 7, base))
	h.watermark(t, base+10*ms)
	check(h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(2, 4242, base+20*ms)}))

	h = open[lrec, rrec, pair](t, build(true), nil)
	check(h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(1, 4242, base), lr(2, 4242, base+20*ms)}))

	h = open[lrec, rrec, pair](t, build(false), nil)
	h.left(t, lr(1, 4242, base), lr(2, 4242, base+20*ms))
	if got, want := timedOf(h.right(t, rr(9, 4242, base+50*ms))), []timed{{1, 9, base + 50*ms}, {2, 9, base + 50*ms}}; !slices.Equal(got, want) {
		t.Fatalf("without UniqueLeft: %v, want %v", got, want)
	}
}

// UniqueLeft's documentation: a second left record of a key "that comes
// after the first was dropped (the watermark passed its bound) is not
// detected, and joins like any left record". Once the watermark passed
// the first record's bound, a right record of the key and then a second
// left record must join as without UniqueLeft.
//
// Found in review: the first left record is removed only at its cleanup
// time, up to untilGrain (100ms) after its bound, and the join treated it
// as held until then: it did not keep the right record (which the second
// left record needed) and failed the job on the second left record, so
// whether a job failed depended on how far the watermark had moved past the
// bound, not on the input alone.
func TestUniqueLeftAfterTheFirstBoundPassed(t *testing.T) {
	ms := int64(time.Millisecond)
	bounds := map[int64]int64{1: base + 10*ms}
	until := func(l lrec) (int64, bool) { u, ok := bounds[l.ID]; return u, ok }
	build := func(unique bool) func() runtime.Operator {
		b := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			if unique {
				opts = append(opts, join.UniqueLeft())
			}
			return join.IntervalUntil(lk, rk, id, 0, until, "bound", pairOf, opts...)
		}
		return newOp(t, b, keyL, keyR)
	}
	for _, passed := range []int64{11 * ms, 50 * ms, 150 * ms} {
		t.Run(fmt.Sprintf("watermark %dms past base", passed/ms), func(t *testing.T) {
			bounds[2] = base + passed + 50*ms
			var outs [2][]timed
			for i, unique := range []bool{false, true} {
				h := open[lrec, rrec, pair](t, build(unique), nil)
				h.left(t, lr(1, 5, base))
				h.watermark(t, base+passed) // past left 1's bound
				h.right(t, rr(7, 5, base+passed+5*ms))
				if err := h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(2, 5, base+passed)}); err != nil {
					t.Fatalf("unique=%v: a left record after the first one's bound passed: %v", unique, err)
				}
				h.watermark(t, runtime.MaxWatermark)
				outs[i] = timedOf(h.out.recs)
			}
			want := []timed{{2, 7, base + passed + 5*ms}}
			if !slices.Equal(outs[0], want) || !slices.Equal(outs[1], want) {
				t.Fatalf("without UniqueLeft %v, with it %v; want %v", outs[0], outs[1], want)
			}
		})
	}
}

// The declaration is part of the state's schema: a checkpoint of the join
// without UniqueLeft is refused by the join with it, and the other way
// round, wrapping state.ErrStateMismatch; each restores into its own kind.
func TestUniqueLeftRestoreAcrossDeclarationsRefused(t *testing.T) {
	opts := []join.Option{join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{})}
	ops := map[bool]func() runtime.Operator{
		false: newOp(t, uniqueSpec(false).build, keyL, keyR, opts...),
		true:  newOp(t, uniqueSpec(true).build, keyL, keyR, opts...),
	}
	for _, unique := range []bool{false, true} {
		h := open[lrec, rrec, pair](t, ops[unique], nil)
		// A held left record (key 1) and a waiting right record (key 2).
		h.left(t, lr(1, 1, base))
		h.right(t, rr(1, 2, base))
		snap := h.snapshot(t, 1)
		if n := entries(t, snap); n["left"] != 1 || n["right"] != 1 {
			t.Fatalf("unique=%v: state %v, want a left and a right key", unique, n)
		}
		restored := &checkpoint.SubtaskState{Watermark: runtime.MinWatermark}
		_, err := tryOpen[lrec, rrec, pair](ops[!unique], fullRange(), restored, snap)
		if !errors.Is(err, state.ErrStateMismatch) || !strings.Contains(err.Error(), "unique left") {
			t.Fatalf("a checkpoint of the join with unique=%v restored into one with unique=%v: %v, want an error wrapping state.ErrStateMismatch naming the declaration",
				unique, !unique, err)
		}
		t.Logf("refused: %v", err)
		if _, err := tryOpen[lrec, rrec, pair](ops[unique], fullRange(), restored, snap); err != nil {
			t.Fatalf("unique=%v: its own checkpoint: %v", unique, err)
		}
	}
}

// Every join other than IntervalUntil refuses UniqueLeft when the pipeline
// is planned, naming IntervalUntil.
func TestUniqueLeftOnlyForIntervalUntil(t *testing.T) {
	for _, sp := range []spec{intervalSpec(0, time.Second), windowSpec(time.Second), innerSpec(time.Second)} {
		p := stream.New("test")
		lk := stream.KeyBy(stream.From[lrec](p, "left", nopSource[lrec]{}), keyL)
		rk := stream.KeyBy(stream.From[rrec](p, "right", nopSource[rrec]{}), keyR)
		stream.To(sp.build(lk, rk, opID, join.UniqueLeft()), "sink", discardSink[pair]{})
		_, err := p.Plan()
		if err == nil || !strings.Contains(err.Error(), "UniqueLeft") || !strings.Contains(err.Error(), "IntervalUntil") {
			t.Errorf("%s with UniqueLeft: plan error %v, want one naming UniqueLeft and IntervalUntil", sp.name, err)
		}
	}
}

// A checkpoint at any step of the shuffled input, with processing going on
// after it (output an exactly-once sink would not commit), restored into a
// fresh subtask that replays from the cut: the committed and replayed
// output is exactly the failure-free one.
func TestUniqueLeftRestoreAtEveryCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	a := shuffledInput(rng, 300, 200, 20*time.Millisecond, 17)
	newOp := newOp(t, uniqueSpec(true).build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
	want := uniqueSpec(true).expect(a.in)
	clean := open[lrec, rrec, pair](t, newOp, nil)
	for _, s := range a.steps {
		clean.run(t, s)
	}
	if got := timedOf(clean.out.recs); !slices.Equal(got, want) || len(want) < 50 {
		t.Fatalf("failure-free (%d pairs expected): %s", len(want), diff(got, want))
	}
	for cut := range a.steps[:len(a.steps)-1] {
		h := open[lrec, rrec, pair](t, newOp, nil)
		for _, s := range a.steps[:cut+1] {
			h.run(t, s)
		}
		if _, err := h.op.Snapshot(1); err != nil {
			t.Fatal(err)
		}
		captured := h.backend.Snapshot()
		committed := slices.Clone(h.out.recs)
		for _, s := range a.steps[cut+1 : min(cut+4, len(a.steps)-1)] {
			h.run(t, s) // lost in the crash
		}
		snap, err := captured.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_ = h.op.Close()
		r := open[lrec, rrec, pair](t, newOp, &checkpoint.SubtaskState{Watermark: a.steps[cut].wm}, snap)
		for _, s := range a.steps[cut+1:] {
			r.run(t, s)
		}
		if got := timedOf(append(committed, r.out.recs...)); !slices.Equal(got, want) {
			t.Fatalf("checkpoint after step %d: %s", cut, diff(got, want))
		}
	}
}

// Through the runtime (join parallelism 3, checkpoints about every read),
// with failures injected while subtasks process records after 1, 2 and 3
// completed checkpoints, each restarting the job from its last checkpoint:
// the committed output equals the failure-free run's and the brute-force
// result exactly.
func TestUniqueLeftExactlyOnceUnderFailures(t *testing.T) {
	sp := uniqueSpec(true)
	in := uniqueInput(randFor(43), 2000, 1500, 1500*time.Microsecond, 20*time.Millisecond)
	want := sp.expect(in)
	if len(want) < 200 {
		t.Fatalf("only %d expected pairs", len(want))
	}
	clean := newJobSpec(t, sp, in, 3)
	if _, err := clean.run(t); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	reference := clean.committed(t)
	if !slices.Equal(reference, want) {
		t.Fatalf("failure-free run: %s", diff(reference, want))
	}
	j := newJobSpec(t, sp, in, 3)
	j.failAt = map[string][]int64{"task/process-batch": {1, 2, 3}}
	st, err := j.run(t)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := j.fired["task/process-batch"]; n != 3 {
		t.Fatalf("%d failures injected, want 3: the job ended first", n)
	}
	if st.Restarts == 0 || st.RestoredFrom == 0 {
		t.Fatalf("stats %+v: the failures did not restart the job from a checkpoint", st)
	}
	if got := j.committed(t); !slices.Equal(got, reference) {
		t.Fatalf("differs from the failure-free run: %s", diff(got, reference))
	}
}

// Under at-least-once checkpoints a restore sends again records whose
// effects the restored state holds: a left record the join kept comes a
// second time. That is the mode's replay, not a false declaration, so the
// join must not fail on it (it joins as the mode's duplicates do); under
// exactly-once checkpoints the same repeat is a second record of the key,
// and fails the job.
func TestUniqueLeftReplayUnderAtLeastOnce(t *testing.T) {
	ms := int64(time.Millisecond)
	until := func(l lrec) (int64, bool) { return base + 1000*ms, true }
	newJoin := func() runtime.Operator {
		b := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.IntervalUntil(lk, rk, id, 0, until, "bound", pairOf, append(opts, join.UniqueLeft())...)
		}
		return newOp(t, b, keyL, keyR)()
	}
	h := open[lrec, rrec, pair](t, func() runtime.Operator { return newJoin() }, nil)
	h.watermark(t, base)
	h.left(t, lr(1, 7, base+10*ms))
	snap := h.snapshot(t, 1)
	for _, mode := range []checkpoint.Mode{checkpoint.ExactlyOnce, checkpoint.AtLeastOnce} {
		b := state.NewBackend(opID, 128, fullRange())
		if err := b.Restore(snap); err != nil {
			t.Fatal(err)
		}
		op := newJoin()
		out := &collector[pair]{}
		ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128, KeyGroups: fullRange(),
			State: b, Output: out, Restored: &checkpoint.SubtaskState{Watermark: base}, JobID: "job", CheckpointMode: mode}
		if err := op.Open(ctx); err != nil {
			t.Fatal(err)
		}
		err := op.ProcessBatch(0, runtime.Batch[lrec]{lr(1, 7, base+10*ms)}) // the replay
		switch {
		case mode == checkpoint.AtLeastOnce && err != nil:
			t.Fatalf("at-least-once: the replay of a left record the state holds: %v", err)
		case mode == checkpoint.ExactlyOnce && !errors.Is(err, runtime.ErrUnrecoverable):
			t.Fatalf("exactly-once: a second left record of key 7: %v, want an unrecoverable error", err)
		case mode == checkpoint.AtLeastOnce:
			if err := op.ProcessBatch(1, runtime.Batch[rrec]{rr(9, 7, base+20*ms)}); err != nil {
				t.Fatal(err)
			}
			if len(out.recs) == 0 {
				t.Fatalf("at-least-once: a right record after the replay joined nothing")
			}
		}
	}
}
