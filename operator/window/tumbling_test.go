package window_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// nopSource is a stream.Source that is never run: the tests drive the window
// operator directly.
type nopSource[T any] struct{}

func (nopSource[T]) NewSubtask() runtime.SourceSubtask[T] { return nil }
func (nopSource[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "test", Capabilities: runtime.Capabilities{Replayable: true}}
}
func (nopSource[T]) Describe() string { return "test" }

// collector is a runtime.Output keeping every emitted record.
type collector[O any] struct{ recs []runtime.Record[O] }

func (c *collector[O]) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[O])
	if !ok {
		return fmt.Errorf("collector: got %T", r)
	}
	c.recs = append(c.recs, b...)
	return nil
}

// ev is the typed record of most tests.
type ev struct {
	Key string
	V   int64
}

// sumAcc counts and sums a window's values.
type sumAcc struct{ N, Sum int64 }

type sumCodec struct{}

func (sumCodec) Name() string { return "test.sum" }
func (sumCodec) Append(dst []byte, a sumAcc) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, a.N), a.Sum)
}
func (sumCodec) Decode(src []byte) (sumAcc, int, error) {
	n, k := binary.Varint(src)
	if k <= 0 {
		return sumAcc{}, 0, errors.New("truncated")
	}
	s, m := binary.Varint(src[k:])
	if m <= 0 {
		return sumAcc{}, 0, errors.New("truncated")
	}
	return sumAcc{n, s}, k + m, nil
}

var sumAgg = window.Aggregate[ev, sumAcc]{
	Init:  func() sumAcc { return sumAcc{} },
	Add:   func(a sumAcc, e ev) sumAcc { return sumAcc{a.N + 1, a.Sum + e.V} },
	Codec: sumCodec{},
}

type result = window.Result[string, sumAcc]

// harness is one window subtask with its backend and output.
type harness[T any, O any] struct {
	op      runtime.Operator
	backend *state.Backend
	out     *collector[O]
}

const opID = "per_key"

func fullRange() state.KeyGroupRange { return state.KeyGroupRange{Start: 0, End: 128} }

// newTyped builds the typed window operator of size size.
func newTyped(t *testing.T, size time.Duration) func() runtime.Operator {
	t.Helper()
	p := stream.New("test")
	src := stream.From[ev](p, "src", nopSource[ev]{})
	ks := stream.KeyBy(src, func(e ev) string { return e.Key })
	out := window.Tumbling(ks, opID, size, sumAgg, window.ResultOf[string, sumAcc])
	stream.To(out, "sink", discardSink[result]{})
	if _, err := p.Plan(); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return out.Node().NewOperator
}

type discardSink[T any] struct{}

