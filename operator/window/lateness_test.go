package window_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Allowed lateness on a tumbling window, step by step (Flink's semantics):
// the window fires at MaxTimestamp; a record within the lateness makes it
// fire again at once with everything so far; at MaxTimestamp+lateness its
// state goes, and later records for it are late: dropped and counted.
func TestTumblingAllowedLateness(t *testing.T) {
	h := open[ev, res](t, spec{kind: "tumbling", size: 100, lateness: 50}.newOp(t), fullRange(), nil)
	h.process(t, rec("k", 1, 10))
	if got := outs(h.watermark(t, 99)); !slices.Equal(got, []out{{"k", 0, 100, 1, 1, 99}}) {
		t.Fatalf("firing: %v", got)
	}
	h.process(t, rec("k", 2, 20))
	if got := outs(h.out.recs[1:]); !slices.Equal(got, []out{{"k", 0, 100, 2, 3, 99}}) {
		t.Fatalf("late record within lateness: %v", got)
	}
	if got := h.watermark(t, 148); len(got) != 0 {
		t.Fatalf("watermark 148 emitted %v", outs(got))
	}
	h.process(t, rec("k", 4, 30), rec("j", 8, 99)) // j: a window first seen within the lateness fires at once
	if got := outs(h.out.recs[2:]); !slices.Equal(got, []out{{"j", 0, 100, 1, 8, 99}, {"k", 0, 100, 3, 7, 99}}) {
		t.Fatalf("late records within lateness: %v", got)
	}
	if got := h.watermark(t, 149); len(got) != 0 {
		t.Fatalf("the cleanup time fired %v", outs(got))
	}
	if e, tm := window.StateSize(h.op); e != 0 || tm != 0 {
		t.Fatalf("after the cleanup time: %d windows, %d timers", e, tm)
	}
	n := len(h.out.recs)
	h.process(t, rec("k", 16, 40), rec("j", 32, 0))
	if len(h.out.recs) != n {
		t.Fatalf("records beyond the lateness fired %v", outs(h.out.recs[n:]))
	}
	if d, s := h.op.(window.LateCounter).LateRecords(); d != 2 || s != 0 {
		t.Fatalf("LateRecords = %d dropped, %d sent; want 2, 0", d, s)
	}
}

// A window restored from a checkpoint taken within its allowed lateness
// still takes late records and goes at its cleanup time.
func TestLatenessAcrossRestore(t *testing.T) {
	newOp := spec{kind: "sliding", size: 100, slide: 50, merge: true, lateness: 50}.newOp(t)
	h := open[ev, res](t, newOp, fullRange(), nil)
	h.process(t, rec("k", 1, 60))
	h.watermark(t, 120) // [0,100) fired, kept until 149; [50,150) open
	snap := h.checkpoint(t, 1)
	r := open[ev, res](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: 120}, snap)
	r.process(t, rec("k", 2, 70))
	want := []out{{"k", 0, 100, 2, 3, 99}}
	if got := outs(r.out.recs); !slices.Equal(got, want) {
		t.Fatalf("late record after restore: %v, want %v", got, want)
	}
	if got := outs(r.watermark(t, 149)); !slices.Equal(got, []out{{"k", 50, 150, 2, 3, 149}}) {
		t.Fatalf("watermark 149: %v", got)
	}
	r.process(t, rec("k", 4, 99)) // [0,100) is gone; [50,150) is within its lateness
	if got := outs(r.out.recs[2:]); !slices.Equal(got, []out{{"k", 50, 150, 3, 7, 149}}) {
		t.Fatalf("record for a gone and a kept window: %v", got)
	}
	if d, _ := r.op.(window.LateCounter).LateRecords(); d != 0 {
		t.Fatalf("%d late records: a record with one kept window is not late", d)
	}
}

