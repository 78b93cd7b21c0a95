package join_test

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// TestMain fails the package if a test leaves a goroutine behind (a job that
// did not shut down).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lrec and rrec are the left and right records of most tests: distinct types,
// so a join that mixed up its inputs would not compile or would fail at once.
type lrec struct{ ID, Key int64 }
type rrec struct{ ID, Key int64 }

// windowT is the window type the window joins hand to cogroup functions.
type windowT = window.Window

// pair is a join result: the ids of its two records.
type pair struct{ L, R int64 }

func pairOf(_ int64, l lrec, r rrec) pair { return pair{l.ID, r.ID} }

// appendTwo and decodeTwo encode two int64s as varints.
func appendTwo(dst []byte, a, b int64) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, a), b)
}

func decodeTwo(src []byte) (a, b int64, n int, err error) {
	a, k := binary.Varint(src)
	if k <= 0 {
		return 0, 0, 0, errors.New("truncated")
	}
	b, m := binary.Varint(src[k:])
	if m <= 0 {
		return 0, 0, 0, errors.New("truncated")
	}
	return a, b, k + m, nil
}

// lrecCodec and rrecCodec are explicit codecs: two varints.
type lrecCodec struct{}

func (lrecCodec) Name() string                     { return "test.lrec/v1" }
func (lrecCodec) Append(dst []byte, v lrec) []byte { return appendTwo(dst, v.ID, v.Key) }
func (lrecCodec) Decode(src []byte) (lrec, int, error) {
	a, b, n, err := decodeTwo(src)
	return lrec{a, b}, n, err
}

type rrecCodec struct{}

func (rrecCodec) Name() string                     { return "test.rrec/v1" }
func (rrecCodec) Append(dst []byte, v rrec) []byte { return appendTwo(dst, v.ID, v.Key) }
func (rrecCodec) Decode(src []byte) (rrec, int, error) {
	a, b, n, err := decodeTwo(src)
	return rrec{a, b}, n, err
}

// nopSource is a stream.Source never run: harness tests drive the join
// operator directly.
type nopSource[T any] struct{}

