package window_test

import (
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
)

// outs returns recs as sorted outs.
func outs(recs []runtime.Record[res]) []out { return outsOf(slices.Clone(recs)) }

// A session is [first record, last record + gap); records at most gap apart
// (touching sessions included, as in Flink) are one session; it fires when
// the watermark reaches end (a record at end still touches it), with that
// event time.
func TestSessionBasics(t *testing.T) {
	h := open[ev, res](t, spec{kind: "session", gap: 10}.newOp(t), fullRange(), nil)
	h.process(t,
		rec("a", 1, 0), rec("a", 2, 5), // [0,15)
		rec("a", 4, 25),                  // [25,35): 25-5 > 10
		rec("b", 8, 3), rec("b", 16, 13), // [3,23): 13 == 3+10 touches
	)
	if got := h.watermark(t, 14); len(got) != 0 {
		t.Fatalf("watermark 14 fired %v before a[0,15) ended: a record at 15 would still touch it", outs(got))
	}
	got := outs(h.watermark(t, 15))
	if want := []out{{"a", 0, 15, 2, 3, 15}}; !slices.Equal(got, want) {
		t.Fatalf("watermark 15: %v, want %v", got, want)
	}
	// A record bridging nothing: b's session grows to [3,33) and fires later.
	h.process(t, rec("b", 32, 23))
	if got := h.watermark(t, 32); len(got) != 0 {
		t.Fatalf("watermark 32 fired %v", outs(got))
	}
	got = outs(h.watermark(t, runtime.MaxWatermark))
	want := []out{{"a", 25, 35, 1, 4, 35}, {"b", 3, 33, 3, 56, 33}}
	if !slices.Equal(got, want) {
		t.Fatalf("final: %v, want %v", got, want)
	}
	if e, tm := window.StateSize(h.op); e != 0 || tm != 0 {
		t.Fatalf("%d keys with sessions and %d timers remain", e, tm)
	}
}

// An out-of-order record between two sessions merges them (and their
// accumulators), and only the merged session fires; a record before a
// session's start moves its start. Each session has exactly one timer.
func TestSessionMergeOutOfOrder(t *testing.T) {
	h := open[ev, res](t, spec{kind: "session", gap: 10}.newOp(t), fullRange(), nil)
	h.process(t, rec("k", 1, 100), rec("k", 2, 130), rec("k", 4, 160)) // three sessions
	if _, tm := window.StateSize(h.op); tm != 3 {
		t.Fatalf("%d timers for 3 sessions", tm)
	}
	h.process(t, rec("k", 8, 120))  // [120,130) touches [130,140): [120,140)
	h.process(t, rec("k", 16, 112)) // [112,122) overlaps [120,140), not [100,110): [112,140)
	h.process(t, rec("k", 32, 105)) // [105,115) overlaps [100,110) and [112,140): [100,140)
	if _, tm := window.StateSize(h.op); tm != 2 {
		t.Fatalf("%d timers for 2 sessions", tm)
	}
	h.process(t, rec("k", 64, 95)) // moves the start to 95
	got := outs(h.watermark(t, runtime.MaxWatermark))
	want := []out{{"k", 95, 140, 6, 1 + 2 + 8 + 16 + 32 + 64, 140}, {"k", 160, 170, 1, 4, 170}}
	if !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

// Sessions merge across a checkpoint and a restore: two sessions open at the
// checkpoint, restored into a new operator, are bridged by a record after it
// and fire once, merged, with every record counted once. The snapshot is
// encoded after the bridging record was processed by the old operator, so it
// must still hold the sessions as they were at the checkpoint.
func TestSessionMergeAcrossRestore(t *testing.T) {
	newOp := spec{kind: "session", gap: 10}.newOp(t)
	h := open[ev, res](t, newOp, fullRange(), nil)
	h.process(t, rec("k", 1, 100), rec("k", 2, 103), rec("k", 4, 120), rec("j", 100, 50))
	h.watermark(t, 60) // j's session [50,60) fires
	captured := h.capture(t, 1)
	h.process(t, rec("k", 8, 112)) // bridges, in the old operator only
	h.watermark(t, runtime.MaxWatermark)
	snap := encode(t, captured)

	r := open[ev, res](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: 60}, snap)
	r.process(t, rec("k", 16, 111))
	got := outs(r.watermark(t, runtime.MaxWatermark))
	if want := []out{{"k", 100, 130, 4, 1 + 2 + 4 + 16, 130}}; !slices.Equal(got, want) {
		t.Fatalf("after restore: %v, want %v", got, want)
	}
}

// With allowed lateness a fired session is kept; a late record extending it
// makes it fire again at once; a record merging it with a new one makes the
// merged session pending again; after the lateness the session is gone and
// a record for it is late.
func TestSessionLateness(t *testing.T) {
	h := open[ev, res](t, spec{kind: "session", gap: 10, lateness: 50}.newOp(t), fullRange(), nil)
	h.process(t, rec("k", 1, 100))
	if got := outs(h.watermark(t, 200)); !slices.Equal(got, []out{{"k", 100, 110, 1, 1, 110}}) {
		t.Fatalf("first firing: %v", got)
	}
	// The watermark jumped past 110+50: the session fired and went in one
	// step, so a record for it is late.
	h.process(t, rec("k", 2, 105))
	if d, _ := h.op.(window.LateCounter).LateRecords(); d != 1 {
		t.Fatalf("%d late records, want 1", d)
	}
	h.process(t, rec("k", 1, 300))
	h.watermark(t, 320) // [300,310) fires, kept until 360
	h.process(t, rec("k", 2, 305))
	got := outs(h.out.recs[len(h.out.recs)-1:])
	if want := []out{{"k", 300, 315, 2, 3, 315}}; !slices.Equal(got, want) {
		t.Fatalf("late record within lateness: %v, want %v", got, want)
	}
	n := len(h.out.recs)
	h.process(t, rec("k", 4, 312)) // [312,322) merges: [300,322), its end 322 > 320: pending again
	if len(h.out.recs) != n {
		t.Fatalf("a session growing past the watermark fired at once: %v", outs(h.out.recs[n:]))
	}
	if got := h.watermark(t, 321); len(got) != 0 {
		t.Fatalf("watermark 321 fired %v before the merged session's end 322", outs(got))
	}
	got = outs(h.watermark(t, 322))
	if want := []out{{"k", 300, 322, 3, 7, 322}}; !slices.Equal(got, want) {
		t.Fatalf("merged session: %v, want %v", got, want)
	}
	h.watermark(t, 322+50)
	if e, tm := window.StateSize(h.op); e != 0 || tm != 0 {
		t.Fatalf("after the lateness: %d keys with sessions, %d timers", e, tm)
	}
}