// Builders report bad settings as plan errors naming the window.
func TestWindowBuilderErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(stream.KeyedStream[ev, string])
		msg   string
	}{
		{"negative lateness", func(ks stream.KeyedStream[ev, string]) {
			window.Tumbling(ks, "w", time.Second, sumAgg, toRes, window.AllowedLateness(-time.Second))
		}, "allowed lateness -1s is negative"},
		{"empty late output", func(ks stream.KeyedStream[ev, string]) {
			window.Tumbling(ks, "w", time.Second, sumAgg, toRes, window.LateRecordsTo(""))
		}, "empty name"},
		{"zero slide", func(ks stream.KeyedStream[ev, string]) {
			window.Sliding(ks, "w", time.Second, 0, sumAgg, toRes)
		}, "slide 0s must be positive"},
		{"zero gap", func(ks stream.KeyedStream[ev, string]) {
			window.Session(ks, "w", 0, sumMergeAgg, toRes)
		}, "gap 0s must be positive"},
		{"session without merge", func(ks stream.KeyedStream[ev, string]) {
			window.Session(ks, "w", time.Second, sumAgg, toRes)
		}, "it has no Merge"},
		{"no codec", func(ks stream.KeyedStream[ev, string]) {
			window.Sliding(ks, "w", time.Second, time.Second, window.Aggregate[ev, sumAcc]{Init: sumAgg.Init, Add: sumAgg.Add}, toRes)
		}, "it has no Codec"},
	} {
		p := stream.New("test")
		c.build(stream.KeyBy(stream.From[ev](p, "src", nopSource[ev]{}), func(e ev) string { return e.Key }))
		_, err := p.Plan()
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "window w") {
			t.Errorf("%s: Plan = %v; want an error naming window w and saying %q", c.name, err, c.msg)
		}
	}
	// Options mix with node options; the description says what they set.
	p := stream.New("test")
	ks := stream.KeyBy(stream.From[ev](p, "src", nopSource[ev]{}), func(e ev) string { return e.Key })
	w := window.Sliding(ks, "w", 10*time.Second, 2*time.Second, sumMergeAgg, toRes,
		window.AllowedLateness(time.Minute), stream.Parallelism(3), window.LateRecordsTo("late"))
	n := w.Node()
	if n.Parallelism != 3 || !slices.Equal(n.SideOutputs, []string{"late"}) {
		t.Errorf("node: parallelism %d, side outputs %q", n.Parallelism, n.SideOutputs)
	}
	if want := "sliding event-time window 10s every 2s (panes of 2s), allowed lateness 1m0s, late records to side output \"late\""; n.Describe != want {
		t.Errorf("Describe = %q\nwant %q", n.Describe, want)
	}
	// A window option given to another node does nothing.
	m := stream.Map(ks.Stream, "m", func(e ev) ev { return e }, window.LateRecordsTo("x"))
	if len(m.Node().SideOutputs) != 0 {
		t.Errorf("a window option changed a map node: %q", m.Node().SideOutputs)
	}
}

// openErr opens newOp's subtask on the restored snapshot and returns Open's
// error.
func openErr(t *testing.T, newOp func() runtime.Operator, snap []byte) error {
	t.Helper()
	b := state.NewBackend(opID, 128, fullRange())
	if err := b.Restore(snap); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128,
		KeyGroups: fullRange(), State: b, Output: &collector[res]{}, Restored: &checkpoint.SubtaskState{}}
	return newOp().Open(ctx)
}

// A checkpoint of a window whose size, slide, gap, aggregate or state layout
// (panes or not) changed is refused at Open with ErrStateMismatch, saying
// what differs, instead of being continued as if it fit.
func TestRestoreRefusesChangedWindow(t *testing.T) {
	countAgg := window.Aggregate[ev, sumAcc]{Init: sumAgg.Init, Add: sumAgg.Add, Merge: sumMergeAgg.Merge, Codec: renamedSum{}}
	withAgg := func(s spec, agg window.Aggregate[ev, sumAcc]) func() runtime.Operator {
		p := stream.New("test")
		ks := stream.KeyBy(stream.From[ev](p, "src", nopSource[ev]{}), func(e ev) string { return e.Key })
		var w stream.Stream[res]
		switch s.kind {
		case "session":
			w = window.Session(ks, opID, time.Duration(s.gap), agg, toRes)
		case "sliding":
			w = window.Sliding(ks, opID, time.Duration(s.size), time.Duration(s.slide), agg, toRes)
		default:
			w = window.Tumbling(ks, opID, time.Duration(s.size), agg, toRes)
		}
		return w.Node().NewOperator
	}
	for _, c := range []struct {
		name     string
		from, to func() runtime.Operator
		msg      string
	}{
		{"tumbling size", spec{kind: "tumbling", size: 100}.newOp(t), spec{kind: "tumbling", size: 200}.newOp(t), "size=100ns"},
		{"sliding slide", spec{kind: "sliding", size: 100, slide: 25, merge: true}.newOp(t), spec{kind: "sliding", size: 100, slide: 50, merge: true}.newOp(t), "slide=25ns"},
		{"sliding size", spec{kind: "sliding", size: 100, slide: 25}.newOp(t), spec{kind: "sliding", size: 75, slide: 25}.newOp(t), "size=100ns"},
		{"panes to windows", spec{kind: "sliding", size: 100, slide: 25, merge: true}.newOp(t), spec{kind: "sliding", size: 100, slide: 25}.newOp(t), "pane-windows"},
		{"tumbling to sliding", spec{kind: "tumbling", size: 100}.newOp(t), spec{kind: "sliding", size: 100, slide: 50}.newOp(t), "slide=50ns"},
		{"session gap", spec{kind: "session", gap: 30}.newOp(t), spec{kind: "session", gap: 40}.newOp(t), "gap=30ns"},
		{"tumbling aggregate", withAgg(spec{kind: "tumbling", size: 100}, sumMergeAgg), withAgg(spec{kind: "tumbling", size: 100}, countAgg), "test.sum"},
		{"session aggregate", withAgg(spec{kind: "session", gap: 30}, sumMergeAgg), withAgg(spec{kind: "session", gap: 30}, countAgg), "test.sum"},
		{"session to tumbling", spec{kind: "session", gap: 30}.newOp(t), spec{kind: "tumbling", size: 30}.newOp(t), "sessions"},
	} {
		h := open[ev, res](t, c.from, fullRange(), nil)
		h.process(t, rec("k", 1, 10))
		snap := h.checkpoint(t, 1)
		err := openErr(t, c.to, snap)
		if c.name == "session to tumbling" || c.name == "panes to windows" {
			// Different state names: Open succeeds, the runtime refuses the
			// unclaimed state (runtime.ErrIncompatible).
			b := state.NewBackend(opID, 128, fullRange())
			_ = b.Restore(snap)
			ctx := &runtime.Context{State: b, Output: &collector[res]{}, KeyGroups: fullRange(), MaxParallelism: 128}
			if err := c.to().Open(ctx); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if u := b.Unclaimed(); !slices.Contains(u, c.msg) {
				t.Errorf("%s: unclaimed %q, want %q among them", c.name, u, c.msg)
			}
			continue
		}
		if !errors.Is(err, state.ErrStateMismatch) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "cannot be continued") {
			t.Errorf("%s: Open = %v; want ErrStateMismatch explaining the change and naming %q", c.name, err, c.msg)
		}
	}
}

