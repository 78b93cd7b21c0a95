// Package window holds the event-time window operators over keyed streams:
// Tumbling, Sliding and Session. They fold records with an Aggregate (the
// built-ins CountOf, SumOf, SumFloatOf, MinOf, MaxOf, AvgOf, CountDistinct,
// or any user-defined one) and emit output(key, window, accumulator) when a
// window fires. Window options (AllowedLateness, LateRecordsTo) go with the
// node options among a builder's trailing arguments.
//
// # State and checkpoints
//
// A window's accumulators and timers are keyed state (package state), so an
// open window survives any number of checkpoints and recoveries: after a
// restore it continues from the accumulators the checkpoint saved and fires
// when the watermark passes its end, exactly as if nothing had happened. The
// state's codec names carry every parameter that gives the state its meaning
// (size, slide, gap, the aggregate's codec name): restoring a checkpoint after
// one of them changed fails with state.ErrStateMismatch, naming the operator,
// instead of continuing windows of another shape.
//
// Accumulators are updated in place when no checkpoint being written and no
// emitted result can see them (see Aggregate.Clone and paneSet.epoch), so a
// record costs one state lookup, not a lookup and an update.
//
// # Firing and lateness (Flink's event-time semantics)
//
// A window [Start, End) fires when the watermark reaches End-1
// (Window.MaxTimestamp): output(key, window, accumulator) is emitted with
// event time End-1. A session fires one instant later, when the watermark
// reaches End, and its output has event time End: a record at End still
// merges with it (see Session). In what follows, a session's MaxTimestamp
// is its End. A window no record of a key fell into emits nothing for
// that key. With allowed lateness L (default 0) a window's state is kept
// while the watermark is below MaxTimestamp+L; a record for the window
// arriving in that time updates it and the window fires again at once, so
// consumers then see more than one result for the window, each complete up
// to then (the last one counts). A record whose every window has reached
// MaxTimestamp+L is late: it is dropped and counted (see LateCounter), or
// sent to a side output (LateRecordsTo). Every drop is reported to the
// runtime (runtime.Context.DroppedLate), which counts it per operator
// (ingest_late_records_total, at 0 from the job's start) and logs it at WARN,
// the first at once and then at most one a minute.
//
// Results of windows that fire because of a late record are emitted while
// processing that record, with event time MaxTimestamp, which is behind the
// watermark already: downstream they are late records too.
package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// Window is the event-time interval [Start, End) in Unix nanoseconds.
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last instant inside the window; results of tumbling
// and sliding windows carry it as their event time and such a window fires
// when the watermark reaches it. (A session fires at End instead: see
// Session.)
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Result is a window's output: its key, its interval and the final accumulator.
type Result[K comparable, A any] struct {
	Key    K
	Window Window
	Value  A
}

// ResultOf builds a Result; pass it as a window's output function.
func ResultOf[K comparable, A any](key K, w Window, acc A) Result[K, A] {
	return Result[K, A]{Key: key, Window: w, Value: acc}
}

// windowKey is the state key of one key's window (or pane): the key and the
// window start, with the key's hash computed once per record.
type windowKey[K comparable] struct {
	key   K
	start int64
	// hash is the hash of key (not of start), so a window's state lives in
	// the key group the partitioner routed the key to.
	// INVARIANT: hash == the key hasher applied to key.
	hash uint64
}

// HashKey returns the key's hash.
func (w windowKey[K]) HashKey() uint64 { return w.hash }

// windowKeyCodec encodes a windowKey as the key's encoding and a varint start;
// decoding recomputes the hash.
type windowKeyCodec[K comparable] struct {
	key  state.Codec[K]
	hash func(K) uint64
	// size and slide are the window's.
	size, slide time.Duration
}

// Name includes the window's shape: windows of another size or slide are
// other state, so restoring them after the shape changed fails instead of
// mixing them. A tumbling window's name is
// "window-key(<key codec>,size=<size>)", as it always was.
func (c windowKeyCodec[K]) Name() string {
	if c.slide != c.size {
		return fmt.Sprintf("window-key(%s,size=%v,slide=%v)", c.key.Name(), c.size, c.slide)
	}
	return fmt.Sprintf("window-key(%s,size=%v)", c.key.Name(), c.size)
}

func (c windowKeyCodec[K]) Append(dst []byte, w windowKey[K]) []byte {
	return binary.AppendVarint(c.key.Append(dst, w.key), w.start)
}

func (c windowKeyCodec[K]) Decode(src []byte) (windowKey[K], int, error) {
	k, n, err := c.key.Decode(src)
	if err != nil {
		return windowKey[K]{}, 0, err
	}
	start, m := binary.Varint(src[n:])
	if m <= 0 {
		return windowKey[K]{}, 0, errors.New("window key: truncated window start")
	}
	return windowKey[K]{key: k, start: start, hash: c.hash(k)}, n + m, nil
}

