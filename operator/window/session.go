package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Session groups each key's records into sessions: a record at t opens the
// session [t, t+gap), and sessions of a key that overlap or touch are merged
// into one (Flink's EventTimeSessionWindows: records at most gap apart are in
// one session), their accumulators combined with agg.Merge, which is
// required. When the watermark reaches a session's end the session fires:
// output(key, Window{first record, last record + gap}, accumulator) with
// event time end.
//
// A session fires at end, not at end-1 (its MaxTimestamp) as Flink's does:
// a record at exactly end touches the session and merges with it, and such
// a record is on time until the watermark reaches end (with a watermark of
// maxSeen - maxDelay - 1ns it is exactly maxDelay behind). Firing at end-1
// would emit a session that an on-time record then extends: two results
// where the records make one. Its result carries event time end for the
// same reason: the watermark forwarded before the firing may be end-1, and a
// result at end-1 would be late downstream.
//
// opts are node options (stream.Parallelism) and window options
// (AllowedLateness, LateRecordsTo). With an allowed lateness, a record within
// it may extend or merge sessions that already fired: the merged session
// fires again (at once if its end already passed), so consumers see a result
// for each of the old sessions and one for the merged session covering them.
//
// State per key: its open sessions (usually one), in one value.
func Session[T any, K comparable, A any, O any](ks stream.KeyedStream[T, K], id string, gap time.Duration,
	agg Aggregate[T, A], output func(K, Window, A) O, opts ...stream.NodeOption) stream.Stream[O] {
	if gap <= 0 {
		ks.Pipeline().Errorf("window %s: session gap %v must be positive", id, gap)
	}
	checkAggregate(ks.Pipeline(), id, "session", agg, true)
	n := &runtime.Node{ID: id, Describe: fmt.Sprintf("session event-time window gap %v", gap)}
	cfg := new(settings)
	n.NewOperator = func() runtime.Operator {
		return &sessionOp[T, K, A, O]{gap: int64(gap), agg: agg, key: ks.Key, keyCodec: ks.KeyCodec, output: output, opBase: opBase[T, K, O]{cfg: *cfg}}
	}
	return addNode[T, O](ks.Stream, n, cfg, opts)
}

// session is one open session of a key.
type session[A any] struct {
	// start and end bound the session [start, end): its first record's time
	// and its last record's time + gap.
	start, end int64
	// timer is the time of the session's pending timer (namespace start).
	// INVARIANT: exactly one timer (key, start, timer) is pending for the
	// session, and timer <= its due time (sessionOp.due). It may be earlier:
	// a session extended by later records keeps its timer, which re-registers
	// at the new due time when it fires, so extending a session costs no
	// timer operation.
	timer int64
	// fired says the session was emitted; it is kept for the allowed
	// lateness. INVARIANT: after a call returns, fired == (end <= the
	// operator's watermark).
	fired bool
	acc   A
}

// sessionSet is a key's open sessions.
type sessionSet[A any] struct {
	// s is sorted by start.
	// INVARIANT: sessions neither overlap nor touch: s[i].end < s[i+1].start
	// (touching sessions are merged when they form).
	s []session[A]
	// epoch: see paneSet.epoch; the same invariant covers s, its backing
	// array and the accumulators.
	epoch uint64
}

// sessionOp is one subtask of a session window.
//
// State: ValueState "sessions", key → *sessionSet; Timers "session-timers",
// one per session (see session.timer).
type sessionOp[T any, K comparable, A any, O any] struct {
	opBase[T, K, O]

	// Immutable after construction.
	gap      int64
	agg      Aggregate[T, A]
	key      func(T) K
	keyCodec state.Codec[K]
	output   func(K, Window, A) O

	// sessions is set by Open.
	sessions *state.ValueState[K, *sessionSet[A]]
}

func (w *sessionOp[T, K, A, O]) Open(ctx *runtime.Context) error {
	w.ctx = ctx
	w.out.Open(ctx.Output)
	w.wm = ctx.Watermark()
	w.cur = 1
	w.lateness = int64(w.cfg.lateness)
	w.writeBack = ctx.State.IsLSM()
	var err error
	vc := sessionsCodec[A]{acc: w.agg.Codec, gap: time.Duration(w.gap)}
	if w.sessions, err = state.NewValueState[K, *sessionSet[A]](ctx.State, "sessions", w.keyCodec, vc); err != nil {
		return restoreError(err)
	}
	if w.timers, err = state.NewTimers[K](ctx.State, "session-timers", w.keyCodec); err != nil {
		return restoreError(err)
	}
	w.fire = w.onTimer
	w.late.open(ctx, w.cfg.lateOutput)
	return nil
}

