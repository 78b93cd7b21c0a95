package join_test

import (
	"cmp"
	"context"
	"encoding/binary"
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

// This file tests IntervalUntilGroups: IntervalUntil with UniqueLeft
// followed by a GROUP BY per left record that closes at its bound, in one
// operator.

// row is a group's output: its left record's id, a summary of its right
// records' ids (N, Sum and Max from the value accumulator, N and the sorted
// ids Rs from the mutable one) and T, the close time Result was given.
type row struct {
	L, N, Sum, Max int64
	Rs             string
	T              int64
}

func rowsOf(recs []runtime.Record[row]) []row {
	out := make([]row, len(recs))
	for i, r := range recs {
		out[i] = r.Value
	}
	return out
}

func sortRows(rs []row) []row {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b row) int { return cmp.Or(cmp.Compare(a.T, b.T), cmp.Compare(a.L, b.L)) })
	return rs
}

// rowsDiff describes how got differs from want, row by row.
func rowsDiff(got, want []row) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%d rows, want %d: row %d is %+v, want %+v", len(got), len(want), i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d rows, want %d", len(got), len(want))
}

// stats is the value accumulator (no Clone: Add returns a new value).
type stats struct{ N, Sum, Max int64 }

type statsCodec struct{}

func (statsCodec) Name() string { return "test.stats/v1" }
func (statsCodec) Append(dst []byte, s stats) []byte {
	return binary.AppendVarint(appendTwo(dst, s.N, s.Sum), s.Max)
}
func (statsCodec) Decode(src []byte) (stats, int, error) {
	n, sum, k, err := decodeTwo(src)
	if err != nil {
		return stats{}, 0, err
	}
	m, j := binary.Varint(src[k:])
	if j <= 0 {
		return stats{}, 0, errors.New("truncated")
	}
	return stats{n, sum, m}, k + j, nil
}

// idsCodec encodes the mutable accumulator: a count, then the varints.
type idsCodec struct{}

func (idsCodec) Name() string { return "test.ids/v1" }
func (idsCodec) Append(dst []byte, ids []int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendVarint(dst, id)
	}
	return dst
}
func (idsCodec) Decode(src []byte) ([]int64, int, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return nil, 0, errors.New("bad count")
	}
	ids := make([]int64, n)
	for i := range ids {
		v, m := binary.Varint(src[k:])
		if m <= 0 {
			return nil, 0, errors.New("truncated")
		}
		ids[i], k = v, k+m
	}
	return ids, k, nil
}

// variant is one Groups under test and the row it makes of a left record
// and the sorted ids of its pairs' right records.
type variant struct {
	name  string
	build func(lower time.Duration, until func(lrec) (int64, bool)) joinFunc[lrec, rrec, row]
	row   func(l int64, ids []int64) row
}

func groupsBuild[A any](g join.Groups[lrec, rrec, int64, A, row]) func(time.Duration, func(lrec) (int64, bool)) joinFunc[lrec, rrec, row] {
	return func(lower time.Duration, until func(lrec) (int64, bool)) joinFunc[lrec, rrec, row] {
		return func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[row] {
			return join.IntervalUntilGroups(lk, rk, id, lower, until, "id-bound", g, opts...)
		}
	}
}

// valueGroups folds a value; mutableGroups changes its accumulator in
// place (Clone set): acc[0] counts the pairs, in place, and acc[1:] are
// the right ids, kept sorted by inserting in place, so a checkpoint that saw
// a later change would hold a wrong count or wrong ids.
var valueGroups = variant{
	name: "value",
	build: groupsBuild(join.Groups[lrec, rrec, int64, stats, row]{
		Codec: statsCodec{},
		New: func() (join.Fold[lrec, rrec, int64, stats, row], error) {
			return join.Fold[lrec, rrec, int64, stats, row]{
				Init: func() stats { return stats{Max: -1} },
				Add: func(a stats, _ int64, _ lrec, r rrec) stats {
					return stats{a.N + 1, a.Sum + r.ID, max(a.Max, r.ID)}
				},
				Result: func(_ int64, l lrec, a stats, close int64) (row, bool, error) {
					return row{L: l.ID, N: a.N, Sum: a.Sum, Max: a.Max, T: close}, true, nil
				},
			}, nil
		},
	}),
	row: func(l int64, ids []int64) row {
		r := row{L: l, N: int64(len(ids)), Max: slices.Max(ids)}
		for _, id := range ids {
			r.Sum += id
		}
		return r
	},
}