// slot is one accumulator as checkpoints of the former per-window state
// (legacyStateName) hold it; a restore moves it into the per-key sets.
type slot[A any] struct {
	acc A
}

// slotCodec encodes a slot as its accumulator alone. Its name is the
// accumulator codec's: the encoding is the same as a plain accumulator's, so
// checkpoints written before slots existed restore.
type slotCodec[A any] struct{ acc state.Codec[A] }

func (c slotCodec[A]) Name() string                         { return c.acc.Name() }
func (c slotCodec[A]) Append(dst []byte, s *slot[A]) []byte { return c.acc.Append(dst, s.acc) }
func (c slotCodec[A]) Decode(src []byte) (*slot[A], int, error) {
	acc, n, err := c.acc.Decode(src)
	if err != nil {
		return nil, 0, err
	}
	return &slot[A]{acc: acc}, n, nil
}

// epochs is an operator subtask's copy-on-write clock. It mirrors the state
// backend's epochs from the operator's side: the runtime calls the operator's
// Snapshot immediately before it snapshots the backend, on the task
// goroutine, and Snapshot calls advance. So a container tagged with the
// current epoch was created after the last backend snapshot and no snapshot
// references it.
type epochs struct {
	// cur is the current epoch. INVARIANT: cur >= 1; 0 tags containers that
	// are never written in place.
	cur uint64
}

// advance starts a new epoch: everything tagged before may be referenced by
// the snapshot being taken.
func (e *epochs) advance() { e.cur++ }

// floorDiv returns the largest multiple of d (d > 0) that is <= t, saturating
// at math.MinInt64.
func floorDiv(t, d int64) int64 {
	r := t % d
	if r < 0 {
		r += d
	}
	return satSub(t, r)
}

// satAdd returns a+b (b >= 0), saturating at math.MaxInt64: window ends and
// cleanup times near the end of representable time stay ordered instead of
// wrapping around.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satSub returns a-b (b >= 0), saturating at math.MinInt64.
func satSub(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// opBase is what the window operators (aligned, pane and session windows)
// share: their options, their timers and the watermark they fire on, the
// results of the call in progress, late-record handling and copy-on-write
// epochs, with the Operator methods that only use those.
type opBase[T any, K comparable, O any] struct {
	// cfg holds the window options; immutable after construction.
	cfg settings

	// Set by Open.
	ctx      *runtime.Context
	lateness int64
	timers   *state.Timers[K]
	fire     func(key K, ns, ts int64) error // the operator's onTimer, bound once
	epochs

	// wm is the watermark processed.
	// INVARIANT: every timer at or before wm has fired, so every window
	// whose MaxTimestamp <= wm (every session whose End <= wm) has fired
	// and every one whose cleanup time <= wm is gone.
	wm int64
	// results collects the output of the call in progress; out emits it
	// before the call returns and gives the next (runtime.BatchBuffer).
	results runtime.Batch[O]
	out     runtime.BatchBuffer[O]
	late    lateRecords[T]
	// writeBack is set when the state backend encodes a value when it is
	// written (the pebble backend): the session and pane operators change
	// a key's set in place after writing it, which the memory backend sees
	// (it keeps the set itself) and an encoding does not, so they write
	// the set again once changed.
	writeBack bool
}

// BorrowsBatches implements runtime.BatchBorrower: the window operators
// copy what they keep of a record (its value into an accumulator or a late
// batch) and never emit their input.
func (w *opBase[T, K, O]) BorrowsBatches() {}

// LateRecords implements LateCounter.
func (w *opBase[T, K, O]) LateRecords() (dropped, sideOutput int64) {
	return w.late.dropped, w.late.sent
}

// flush emits the collected results as one batch.
func (w *opBase[T, K, O]) flush() error {
	if len(w.results) == 0 {
		return nil
	}
	err := w.out.Emit(w.results)
	w.results = w.out.Get(0)
	return err
}

// ProcessWatermark fires every window whose MaxTimestamp the watermark
// reached and drops the state of those whose cleanup time it reached.
func (w *opBase[T, K, O]) ProcessWatermark(wm int64) error {
	w.wm = wm
	if err := w.timers.Advance(wm, w.fire); err != nil {
		return err
	}
	return w.flush()
}

// Snapshot starts a new copy-on-write epoch (see epochs): the backend
// snapshot the runtime takes next references the state written so far.
func (w *opBase[T, K, O]) Snapshot(int64) (runtime.Snapshot, error) {
	w.advance()
	return runtime.Snapshot{}, nil
}

// NotifyComplete does nothing: window output is not transactional.
func (w *opBase[T, K, O]) NotifyComplete(int64) error { return nil }

// Close logs the late-record counts.
func (w *opBase[T, K, O]) Close() error {
	w.late.close(w.ctx, w.cfg.lateOutput)
	return nil
}
