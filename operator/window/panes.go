package window

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// paneOp is one subtask of a sliding window whose aggregate has Merge. It
// keeps one accumulator per (key, pane), a pane being the gcd of size and
// slide: every window is the union of size/pane consecutive panes, and a
// record belongs to exactly one pane, so it costs one state update. A window
// firing merges its panes.
//
// A key's panes live together in one value (paneSet), with the key's firing
// progress and its one due time, so that firing a window costs one state
// lookup however many panes and windows the key has: windows that hold none
// of the key's records are skipped without a lookup, and a new pane moves
// the key's due time only when it is due earlier.
//
// State: ValueState "pane-windows", key → *paneSet. The keys due at each
// time are kept in memory (due, rebuilt from the sets' due times at Open; a
// key whose due time moves stays listed at the old one, an entry onDue
// skips, since paneSet.timer no longer matches):
// every key's windows end at the same times, so a timer per key (a map entry
// and a heap item) only repeated what paneSet.timer records. Checkpoints of
// earlier builds hold the sets as "windows" with a timer per key as
// "window-timers": Open moves the first and drops the second (a build that
// expects the timers refuses "pane-windows" as state it does not declare).
type paneOp[T any, K comparable, A any, O any] struct {
	opBase[T, K, O]

	// Immutable after construction.
	// INVARIANT: pane divides size and slide; agg.Merge != nil.
	size, slide, pane int64
	agg               Aggregate[T, A]
	key               func(T) K
	keyCodec          state.Codec[K]
	output            func(K, Window, A) O

	// sets and due are set by Open.
	sets *state.ValueState[K, *paneSet[A]]
	// due holds every key with a set under its set's timer.
	// INVARIANT: for every key in sets, due lists key at set.timer.
	due startkeys.Index[K]
}

// paneStateName is the state of the pane sets.
const paneStateName = "pane-windows"

// pane is one pane's accumulator.
type pane[A any] struct {
	start int64
	acc   A
}

// paneSet is one key's panes.
type paneSet[A any] struct {
	// panes is sorted by start, without duplicates, and never empty.
	panes []pane[A]
	// next is the start of the earliest window of the key that may not have
	// fired: every window starting before it has.
	// INVARIANT: next <= the first window whose MaxTimestamp is after the
	// operator's watermark (firstUnfired); it is raised to it whenever a
	// pane is added, so a window the watermark passed while it had none of
	// the key's panes is not fired again by the timer.
	next int64
	// timer is the time of the key's pending timer.
	// INVARIANT: the operator's due lists the key at timer, and
	// timer <= due(set).
	timer int64
	// epoch is the operator epoch (see epochs) the set was created or copied
	// in; 0 when it was restored or an accumulator was handed to an output
	// function. Writing in place saves the state update (a second map
	// operation) per record, and lets mutable accumulators (Aggregate.Clone)
	// be updated without a copy.
	// INVARIANT: unless epoch == the operator's current epoch, a checkpoint
	// being encoded or an emitted result may reference this set, its panes'
	// backing array or their accumulators: none is written again; a write
	// installs a copy.
	epoch uint64
}

func (w *paneOp[T, K, A, O]) Open(ctx *runtime.Context) error {
	w.ctx = ctx
	w.out.Open(ctx.Output)
	w.wm = ctx.Watermark()
	w.cur = 1
	w.lateness = int64(w.cfg.lateness)
	w.writeBack = ctx.State.IsLSM()
	vc := paneSetCodec[A]{acc: w.agg.Codec, size: time.Duration(w.size), slide: time.Duration(w.slide), pane: time.Duration(w.pane)}
	var err error
	if w.sets, err = state.NewValueState[K, *paneSet[A]](ctx.State, paneStateName, w.keyCodec, vc); err != nil {
		return restoreError(err)
	}
	if err := state.MoveRestoredValues(ctx.State, legacyStateName, w.keyCodec, state.Codec[*paneSet[A]](vc), w.sets.Update); err != nil {
		return restoreError(err)
	}
	if slices.Contains(ctx.State.Unclaimed(), legacyTimersName) {
		ctx.State.DropState(legacyTimersName) // paneSet.timer records each key's
	}
	w.sets.All(func(k K, set *paneSet[A]) bool {
		w.due.Add(set.timer, k)
		return true
	})
	w.late.open(ctx, w.cfg.lateOutput)
	return nil
}

// maxTs returns the MaxTimestamp of the window starting at s.
func (w *paneOp[T, K, A, O]) maxTs(s int64) int64 { return satAdd(s, w.size) - 1 }

// cleanupAt returns when the state of the window starting at s goes.
func (w *paneOp[T, K, A, O]) cleanupAt(s int64) int64 { return satAdd(w.maxTs(s), w.lateness) }

// lastWindow returns the start of the newest window that may hold pane p
// (it does unless p falls in a gap between windows, size < slide).
func (w *paneOp[T, K, A, O]) lastWindow(p int64) int64 { return floorDiv(p, w.slide) }

