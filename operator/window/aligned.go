package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// alignedOp is one subtask of a tumbling window, or of a sliding window
// whose aggregate has no Merge (see paneOp for those with one): windows whose
// bounds depend on time alone (Flink's aligned windows), [s, s+size) for
// every s that is a multiple of slide (offset 0). Tumbling is the case
// size == slide.
//
// State: ValueState "windows", one slot per (key, window start); a record is
// added to every window it belongs to (size/slide of them).
//
// Timers, in "window-timers", namespace = window start: for every (key,
// window) with state, one at the window's MaxTimestamp until it fired, then,
// when the allowed lateness is positive, one at MaxTimestamp+lateness (the
// cleanup time), when its state goes.
type alignedOp[T any, K comparable, A any, O any] struct {
	opBase[T, K, O]

	// Immutable after construction.
	size, slide int64
	agg         Aggregate[T, A]
	key         func(T) K
	keyCodec    state.Codec[K]
	output      func(K, Window, A) O

	// Set by Open.
	hash func(K) uint64
	accs *state.ValueState[windowKey[K], *slot[A]]
}

func (w *alignedOp[T, K, A, O]) Open(ctx *runtime.Context) error {
	w.ctx = ctx
	w.wm = ctx.Watermark()
	w.cur = 1
	w.lateness = int64(w.cfg.lateness)
	var err error
	if w.hash, err = state.Hasher[K](); err != nil {
		return err
	}
	kc := windowKeyCodec[K]{key: w.keyCodec, hash: w.hash, size: time.Duration(w.size), slide: time.Duration(w.slide)}
	if w.accs, err = state.NewValueState[windowKey[K], *slot[A]](ctx.State, "windows", kc, slotCodec[A]{w.agg.Codec}); err != nil {
		return restoreError(err)
	}
	if w.timers, err = state.NewTimers[K](ctx.State, "window-timers", w.keyCodec); err != nil {
		return restoreError(err)
	}
	w.fire = w.onTimer
	w.late.open(ctx, w.cfg.lateOutput)
	return nil
}

// restoreError explains a restored state that does not fit the window.
func restoreError(err error) error {
	if errors.Is(err, state.ErrStateMismatch) {
		return fmt.Errorf("the checkpoint holds windows of another kind, size, slide, gap or aggregate, which cannot be continued "+
			"(restore with the window as it was, or start from an empty checkpoint directory): %w", err)
	}
	return err
}

// end returns the end of the window starting at s.
func (w *alignedOp[T, K, A, O]) end(s int64) int64 { return satAdd(s, w.size) }

// cleanupAt returns the time the state of the window starting at s goes:
// MaxTimestamp + allowed lateness.
func (w *alignedOp[T, K, A, O]) cleanupAt(s int64) int64 { return satAdd(w.end(s)-1, w.lateness) }

func (w *alignedOp[T, K, A, O]) ProcessBatch(_ int, r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[T]) {
		t := rec.Time
		last := floorDiv(t, w.slide) // the start of the newest window that may hold t
		if t-last >= w.size {
			continue // size < slide and t falls between two windows: no window holds it
		}
		if w.cleanupAt(last) <= w.wm {
			// Every window of t ends at or before the newest one: all are gone.
			w.late.add(rec, w.wm)
			continue
		}
		key := w.key(rec.Value)
		h := w.hash(key)
		if w.size <= w.slide {
			w.addToWindow(key, h, last, rec.Value) // tumbling: t's only window
		} else {
			// The windows holding t start at last - i*slide > t - size.
			for i := (w.size - (t - last) - 1) / w.slide; i >= 0; i-- {
				if s := last - i*w.slide; w.cleanupAt(s) > w.wm {
					w.addToWindow(key, h, s, rec.Value)
				}
			}
		}
	}
	if err := w.late.flush(); err != nil {
		return err
	}
	return w.flush()
}

// own returns sl ready to be written: sl itself when it belongs to the
// current epoch, else a copy stored in its place under k.
func (w *alignedOp[T, K, A, O]) own(k windowKey[K], sl *slot[A]) *slot[A] {
	if sl.epoch == w.cur {
		return sl
	}
	sl = &slot[A]{acc: w.agg.clone(sl.acc), epoch: w.cur}
	w.accs.Update(k, sl)
	return sl
}

// addToWindow adds v to key's window starting at s, whose
// cleanup time has not passed. A window that already fired fires again.
func (w *alignedOp[T, K, A, O]) addToWindow(key K, h uint64, s int64, v T) {
	k := windowKey[K]{key: key, start: s, hash: h}
	sl, ok := w.accs.Get(k)
	if !ok {
		sl = &slot[A]{acc: w.agg.Init(), epoch: w.cur}
		w.accs.Update(k, sl)
		w.register(key, s)
	} else {
		sl = w.own(k, sl)
	}
	sl.acc = w.agg.Add(sl.acc, v)
	if w.end(s)-1 <= w.wm {
		w.emit(key, s, sl) // within the allowed lateness: an updated result
	}
}

// register registers the timer of key's window starting at s, which just got
// state: at its MaxTimestamp, or at its cleanup time when it already fired
// (it gets state within the allowed lateness). A window past its cleanup time
// gets none.
func (w *alignedOp[T, K, A, O]) register(key K, s int64) {
	if maxTs := w.end(s) - 1; maxTs > w.wm {
		w.timers.Register(key, s, maxTs)
	} else if c := w.cleanupAt(s); c > w.wm {
		w.timers.Register(key, s, c)
	}
}

// onTimer handles timer (key, window start s, ts); see alignedOp for the
// timers a window has.
func (w *alignedOp[T, K, A, O]) onTimer(key K, s, ts int64) error {
	maxTs, cleanup := w.end(s)-1, w.cleanupAt(s)
	h := w.hash(key)
	switch {
	case ts < maxTs:
		// Not registered by this code; be safe rather than fire early.
		w.timers.Register(key, s, maxTs)
		return nil
	case ts == maxTs:
		if sl, ok := w.accs.Get(windowKey[K]{key: key, start: s, hash: h}); ok {
			w.emit(key, s, sl)
		}
	}
	if ts < cleanup {
		// The window fired and is kept for the allowed lateness (or the
		// allowed lateness grew since a restore).
		w.timers.Register(key, s, cleanup)
		return nil
	}
	w.accs.Clear(windowKey[K]{key: key, start: s, hash: h}) // the window's state goes
	return nil
}

// emit appends key's window starting at s with the accumulator in sl to the
// results. The output function may keep a reference to the accumulator, so sl
// is no longer written in place.
func (w *alignedOp[T, K, A, O]) emit(key K, s int64, sl *slot[A]) {
	end := w.end(s)
	w.results = append(w.results, runtime.Record[O]{Value: w.output(key, Window{Start: s, End: end}, sl.acc), Time: end - 1})
	if sl.epoch == w.cur {
		sl.epoch = 0
	}
}
