package window

import (
	"errors"
	"fmt"
	"slices"
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
// State: "aligned-windows", a NamespacedValueState of accumulators by
// (window start, key), in compact tables: one per key group and window, so
// a window's state is dropped in O(key groups) when it goes. A record is
// added to every window it belongs to (size/slide of them).
//
// No timers: every key's window [s, s+size) fires at the same watermark, its
// MaxTimestamp, and goes at its cleanup time, MaxTimestamp + allowed
// lateness. So when the watermark passes a window's MaxTimestamp or cleanup
// time the operator visits that window's entries, which the state lists by
// start: a per-key timer cost a map entry and a heap item per key and
// window.
//
// Whether a window fired follows from the watermark, which the checkpoint
// restores with the state, except after a rescaling restore: the subtask
// then takes the least watermark of the subtasks whose key groups it takes,
// and a window another of them had fired would fire again. With no allowed
// lateness that cannot happen (a window's state goes when it fires); with
// allowed lateness, "aligned-windows-fired" marks the entries of fired
// windows kept for late records, and firing skips them.
//
// Both states' checkpoint entries are (key, start) → value, as the
// ValueStates of earlier builds wrote them, so their checkpoints restore.
// Checkpoints of still earlier builds hold the accumulators as "windows" and
// a timer per key and window as "window-timers": Open moves the first into
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
	// accs holds the accumulators by (window start, key).
	accs *state.NamespacedValueState[K, A]
	// fired marks the entries of windows that fired and are kept for the
	// allowed lateness.
	// INVARIANT: (s, key) is in fired only if it is in accs and its window
	// fired (here or in the subtask whose key groups a restore took); every
	// such entry is in fired when the allowed lateness is positive.
	fired *state.NamespacedValueState[K, bool]
	// add is the update Apply makes for a record, bound once so that a
	// record allocates no closure: it adds adding to the accumulator (from
	// empty, the encoded empty accumulator, if the entry is new, which it
	// records in created).
	add     func(acc A, found bool) A
	empty   []byte
	adding  T
	created bool
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
	w.out.Open(ctx.Output)
	w.wm = ctx.Watermark()
	w.cur = 1
	w.lateness = int64(w.cfg.lateness)
	hash, err := state.Hasher[K]()
	if err != nil {
		return err
	}
	kc := windowKeyCodec[K]{key: w.keyCodec, hash: hash, size: time.Duration(w.size), slide: time.Duration(w.slide)}
	if w.accs, err = state.NewNamespacedValueState(ctx.State, alignedStateName, kc.Name(), w.keyCodec, w.agg.Codec); err != nil {
		return restoreError(err)
	}
	if w.fired, err = state.NewNamespacedValueState[K, bool](ctx.State, firedStateName, kc.Name(), w.keyCodec, state.BoolCodec{}); err != nil {
		return restoreError(err)
	}
	if err := w.adoptLegacy(ctx.State, kc); err != nil {
		return err
	}
	// A new entry starts from the empty accumulator decoded, into reused
	// memory when the codec can (state.IntoDecoder): no Init per new key.
	w.empty = w.agg.Codec.Append(nil, w.agg.Init())
	w.add = func(acc A, found bool) A {
		w.created = !found
		return w.agg.Add(acc, w.adding)
	}
	w.late.open(ctx, w.cfg.lateOutput)
	// The restored watermark may be past the cleanup time of restored
	// windows (allowed lateness shortened since the checkpoint): they go now.
	// Those it is past the MaxTimestamp of fired before the checkpoint.
	return w.advanceTo(w.wm, w.wm)
}

// adoptLegacy moves the accumulators of a checkpoint written with a timer
// per key and window into the aligned-windows state, and drops the timers,
// which the watermark and the window starts replace.
func (w *alignedOp[T, K, A, O]) adoptLegacy(b *state.Backend, kc windowKeyCodec[K]) error {
	move := func(k windowKey[K], sl *slot[A]) { w.accs.Update(k.start, k.key, sl.acc) }
	if err := state.MoveRestoredValues(b, legacyStateName, state.Codec[windowKey[K]](kc), state.Codec[*slot[A]](slotCodec[A]{w.agg.Codec}), move); err != nil {
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
				if _, ok := w.accs.Get(s, key); ok {
					w.fired.Update(s, key, true)
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
	in, err := runtime.BatchOf[T](r)
	if err != nil {
		return err
	}
	for _, rec := range in {
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
		if w.size <= w.slide {
			w.addToWindow(key, last, rec.Value) // tumbling: t's only window
		} else {
			// The windows holding t start at last - i*slide > t - size.
			for i := (w.size - (t - last) - 1) / w.slide; i >= 0; i-- {
				if s := last - i*w.slide; w.cleanupAt(s) > w.wm {
					w.addToWindow(key, s, rec.Value)
				}
			}
		}
	}
	if err := w.late.flush(); err != nil {
		return err
	}
	return w.flush()
}

// addToWindow adds v to key's window starting at s, whose cleanup time has
// not passed. A window that already fired fires again.
func (w *alignedOp[T, K, A, O]) addToWindow(key K, s int64, v T) {
	w.adding, w.created = v, false
	w.accs.Apply(s, key, w.empty, w.add)
	var zero T
	w.adding = zero // the record is not kept
	if w.end(s)-1 <= w.wm {
		// Within the allowed lateness: an updated result.
		if w.created {
			w.fired.Update(s, key, true)
		}
		if acc, ok := w.accs.Get(s, key); ok {
			w.emit(key, s, acc)
		}
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
// so results come out in the order of their times.
func (w *alignedOp[T, K, A, O]) advanceTo(prev, wm int64) error {
	for i := 0; ; {
		starts := w.accs.Namespaces() // visit may drop starts[i]: read it again
		if i >= len(starts) {
			return nil
		}
		s := starts[i]
		maxTs := w.end(s) - 1
		if maxTs > wm {
			return nil
		}
		fire := maxTs > prev
		drop := w.cleanupAt(s) <= wm
		if fire || drop {
			if err := w.visit(s, fire, drop); err != nil {
				return err
			}
		}
		if !drop {
			i++
		}
	}
}

// visit emits (fire) and removes (drop) the entries of the window starting
// at s. It emits the results in batches of runtime.DefaultBatchSize as it
// goes, so a window of millions of keys never holds all its results at once.
func (w *alignedOp[T, K, A, O]) visit(s int64, fire, drop bool) error {
	var err error
	if fire {
		marks := w.fired.Len() > 0
		w.accs.Entries(s, func(key K, acc A) bool {
			if marks {
				if _, done := w.fired.Get(s, key); done {
					return true
				}
			}
			w.emit(key, s, acc)
			if !drop {
				w.fired.Update(s, key, true)
				marks = true
			}
			if len(w.results) >= runtime.DefaultBatchSize {
				err = w.flush()
			}
			return err == nil
		})
	}
	if err != nil {
		return err
	}
	if drop {
		w.accs.DropNamespace(s)
		w.fired.DropNamespace(s)
	}
	return nil
}

// emit appends key's window starting at s with accumulator acc, which the
// state decoded for it (the output function may keep it), to the results.
func (w *alignedOp[T, K, A, O]) emit(key K, s int64, acc A) {
	end := w.end(s)
	w.results = append(w.results, runtime.Record[O]{Value: w.output(key, Window{Start: s, End: end}, acc), Time: end - 1})
}
