package join

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Window joins left and right in tumbling event-time windows of size,
// aligned to the Unix epoch: when the watermark reaches a window's last
// instant (Window.MaxTimestamp), it emits output(key, l, r) for every left
// record l and right record r of the key in that window (their cross
// product), each with event time Window.MaxTimestamp. A key with records on
// one side only emits nothing. This is Flink's window join
// (a.join(b).where(...).equalTo(...).window(TumblingEventTimeWindows.of(size))).
//
// A record whose window has already fired (Window.MaxTimestamp <= watermark)
// is late: dropped and counted, as Flink's window operator does with no
// allowed lateness. Records of an open window are kept in keyed state until
// it fires, then dropped.
func Window[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	size time.Duration, output func(K, L, R) O, opts ...Option) stream.Stream[O] {
	if output == nil {
		left.Pipeline().Errorf("window join %s: the output function is nil", id)
	}
	apply := func(key K, _ window.Window, ls []L, rs []R, emit func(O)) {
		for _, l := range ls {
			for _, r := range rs {
				emit(output(key, l, r))
			}
		}
	}
	return newWindowJoin(left, right, id, size, "window join", true, apply, opts)
}

// WindowCoGroup groups left and right in tumbling event-time windows of size
// and, when the watermark reaches a window's last instant, calls
// apply(key, window, lefts, rights, emit) once for every key with records in
// that window on either side (one of the lists may be empty, so outer joins
// and semi-joins can be written). Values passed to emit get event time
// Window.MaxTimestamp. This is Flink's window coGroup.
//
// lefts and rights hold the window's records in arrival order (which may
// differ between runs: only the multiset is deterministic). They are
// read-only views of the state: apply must not modify their elements; it may
// keep the slices. emit must be called only during apply.
//
// Late records are dropped and counted as for Window.
func WindowCoGroup[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	size time.Duration, apply func(key K, w window.Window, lefts []L, rights []R, emit func(O)), opts ...Option) stream.Stream[O] {
	if apply == nil {
		left.Pipeline().Errorf("window cogroup %s: the apply function is nil", id)
	}
	return newWindowJoin(left, right, id, size, "window cogroup", false, apply, opts)
}

// newWindowJoin builds a window join node; inner says whether apply is
// skipped for keys with records on one side only.
func newWindowJoin[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	size time.Duration, kind string, inner bool, apply func(K, window.Window, []L, []R, func(O)), opts []Option) stream.Stream[O] {
	s := resolve(kind, id, left, right, opts)
	noUniqueLeft(left.Pipeline(), kind, id, s)
	if size <= 0 {
		left.Pipeline().Errorf("%s %s: window size %v must be positive", kind, id, size)
		size = 1
	}
	// The schema leaves the kind out: a join and a cogroup keep the same
	// state with the same meaning, so a pipeline may switch between them.
	schema := fmt.Sprintf("window-join(key=%s,size=%v)", s.keyCodec.Name(), size)
	n := &runtime.Node{ID: id, Describe: fmt.Sprintf("%s, tumbling event-time windows of %v", kind, size), Type: kind, DropsLate: true}
	n.NewOperator = func() runtime.Operator {
		return &windowJoin[L, R, K, O]{kind: kind, size: int64(size), schema: schema, inner: inner, sides: s, apply: apply}
	}
	return addNode[L, R, K, O](left, right, n, s)
}

// windowJoin is one subtask of a window join or cogroup.
type windowJoin[L, R any, K comparable, O any] struct {
	kind   string
	size   int64
	schema string
	inner  bool
	sides[L, R, K]
	apply func(K, window.Window, []L, []R, func(O))

	task  string
	out   runtime.Output
	hash  func(K) uint64
	left  *state.ListState[bucketKey[K], L]
	right *state.ListState[bucketKey[K], R]
	// windows holds, by window start, the keys with records in it, in the
	// order they got their first record. Not state: every key's window of
	// one start fires at the same watermark, so Open rebuilds it from the
	// lists instead of keeping a timer per key and window.
	// INVARIANT: a (key, start) has a non-empty list on either side if and
	// only if windows lists key under start, once. Keys are added with
	// AddOnce: the index's own set says whether a key is new in a window.
	windows startkeys.Index[K]

	// wm is the watermark processed; windows ending at or before it have
	// fired. INVARIANT: it never decreases.
	wm   int64
	late lateCount
	// fired collects the output of the windows fired by one watermark, and
	// firedAt is the event time of the window being fired.
	fired   runtime.Batch[O]
	firedAt int64
	// emit appends to fired; bound once in Open so apply gets no new closure
	// per window.
	emit func(O)
}

