// Package window holds event-time window operators. A window's accumulators
// and its end-of-window timer are keyed state, so an open window survives any
// number of checkpoints and recoveries: after a restore it continues from the
// accumulator the checkpoint saved and fires once, when the watermark passes
// its end.
package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Window is the event-time interval [Start, End) in Unix nanoseconds.
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last instant inside the window; results carry it as
// their event time and the window fires when the watermark reaches it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Aggregate folds the records of one key and window into an accumulator.
type Aggregate[T, A any] struct {
	// Init returns the accumulator of an empty window.
	Init func() A
	// Add returns acc with v added. It must not modify acc in place when A
	// holds references (slices, maps, pointers): the previous value may belong
	// to a snapshot being written.
	Add func(acc A, v T) A
	// Codec encodes accumulators in checkpoints.
	Codec state.Codec[A]
}

// Result is a window's output: its key, its interval and the final accumulator.
type Result[K comparable, A any] struct {
	Key    K
	Window Window
	Value  A
}

// ResultOf builds a Result; pass it as Tumbling's output function.
func ResultOf[K comparable, A any](key K, w Window, acc A) Result[K, A] {
	return Result[K, A]{Key: key, Window: w, Value: acc}
}

// Tumbling groups ks into fixed, non-overlapping event-time windows of size
// per key, folds each with agg, and when the watermark passes a window's end
// emits output(key, window, accumulator) with event time Window.MaxTimestamp.
// Records for a window that already fired are late: they are dropped and
// counted.
func Tumbling[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id string, size time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts ...stream.NodeOption) stream.Stream[O] {
	if size <= 0 {
		ks.Pipeline().Errorf("window %s: size %v must be positive", id, size)
	}
	if agg.Init == nil || agg.Add == nil || agg.Codec == nil {
		ks.Pipeline().Errorf("window %s: the aggregate needs Init, Add and Codec", id)
	}
	n := &runtime.Node{ID: id, Describe: fmt.Sprintf("tumbling event-time window %v", size)}
	n.NewOperator = func() runtime.Operator {
		return &tumbling[T, K, A, O]{size: int64(size), agg: agg, key: ks.Key, keyCodec: ks.KeyCodec, output: output}
	}
	return stream.Add[T, O](ks.Stream, n, opts...)
}

// windowKey is the state key of one key's window: the key and the window
// start, with the key's hash computed once per record.
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
	size time.Duration
}

// Name includes the window size: windows of another size are other state, so
// restoring them after the size changed fails instead of mixing them.
func (c windowKeyCodec[K]) Name() string {
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

// tumbling is one subtask of a tumbling window.
type tumbling[T any, K comparable, A any, O any] struct {
	size     int64
	agg      Aggregate[T, A]
	key      func(T) K
	keyCodec state.Codec[K]
	output   func(K, Window, A) O

	out    runtime.Output
	hash   func(K) uint64
	accs   *state.ValueState[windowKey[K], A]
	timers *state.Timers[K]
	// wm is the watermark processed; windows ending at or before it have fired.
	wm   int64
	late int64
}

func (w *tumbling[T, K, A, O]) Open(ctx *runtime.Context) error {
	w.out = ctx.Output
	w.wm = ctx.Watermark()
	var err error
	if w.hash, err = state.Hasher[K](); err != nil {
		return err
	}
	if w.accs, err = state.NewValueState[windowKey[K], A](ctx.State, "windows", windowKeyCodec[K]{w.keyCodec, w.hash, time.Duration(w.size)}, w.agg.Codec); err != nil {
		return err
	}
	w.timers, err = state.NewTimers[K](ctx.State, "window-timers", w.keyCodec)
	return err
}

// start returns the start of the window holding ts.
func (w *tumbling[T, K, A, O]) start(ts int64) int64 {
	r := ts % w.size
	if r < 0 {
		r += w.size
	}
	return ts - r
}

func (w *tumbling[T, K, A, O]) ProcessBatch(_ int, r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[T]) {
		start := w.start(rec.Time)
		if start+w.size-1 <= w.wm {
			w.late++
			continue
		}
		key := w.key(rec.Value)
		k := windowKey[K]{key: key, start: start, hash: w.hash(key)}
		acc, ok := w.accs.Get(k)
		if !ok {
			acc = w.agg.Init()
			w.timers.Register(k.key, start, start+w.size-1)
		}
		w.accs.Update(k, w.agg.Add(acc, rec.Value))
	}
	return nil
}

// ProcessWatermark fires every window whose end the watermark reached.
func (w *tumbling[T, K, A, O]) ProcessWatermark(wm int64) error {
	w.wm = wm
	var results runtime.Batch[O]
	err := w.timers.Advance(wm, func(key K, start, ts int64) error {
		k := windowKey[K]{key: key, start: start, hash: w.hash(key)}
		acc, ok := w.accs.Get(k)
		if !ok {
			return nil
		}
		w.accs.Clear(k)
		results = append(results, runtime.Record[O]{Value: w.output(key, Window{Start: start, End: start + w.size}, acc), Time: ts})
		return nil
	})
	if err != nil {
		return err
	}
	return w.out.Emit(results)
}

func (w *tumbling[T, K, A, O]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}

func (w *tumbling[T, K, A, O]) NotifyComplete(int64) error { return nil }

func (w *tumbling[T, K, A, O]) Close() error { return nil }
