package window_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file holds what the correctness tests share: a window spec that builds
// any window kind, a brute-force model of the windows' semantics (naive:
// every window keeps its records and recomputes its result from them), input
// generators, and a harness run with checkpoints and restores.

// spec describes a window under test.
type spec struct {
	kind             string // "tumbling", "sliding" or "session"
	size, slide, gap int64
	lateness         int64
	// merge gives the aggregate a Merge (pane mode for sliding windows).
	merge bool
}

func (s spec) String() string {
	m := ""
	if s.merge {
		m = ",merge"
	}
	switch s.kind {
	case "session":
		return fmt.Sprintf("session(gap=%d,lateness=%d%s)", s.gap, s.lateness, m)
	case "sliding":
		return fmt.Sprintf("sliding(%d/%d,lateness=%d%s)", s.size, s.slide, s.lateness, m)
	}
	return fmt.Sprintf("tumbling(%d,lateness=%d%s)", s.size, s.lateness, m)
}

// out is a result as the tests compare it.
type out struct {
	Key        string
	Start, End int64
	N, Sum     int64
	Time       int64
}

func (o out) String() string {
	return fmt.Sprintf("%s[%d,%d)=%d/%d@%d", o.Key, o.Start, o.End, o.N, o.Sum, o.Time)
}

// res is the output record of the windows under test.
type res struct {
	Key        string
	Start, End int64
	N, Sum     int64
}

func toRes(k string, w window.Window, a sumAcc) res {
	return res{Key: k, Start: w.Start, End: w.End, N: a.N, Sum: a.Sum}
}

var sumMergeAgg = window.Aggregate[ev, sumAcc]{
	Init:  sumAgg.Init,
	Add:   sumAgg.Add,
	Merge: func(a, b sumAcc) sumAcc { return sumAcc{a.N + b.N, a.Sum + b.Sum} },
	Codec: sumCodec{},
}

// build adds the window to a pipeline reading src and returns its stream.
func (s spec) build(src stream.Stream[ev], opts ...stream.NodeOption) stream.Stream[res] {
	ks := stream.KeyBy(src, func(e ev) string { return e.Key })
	agg := sumAgg
	if s.merge || s.kind == "session" {
		agg = sumMergeAgg
	}
	if s.lateness > 0 {
		opts = append(opts, window.AllowedLateness(time.Duration(s.lateness)))
	}
	switch s.kind {
	case "session":
		return window.Session(ks, opID, time.Duration(s.gap), agg, toRes, opts...)
	case "sliding":
		return window.Sliding(ks, opID, time.Duration(s.size), time.Duration(s.slide), agg, toRes, opts...)
	}
	return window.Tumbling(ks, opID, time.Duration(s.size), agg, toRes, opts...)
}

// newOp returns the operator factory of the window.
func (s spec) newOp(t testing.TB, opts ...stream.NodeOption) func() runtime.Operator {
	t.Helper()
	p := stream.New("test")
	w := s.build(stream.From[ev](p, "src", nopSource[ev]{}), opts...)
	stream.To(w, "sink", discardSink[res]{})
	if _, err := p.Plan(); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return w.Node().NewOperator
}

// --- the model -------------------------------------------------------------

// model computes a window's output from scratch, following the package
// documentation sentence by sentence: a window fires when the watermark
// reaches its MaxTimestamp; it is kept until the watermark reaches
// MaxTimestamp+lateness; a record for a fired window within that time makes
// it fire again at once; a record none of whose windows is kept is late.
type model struct {
	spec
	wm   int64
	wins map[string][]*mwin // per key, aligned windows and sessions alike
	out  []out
	late int
}

// mwin is a window of the model: its bounds and its records.
type mwin struct {
	start, end int64
	vals       []int64
}

func newModel(s spec) *model {
	return &model{spec: s, wm: runtime.MinWatermark, wins: map[string][]*mwin{}}
}

// maxTs is when a window fires and the event time of its result: end-1, or
// end for a session (a record at end still touches it).
func (m *model) maxTs(w *mwin) int64 {
	if m.kind == "session" {
		return w.end
	}
	return w.end - 1
}

func (m *model) cleanup(w *mwin) int64 {
	if m.maxTs(w) > math.MaxInt64-m.lateness {
		return math.MaxInt64
	}
	return m.maxTs(w) + m.lateness
}