// firstWindow returns the start of the oldest window holding pane p: the
// least multiple of slide >= p + pane - size.
func (w *paneOp[T, K, A, O]) firstWindow(p int64) int64 {
	return ceilDiv(satSub(satAdd(p, w.pane), w.size), w.slide)
}

// firstUnfired returns the start of the first window whose MaxTimestamp is
// after wm: the least multiple of slide > wm - size + 1.
func (w *paneOp[T, K, A, O]) firstUnfired(wm int64) int64 {
	return ceilDiv(satAdd(satSub(wm, w.size), 2), w.slide)
}

// nextWindow returns the start of the key's next window to fire: the first
// window at or after set.next holding one of its panes.
func (w *paneOp[T, K, A, O]) nextWindow(set *paneSet[A]) (int64, bool) {
	for _, p := range set.panes {
		if w.lastWindow(p.start) >= set.next {
			return max(set.next, w.firstWindow(p.start)), true
		}
	}
	return 0, false
}

// dueAt returns when the key's timer must fire: at its next window's
// MaxTimestamp or at its first pane's cleanup time (the cleanup time of the
// pane's newest window), whichever comes first.
func (w *paneOp[T, K, A, O]) dueAt(set *paneSet[A]) int64 {
	d := w.cleanupAt(w.lastWindow(set.panes[0].start))
	if s, ok := w.nextWindow(set); ok {
		d = min(d, w.maxTs(s))
	}
	return d
}

// store writes key's set, changed in place, again when the backend holds an
// encoding of it (see opBase.writeBack).
func (w *paneOp[T, K, A, O]) store(key K, set *paneSet[A]) {
	if w.writeBack {
		w.sets.Update(key, set)
	}
}

// own returns set ready to be written (see sessionOp.own).
func (w *paneOp[T, K, A, O]) own(key K, set *paneSet[A]) *paneSet[A] {
	if set.epoch == w.cur {
		return set
	}
	c := &paneSet[A]{panes: make([]pane[A], len(set.panes), len(set.panes)+1), next: set.next, timer: set.timer, epoch: w.cur}
	copy(c.panes, set.panes)
	if w.agg.Clone != nil {
		for i := range c.panes {
			c.panes[i].acc = w.agg.Clone(c.panes[i].acc)
		}
	}
	w.sets.Update(key, c)
	return c
}

func (w *paneOp[T, K, A, O]) ProcessBatch(_ int, r runtime.Records) error {
	in, err := runtime.BatchOf[T](r)
	if err != nil {
		return err
	}
	for _, rec := range in {
		t := rec.Time
		last := floorDiv(t, w.slide)
		if t-last >= w.size {
			continue // between two windows (size < slide)
		}
		if w.cleanupAt(last) <= w.wm {
			w.late.add(rec, w.wm)
			continue
		}
		w.add(w.key(rec.Value), floorDiv(t, w.pane), rec.Value)
	}
	if err := w.late.flush(); err != nil {
		return err
	}
	return w.flush()
}