func (nopSource[T]) NewSubtask() runtime.SourceSubtask[T] { return nil }
func (nopSource[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (nopSource[T]) Describe() string { return "test" }

// discardSink is a stream.Sink never run.
type discardSink[T any] struct{}

func (discardSink[T]) NewSubtask() runtime.SinkSubtask[T] { return nil }
func (discardSink[T]) Committer() runtime.Committer       { return nil }
func (discardSink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (discardSink[T]) Describe() string { return "discard" }

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

// joinFunc builds a join of lk and rk named id.
type joinFunc[L, R any, O any] func(lk stream.KeyedStream[L, int64], rk stream.KeyedStream[R, int64], id string, opts ...join.Option) stream.Stream[O]

// newOp plans a pipeline around build and returns the join node's operator
// factory.
func newOp[L, R, O any](t testing.TB, build joinFunc[L, R, O], keyL func(L) int64, keyR func(R) int64, opts ...join.Option) func() runtime.Operator {
	t.Helper()
	p := stream.New("test")
	lk := stream.KeyBy(stream.From[L](p, "left", nopSource[L]{}), keyL)
	rk := stream.KeyBy(stream.From[R](p, "right", nopSource[R]{}), keyR)
	out := build(lk, rk, opID, opts...)
	stream.To(out, "sink", discardSink[O]{})
	if _, err := p.Plan(); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return out.Node().NewOperator
}

const opID = "join"

func fullRange() state.KeyGroupRange { return state.KeyGroupRange{Start: 0, End: 128} }

// harness is one join subtask with its backend and output, driven by the
// test as the runtime would drive it.
type harness[L, R, O any] struct {
	op      runtime.Operator
	backend *state.Backend
	out     *collector[O]
}

// open opens a subtask of newOp on a fresh backend, or on one restored from
// snapshots with restored watermark wm.
func open[L, R, O any](t testing.TB, newOp func() runtime.Operator, restored *checkpoint.SubtaskState, snapshots ...[]byte) *harness[L, R, O] {
	t.Helper()
	h, err := tryOpen[L, R, O](newOp, fullRange(), restored, snapshots...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func tryOpen[L, R, O any](newOp func() runtime.Operator, kg state.KeyGroupRange, restored *checkpoint.SubtaskState, snapshots ...[]byte) (*harness[L, R, O], error) {
	b := state.NewBackend(opID, 128, kg)
	if len(snapshots) > 0 {
		if err := b.Restore(snapshots...); err != nil {
			return nil, fmt.Errorf("Restore: %w", err)
		}
	}
	h := &harness[L, R, O]{op: newOp(), backend: b, out: &collector[O]{}}
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
		return nil, fmt.Errorf("Open: %w", err)
	}
	if u := b.Unclaimed(); len(u) > 0 {
		return nil, fmt.Errorf("restored state not claimed by the operator: %v", u)
	}
	return h, nil
}

func (h *harness[L, R, O]) left(t testing.TB, recs ...runtime.Record[L]) []runtime.Record[O] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessBatch(0, runtime.Batch[L](recs)); err != nil {
		t.Fatalf("ProcessBatch(left): %v", err)
	}
	if err := h.backend.Err(); err != nil {
		t.Fatal(err)
	}
	return h.out.recs[n:]
}

func (h *harness[L, R, O]) right(t testing.TB, recs ...runtime.Record[R]) []runtime.Record[O] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessBatch(1, runtime.Batch[R](recs)); err != nil {
		t.Fatalf("ProcessBatch(right): %v", err)
	}
	if err := h.backend.Err(); err != nil {
		t.Fatal(err)
	}
	return h.out.recs[n:]
}

func (h *harness[L, R, O]) watermark(t testing.TB, wm int64) []runtime.Record[O] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessWatermark(wm); err != nil {
		t.Fatalf("ProcessWatermark(%d): %v", wm, err)
	}
	return h.out.recs[n:]
}

// snapshot takes the operator's and the backend's snapshot and encodes it.
func (h *harness[L, R, O]) snapshot(t testing.TB, id int64) []byte {
	t.Helper()
	if _, err := h.op.Snapshot(id); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	data, err := h.backend.Snapshot().Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return data
}

// entries returns the number of state entries (keys, or timers) per state
// name in the encoded snapshot, from state.Inspect.
func entries(t testing.TB, snap []byte) map[string]int {
	t.Helper()
	info, err := state.Inspect(snap)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, sec := range info.Sections {
		for _, st := range sec.States {
			n[st.Name] += st.Entries
		}
	}
	return n
}

func lr(id, key, ts int64) runtime.Record[lrec] {
	return runtime.Record[lrec]{Value: lrec{id, key}, Time: ts}
}

func rr(id, key, ts int64) runtime.Record[rrec] {
	return runtime.Record[rrec]{Value: rrec{id, key}, Time: ts}
}

// timed is a result with its event time, as the tests compare them.
type timed struct{ L, R, T int64 }

func (a timed) compare(b timed) int {
	return cmp.Or(cmp.Compare(a.L, b.L), cmp.Compare(a.R, b.R), cmp.Compare(a.T, b.T))
}

func timedOf(recs []runtime.Record[pair]) []timed {
	out := make([]timed, len(recs))
	for i, r := range recs {
		out[i] = timed{r.Value.L, r.Value.R, r.Time}
	}
	slices.SortFunc(out, timed.compare)
	return out
}

func sorted(ts []timed) []timed {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, timed.compare)
	return ts
}

// diff describes how got differs from want (both sorted), as multisets.
func diff(got, want []timed) string {
	var missing, extra []timed
	i, k := 0, 0
	for i < len(got) || k < len(want) {
		switch {
		case k == len(want) || (i < len(got) && got[i].compare(want[k]) < 0):
			extra = append(extra, got[i])
			i++
		case i == len(got) || got[i].compare(want[k]) > 0:
			missing = append(missing, want[k])
			k++
		default:
			i++
			k++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d results, want %d: %d missing, %d extra (duplicated or wrong)", len(got), len(want), len(missing), len(extra))
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\n  missing e.g. %v", missing[:min(5, len(missing))])
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "\n  extra e.g. %v", extra[:min(5, len(extra))])
	}
	return b.String()
}

// --- generated inputs and brute-force references ----------------------------

// input is a generated two-sided input. Record i of a side has event time
// base + i*step + jitter with jitter in [0, delay), all in whole
// milliseconds (so exact offsets and window edges occur): out of order by
// less than delay, so a source whose watermark lags its largest emitted time
// by delay never emits a record at or below its watermark.
type input struct {
	left  []runtime.Record[lrec]
	right []runtime.Record[rrec]
	delay int64
}