// due is when a session's timer must fire: at its end until it fired (a
// record at end still touches it: see Session), then at its cleanup time
// (end + allowed lateness).
func (w *sessionOp[T, K, A, O]) due(s *session[A]) int64 {
	if s.fired {
		return satAdd(s.end, w.lateness)
	}
	return s.end
}

// store writes key's set, changed in place, again when the backend holds an
// encoding of it (see opBase.writeBack).
func (w *sessionOp[T, K, A, O]) store(key K, set *sessionSet[A]) {
	if w.writeBack {
		w.sessions.Update(key, set)
	}
}

// own returns set ready to be written: set itself when it belongs to the
// current epoch, else a copy (accumulators cloned) stored in its place.
func (w *sessionOp[T, K, A, O]) own(key K, set *sessionSet[A]) *sessionSet[A] {
	if set.epoch == w.cur {
		return set
	}
	c := &sessionSet[A]{s: make([]session[A], len(set.s), len(set.s)+1), epoch: w.cur}
	copy(c.s, set.s)
	if w.agg.Clone != nil {
		for i := range c.s {
			c.s[i].acc = w.agg.Clone(c.s[i].acc)
		}
	}
	w.sessions.Update(key, c)
	return c
}

func (w *sessionOp[T, K, A, O]) ProcessBatch(_ int, r runtime.Records) error {
	in, err := runtime.BatchOf[T](r)
	if err != nil {
		return err
	}
	for _, rec := range in {
		w.add(rec)
	}
	if err := w.late.flush(); err != nil {
		return err
	}
	return w.flush()
}

// add puts one record into its key's sessions.
func (w *sessionOp[T, K, A, O]) add(rec runtime.Record[T]) {
	lo, hi := rec.Time, satAdd(rec.Time, w.gap)
	key := w.key(rec.Value)
	set, _ := w.sessions.Get(key)
	// The sessions [lo, hi) merges with: s[first:last], which overlap or
	// touch it (contiguous, since the set is sorted and disjoint).
	first, last := 0, 0
	start, end := lo, hi
	if set != nil {
		for first < len(set.s) && set.s[first].end < lo {
			first++
		}
		for last = first; last < len(set.s) && set.s[last].start <= hi; last++ {
		}
		if first < last {
			start, end = min(lo, set.s[first].start), max(hi, set.s[last-1].end)
		}
	}
	if satAdd(end, w.lateness) <= w.wm {
		// Only possible when it merges with nothing: an existing session's
		// cleanup time is after the watermark.
		w.late.add(rec, w.wm)
		return
	}
	if set == nil {
		set = &sessionSet[A]{s: make([]session[A], 0, 1), epoch: w.cur}
		w.sessions.Update(key, set)
	} else {
		set = w.own(key, set)
	}
	if first == last {
		// A new session, inserted at first (sessions before it end before lo).
		set.s = slices.Insert(set.s, first, session[A]{start: lo, end: hi, acc: w.agg.Add(w.agg.Init(), rec.Value)})
		se := &set.s[first]
		// Behind the watermark already (within the allowed lateness): it
		// fires at once.
		se.fired = se.end <= w.wm
		se.timer = w.due(se)
		w.timers.Register(key, se.start, se.timer)
		if se.fired {
			w.emit(key, set, *se)
		}
		w.store(key, set)
		return
	}
	se := &set.s[first]
	oldStart, oldTimer := se.start, se.timer
	for j := first + 1; j < last; j++ {
		se.acc = w.agg.Merge(se.acc, set.s[j].acc)
		w.timers.Delete(key, set.s[j].start, set.s[j].timer)
	}
	se.acc = w.agg.Add(se.acc, rec.Value)
	se.start, se.end = start, end
	// A session that grows past the watermark is pending again; one whose
	// end is still behind it fires again at once, within the allowed
	// lateness.
	se.fired = se.end <= w.wm
	set.s = slices.Delete(set.s, first+1, last)
	se = &set.s[first]
	if due := w.due(se); se.start != oldStart || oldTimer > due {
		w.timers.Delete(key, oldStart, oldTimer)
		se.timer = due
		w.timers.Register(key, se.start, due)
	}
	if se.fired {
		w.emit(key, set, *se)
	}
	w.store(key, set)
}