var mutableGroups = variant{
	name: "mutable",
	build: groupsBuild(join.Groups[lrec, rrec, int64, []int64, row]{
		Codec: idsCodec{},
		Clone: slices.Clone[[]int64],
		New: func() (join.Fold[lrec, rrec, int64, []int64, row], error) {
			return join.Fold[lrec, rrec, int64, []int64, row]{
				Init: func() []int64 { return make([]int64, 1, 4) },
				Add: func(acc []int64, _ int64, _ lrec, r rrec) []int64 {
					acc[0]++
					i, _ := slices.BinarySearch(acc[1:], r.ID)
					return slices.Insert(acc, 1+i, r.ID)
				},
				Result: func(_ int64, l lrec, acc []int64, close int64) (row, bool, error) {
					return row{L: l.ID, N: acc[0], Rs: fmt.Sprint(acc[1:]), T: close}, true, nil
				},
			}, nil
		},
	}),
	row: func(l int64, ids []int64) row { return row{L: l, N: int64(len(ids)), Rs: fmt.Sprint(ids)} },
}

var codecOpts = []join.Option{join.LeftCodec[lrec](lrecCodec{}), join.RightCodec[rrec](rrecCodec{})}

func groupsOp(t testing.TB, v variant, lower time.Duration, until func(lrec) (int64, bool)) func() runtime.Operator {
	t.Helper()
	return newOp(t, v.build(lower, until), keyL, keyR, codecOpts...)
}

// groupRows is the GROUP BY per left record of pairs, as v's rows closing
// at until of their left record (whose bound depends on its id only),
// sorted by close time, then left id.
func groupRows(pairs []timed, v variant, until func(lrec) (int64, bool)) []row {
	ids := map[int64][]int64{}
	for _, p := range pairs {
		ids[p.L] = append(ids[p.L], p.R)
	}
	var out []row
	for l, rs := range ids {
		slices.Sort(rs)
		r := v.row(l, rs)
		r.T, _ = until(lrec{ID: l, Key: l})
		out = append(out, r)
	}
	return sortRows(out)
}