func (discardSink[T]) NewSubtask() runtime.SinkSubtask[T] { return nil }
func (discardSink[T]) Committer() runtime.Committer       { return nil }
func (discardSink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (discardSink[T]) Describe() string { return "discard" }

// open opens a subtask of newOp on a fresh backend, or on one restored from
// snapshots with the restored watermark wm.
func open[T, O any](t *testing.T, newOp func() runtime.Operator, kg state.KeyGroupRange, restored *checkpoint.SubtaskState, snapshots ...[]byte) *harness[T, O] {
	t.Helper()
	b := state.NewBackend(opID, 128, kg)
	if len(snapshots) > 0 {
		if err := b.Restore(snapshots...); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	return openOn[T, O](t, newOp, b, kg, restored)
}

// openOn opens a subtask of newOp on the backend b of key groups kg
// (restored, when not nil, with the restored watermark).
func openOn[T, O any](t *testing.T, newOp func() runtime.Operator, b *state.Backend, kg state.KeyGroupRange, restored *checkpoint.SubtaskState) *harness[T, O] {
	t.Helper()
	h := &harness[T, O]{op: newOp(), backend: b, out: &collector[O]{}}
	ctx := &runtime.Context{
		Task:           checkpoint.TaskID{Operator: opID},
		Parallelism:    1,
		MaxParallelism: 128,
		KeyGroups:      kg,
		State:          b,
		Output:         h.out,
		Restored:       restored,
		JobID:          "job",
	}
	if err := h.op.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if u := b.Unclaimed(); len(u) > 0 {
		t.Fatalf("restored state not claimed by the operator: %v", u)
	}
	return h
}

func (h *harness[T, O]) process(t *testing.T, recs ...runtime.Record[T]) {
	t.Helper()
	if err := h.op.ProcessBatch(0, runtime.Batch[T](recs)); err != nil {
		t.Fatalf("ProcessBatch: %v", err)
	}
	if err := h.backend.Err(); err != nil {
		t.Fatal(err)
	}
}

func (h *harness[T, O]) watermark(t *testing.T, wm int64) []runtime.Record[O] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessWatermark(wm); err != nil {
		t.Fatalf("ProcessWatermark(%d): %v", wm, err)
	}
	return h.out.recs[n:]
}

// checkpoint takes the keyed state snapshot and the non-keyed one.
func (h *harness[T, O]) checkpoint(t *testing.T, id int64) []byte {
	t.Helper()
	return encode(t, h.capture(t, id))
}

// capture is the synchronous part of a checkpoint; encode is the
// asynchronous part, which may run after the task processed more records.
func (h *harness[T, O]) capture(t *testing.T, id int64) *state.Snapshot {
	t.Helper()
	if _, err := h.op.Snapshot(id); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return h.backend.Snapshot()
}

func encode(t *testing.T, s *state.Snapshot) []byte {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return data
}

func rec(key string, v, ts int64) runtime.Record[ev] {
	return runtime.Record[ev]{Value: ev{key, v}, Time: ts}
}

func TestTumblingAssignsWindowsIncludingNegativeTimes(t *testing.T) {
	h := open[ev, result](t, newTyped(t, 10), fullRange(), nil)
	h.process(t,
		rec("a", 1, -15), // [-20,-10)
		rec("a", 2, -11), // [-20,-10)
		rec("a", 4, -10), // [-10,0)
		rec("a", 8, -1),  // [-10,0)
		rec("a", 16, 0),  // [0,10)
		rec("a", 32, 9),  // [0,10)
		rec("a", 64, 10), // [10,20)
		rec("b", 128, 5), // b [0,10)
	)
	got := h.watermark(t, runtime.MaxWatermark)
	type w struct {
		key        string
		start, end int64
		n, sum     int64
		ts         int64
	}
	var have []w
	for _, r := range got {
		have = append(have, w{r.Value.Key, r.Value.Window.Start, r.Value.Window.End, r.Value.Value.N, r.Value.Value.Sum, r.Time})
	}
	slices.SortFunc(have, func(x, y w) int {
		if c := strings.Compare(x.key, y.key); c != 0 {
			return c
		}
		return int(x.start - y.start)
	})
	want := []w{
		{"a", -20, -10, 2, 3, -11},
		{"a", -10, 0, 2, 12, -1},
		{"a", 0, 10, 2, 48, 9},
		{"a", 10, 20, 1, 64, 19},
		{"b", 0, 10, 1, 128, 9},
	}
	if !slices.Equal(have, want) {
		t.Fatalf("results\n got %+v\nwant %+v", have, want)
	}
	if got := (window.Window{Start: -10, End: 0}).MaxTimestamp(); got != -1 {
		t.Errorf("MaxTimestamp of [-10,0) = %d, want -1", got)
	}
}

// A window [start, end) fires when the watermark reaches end-1, not before;
// its result carries event time end-1; later records for it are dropped.
func TestTumblingFiresAtEndMinusOne(t *testing.T) {
	h := open[ev, result](t, newTyped(t, 100), fullRange(), nil)
	h.process(t, rec("k", 1, 100), rec("k", 2, 150))
	if got := h.watermark(t, 198); len(got) != 0 {
		t.Fatalf("watermark 198 fired %+v before the window [100,200) ended", got)
	}
	// Still open at 198: a record at 199 counts.
	h.process(t, rec("k", 4, 199))
	got := h.watermark(t, 199)
	if len(got) != 1 {
		t.Fatalf("watermark 199 (end-1) fired %d results, want 1", len(got))
	}
	r := got[0]
	if r.Time != 199 || r.Value.Window != (window.Window{Start: 100, End: 200}) || r.Value.Value != (sumAcc{3, 7}) || r.Value.Key != "k" {
		t.Fatalf("result %+v at %d; want key k, [100,200), {3 7} at 199", r.Value, r.Time)
	}
	// Late: the window already fired. Its records are dropped, not re-fired.
	h.process(t, rec("k", 1000, 100), rec("k", 1000, 199), rec("other", 1000, 150))
	// Not late: the next window.
	h.process(t, rec("k", 8, 200))
	got = h.watermark(t, runtime.MaxWatermark)
	if len(got) != 1 || got[0].Value.Window.Start != 200 || got[0].Value.Value != (sumAcc{1, 8}) {
		t.Fatalf("after late records, final results %+v; want only [200,300) with {1 8}", got)
	}
	// Nothing pending fires twice.
	if got := h.watermark(t, runtime.MaxWatermark); len(got) != 0 {
		t.Fatalf("a second MaxWatermark fired %+v", got)
	}
}

// A watermark that jumps over several windows fires all of them, each once,
// in event-time order.
func TestTumblingWatermarkJumpFiresAllInOrder(t *testing.T) {
	h := open[ev, result](t, newTyped(t, 10), fullRange(), nil)
	for ts := int64(0); ts < 50; ts += 3 {
		h.process(t, rec("a", 1, ts), rec("b", 1, ts))
	}
	got := h.watermark(t, 29)
	if len(got) != 6 {
		t.Fatalf("watermark 29 fired %d results, want 6 (3 windows x 2 keys)", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time < got[i-1].Time {
			t.Fatalf("results out of event-time order: %+v", got)
		}
	}
	for _, r := range got {
		if r.Time != r.Value.Window.End-1 {
			t.Fatalf("result %+v at %d, want at window end - 1", r.Value, r.Time)
		}
	}
	if got := h.watermark(t, 30); len(got) != 0 {
		t.Fatalf("watermark 30 fired %+v", got)
	}
}

// A restored watermark makes records of windows that fired before the
// checkpoint late.
func TestTumblingRestoredWatermarkDropsLate(t *testing.T) {
	newOp := newTyped(t, 10)
	h := open[ev, result](t, newOp, fullRange(), nil)
	h.process(t, rec("a", 1, 5), rec("a", 1, 15))
	if got := h.watermark(t, 9); len(got) != 1 {
		t.Fatalf("fired %+v", got)
	}
	snap := h.checkpoint(t, 1)

	r := open[ev, result](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: 9}, snap)
	r.process(t, rec("a", 100, 3)) // late: [0,10) fired before the checkpoint
	got := r.watermark(t, runtime.MaxWatermark)
	if len(got) != 1 || got[0].Value.Window.Start != 10 || got[0].Value.Value != (sumAcc{1, 1}) {
		t.Fatalf("after restore: %+v; want only [10,20) with {1 1}", got)
	}
}

// --- snapshot and restore mid-window --------------------------------------

// rowRecords is a deterministic input: record i has key i%keys, value i and
// event time i*step, in batches of batch records.
func rowBatches(n, keys, batch int, step int64) [][]runtime.Record[row.Row] {
	var out [][]runtime.Record[row.Row]
	for i := 0; i < n; i += batch {
		var b []runtime.Record[row.Row]
		for j := i; j < min(i+batch, n); j++ {
			b = append(b, runtime.Record[row.Row]{
				Value: row.Row{row.IntValue(int64(j)), row.IntValue(int64(j % keys)), row.IntValue(int64(j))},
				Time:  int64(j) * step,
			})
		}
		out = append(out, b)
	}
	return out
}

var inSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

// newRowWindow builds the row window the YAML config builds: key by "key",
// count, sum, min, max and avg of value.
func newRowWindow(t *testing.T, size time.Duration) (func() runtime.Operator, *row.Schema) {
	t.Helper()
	var specs []window.AggregateSpec
	for _, s := range [][2]string{{"count", "count()"}, {"sum", "sum(value)"}, {"lo", "min(value)"}, {"hi", "max(value)"}, {"mean", "avg(value)"}} {
		spec, err := window.ParseAggregate(s[0], s[1])
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	agg, fields, result, err := window.RowAggregates(inSchema, specs)
	if err != nil {
		t.Fatal(err)
	}
	schema := &row.Schema{Fields: append([]row.Field{{Name: "key", Kind: row.Int}, {Name: "window_start", Kind: row.Time}, {Name: "window_end", Kind: row.Time}}, fields...)}
	p := stream.New("test")
	src := stream.From[row.Row](p, "src", nopSource[row.Row]{})
	ks := stream.KeyBy(src, func(r row.Row) row.Value { return r[1] })
	ks.KeyCodec = row.ValueCodec{}
	out := window.Tumbling(ks, opID, size, agg, func(k row.Value, w window.Window, acc window.RowAcc) row.Row {
		return result(acc, row.Row{k, row.TimeValue(w.Start), row.TimeValue(w.End)})
	})
	stream.To(out, "sink", discardSink[row.Row]{})
	if _, err := p.Plan(); err != nil {
		t.Fatal(err)
	}
	return out.Node().NewOperator, schema
}

// lines renders results as sorted JSON lines with their event times.
func lines(schema *row.Schema, recs []runtime.Record[row.Row]) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d %s", r.Time, schema.AppendJSON(nil, r.Value)))
	}
	slices.Sort(out)
	return out
}