// Open registers the window buffers, takes the restored watermark and
// rebuilds the windows' key lists. A checkpoint of an earlier build holds
// the buffers as "left" and "right" with a timer per key and window as
// "window-timers": Open moves the buffers and drops the timers. (Such a
// build refuses the new names as state it does not declare, rather than
// keeping windows it would never fire.)
func (j *windowJoin[L, R, K, O]) Open(ctx *runtime.Context) error {
	j.task = fmt.Sprintf("%s %v", j.kind, ctx.Task)
	j.out = ctx.Output
	j.late.ctx = ctx
	j.wm = ctx.Watermark()
	j.emit = j.collect
	var err error
	if j.hash, err = state.Hasher[K](); err != nil {
		return fmt.Errorf("%s: %w", j.task, err)
	}
	kc := bucketKeyCodec[K]{key: j.keyCodec, hash: j.hash, name: j.schema}
	if j.left, err = state.NewListState(ctx.State, "window-left", kc, j.codecL); err != nil {
		return j.restoreError(err)
	}
	if j.right, err = state.NewListState(ctx.State, "window-right", kc, j.codecR); err != nil {
		return j.restoreError(err)
	}
	if err := state.MoveRestoredLists(ctx.State, "left", state.Codec[bucketKey[K]](kc), j.codecL, j.left); err != nil {
		return j.restoreError(err)
	}
	if err := state.MoveRestoredLists(ctx.State, "right", state.Codec[bucketKey[K]](kc), j.codecR, j.right); err != nil {
		return j.restoreError(err)
	}
	if slices.Contains(ctx.State.Unclaimed(), "window-timers") {
		ctx.State.DropState("window-timers") // the windows' key lists replace them
	}
	j.left.All(func(bk bucketKey[K], _ []L) bool { j.windows.AddOnce(bk.slot, bk.key); return true })
	j.right.All(func(bk bucketKey[K], _ []R) bool { j.windows.AddOnce(bk.slot, bk.key); return true })
	return nil
}

// restoreError explains a state registration failure.
func (j *windowJoin[L, R, K, O]) restoreError(err error) error {
	return stateError(j.task, "a window join with another window size or other record codecs", j.schema, err)
}

func (j *windowJoin[L, R, K, O]) collect(v O) {
	j.fired = append(j.fired, runtime.Record[O]{Value: v, Time: j.firedAt})
}

// windowOf returns the start and last instant of the window holding t. Near
// the ends of representable time they are clamped: a window reaching past
// MaxInt64 ends at MaxInt64 and fires only with the final watermark.
func windowOf(t, size int64) (start, last int64) {
	r := floorMod(t, size)
	start = math.MinInt64
	if t >= math.MinInt64+r {
		start = t - r
	}
	if t > math.MaxInt64-(size-r) {
		return start, math.MaxInt64
	}
	return start, t + (size - r) - 1
}

// BorrowsBatches implements runtime.BatchBorrower: stored records are
// copies.
func (j *windowJoin[L, R, K, O]) BorrowsBatches() {}

// ProcessBatch adds each record to its key's window.
func (j *windowJoin[L, R, K, O]) ProcessBatch(input int, r runtime.Records) error {
	switch input { // not on the type: with L == R both sides deliver the same type
	case 0:
		b, err := runtime.BatchOf[L](r)
		if err != nil {
			return fmt.Errorf("%s: input 0: %w", j.task, err)
		}
		addToWindows(j, 0, b, j.keyL, j.left)
	case 1:
		b, err := runtime.BatchOf[R](r)
		if err != nil {
			return fmt.Errorf("%s: input 1: %w", j.task, err)
		}
		addToWindows(j, 1, b, j.keyR, j.right)
	default:
		return inputError(j.task, input)
	}
	return nil
}

// addToWindows adds records of side s to their windows.
func addToWindows[L, R any, K comparable, O any, T any](j *windowJoin[L, R, K, O], s int, in runtime.Batch[T], keyOf func(T) K,
	mine *state.ListState[bucketKey[K], T]) {
	for _, rec := range in {
		start, last := windowOf(rec.Time, j.size)
		if last <= j.wm {
			j.late.add(s, rec.Time, j.wm)
			continue
		}
		key := keyOf(rec.Value)
		// The key's first record in the window lists it. Asking the index,
		// not the lists, saves two lookups per record: on an LSM backend,
		// mostly of absent keys in the store.
		j.windows.AddOnce(start, key)
		mine.Add(bucketKey[K]{key: key, slot: start, hash: j.hash(key)}, rec.Value)
	}
}

// ProcessWatermark fires every window whose last instant the watermark
// reached, in event-time order (within a window, in the order its keys got
// their first record), and emits their output in one batch.
func (j *windowJoin[L, R, K, O]) ProcessWatermark(wm int64) error {
	j.wm = wm
	n := 0
	for _, start := range j.windows.Starts() {
		_, last := windowOf(start, j.size)
		if last > wm {
			break
		}
		n++
		for _, key := range j.windows.Keys(start) {
			bk := bucketKey[K]{key: key, slot: start, hash: j.hash(key)}
			ls, rs := j.left.Get(bk), j.right.Get(bk)
			// The views stay valid after Clear: a list is never written in place.
			j.left.Clear(bk)
			j.right.Clear(bk)
			if j.inner && (len(ls) == 0 || len(rs) == 0) {
				continue
			}
			j.firedAt = last
			j.apply(key, window.Window{Start: start, End: satAdd(last, 1)}, ls, rs, j.emit)
		}
	}
	j.windows.DropFirst(n)
	if len(j.fired) == 0 {
		return nil
	}
	out := j.fired
	j.fired = nil // the batch belongs to the receiver now
	return j.out.Emit(out)
}

// Snapshot has no non-keyed state: the windows are keyed state.
func (j *windowJoin[L, R, K, O]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}

// NotifyComplete does nothing.
func (j *windowJoin[L, R, K, O]) NotifyComplete(int64) error { return nil }

// Close reports the late records dropped.
func (j *windowJoin[L, R, K, O]) Close() error {
	j.late.report()
	return nil
}
