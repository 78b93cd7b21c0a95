package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// ProcessingTimeTumbling groups each key's records into tumbling windows of
// size of processing time (the wall clock when a record is processed, SQL's
// PROCTIME()): a window is output when the clock passes its end, and every
// open window when the input ends.
//
// What a window holds depends on when its records were processed, so a run
// recovered from a checkpoint outputs other windows than a failure-free one:
// the records are all counted once (exactly-once holds for the aggregates'
// inputs), but the windows they fall in differ. The plan reports the window
// as nondeterministic for that reason.
func ProcessingTimeTumbling[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id string, size time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts ...stream.NodeOption) stream.Stream[O] {
	if size <= 0 {
		ks.Pipeline().Errorf("window %s: size %v must be positive", id, size)
	}
	checkAggregate(ks.Pipeline(), id, "processing-time tumbling", agg, false)
	out := process.Keyed(ks, id, func() process.Function[T, K, O] {
		return &procTumbling[T, K, A, O]{size: int64(size), agg: agg, output: output}
	}, opts...)
	out.Node().Type, out.Node().Describe = "window", fmt.Sprintf("tumbling processing-time window %v", size)
	return out
}

// procWindow is a key's open window: its start and accumulator.
type procWindow[A any] struct {
	Start int64
	Acc   A
}

// procTumbling is one subtask of a processing-time tumbling window.
type procTumbling[T any, K comparable, A any, O any] struct {
	size   int64
	agg    Aggregate[T, A]
	output func(K, Window, A) O
	open   *state.ValueState[K, procWindow[A]]
	// fresh are the keys whose stored accumulator was made since the last
	// checkpoint captured the state, and may be changed in place.
	// INVARIANT: cleared at every Snapshotting.
	fresh map[K]struct{}
}

func (w *procTumbling[T, K, A, O]) Open(s process.Setup[K]) error {
	w.fresh = map[K]struct{}{}
	var err error
	w.open, err = state.NewValueState(s.State, "processing-time-window", s.KeyCodec, procWindowCodec[A]{acc: w.agg.Codec, size: w.size})
	return err
}

// Snapshotting implements process.Snapshotter.
func (w *procTumbling[T, K, A, O]) Snapshotting(int64) { clear(w.fresh) }

func (w *procTumbling[T, K, A, O]) emit(c *process.Context[K, O], win procWindow[A]) {
	c.Emit(w.output(c.Key(), Window{Start: win.Start, End: win.Start + w.size}, win.Acc))
}

func (w *procTumbling[T, K, A, O]) ProcessRecord(c *process.Context[K, O], v T) error {
	k := c.Key()
	start := alignDown(c.Now(), w.size)
	win, ok := w.open.Get(k)
	if ok && win.Start != start {
		// The clock passed the open window's end before its timer ran.
		w.emit(c, win)
		c.DeleteTimer(process.ProcessingTime, win.Start+w.size-1)
		ok = false
	}
	_, fresh := w.fresh[k]
	switch {
	case !ok:
		win = procWindow[A]{Start: start, Acc: w.agg.Init()}
		c.SetTimer(process.ProcessingTime, start+w.size-1)
		// Every open window is output at the end of the input, when the
		// watermark reaches the maximum.
		c.SetTimer(process.EventTime, math.MaxInt64)
		w.fresh[k] = struct{}{}
	case w.agg.Clone != nil && !fresh:
		// The stored accumulator may belong to a checkpoint being written.
		win.Acc = w.agg.Clone(win.Acc)
		w.fresh[k] = struct{}{}
	}
	win.Acc = w.agg.Add(win.Acc, v)
	w.open.Update(k, win)
	return nil
}

func (w *procTumbling[T, K, A, O]) OnTimer(c *process.Context[K, O], d process.Domain) error {
	win, ok := w.open.Get(c.Key())
	if !ok || d == process.ProcessingTime && c.Time() != win.Start+w.size-1 {
		return nil // a timer of a window output already
	}
	w.open.Clear(c.Key())
	w.emit(c, win)
	return nil
}

// alignDown returns the largest multiple of size that is <= t.
func alignDown(t, size int64) int64 {
	r := t % size
	if r < 0 {
		r += size
	}
	return t - r
}

// procWindowCodec encodes an open window: its start (a varint), then the
// accumulator. Its name holds the size and the accumulator codec's name.
type procWindowCodec[A any] struct {
	acc  state.Codec[A]
	size int64
}

func (c procWindowCodec[A]) Name() string {
	return fmt.Sprintf("window.processing-time.v1[%v %s]", time.Duration(c.size), c.acc.Name())
}

func (c procWindowCodec[A]) Append(dst []byte, w procWindow[A]) []byte {
	return c.acc.Append(binary.AppendVarint(dst, w.Start), w.Acc)
}

func (c procWindowCodec[A]) Decode(src []byte) (procWindow[A], int, error) {
	start, n := binary.Varint(src)
	if n <= 0 {
		return procWindow[A]{}, 0, errors.New("processing-time window: truncated start")
	}
	acc, m, err := c.acc.Decode(src[n:])
	if err != nil {
		return procWindow[A]{}, 0, fmt.Errorf("processing-time window: %w", err)
	}
	return procWindow[A]{Start: start, Acc: acc}, n + m, nil
}