// uninterrupted runs every batch with a watermark after each (the event time
// of its last record, as datagen does), then MaxWatermark.
func uninterrupted(t *testing.T, newOp func() runtime.Operator, batches [][]runtime.Record[row.Row]) []runtime.Record[row.Row] {
	h := open[row.Row, row.Row](t, newOp, fullRange(), nil)
	for _, b := range batches {
		h.process(t, b...)
		h.watermark(t, b[len(b)-1].Time)
	}
	h.watermark(t, runtime.MaxWatermark)
	return h.out.recs
}

// A window spanning a checkpoint is neither lost nor double counted: run
// until a checkpoint, keep running (output after the checkpoint is discarded,
// as an exactly-once sink never commits it), crash, restore from the
// checkpoint into a fresh backend and operator, replay from the checkpoint's
// position, and compare with an uninterrupted run.
func TestTumblingSnapshotRestoreMatchesUninterrupted(t *testing.T) {
	newOp, schema := newRowWindow(t, 100*time.Millisecond)
	// 7 keys, 1 record/ms, 100ms windows, batches of 37: every checkpoint
	// point falls inside open windows of every key.
	batches := rowBatches(1000, 7, 37, int64(time.Millisecond))
	want := lines(schema, uninterrupted(t, newOp, batches))
	if len(want) != 7*10 {
		t.Fatalf("uninterrupted run produced %d results, want 70", len(want))
	}

	for cut := range len(batches) {
		h := open[row.Row, row.Row](t, newOp, fullRange(), nil)
		var wm int64 = runtime.MinWatermark
		for _, b := range batches[:cut+1] {
			h.process(t, b...)
			wm = b[len(b)-1].Time
			h.watermark(t, wm)
		}
		captured := h.capture(t, 1)
		committed := slices.Clone(h.out.recs)
		// Work after the checkpoint, lost in the crash. The snapshot is
		// encoded only afterwards, as the asynchronous part of a checkpoint
		// may be: it must still hold the state as of the barrier.
		for _, b := range batches[cut+1 : min(cut+4, len(batches))] {
			h.process(t, b...)
			h.watermark(t, b[len(b)-1].Time)
		}
		snap := encode(t, captured)
		_ = h.op.Close()

		r := open[row.Row, row.Row](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: wm}, snap)
		for _, b := range batches[cut+1:] {
			r.process(t, b...)
			r.watermark(t, b[len(b)-1].Time)
		}
		r.watermark(t, runtime.MaxWatermark)
		got := lines(schema, append(committed, r.out.recs...))
		if !slices.Equal(got, want) {
			t.Fatalf("checkpoint after batch %d: restored run differs from uninterrupted run\n%s", cut, diff(got, want))
		}
	}
}