// base is the event time of record 0: a realistic epoch, so nothing is near
// the ends of int64 and the windows are aligned like real ones.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func generate(rng *rand.Rand, nLeft, nRight int, keys int64, leftStep, rightStep, delay time.Duration) input {
	in := input{delay: int64(delay)}
	ms := int64(time.Millisecond)
	for i := range nLeft {
		ts := base + int64(i)*int64(leftStep)/ms*ms + rng.Int64N(int64(delay)/ms)*ms
		in.left = append(in.left, runtime.Record[lrec]{Value: lrec{ID: int64(i), Key: rng.Int64N(keys)}, Time: ts})
	}
	for i := range nRight {
		ts := base + int64(i)*int64(rightStep)/ms*ms + rng.Int64N(int64(delay)/ms)*ms
		in.right = append(in.right, runtime.Record[rrec]{Value: rrec{ID: int64(i), Key: rng.Int64N(keys)}, Time: ts})
	}
	return in
}

// bruteForce returns every (l, r) of equal keys for which match says yes,
// with event time at(l, r): the reference the joins are checked against.
func bruteForce(in input, match func(l, r int64) bool, at func(l, r int64) int64) []timed {
	byKey := map[int64][]runtime.Record[rrec]{}
	for _, r := range in.right {
		byKey[r.Value.Key] = append(byKey[r.Value.Key], r)
	}
	var out []timed
	for _, l := range in.left {
		for _, r := range byKey[l.Value.Key] {
			if match(l.Time, r.Time) {
				out = append(out, timed{l.Value.ID, r.Value.ID, at(l.Time, r.Time)})
			}
		}
	}
	slices.SortFunc(out, timed.compare)
	return out
}

// spec is a join under test: how to build it and what it must produce.
type spec struct {
	name  string
	build joinFunc[lrec, rrec, pair]
	// match and at define the join's result (see bruteForce).
	match func(l, r int64) bool
	at    func(l, r int64) int64
	// matchRec, when set, replaces match: a join whose pairs depend on the
	// left record's value.
	matchRec func(l runtime.Record[lrec], r runtime.Record[rrec]) bool
}

func (s spec) expect(in input) []timed {
	if s.matchRec == nil {
		return bruteForce(in, s.match, s.at)
	}
	var out []timed
	for _, l := range in.left {
		for _, r := range in.right {
			if l.Value.Key == r.Value.Key && s.matchRec(l, r) {
				out = append(out, timed{l.Value.ID, r.Value.ID, s.at(l.Time, r.Time)})
			}
		}
	}
	slices.SortFunc(out, timed.compare)
	return out
}

// untilSpec is IntervalUntil with the given lower bound, each left record's
// upper bound a time its id gives: from 5ms before the record's nominal time
// (an empty interval, when the record is late enough) to 25ms after, and
// none (NULL) for every ninth id.
func untilSpec(lower time.Duration) spec {
	until := func(l lrec) (int64, bool) {
		return base + l.ID*int64(time.Millisecond) + (l.ID%4)*int64(10*time.Millisecond) - int64(5*time.Millisecond), l.ID%9 != 0
	}
	return spec{
		name: fmt.Sprintf("until[%v]", lower),
		build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.IntervalUntil(lk, rk, id, lower, until, "id-bound", pairOf, opts...)
		},
		matchRec: func(l runtime.Record[lrec], r runtime.Record[rrec]) bool {
			u, ok := until(l.Value)
			return ok && r.Time >= l.Time+int64(lower) && r.Time <= u
		},
		at: maxTime,
	}
}

func maxTime(l, r int64) int64 { return max(l, r) }

func intervalSpec(lower, upper time.Duration) spec {
	return spec{
		name: fmt.Sprintf("interval[%v,%v]", lower, upper),
		build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.Interval(lk, rk, id, lower, upper, pairOf, opts...)
		},
		match: func(l, r int64) bool { return r >= l+int64(lower) && r <= l+int64(upper) },
		at:    maxTime,
	}
}

func windowSpec(size time.Duration) spec {
	sz := int64(size)
	start := func(t int64) int64 { return t - ((t%sz)+sz)%sz }
	return spec{
		name: fmt.Sprintf("window[%v]", size),
		build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.Window(lk, rk, id, size, pairOf, opts...)
		},
		match: func(l, r int64) bool { return start(l) == start(r) },
		at:    func(l, _ int64) int64 { return start(l) + sz - 1 },
	}
}

func innerSpec(ttl time.Duration) spec {
	return spec{
		name: fmt.Sprintf("inner[ttl=%v]", ttl),
		build: func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
			return join.Inner(lk, rk, id, ttl, pairOf, opts...)
		},
		match: func(l, r int64) bool { return ttl == 0 || (l-r < int64(ttl) && r-l < int64(ttl)) },
		at:    maxTime,
	}
}

func keyL(l lrec) int64 { return l.Key }
func keyR(r rrec) int64 { return r.Key }