// emit appends session s of key's set to the results. The output function
// may keep a reference to the accumulator, so set is no longer written in
// place: callers emit after their last write to set.
func (w *sessionOp[T, K, A, O]) emit(key K, set *sessionSet[A], s session[A]) {
	w.results = append(w.results, runtime.Record[O]{Value: w.output(key, Window{Start: s.start, End: s.end}, s.acc), Time: s.end})
	if set.epoch == w.cur {
		set.epoch = 0
	}
}

// onTimer handles the timer (key, session start, ts).
func (w *sessionOp[T, K, A, O]) onTimer(key K, start, ts int64) error {
	set, ok := w.sessions.Get(key)
	if !ok {
		return nil
	}
	i := slices.IndexFunc(set.s, func(s session[A]) bool { return s.start == start })
	if i < 0 || set.s[i].timer != ts {
		return nil // not the session's timer (the invariant says this does not happen)
	}
	set = w.own(key, set)
	se := &set.s[i]
	if se.fired || se.end > ts {
		if due := w.due(se); due > ts {
			// The session grew since the timer was registered, or it
			// fired and its allowed lateness grew since a restore.
			se.timer = due
			w.timers.Register(key, se.start, due)
			w.store(key, set)
			return nil
		}
		w.remove(key, set, i) // its cleanup time came
		return nil
	}
	se.fired = true
	if cleanup := w.due(se); cleanup > ts {
		se.timer = cleanup // kept for the allowed lateness
		w.timers.Register(key, se.start, cleanup)
		w.emit(key, set, *se)
		w.store(key, set)
		return nil
	}
	fired := *se
	w.remove(key, set, i)
	w.emit(key, set, fired)
	return nil
}

// remove deletes session i of key's set, which is owned.
func (w *sessionOp[T, K, A, O]) remove(key K, set *sessionSet[A], i int) {
	if len(set.s) == 1 {
		w.sessions.Clear(key)
		return
	}
	set.s = slices.Delete(set.s, i, i+1)
	w.store(key, set)
}

// sessionsCodec encodes a key's sessions: a uvarint count, then per session
// its start (the first absolute, the others as a delta from the previous
// session's end), its end as a delta from its start and its timer as a delta
// from its end (varints; deltas wrap around in int64 arithmetic both ways,
// and keep the varints short), a fired byte and the accumulator.
type sessionsCodec[A any] struct {
	acc state.Codec[A]
	gap time.Duration
}

// Name includes the gap and the accumulator codec's name: sessions of another
// gap or aggregate are other state.
func (c sessionsCodec[A]) Name() string {
	return fmt.Sprintf("window-sessions(gap=%v)[%s]", c.gap, c.acc.Name())
}

func (c sessionsCodec[A]) Append(dst []byte, set *sessionSet[A]) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(set.s)))
	var prevEnd int64
	for i := range set.s {
		s := &set.s[i]
		dst = binary.AppendVarint(dst, s.start-prevEnd)
		dst = binary.AppendVarint(dst, s.end-s.start)
		dst = binary.AppendVarint(dst, s.timer-s.end)
		prevEnd = s.end
		if s.fired {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
		dst = c.acc.Append(dst, s.acc)
	}
	return dst
}

var errSessionsCorrupt = errors.New("window sessions: malformed")

func (c sessionsCodec[A]) Decode(src []byte) (*sessionSet[A], int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l == 0 || l > uint64(len(src)) {
		return nil, 0, errSessionsCorrupt
	}
	set := &sessionSet[A]{s: make([]session[A], l)}
	var prevEnd int64
	for i := range set.s {
		s := &set.s[i]
		var d [3]int64
		for j := range d {
			v, m := binary.Varint(src[n:])
			if m <= 0 {
				return nil, 0, errSessionsCorrupt
			}
			d[j], n = v, n+m
		}
		s.start = prevEnd + d[0]
		s.end = s.start + d[1]
		s.timer = s.end + d[2]
		prevEnd = s.end
		if n >= len(src) || src[n] > 1 {
			return nil, 0, errSessionsCorrupt
		}
		s.fired = src[n] == 1
		n++
		acc, m, err := c.acc.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("window sessions: %w", err)
		}
		s.acc, n = acc, n+m
		if s.start > s.end || (i > 0 && set.s[i-1].end >= s.start) {
			return nil, 0, fmt.Errorf("window sessions: session [%d,%d) out of order or overlapping", s.start, s.end)
		}
	}
	return set, n, nil
}