// Several checkpoints and restores in a row, at random points.
func TestTumblingRepeatedRestores(t *testing.T) {
	newOp, schema := newRowWindow(t, 50*time.Millisecond)
	batches := rowBatches(2000, 5, 23, int64(time.Millisecond))
	want := lines(schema, uninterrupted(t, newOp, batches))
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		var committed []runtime.Record[row.Row]
		var snap []byte
		var restored *checkpoint.SubtaskState
		next := 0
		for next < len(batches) {
			h := open[row.Row, row.Row](t, newOp, fullRange(), restored, snapOrNone(snap)...)
			lastCkpt := next + rng.IntN(len(batches)-next) // checkpoint after this batch
			wm := restoredWM(restored)
			for i := next; i <= lastCkpt; i++ {
				h.process(t, batches[i]...)
				wm = batches[i][len(batches[i])-1].Time
				h.watermark(t, wm)
			}
			snap = h.checkpoint(t, int64(trial))
			committed = append(committed, h.out.recs...)
			restored = &checkpoint.SubtaskState{Watermark: wm}
			next = lastCkpt + 1
			_ = h.op.Close()
		}
		h := open[row.Row, row.Row](t, newOp, fullRange(), restored, snap)
		h.watermark(t, runtime.MaxWatermark)
		got := lines(schema, append(committed, h.out.recs...))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: restored runs differ from uninterrupted run\n%s", trial, diff(got, want))
		}
	}
}