func (m *model) emit(key string, w *mwin) {
	o := out{Key: key, Start: w.start, End: w.end, N: int64(len(w.vals)), Time: m.maxTs(w)}
	for _, v := range w.vals {
		o.Sum += v
	}
	m.out = append(m.out, o)
}

// record adds one record at the model's watermark.
func (m *model) record(r runtime.Record[ev]) {
	if m.kind == "session" {
		m.sessionRecord(r)
		return
	}
	key, t := r.Value.Key, r.Time
	slide := m.slide
	if m.kind == "tumbling" {
		slide = m.size
	}
	// Every window start that is a multiple of slide, checked for t by
	// brute force over a range wide enough to hold all of them.
	var starts []int64
	lo := (t - m.size - slide) / slide * slide
	for s := lo - slide; s <= t+slide; s += slide {
		if s <= t && t < s+m.size && mod(s, slide) == 0 {
			starts = append(starts, s)
		}
	}
	if len(starts) == 0 {
		return // between windows
	}
	kept := 0
	for _, s := range starts {
		w := m.window(key, s)
		if m.cleanup(w) <= m.wm {
			continue
		}
		kept++
		w = m.keep(key, w)
		w.vals = append(w.vals, r.Value.V)
		if m.maxTs(w) <= m.wm {
			m.emit(key, w)
		}
	}
	if kept == 0 {
		m.late++
	}
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// window returns key's window starting at s (a new, unkept one when absent).
func (m *model) window(key string, s int64) *mwin {
	for _, w := range m.wins[key] {
		if w.start == s {
			return w
		}
	}
	return &mwin{start: s, end: s + m.size}
}

// keep makes sure w is among key's windows.
func (m *model) keep(key string, w *mwin) *mwin {
	if !slices.Contains(m.wins[key], w) {
		m.wins[key] = append(m.wins[key], w)
	}
	return w
}

func (m *model) sessionRecord(r runtime.Record[ev]) {
	key, t := r.Value.Key, r.Time
	merged := &mwin{start: t, end: t + m.gap, vals: []int64{r.Value.V}}
	var rest []*mwin
	for _, w := range m.wins[key] {
		if w.start <= merged.end && w.end >= merged.start { // overlap or touch
			merged.start, merged.end = min(merged.start, w.start), max(merged.end, w.end)
			merged.vals = append(merged.vals, w.vals...)
		} else {
			rest = append(rest, w)
		}
	}
	// Merging grows the session, which may then touch more sessions:
	// repeat until none does.
	for changed := true; changed; {
		changed = false
		var keep []*mwin
		for _, w := range rest {
			if w.start <= merged.end && w.end >= merged.start {
				merged.start, merged.end = min(merged.start, w.start), max(merged.end, w.end)
				merged.vals = append(merged.vals, w.vals...)
				changed = true
			} else {
				keep = append(keep, w)
			}
		}
		rest = keep
	}
	if m.cleanup(merged) <= m.wm {
		m.late++
		return
	}
	m.wins[key] = append(rest, merged)
	if m.maxTs(merged) <= m.wm {
		m.emit(key, merged)
	}
}

// watermark advances the model's watermark to wm.
func (m *model) watermark(wm int64) {
	if wm <= m.wm {
		return
	}
	for key, ws := range m.wins {
		var keep []*mwin
		for _, w := range ws {
			if mt := m.maxTs(w); mt > m.wm && mt <= wm {
				m.emit(key, w)
			}
			if m.cleanup(w) > wm {
				keep = append(keep, w)
			}
		}
		m.wins[key] = keep
	}
	m.wm = wm
}

// expected runs the model over steps and returns its output.
func (s spec) expected(steps []step) ([]out, int) {
	m := newModel(s)
	for _, st := range steps {
		for _, r := range st.recs {
			m.record(r)
		}
		m.watermark(st.wm)
	}
	m.watermark(runtime.MaxWatermark)
	return sortOuts(m.out), m.late
}

// --- input -----------------------------------------------------------------

// step is one source read: records, then the watermark after them.
type step struct {
	recs []runtime.Record[ev]
	wm   int64
}

// gen describes generated input.
type gen struct {
	n, keys, batch int
	// stepT is the event time between consecutive records; each record is
	// then moved later by up to jitter, which the watermark (max time seen
	// - jitter) allows for: such records are never behind the watermark.
	stepT, jitter int64
	// lateFrac of the records are moved back by up to lateBy instead: they
	// may be behind the watermark.
	lateFrac float64
	lateBy   int64
	// start is the event time of record 0.
	start int64
	seed  uint64
}

func (g gen) steps() []step {
	rng := rand.New(rand.NewPCG(g.seed, 7))
	var steps []step
	maxSeen := int64(math.MinInt64)
	for i := 0; i < g.n; i += g.batch {
		var st step
		for j := i; j < min(i+g.batch, g.n); j++ {
			t := g.start + int64(j)*g.stepT
			if g.lateFrac > 0 && rng.Float64() < g.lateFrac {
				t -= rng.Int64N(g.lateBy + 1)
			} else if g.jitter > 0 {
				t += rng.Int64N(g.jitter)
			}
			maxSeen = max(maxSeen, t)
			st.recs = append(st.recs, runtime.Record[ev]{Value: ev{Key: fmt.Sprintf("k%d", rng.IntN(g.keys)), V: rng.Int64N(100)}, Time: t})
		}
		st.wm = maxSeen - g.jitter
		steps = append(steps, st)
	}
	return steps
}

func sortOuts(os []out) []out {
	slices.SortFunc(os, func(a, b out) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End),
			cmp.Compare(a.N, b.N), cmp.Compare(a.Sum, b.Sum), cmp.Compare(a.Time, b.Time))
	})
	return os
}