// On shuffled input (right records before their left one, records exactly
// at the watermark and at both bounds, late ones on both sides) the groups
// are the GROUP BY per left record of the brute-force pairs and of what
// IntervalUntil with UniqueLeft emits, each emitted at its close time in
// non-decreasing order; late records are counted, and nothing is left
// after the final watermark.
func TestGroupsMatchJoinThenGroupBy(t *testing.T) {
	for _, seed := range []uint64{31, 32, 33} {
		a := shuffledInput(rand.New(rand.NewPCG(seed, seed)), 800, 600, 20*time.Millisecond, 19)
		for _, lower := range []time.Duration{0, 3 * time.Millisecond} {
			pairs := untilSpec(lower).expect(a.in)
			ref := open[lrec, rrec, pair](t, newOp(t, untilSpec(lower).build, keyL, keyR, append(slices.Clone(codecOpts), join.UniqueLeft())...), nil)
			for _, s := range a.steps {
				ref.run(t, s)
			}
			joined := timedOf(ref.out.recs)
			if !slices.Equal(joined, pairs) {
				t.Fatalf("seed %d lower %v: the reference join: %s", seed, lower, diff(joined, pairs))
			}
			// The input must exercise the edges.
			left, right := map[int64]runtime.Record[lrec]{}, map[int64]runtime.Record[rrec]{}
			for _, l := range a.in.left {
				left[l.Value.ID] = l
			}
			for _, r := range a.in.right {
				right[r.Value.ID] = r
			}
			var early, atUntil, atLower int
			for _, p := range pairs {
				l, r := left[p.L], right[p.R]
				u, _ := uniqueUntil(l.Value)
				early += b2i(a.rightStep[p.R] < a.leftStep[p.L])
				atUntil += b2i(r.Time == u)
				atLower += b2i(r.Time == l.Time+int64(lower))
			}
			if len(pairs) < 100 || early == 0 || atUntil == 0 || atLower == 0 || len(a.lateL) == 0 || len(a.lateR) == 0 {
				t.Fatalf("seed %d lower %v: %d pairs, %d early, %d at the bound, %d at the lower bound, %d+%d late: the input does not exercise the join",
					seed, lower, len(pairs), early, atUntil, atLower, len(a.lateL), len(a.lateR))
			}
			t.Logf("seed %d lower %v: %d pairs in %d groups, %d early, %d at the bound, %d at the lower bound, %d+%d late, %d at the watermark",
				seed, lower, len(pairs), len(groupRows(pairs, valueGroups, uniqueUntil)), early, atUntil, atLower, len(a.lateL), len(a.lateR), a.atWM)
			for _, v := range []variant{valueGroups, mutableGroups} {
				t.Run(fmt.Sprintf("seed=%d/lower=%v/%s", seed, lower, v.name), func(t *testing.T) {
					h := open[lrec, rrec, row](t, groupsOp(t, v, lower, uniqueUntil), nil)
					for _, s := range a.steps {
						h.run(t, s)
					}
					for i, r := range h.out.recs {
						if r.Time != r.Value.T || (i > 0 && r.Time < h.out.recs[i-1].Time) {
							t.Fatalf("output %d: %+v at %d after one at %d: want event time = close time, non-decreasing", i, r.Value, r.Time, h.out.recs[max(i-1, 0)].Time)
						}
					}
					got := sortRows(rowsOf(h.out.recs))
					if want := groupRows(pairs, v, uniqueUntil); !slices.Equal(got, want) {
						t.Fatalf("brute force grouped: %s", rowsDiff(got, want))
					}
					if want := groupRows(joined, v, uniqueUntil); !slices.Equal(got, want) {
						t.Fatalf("IntervalUntil+UniqueLeft grouped: %s", rowsDiff(got, want))
					}
					if l, r, err := join.Late(h.op); err != nil || l != int64(len(a.lateL)) || r != int64(len(a.lateR)) {
						t.Fatalf("late counts %d, %d (%v), want %d, %d", l, r, err, len(a.lateL), len(a.lateR))
					}
					if n := entries(t, h.snapshot(t, 1)); len(n) != 0 {
						t.Fatalf("state left after the final watermark: %v", n)
					}
				})
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A checkpoint after any step, captured, then encoded only after 3 more
// steps changed the groups it holds (in place, with the mutable
// accumulator), restored and replayed from the cut: the committed output
// and the restored one are the uninterrupted run's, in order.
func TestGroupsRestoreAtEveryCut(t *testing.T) {
	a := shuffledInput(rand.New(rand.NewPCG(34, 34)), 400, 350, 20*time.Millisecond, 17)
	for _, lower := range []time.Duration{0, 3 * time.Millisecond} {
		mk := groupsOp(t, mutableGroups, lower, uniqueUntil)
		clean := open[lrec, rrec, row](t, mk, nil)
		for _, s := range a.steps {
			clean.run(t, s)
		}
		want := rowsOf(clean.out.recs)
		if len(want) < 40 {
			t.Fatalf("lower %v: only %d groups", lower, len(want))
		}
		for cut := range a.steps[:len(a.steps)-1] {
			h := open[lrec, rrec, row](t, mk, nil)
			for _, s := range a.steps[:cut+1] {
				h.run(t, s)
			}
			if _, err := h.op.Snapshot(1); err != nil {
				t.Fatal(err)
			}
			captured := h.backend.Snapshot()
			committed := rowsOf(h.out.recs)
			for _, s := range a.steps[cut+1 : min(cut+4, len(a.steps)-1)] {
				h.run(t, s) // lost in the crash
			}
			snap, err := captured.Encode()
			if err != nil {
				t.Fatal(err)
			}
			_ = h.op.Close()
			r := open[lrec, rrec, row](t, mk, &checkpoint.SubtaskState{Watermark: a.steps[cut].wm}, snap)
			for _, s := range a.steps[cut+1:] {
				r.run(t, s)
			}
			if got := append(committed, rowsOf(r.out.recs)...); !slices.Equal(got, want) {
				t.Fatalf("lower %v, checkpoint after step %d: %s", lower, cut, rowsDiff(got, want))
			}
		}
	}
}

// openSubtasks opens the n subtasks of parallelism n, each restored from
// snaps (its key groups of them) when restored is set.
func openSubtasks(t *testing.T, mk func() runtime.Operator, n int, restored *checkpoint.SubtaskState, snaps ...[]byte) []*harness[lrec, rrec, row] {
	t.Helper()
	hs := make([]*harness[lrec, rrec, row], n)
	for i := range hs {
		h, err := tryOpen[lrec, rrec, row](mk, state.KeyGroupRangeFor(128, n, i), restored, snaps...)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	return hs
}

// runRouted runs s on the subtasks hs, each record on its key's subtask,
// the watermark on all.
func runRouted(t *testing.T, hs []*harness[lrec, rrec, row], s step) {
	t.Helper()
	parts := make([]step, len(hs))
	route := func(key int64) *step {
		return &parts[state.SubtaskForKeyGroup(128, len(hs), state.KeyGroupFor(state.HashKey(key), 128))]
	}
	for _, r := range s.left {
		p := route(r.Value.Key)
		p.left = append(p.left, r)
	}
	for _, r := range s.right {
		p := route(r.Value.Key)
		p.right = append(p.right, r)
	}
	for i, h := range hs {
		parts[i].wm = s.wm
		h.run(t, parts[i])
	}
}

// Rescaling 2 -> 1 and 1 -> 2 at a checkpoint: every group, timer and
// waiting right record lands in its key's subtask, and the result is exact.
func TestGroupsRestoreRescaled(t *testing.T) {
	a := shuffledInput(rand.New(rand.NewPCG(35, 35)), 300, 250, 20*time.Millisecond, 13)
	lower := 3 * time.Millisecond
	want := groupRows(untilSpec(lower).expect(a.in), mutableGroups, uniqueUntil)
	mk := groupsOp(t, mutableGroups, lower, uniqueUntil)
	cut := len(a.steps) / 2
	for _, c := range []struct{ from, to int }{{2, 1}, {1, 2}} {
		hs := openSubtasks(t, mk, c.from, nil)
		for _, s := range a.steps[:cut] {
			runRouted(t, hs, s)
		}
		var snaps [][]byte
		var got []row
		var late [2]int64
		for _, h := range hs {
			snaps = append(snaps, h.snapshot(t, 1))
			got = append(got, rowsOf(h.out.recs)...)
			l, r, _ := join.Late(h.op)
			late[0], late[1] = late[0]+l, late[1]+r
		}
		if len(got) == 0 || len(got) == len(want) {
			t.Fatalf("%d -> %d: %d of %d groups before the cut", c.from, c.to, len(got), len(want))
		}
		rs := openSubtasks(t, mk, c.to, &checkpoint.SubtaskState{Watermark: a.steps[cut-1].wm}, snaps...)
		for _, s := range a.steps[cut:] {
			runRouted(t, rs, s)
		}
		for _, h := range rs {
			got = append(got, rowsOf(h.out.recs)...)
			l, r, _ := join.Late(h.op)
			late[0], late[1] = late[0]+l, late[1]+r
		}
		if got := sortRows(got); !slices.Equal(got, want) {
			t.Fatalf("%d -> %d: %s", c.from, c.to, rowsDiff(got, want))
		}
		if late != [2]int64{int64(len(a.lateL)), int64(len(a.lateR))} {
			t.Fatalf("%d -> %d: late counts %v, want %d, %d", c.from, c.to, late, len(a.lateL), len(a.lateR))
		}
	}
}

// openMode is open under checkpoint mode mode.
func openMode(t *testing.T, mk func() runtime.Operator, mode checkpoint.Mode, restored *checkpoint.SubtaskState, snap []byte) *harness[lrec, rrec, row] {
	t.Helper()
	b := state.NewBackend(opID, 128, fullRange())
	if err := b.Restore(snap); err != nil {
		t.Fatal(err)
	}
	h := &harness[lrec, rrec, row]{op: mk(), backend: b, out: &collector[row]{}}
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128, KeyGroups: fullRange(),
		State: b, Output: h.out, Restored: restored, JobID: "job", CheckpointMode: mode}
	if err := h.op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// A second left record of a key whose group is open fails the job naming
// the key, except under at-least-once checkpoints, where it is the replay of
// the one the group holds; one that comes after the first's bound passed
// opens a new group, with the right records kept since, as IntervalUntil
// with UniqueLeft joins it.
func TestGroupsDuplicateLeft(t *testing.T) {
	ms := int64(time.Millisecond)
	bounds := map[int64]int64{1: base + 10*ms, 2: base + 40*ms, 3: base + 100*ms}
	until := func(l lrec) (int64, bool) { u, ok := bounds[l.ID]; return u, ok }
	mk := groupsOp(t, mutableGroups, 0, until)
	check := func(err error) {
		t.Helper()
		if !errors.Is(err, runtime.ErrUnrecoverable) || !strings.Contains(err.Error(), "share key 4242") {
			t.Fatalf("a second left record of key 4242 with its group open: %v, want an error wrapping runtime.ErrUnrecoverable naming the key", err)
		}
	}
	h := open[lrec, rrec, row](t, mk, nil)
	h.left(t, lr(3, 4242, base))
	h.watermark(t, base+10*ms)
	check(h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(2, 4242, base+20*ms)}))
	h = open[lrec, rrec, row](t, mk, nil)
	check(h.op.ProcessBatch(0, runtime.Batch[lrec]{lr(3, 4242, base), lr(1, 4242, base+5*ms)}))

	// Key 5: right 9 waits, outside left 1's interval, and goes with left
	// 1's arrival; left 2 comes after left 1's bound passed.
	ss := []step{
		{right: []runtime.Record[rrec]{rr(9, 5, base+30*ms)}, wm: base},
		{left: []runtime.Record[lrec]{lr(1, 5, base)}, right: []runtime.Record[rrec]{rr(7, 5, base+5*ms)}, wm: base + 10*ms},
		{wm: base + 11*ms},
		{left: []runtime.Record[lrec]{lr(2, 5, base+20*ms)}, right: []runtime.Record[rrec]{rr(8, 5, base+25*ms)}, wm: runtime.MaxWatermark},
	}
	h = open[lrec, rrec, row](t, mk, nil)
	ref := open[lrec, rrec, pair](t, newOp(t, func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.IntervalUntil(lk, rk, id, 0, until, "id-bound", pairOf, append(opts, join.UniqueLeft())...)
	}, keyL, keyR), nil)
	for i, s := range ss {
		h.run(t, s)
		ref.run(t, s)
		if i == 1 && len(h.out.recs) != 0 {
			t.Fatalf("left 1's group closed at watermark %d, its bound: %v", s.wm, h.out.recs)
		}
	}
	want := []row{{L: 1, N: 1, Rs: "[7]", T: base + 10*ms}, {L: 2, N: 1, Rs: "[8]", T: base + 40*ms}}
	if got := rowsOf(h.out.recs); !slices.Equal(got, want) {
		t.Fatalf("a left record after the first one's bound: %+v, want %+v", got, want)
	}
	if got, grouped := sortRows(rowsOf(h.out.recs)), groupRows(timedOf(ref.out.recs), mutableGroups, until); !slices.Equal(got, grouped) {
		t.Fatalf("%+v, IntervalUntil+UniqueLeft grouped %+v", got, grouped)
	}

	// A checkpoint holds left 3's group with right 1; the restore receives
	// left 3 again.
	h = open[lrec, rrec, row](t, mk, nil)
	h.watermark(t, base)
	h.left(t, lr(3, 7, base))
	h.right(t, rr(1, 7, base+10*ms))
	snap := h.snapshot(t, 1)
	for _, mode := range []checkpoint.Mode{checkpoint.ExactlyOnce, checkpoint.AtLeastOnce} {
		r := openMode(t, mk, mode, &checkpoint.SubtaskState{Watermark: base}, snap)
		err := r.op.ProcessBatch(0, runtime.Batch[lrec]{lr(3, 7, base)})
		if mode == checkpoint.ExactlyOnce {
			if !errors.Is(err, runtime.ErrUnrecoverable) {
				t.Fatalf("exactly-once: left 3 again: %v, want an unrecoverable error", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("at-least-once: the replay of left 3: %v", err)
		}
		r.right(t, rr(2, 7, base+20*ms))
		r.watermark(t, runtime.MaxWatermark)
		if got, want := rowsOf(r.out.recs), []row{{L: 3, N: 2, Rs: "[1 2]", T: base + 100*ms}}; !slices.Equal(got, want) {
			t.Fatalf("at-least-once, after the replay of left 3: %+v, want %+v", got, want)
		}
	}
}

// Mistakes in building groups are pipeline errors, reported by Plan.
func TestGroupsBuilderErrors(t *testing.T) {
	g := join.Groups[lrec, rrec, int64, stats, row]{Codec: statsCodec{}, New: func() (join.Fold[lrec, rrec, int64, stats, row], error) {
		return join.Fold[lrec, rrec, int64, stats, row]{}, nil
	}}
	noNew, noCodec := g, g
	noNew.New, noCodec.Codec = nil, nil
	cases := []struct {
		name  string
		lower time.Duration
		g     join.Groups[lrec, rrec, int64, stats, row]
		want  string
	}{
		{"negative lower", -time.Millisecond, g, "lower bound -1ms is negative"},
		{"nil New", 0, noNew, "Groups.New are required"},
		{"nil Codec", 0, noCodec, "accumulator codec and Groups.New are required"},
	}
	for _, c := range cases {
		p := stream.New("test")
		lk := stream.KeyBy(stream.From[lrec](p, "left", nopSource[lrec]{}), keyL)
		rk := stream.KeyBy(stream.From[rrec](p, "right", nopSource[rrec]{}), keyR)
		stream.To(join.IntervalUntilGroups(lk, rk, opID, c.lower, uniqueUntil, "id-bound", c.g), "sink", discardSink[row]{})
		if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Plan = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// The same with a lower bound of 0 plans.
	if newOp(t, groupsBuild(g)(0, uniqueUntil), keyL, keyR) == nil {
		t.Fatal("no operator")
	}
}

// snapshotOf is a snapshot of mk after an open group or held left record
// (key 1) and a waiting right record (key 2).
func snapshotOf[O any](t *testing.T, mk func() runtime.Operator, lower time.Duration) []byte {
	t.Helper()
	h := open[lrec, rrec, O](t, mk, nil)
	h.left(t, lr(1, 1, base))
	h.right(t, rr(1, 1, base+int64(lower)), rr(2, 2, base))
	snap := h.snapshot(t, 1)
	if n := entries(t, snap); len(n) < 2 {
		t.Fatalf("state %v, want a left and a right key", n)
	}
	return snap
}

// A checkpoint of groups with another accumulator codec is refused with
// state.ErrStateMismatch naming this one's; one of IntervalUntil (its
// pairs' state) restores into groups no more than the other way round.
func TestGroupsRestoreRefused(t *testing.T) {
	lower := 3 * time.Millisecond
	plain := newOp(t, untilSpec(lower).build, keyL, keyR, append(slices.Clone(codecOpts), join.UniqueLeft())...)
	ops := []func() runtime.Operator{groupsOp(t, mutableGroups, lower, uniqueUntil), groupsOp(t, valueGroups, lower, uniqueUntil), plain}
	snaps := [][]byte{snapshotOf[row](t, ops[0], lower), snapshotOf[row](t, ops[1], lower), snapshotOf[pair](t, ops[2], lower)}
	restored := &checkpoint.SubtaskState{Watermark: runtime.MinWatermark}
	for i, mk := range ops {
		for k, snap := range snaps {
			_, err := tryOpen[lrec, rrec, row](mk, fullRange(), restored, snap)
			switch {
			case i == k && err != nil:
				t.Errorf("op %d: its own checkpoint refused: %v", i, err)
			case i != k && err == nil:
				t.Errorf("op %d restored op %d's checkpoint", i, k)
			case i < 2 && k < 2 && i != k && (!errors.Is(err, state.ErrStateMismatch) || !strings.Contains(err.Error(), "acc="+[]string{"test.ids/v1", "test.stats/v1"}[i])):
				t.Errorf("op %d, checkpoint of op %d: %v, want an error wrapping state.ErrStateMismatch naming the accumulator codec", i, k, err)
			}
		}
	}
}

// The interval [l.Time+lower, until(l)] is closed at both ends whichever
// side comes first, a right record at exactly the watermark is folded, and
// a group closes once the watermark passes its bound (until+1), not at it.
// A left record takes its waiting right records out of state.
func TestGroupsBoundsAndClose(t *testing.T) {
	until := func(lrec) (int64, bool) { return 110, true }
	for _, v := range []variant{valueGroups, mutableGroups} {
		mk := groupsOp(t, v, 3, until)
		want := v.row(1, []int64{2, 3})
		want.T = 110
		for _, rightsFirst := range []bool{true, false} {
			h := open[lrec, rrec, row](t, mk, nil)
			rights := []runtime.Record[rrec]{rr(1, 1, 102), rr(2, 1, 103), rr(4, 1, 111), rr(5, 2, 105)}
			if rightsFirst {
				h.right(t, append(rights, rr(3, 1, 110))...)
				h.left(t, lr(1, 1, 100))
			} else {
				h.left(t, lr(1, 1, 100))
				h.right(t, rights...)
			}
			if n := entries(t, h.snapshot(t, 1)); n["keys"] != 2 || n["group-closes"] != 1 || len(n) != 2 {
				t.Fatalf("%s, rights first %v: state %v, want key 1's group and timer, key 2's waiting right record only (two keys, one timer)", v.name, rightsFirst, n)
			}
			if got := h.watermark(t, 110); len(got) != 0 {
				t.Fatalf("%s, rights first %v: the watermark at the bound emitted %v", v.name, rightsFirst, got)
			}
			if !rightsFirst {
				h.right(t, rr(3, 1, 110)) // at the watermark: not late
			}
			if got := rowsOf(h.watermark(t, 111)); !slices.Equal(got, []row{want}) {
				t.Fatalf("%s, rights first %v: watermark 111 emitted %+v, want %+v", v.name, rightsFirst, got, want)
			}
			if got := h.watermark(t, runtime.MaxWatermark); len(got) != 0 {
				t.Fatalf("%s, rights first %v: the final watermark emitted %v", v.name, rightsFirst, got)
			}
			if n := entries(t, h.snapshot(t, 2)); len(n) != 0 {
				t.Fatalf("%s, rights first %v: state left %v", v.name, rightsFirst, n)
			}
			if l, r, _ := join.Late(h.op); l+r != 0 {
				t.Fatalf("late %d, %d", l, r)
			}
		}
	}
}

// On the pebble backend the output equals the memory backend's, through
// cache evictions (a cache far smaller than the state: entries read back
// from the store are of no generation, and copied before they change) and
// checkpoints taken every few steps (each flushes the cache and starts a
// generation).
func TestGroupsOnPebble(t *testing.T) {
	a := shuffledInput(rand.New(rand.NewPCG(41, 41)), 3000, 3000, 20*time.Millisecond, 19)
	for _, v := range []variant{valueGroups, mutableGroups} {
		t.Run(v.name, func(t *testing.T) {
			mk := groupsOp(t, v, 0, uniqueUntil)
			mem := open[lrec, rrec, row](t, mk, nil)
			for _, s := range a.steps {
				mem.run(t, s)
			}
			env, err := state.NewLSMEnv(state.LSMOptions{Dir: t.TempDir(), CacheBytes: 64 << 10}, "job")
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			b := state.NewLSMBackend(context.Background(), env, opID, 128, fullRange())
			defer b.Close()
			h := &harness[lrec, rrec, row]{op: mk(), backend: b, out: &collector[row]{}}
			if err := h.op.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128,
				KeyGroups: fullRange(), State: b, Output: h.out, JobID: "job"}); err != nil {
				t.Fatal(err)
			}
			for i, s := range a.steps {
				h.run(t, s)
				if i%3 == 2 {
					id := int64(i + 1)
					if _, err := h.op.Snapshot(id); err != nil {
						t.Fatal(err)
					}
					b.CheckpointSnapshot(id, false)
					b.Complete(id)
				}
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := rowsOf(h.out.recs), rowsOf(mem.out.recs); !slices.Equal(got, want) {
				t.Fatalf("pebble against memory: %s", rowsDiff(sortRows(got), sortRows(want)))
			}
			if len(mem.out.recs) < 300 {
				t.Fatalf("only %d groups: the input does not exercise the state", len(mem.out.recs))
			}
		})
	}
}