func snapOrNone(s []byte) [][]byte {
	if s == nil {
		return nil
	}
	return [][]byte{s}
}

func restoredWM(s *checkpoint.SubtaskState) int64 {
	if s == nil {
		return runtime.MinWatermark
	}
	return s.Watermark
}

// Snapshots of two subtasks restore into one subtask (rescaling 2 -> 1): the
// open windows of both continue.
func TestTumblingRestoreRescaled(t *testing.T) {
	newOp, schema := newRowWindow(t, 100*time.Millisecond)
	batches := rowBatches(600, 9, 50, int64(time.Millisecond))
	want := lines(schema, uninterrupted(t, newOp, batches))

	ranges := []state.KeyGroupRange{state.KeyGroupRangeFor(128, 2, 0), state.KeyGroupRangeFor(128, 2, 1)}
	hs := []*harness[row.Row, row.Row]{
		open[row.Row, row.Row](t, newOp, ranges[0], nil),
		open[row.Row, row.Row](t, newOp, ranges[1], nil),
	}
	const cut = 5 // checkpoint after batch 5 (t = 299ms): windows [200,300) fired, [300,400) not started
	var wm int64
	for _, b := range batches[:cut+1] {
		parts := make([][]runtime.Record[row.Row], 2)
		for _, r := range b {
			kg := state.KeyGroupFor(state.HashKey(r.Value[1]), 128)
			s := state.SubtaskForKeyGroup(128, 2, kg)
			parts[s] = append(parts[s], r)
		}
		for s, h := range hs {
			if len(parts[s]) > 0 {
				h.process(t, parts[s]...)
			}
		}
		wm = b[len(b)-1].Time - int64(20*time.Millisecond) // mid-window cut: lag the watermark
		for _, h := range hs {
			h.watermark(t, wm)
		}
	}
	snaps := [][]byte{hs[0].checkpoint(t, 1), hs[1].checkpoint(t, 1)}
	committed := append(slices.Clone(hs[0].out.recs), hs[1].out.recs...)

	r := open[row.Row, row.Row](t, newOp, fullRange(), &checkpoint.SubtaskState{Watermark: wm}, snaps...)
	for _, b := range batches[cut+1:] {
		r.process(t, b...)
		r.watermark(t, b[len(b)-1].Time)
	}
	r.watermark(t, runtime.MaxWatermark)
	got := lines(schema, append(committed, r.out.recs...))
	if !slices.Equal(got, want) {
		t.Fatalf("rescaled restore differs from uninterrupted run\n%s", diff(got, want))
	}
}

func diff(got, want []string) string {
	var b strings.Builder
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "  extra:   %s\n", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "  missing: %s\n", w)
		}
	}
	fmt.Fprintf(&b, "  (%d results, want %d)", len(got), len(want))
	return b.String()
}

// The JSON output of a row window follows the README: key, RFC 3339 UTC
// window bounds, count and integer sum as JSON integers, avg a float.
func TestRowWindowOutputJSON(t *testing.T) {
	newOp, schema := newRowWindow(t, time.Second)
	h := open[row.Row, row.Row](t, newOp, fullRange(), nil)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i, v := range []int64{3, 4, 8} {
		h.process(t, runtime.Record[row.Row]{Value: row.Row{row.IntValue(int64(i)), row.IntValue(42), row.IntValue(v)}, Time: base + int64(i)*int64(time.Millisecond)})
	}
	got := h.watermark(t, base+int64(time.Second)-1)
	if len(got) != 1 {
		t.Fatalf("fired %d results", len(got))
	}
	js := string(schema.AppendJSON(nil, got[0].Value))
	want := `{"key":42,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:00:01Z","count":3,"sum":15,"lo":3,"hi":8,"mean":5}`
	if js != want {
		t.Fatalf("output\n got %s\nwant %s", js, want)
	}
	if got[0].Time != base+int64(time.Second)-1 {
		t.Fatalf("result time %d, want window end - 1", got[0].Time)
	}
}
