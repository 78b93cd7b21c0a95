package window

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// alignedOp is one subtask of a tumbling window, or of a sliding window
// whose aggregate has no Merge (see paneOp for those with one): windows whose
// bounds depend on time alone (Flink's aligned windows), [s, s+size) for
// every s that is a multiple of slide (offset 0). Tumbling is the case
// size == slide.
//
// State: ValueState "aligned-windows", one slot per (key, window start); a
// record is added to every window it belongs to (size/slide of them).
//
// No timers: every key's window [s, s+size) fires at the same watermark, its
// MaxTimestamp, and goes at its cleanup time, MaxTimestamp + allowed
// lateness. So the operator keeps, in memory (rebuilt from the state at
// Open), the starts of the windows with state and each window's keys, and
// when the watermark passes a window's MaxTimestamp or cleanup time it
// visits that window's entries: a per-key timer cost a map entry and a heap
// item per key and window, three times what a key in a list does.
//
// Whether a window fired follows from the watermark, which the checkpoint
// restores with the state, except after a rescaling restore: the subtask
// then takes the least watermark of the subtasks whose key groups it takes,
// and a window another of them had fired would fire again. With no allowed
// lateness that cannot happen (a window's state goes when it fires); with
// allowed lateness, ValueState "aligned-windows-fired" marks the entries of
// fired windows kept for late records, and firing skips them.
//
// Checkpoints of earlier builds hold the slots as "windows" and a timer per
// key and window as "window-timers": Open moves the first into
// "aligned-windows" and drops the second. (A build that expects those timers
// refuses a checkpoint without them: its "aligned-windows" is state it does
// not declare.)
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
	// fired marks the entries of windows that fired and are kept for the
	// allowed lateness.
	// INVARIANT: (key, s) is in fired only if it is in accs and its window
	// fired (here or in the subtask whose key groups a restore took); every
	// such entry is in fired when the allowed lateness is positive.
	fired *state.ValueState[windowKey[K], bool]
	// windows holds the keys of each window with state, by start.
	// INVARIANT: (key, s) is an entry of accs if and only if windows lists
	// key under s (once); every window in it has its cleanup time after wm.
	windows startkeys.Index[K]
}

// alignedStateName is the state of the window slots, firedStateName that of
// the marks of fired ones; legacyStateName and legacyTimersName are what
// builds with a timer per key and window wrote.
const (
	alignedStateName = "aligned-windows"
	firedStateName   = "aligned-windows-fired"
	legacyStateName  = "windows"
	legacyTimersName = "window-timers"
)

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
	vc := slotCodec[A]{w.agg.Codec}
	if w.accs, err = state.NewValueState[windowKey[K], *slot[A]](ctx.State, alignedStateName, kc, vc); err != nil {
		return restoreError(err)
	}
	if w.fired, err = state.NewValueState[windowKey[K], bool](ctx.State, firedStateName, kc, state.BoolCodec{}); err != nil {
		return restoreError(err)
	}
	if err := w.adoptLegacy(ctx.State, kc, vc); err != nil {
		return err
	}
	w.accs.All(func(k windowKey[K], _ *slot[A]) bool {
		w.windows.Add(k.start, k.key)
		return true
	})
	w.late.open(ctx, w.cfg.lateOutput)
	// The restored watermark may be past the cleanup time of restored
	// windows (allowed lateness shortened since the checkpoint): they go now.
	// Those it is past the MaxTimestamp of fired before the checkpoint.
	return w.advanceTo(w.wm, w.wm)
}

// adoptLegacy moves the slots of a checkpoint written with a timer per key
// and window into the aligned-windows state, and drops the timers, which the
// watermark and the window starts replace.
func (w *alignedOp[T, K, A, O]) adoptLegacy(b *state.Backend, kc windowKeyCodec[K], vc slotCodec[A]) error {
	if err := state.MoveRestoredValues(b, legacyStateName, state.Codec[windowKey[K]](kc), state.Codec[*slot[A]](vc), w.accs); err != nil {
		return restoreError(err)
	}
	if slices.Contains(b.Unclaimed(), legacyTimersName) {
		// A window that fired had its timer moved to its cleanup time.
		legacy, err := state.NewTimers[K](b, legacyTimersName, w.keyCodec)
		if err != nil {
			return restoreError(err)
		}
		if err := legacy.Advance(runtime.MaxWatermark, func(key K, s, ts int64) error {
			if ts > w.end(s)-1 {
				if k := (windowKey[K]{key: key, start: s, hash: w.hash(key)}); w.hasEntry(k) {
					w.fired.Update(k, true)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		b.DropState(legacyTimersName)
	}
	return nil
}

func (w *alignedOp[T, K, A, O]) hasEntry(k windowKey[K]) bool {
	_, ok := w.accs.Get(k)
	return ok
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
		w.windows.Add(s, key)
		if w.end(s)-1 <= w.wm {
			w.fired.Update(k, true) // it fires below, within the allowed lateness
		}
	} else {
		sl = w.own(k, sl)
	}
	sl.acc = w.agg.Add(sl.acc, v)
	if w.end(s)-1 <= w.wm {
		w.emit(key, s, sl) // within the allowed lateness: an updated result
	}
}

// ProcessWatermark fires every window whose MaxTimestamp the watermark
// reached and drops the state of those whose cleanup time it reached.
func (w *alignedOp[T, K, A, O]) ProcessWatermark(wm int64) error {
	prev := w.wm
	w.wm = wm
	if err := w.advanceTo(prev, wm); err != nil {
		return err
	}
	return w.flush()
}

// advanceTo fires the windows whose MaxTimestamp is in (prev, wm] and drops
// those whose cleanup time is at or before wm, in increasing order of start,
// so results come out in the order of their times, and within a window in
// the order its keys got state (as the timers fired that came before).
func (w *alignedOp[T, K, A, O]) advanceTo(prev, wm int64) error {
	dropped := 0 // cleanup times increase with the start: the dropped are the first
	for _, s := range w.windows.Starts() {
		maxTs := w.end(s) - 1
		if maxTs > wm {
			break
		}
		fire := maxTs > prev
		drop := w.cleanupAt(s) <= wm
		if fire || drop {
			w.visit(s, fire, drop)
		}
		if drop {
			dropped++
		}
	}
	w.windows.DropFirst(dropped)
	return nil
}

// visit emits (fire) and removes (drop) the entries of the window starting
// at s.
func (w *alignedOp[T, K, A, O]) visit(s int64, fire, drop bool) {
	marks := w.fired.Len() > 0
	for _, key := range w.windows.Keys(s) {
		k := windowKey[K]{key: key, start: s, hash: w.hash(key)}
		if fire {
			done := false
			if marks {
				_, done = w.fired.Get(k)
			}
			if !done {
				if sl, ok := w.accs.Get(k); ok {
					w.emit(key, s, sl)
				}
				if !drop {
					w.fired.Update(k, true)
					marks = true
				}
			}
		}
		if drop {
			w.accs.Clear(k)
			if marks {
				w.fired.Clear(k)
			}
		}
	}
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