// add adds v to key's pane p, one of whose windows is still kept.
func (w *paneOp[T, K, A, O]) add(key K, p int64, v T) {
	set, ok := w.sets.Get(key)
	if !ok {
		set = &paneSet[A]{panes: make([]pane[A], 1, 2), next: w.firstUnfired(w.wm), epoch: w.cur}
		set.panes[0] = pane[A]{start: p, acc: w.agg.Add(w.agg.Init(), v)}
		w.sets.Update(key, set)
		set.timer = w.dueAt(set)
		w.due.Add(set.timer, key)
		w.refire(key, set, p)
		w.store(key, set)
		return
	}
	set = w.own(key, set)
	// The pane is usually the newest.
	i := len(set.panes) - 1
	if set.panes[i].start != p {
		var found bool
		if i, found = slices.BinarySearchFunc(set.panes, p, func(q pane[A], p int64) int { return cmpInt(q.start, p) }); !found {
			set.panes = slices.Insert(set.panes, i, pane[A]{start: p, acc: w.agg.Init()})
			set.panes[i].acc = w.agg.Add(set.panes[i].acc, v)
			set.next = max(set.next, w.firstUnfired(w.wm))
			if d := w.dueAt(set); d < set.timer {
				set.timer = d // the entry at the old time is stale now
				w.due.Add(d, key)
			}
			w.refire(key, set, p)
			w.store(key, set)
			return
		}
	}
	set.panes[i].acc = w.agg.Add(set.panes[i].acc, v)
	w.refire(key, set, p)
	w.store(key, set)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// refire fires again, with their updated panes, the windows of pane p that
// already fired and are kept for the allowed lateness.
func (w *paneOp[T, K, A, O]) refire(key K, set *paneSet[A], p int64) {
	s := w.firstWindow(p)
	if w.maxTs(s) > w.wm {
		return // the oldest window of the pane has not fired: none has
	}
	for last := w.lastWindow(p); s <= last && w.maxTs(s) <= w.wm; s += w.slide {
		if w.cleanupAt(s) > w.wm {
			w.emit(key, set, s)
		}
	}
}

// emit appends key's window starting at s, its panes merged, to the
// results. The merged accumulator is fresh: it references no pane.
func (w *paneOp[T, K, A, O]) emit(key K, set *paneSet[A], s int64) {
	end := satAdd(s, w.size)
	acc, found := w.agg.Init(), false
	for i := range set.panes {
		if p := set.panes[i].start; p >= s && p < end {
			acc, found = w.agg.Merge(acc, set.panes[i].acc), true
		} else if p >= end {
			break
		}
	}
	if found {
		w.results = append(w.results, runtime.Record[O]{Value: w.output(key, Window{Start: s, End: end}, acc), Time: end - 1})
	}
}

// onDue fires key's windows due at ts and drops its panes whose cleanup
// time came.
func (w *paneOp[T, K, A, O]) onDue(key K, ts int64) error {
	set, ok := w.sets.Get(key)
	if !ok || set.timer != ts {
		return nil // a stale entry: the key's due time moved, or its panes went
	}
	set = w.own(key, set)
	for {
		s, ok := w.nextWindow(set)
		if !ok || w.maxTs(s) > ts {
			break
		}
		w.emit(key, set, s)
		set.next = satAdd(s, w.slide)
	}
	n := 0
	for n < len(set.panes) && w.cleanupAt(w.lastWindow(set.panes[n].start)) <= ts {
		n++
	}
	if n == len(set.panes) {
		w.sets.Clear(key)
		return nil
	}
	set.panes = slices.Delete(set.panes, 0, n)
	set.timer = w.dueAt(set)
	w.due.Add(set.timer, key)
	w.store(key, set)
	return nil
}

// ProcessWatermark fires the keys due at or before wm.
func (w *paneOp[T, K, A, O]) ProcessWatermark(wm int64) error {
	w.wm = wm
	if err := w.due.Fire(wm, w.onDue); err != nil {
		return err
	}
	return w.flush()
}

// ceilDiv returns the least multiple of d (d > 0) that is >= t, saturating
// at math.MaxInt64.
func ceilDiv(t, d int64) int64 {
	r := t % d
	if r < 0 {
		r += d
	}
	if r == 0 {
		return t
	}
	return satAdd(t, d-r)
}

// paneSetCodec encodes a key's panes: a uvarint count, varint next, the
// timer as a varint delta from next, then per pane its start as a varint
// delta from the previous pane's start (the first: from next) and the
// accumulator. Deltas keep the varints short: checkpoints of millions of
// keys encode faster and smaller than with absolute times. (Deltas wrap
// around in int64 arithmetic both ways, so every value round-trips.)
type paneSetCodec[A any] struct {
	acc               state.Codec[A]
	size, slide, pane time.Duration
}

// Name includes the window's shape and the accumulator codec's name: panes
// of another window or aggregate are other state.
func (c paneSetCodec[A]) Name() string {
	return fmt.Sprintf("window-panes(size=%v,slide=%v,pane=%v)[%s]", c.size, c.slide, c.pane, c.acc.Name())
}

func (c paneSetCodec[A]) Append(dst []byte, set *paneSet[A]) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(set.panes)))
	dst = binary.AppendVarint(dst, set.next)
	dst = binary.AppendVarint(dst, set.timer-set.next)
	prev := set.next
	for i := range set.panes {
		dst = binary.AppendVarint(dst, set.panes[i].start-prev)
		prev = set.panes[i].start
		dst = c.acc.Append(dst, set.panes[i].acc)
	}
	return dst
}

func (c paneSetCodec[A]) Decode(src []byte) (*paneSet[A], int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l == 0 || l > uint64(len(src)) {
		return nil, 0, fmt.Errorf("window panes: malformed count")
	}
	set := &paneSet[A]{panes: make([]pane[A], l)}
	var m int
	if set.next, m = binary.Varint(src[n:]); m <= 0 {
		return nil, 0, errAccTruncated
	}
	n += m
	d, m := binary.Varint(src[n:])
	if m <= 0 {
		return nil, 0, errAccTruncated
	}
	set.timer, n = set.next+d, n+m
	prev := set.next
	for i := range set.panes {
		p := &set.panes[i]
		if d, m = binary.Varint(src[n:]); m <= 0 {
			return nil, 0, errAccTruncated
		}
		p.start, n = prev+d, n+m
		if i > 0 && p.start <= prev {
			return nil, 0, fmt.Errorf("window panes: pane %d after %d: out of order", p.start, prev)
		}
		prev = p.start
		acc, k, err := c.acc.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("window panes: %w", err)
		}
		p.acc, n = acc, n+k
	}
	return set, n, nil
}