func outsOf(recs []runtime.Record[res]) []out {
	os := make([]out, len(recs))
	for i, r := range recs {
		os[i] = out{Key: r.Value.Key, Start: r.Value.Start, End: r.Value.End, N: r.Value.N, Sum: r.Value.Sum, Time: r.Time}
	}
	return sortOuts(os)
}

// diffOuts describes how got differs from want (both sorted).
func diffOuts(got, want []out) string {
	count := map[out]int{}
	for _, o := range want {
		count[o]++
	}
	for _, o := range got {
		count[o]--
	}
	var s string
	n := 0
	for o, c := range count {
		if c != 0 && n < 12 {
			if c > 0 {
				s += fmt.Sprintf("  missing x%d: %v\n", c, o)
			} else {
				s += fmt.Sprintf("  extra   x%d: %v\n", -c, o)
			}
			n++
		}
	}
	return fmt.Sprintf("%s  (%d results, want %d)", s, len(got), len(want))
}

// --- harness runs ----------------------------------------------------------

// runPlain runs steps through one subtask without checkpoints.
func runPlain(t *testing.T, newOp func() runtime.Operator, steps []step) ([]out, runtime.Operator) {
	t.Helper()
	h := open[ev, res](t, newOp, fullRange(), nil)
	for _, st := range steps {
		h.process(t, st.recs...)
		h.watermark(t, st.wm)
	}
	h.watermark(t, runtime.MaxWatermark)
	return outsOf(h.out.recs), h.op
}

// runRestoring runs steps through one subtask, taking a checkpoint after
// each step in cuts; after each checkpoint it keeps processing a few steps
// (output lost in the crash that follows), encodes the snapshot only then
// (as the asynchronous part of a checkpoint may), and restores a fresh
// operator from it, which replays from the checkpoint.
func runRestoring(t *testing.T, newOp func() runtime.Operator, steps []step, cuts []int) []out {
	t.Helper()
	var committed []runtime.Record[res]
	var snap []byte
	var restored *checkpoint.SubtaskState
	next := 0
	for _, cut := range append(slices.Clone(cuts), len(steps)-1) {
		if cut < next {
			continue
		}
		h := open[ev, res](t, newOp, fullRange(), restored, snapOrNone(snap)...)
		wm := restoredWM(restored)
		for _, st := range steps[next : cut+1] {
			h.process(t, st.recs...)
			h.watermark(t, st.wm)
			wm = max(wm, st.wm)
		}
		captured := h.capture(t, int64(cut))
		committed = append(committed, h.out.recs...)
		for _, st := range steps[cut+1 : min(cut+4, len(steps))] {
			h.process(t, st.recs...)
			h.watermark(t, st.wm)
		}
		snap = encode(t, captured)
		_ = h.op.Close()
		restored = &checkpoint.SubtaskState{Watermark: wm}
		next = cut + 1
	}
	h := open[ev, res](t, newOp, fullRange(), restored, snap)
	h.watermark(t, runtime.MaxWatermark)
	return outsOf(append(committed, h.out.recs...))
}