// renamedSum is sumCodec under another name: another aggregate with the same
// accumulator type.
type renamedSum struct{ sumCodec }

func (renamedSum) Name() string { return "test.count" }

// A rescaling restore takes the least watermark of the subtasks whose key
// groups it takes. A tumbling window that one of them fired and kept for
// its allowed lateness must not fire again when that watermark passes its
// end a second time; the other's window, not fired yet, fires once.
func TestFiredWindowDoesNotFireAgainAfterRescale(t *testing.T) {
	newOp := spec{kind: "tumbling", size: 100, lateness: 500}.newOp(t)
	hash, err := state.Hasher[string]()
	if err != nil {
		t.Fatal(err)
	}
	low, high := state.KeyGroupRange{Start: 0, End: 64}, state.KeyGroupRange{Start: 64, End: 128}
	keyIn := func(r state.KeyGroupRange) string {
		for i := 0; ; i++ {
			k := fmt.Sprintf("k%d", i)
			if r.Contains(state.KeyGroupFor(hash(k), 128)) {
				return k
			}
		}
	}
	ka, kb := keyIn(low), keyIn(high)

	a := open[ev, res](t, newOp, low, nil)
	a.process(t, rec(ka, 1, 10))
	if got := outs(a.watermark(t, 150)); !slices.Equal(got, []out{{ka, 0, 100, 1, 1, 99}}) {
		t.Fatalf("a fired %v", got)
	}
	b := open[ev, res](t, newOp, high, nil)
	b.process(t, rec(kb, 2, 20))
	if got := b.watermark(t, 50); len(got) != 0 {
		t.Fatalf("b fired before the window's end: %v", outs(got))
	}
	snapA, snapB := a.checkpoint(t, 1), b.checkpoint(t, 1)

	merged := open[ev, res](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: 50}, snapA, snapB)
	if got := outs(merged.watermark(t, 200)); !slices.Equal(got, []out{{kb, 0, 100, 1, 2, 99}}) {
		t.Fatalf("after the rescaling restore the watermark passing the window's end gave %v, want b's window alone", got)
	}
	// Late records within the allowed lateness still update both.
	merged.process(t, rec(ka, 4, 30), rec(kb, 8, 40))
	if got := sortOuts(outs(merged.out.recs[1:])); !slices.Equal(got, sortOuts([]out{{ka, 0, 100, 2, 5, 99}, {kb, 0, 100, 2, 10, 99}})) {
		t.Fatalf("late records after the restore: %v", got)
	}
	if got := merged.watermark(t, 599); len(got) != 0 {
		t.Fatalf("the cleanup time fired %v", outs(got))
	}
	if e, _ := window.StateSize(merged.op); e != 0 {
		t.Fatalf("after the cleanup time: %d windows", e)
	}
}
