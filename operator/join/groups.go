package join

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Groups is what IntervalUntilGroups does with the pairs of each left
// record: it folds them into one accumulator of type A and, once no pair
// can come, makes one output of type O.
type Groups[L, R any, K comparable, A, O any] struct {
	// Codec encodes accumulators in checkpoints. Required. Its name is part
	// of the join's state schema: a checkpoint of other groups is refused.
	Codec state.Codec[A]
	// Clone returns a copy of acc that shares nothing mutable with it.
	// Setting it declares A mutable: Fold.Add may then change its first
	// argument in place and return it, and the join clones an accumulator
	// before its first change after a checkpoint captured it. Nil: Add never
	// changes acc in place.
	Clone func(acc A) A
	// New makes one subtask's Fold (a subtask may keep scratch space in
	// it: it is used from the subtask's goroutine only). Required.
	New func() (Fold[L, R, K, A, O], error)
}

// Fold is one subtask's part of Groups.
type Fold[L, R any, K comparable, A, O any] struct {
	// Init returns the accumulator of a left record's first pair.
	Init func() A
	// Add folds the pair (l, r) of key into acc.
	Add func(acc A, key K, l L, r R) A
	// Result makes the output of left record l's group, whose pairs acc
	// holds, closed at close (the bound of l). False drops it (SQL's
	// HAVING); an error fails the job. It must not change acc: a
	// checkpoint being written may hold it.
	Result func(key K, l L, acc A, close int64) (O, bool, error)
}

// IntervalUntilGroups is IntervalUntil with UniqueLeft whose pairs are not
// emitted but folded, per left record, into one group: it is the interval
// join followed by a GROUP BY of the left record's fields (its key among
// them) that closes at the left record's bound, computed in one operator
// (a groupjoin). Since no two left records share a key, a key has at most
// one group, and a right record costs one keyed-state lookup: no pair is
// made, sent or keyed again.
//
// Once the watermark passes a left record's bound until(l), no pair of it
// can come: the join emits Fold.Result of its group, with until(l) as the
// event time, and forgets it. A left record with no pair emits nothing, as
// a GROUP BY has no group without rows. The output is append-only, and is
// the same as the closing aggregate's (aggregate.Closing) over
// IntervalUntil's pairs, emitted in the order the left records came (by
// bound, then arrival).
//
// lower must not be negative: a left record then comes no later than its
// pairs' right records (r.Time >= l.Time >= the watermark), so every pair
// is folded before its group closes. With a negative lower bound a left
// record could come after its own bound and still match right records that
// waited for it, and its group would close before it opened.
//
// Records below the watermark are late, dropped and counted, as in
// IntervalUntil; a left record whose bound is NULL (until reports false)
// matches nothing. A second left record of a key while the first one's
// group is open fails the job unrecoverably, naming the key, except under
// at-least-once checkpoints, whose restores send held records again: the
// repeat is then dropped (the group already holds it).
func IntervalUntilGroups[L, R any, K comparable, A, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	lower time.Duration, until func(L) (int64, bool), untilName string, g Groups[L, R, K, A, O], opts ...Option) stream.Stream[O] {
	const kind = "interval join"
	s := resolve(kind, id, left, right, opts)
	p := left.Pipeline()
	if lower < 0 {
		p.Errorf("%s %s: the lower bound %v is negative: a left record could come after its own bound, so its group would close before its pairs came; groups need a lower bound of 0 or more", kind, id, lower)
		lower = 0
	}
	if until == nil || g.Codec == nil || g.New == nil {
		p.Errorf("%s %s: the bound function, the accumulator codec and Groups.New are required", kind, id)
	}
	acc := "nil"
	if g.Codec != nil {
		acc = g.Codec.Name()
	}
	schema := fmt.Sprintf("interval-join-groups(key=%s,lower=%v,upper=left %s,unique left,acc=%s)", s.keyCodec.Name(), lower, untilName, acc)
	describe := fmt.Sprintf("interval join [%v, left %s], left unique by key (declared), its pairs grouped per left record", lower, untilName)
	n := &runtime.Node{ID: id, Describe: describe, Type: kind, DropsLate: true}
	n.NewOperator = func() runtime.Operator {
		return &groupJoin[L, R, K, A, O]{schema: schema, sides: s, lower: int64(lower), until: until, groups: g}
	}
	return addNode[L, R, K, O](left, right, n, s)
}

// entry is one key's state: the open group of its left record, or the
// right records that came before it.
type entry[L, R, A any] struct {
	// open says the key's left record came: left, until, paired and acc
	// are set, and waiting is empty.
	open bool
	left runtime.Record[L]
	// until is until(left.Value), the group's close time.
	until int64
	// paired says acc holds at least one pair; before, acc is unset.
	paired bool
	acc    A
	// waiting are the right records that came before the left record, in
	// arrival order.
	waiting []runtime.Record[R]
	// listed is the latest time the cleanup index lists the key at for its
	// waiting records (not stored: Open rebuilds the index).
	listed int64
	// gen is the generation the entry was made in (not stored): one of the
	// current generation belongs to no checkpoint yet and may be changed
	// in place (see groupJoin.keys).
	gen uint64
}

// The kinds of a stored entry.
const (
	entryWaiting = iota // waiting right records
	entryOpen           // an open group without a pair yet
	entryPaired         // an open group and its accumulator
)

// entryCodec stores an entry as its kind, then the waiting records (a
// count and each record) or the left record, close time and, when paired,
// the accumulator.
type entryCodec[L, R, A any] struct {
	left  recordCodec[L]
	right recordCodec[R]
	acc   state.Codec[A]
}

func (c entryCodec[L, R, A]) Name() string {
	return "join-groups-entry(" + c.left.Name() + "," + c.right.Name() + "," + c.acc.Name() + ")"
}

func (c entryCodec[L, R, A]) Append(dst []byte, e *entry[L, R, A]) []byte {
	switch {
	case !e.open:
		dst = binary.AppendUvarint(append(dst, entryWaiting), uint64(len(e.waiting)))
		for _, r := range e.waiting {
			dst = c.right.Append(dst, r)
		}
		return dst
	case !e.paired:
		return binary.AppendVarint(c.left.Append(append(dst, entryOpen), e.left), e.until)
	default:
		dst = binary.AppendVarint(c.left.Append(append(dst, entryPaired), e.left), e.until)
		return c.acc.Append(dst, e.acc)
	}
}

func (c entryCodec[L, R, A]) Decode(src []byte) (*entry[L, R, A], int, error) {
	if len(src) == 0 {
		return nil, 0, errors.New("join groups entry: empty")
	}
	e := &entry[L, R, A]{}
	n := 1
	switch src[0] {
	case entryWaiting:
		count, m := binary.Uvarint(src[n:])
		if m <= 0 || count > uint64(len(src)) {
			return nil, 0, errors.New("join groups entry: truncated or impossible count of waiting records")
		}
		n += m
		e.waiting = make([]runtime.Record[R], 0, count)
		for range count {
			r, m, err := c.right.Decode(src[n:])
			if err != nil {
				return nil, 0, fmt.Errorf("join groups entry: waiting record: %w", err)
			}
			e.waiting, n = append(e.waiting, r), n+m
		}
		return e, n, nil
	case entryOpen, entryPaired:
	default:
		return nil, 0, fmt.Errorf("join groups entry: kind %d, want %d, %d or %d", src[0], entryWaiting, entryOpen, entryPaired)
	}
	l, m, err := c.left.Decode(src[n:])
	if err != nil {
		return nil, 0, fmt.Errorf("join groups entry: %w", err)
	}
	n += m
	u, m := binary.Varint(src[n:])
	if m <= 0 {
		return nil, 0, errors.New("join groups entry: truncated or overflowing close time")
	}
	e.open, e.left, e.until, n = true, l, u, n+m
	if src[0] == entryOpen {
		return e, n, nil
	}
	a, m, err := c.acc.Decode(src[n:])
	if err != nil {
		return nil, 0, fmt.Errorf("join groups entry: accumulator: %w", err)
	}
	e.paired, e.acc = true, a
	return e, n + m, nil
}

// schemaKeyCodec is a key codec under the name of the state's schema, so
// that state of an operator with other parameters is refused at restore.
type schemaKeyCodec[K any] struct {
	state.Codec[K]
	name string
}

func (c schemaKeyCodec[K]) Name() string { return c.name }

// groupJoin is one subtask of IntervalUntilGroups.
type groupJoin[L, R any, K comparable, A, O any] struct {
	schema string
	sides[L, R, K]
	lower  int64
	until  func(L) (int64, bool)
	groups Groups[L, R, K, A, O]

	task   string
	output runtime.Output
	fold   Fold[L, R, K, A, O]
	// keys holds each key's entry: its open group or its waiting right
	// records. closes has a timer at each open group's close time + 1
	// (fireAt).
	// INVARIANT: a key has an open group iff it has a timer, and every
	// open group's close time is at or after wm: the timers of the others
	// fired, and their groups were emitted and forgotten.
	//
	// Entries are held by pointer: one of the current generation
	// (entry.gen), written since the last checkpoint captured the state,
	// is changed in place, without another state write on the memory
	// backend (on pebble a write marks it for the store's cache, which a
	// checkpoint encodes when it is taken); any other is copied and
	// written.
	keys   *state.ValueState[K, *entry[L, R, A]]
	closes *state.Timers[K]
	// cleanup lists the keys with waiting records by the grain after
	// their records' expiries. Not state: Open rebuilds it.
	// INVARIANT: a key with waiting records is listed at entry.listed, at
	// or after the cleanup time of each of them.
	cleanup startkeys.Index[K]
	// gen counts the checkpoints that captured the state.
	// INVARIANT: incremented at every Snapshot; restored entries have gen
	// 0, and gen starts at 1.
	gen uint64
	// wm is the watermark processed. INVARIANT: it never decreases.
	wm      int64
	late    lateCount
	replays bool
	// lsm is set on an LSM backend, whose cached values are written back
	// only when a state write marks them.
	lsm bool
	// closed collects the results of one watermark's closed groups.
	closed runtime.Batch[O]
}

// Open registers the state, takes the restored watermark and rebuilds the
// cleanup index.
func (j *groupJoin[L, R, K, A, O]) Open(ctx *runtime.Context) error {
	j.task = fmt.Sprintf("interval join %v", ctx.Task)
	j.output = ctx.Output
	j.late.ctx = ctx
	j.wm = ctx.Watermark()
	j.gen = 1
	j.replays = ctx.CheckpointMode == checkpoint.AtLeastOnce
	j.lsm = ctx.State.IsLSM()
	var err error
	if j.fold, err = j.groups.New(); err != nil {
		return fmt.Errorf("%s: %w", j.task, err)
	}
	restoreError := func(err error) error {
		return stateError(j.task, "a join with other parameters, record codecs or aggregates", j.schema, err)
	}
	kc := state.Codec[K](schemaKeyCodec[K]{Codec: j.keyCodec, name: j.schema})
	vc := state.Codec[*entry[L, R, A]](entryCodec[L, R, A]{left: recordCodec[L]{j.codecL}, right: recordCodec[R]{j.codecR}, acc: j.groups.Codec})
	if j.keys, err = state.NewValueState(ctx.State, "keys", kc, vc); err != nil {
		return restoreError(err)
	}
	if j.closes, err = state.NewTimers(ctx.State, "group-closes", kc); err != nil {
		return restoreError(err)
	}
	// No checkpoint holds the restored entries yet: listed may be set.
	j.keys.All(func(k K, e *entry[L, R, A]) bool {
		for _, r := range e.waiting {
			e.listed = max(e.listed, cleanupAt(j.expiryR(r)))
		}
		if len(e.waiting) > 0 {
			j.cleanup.Add(e.listed, k)
		}
		return true
	})
	return nil
}

// expiryR is when right record r stops matching: r.Time - lower.
func (j *groupJoin[L, R, K, A, O]) expiryR(r runtime.Record[R]) int64 {
	return satAdd(r.Time, satNeg(j.lower))
}

// BorrowsBatches implements runtime.BatchBorrower: stored records are
// copies.
func (j *groupJoin[L, R, K, A, O]) BorrowsBatches() {}

// pairs reports whether right record r and left record l, bounded by
// until, are a pair.
func (j *groupJoin[L, R, K, A, O]) pairs(l runtime.Record[L], until int64, r runtime.Record[R]) bool {
	return atLeastLower(r.Time, l.Time, j.lower) && r.Time <= until
}

// add folds the pair (e.left, r) of key into open entry e, of the current
// generation (its accumulator is no checkpoint's).
func (j *groupJoin[L, R, K, A, O]) add(e *entry[L, R, A], key K, r runtime.Record[R]) {
	if !e.paired {
		e.acc, e.paired = j.fold.Init(), true
	}
	e.acc = j.fold.Add(e.acc, key, e.left.Value, r.Value)
}

// ProcessBatch opens a group for each left record, folding the right
// records that waited for it, and folds each right record into its key's
// open group, or keeps it until its left record comes.
func (j *groupJoin[L, R, K, A, O]) ProcessBatch(input int, r runtime.Records) error {
	switch input {
	case 0:
		b, err := runtime.BatchOf[L](r)
		if err != nil {
			return fmt.Errorf("%s: input 0: %w", j.task, err)
		}
		for _, l := range b {
			if err := j.left(l); err != nil {
				return err
			}
		}
	case 1:
		b, err := runtime.BatchOf[R](r)
		if err != nil {
			return fmt.Errorf("%s: input 1: %w", j.task, err)
		}
		for _, rr := range b {
			j.right(rr)
		}
	default:
		return inputError(j.task, input)
	}
	return nil
}

// left opens left record l's group.
func (j *groupJoin[L, R, K, A, O]) left(l runtime.Record[L]) error {
	if l.Time < j.wm {
		j.late.add(0, l.Time, j.wm)
		return nil
	}
	until, ok := j.until(l.Value)
	if !ok {
		return nil // a NULL bound matches nothing
	}
	key := j.keyL(l.Value)
	old, had := j.keys.Get(key)
	if had && old.open {
		if j.replays {
			return nil // the restored group holds it already
		}
		return duplicateLeft(j.task, key, old.left.Time, l.Time)
	}
	if until < j.wm {
		// No pair: each would have r.Time >= l.Time >= wm > until. No
		// other left record can come for the waiting ones.
		if had {
			j.keys.Clear(key)
		}
		return nil
	}
	e := &entry[L, R, A]{open: true, left: l, until: until, gen: j.gen}
	if had {
		for _, w := range old.waiting {
			if j.pairs(l, until, w) {
				j.add(e, key, w)
			}
		}
	}
	j.keys.Update(key, e) // the waiting records go: no other left record can come for them
	j.closes.Register(key, 0, fireAt(until))
	return nil
}

// right folds right record r into its key's open group, or keeps it for
// the left record to come.
func (j *groupJoin[L, R, K, A, O]) right(r runtime.Record[R]) {
	if r.Time < j.wm {
		j.late.add(1, r.Time, j.wm)
		return
	}
	key := j.keyR(r.Value)
	e, had := j.keys.Get(key)
	if had && e.open {
		// Its key's only left record has come: r is folded or, outside
		// its interval, matches nothing, now or later.
		if !j.pairs(e.left, e.until, r) {
			return
		}
		switch {
		case e.gen != j.gen:
			c := *e // a checkpoint may hold e
			if c.paired && j.groups.Clone != nil {
				c.acc = j.groups.Clone(c.acc)
			}
			c.gen = j.gen
			e = &c
			j.add(e, key, r)
			j.keys.Update(key, e)
		case j.lsm:
			// The store's cache writes back what a state write marks.
			j.add(e, key, r)
			j.keys.Update(key, e)
		default:
			j.add(e, key, r)
		}
		return
	}
	exp := j.expiryR(r)
	if exp < j.wm {
		return // every left record to come is after exp
	}
	switch {
	case !had:
		e = &entry[L, R, A]{waiting: make([]runtime.Record[R], 0, 2), gen: j.gen}
		e.waiting = append(e.waiting, r)
		j.keys.Update(key, e)
	case e.gen != j.gen:
		// A checkpoint may hold e and its records' array.
		c := &entry[L, R, A]{waiting: make([]runtime.Record[R], len(e.waiting), len(e.waiting)+2), listed: e.listed, gen: j.gen}
		copy(c.waiting, e.waiting)
		e = c
		e.waiting = append(e.waiting, r)
		j.keys.Update(key, e)
	default:
		e.waiting = append(e.waiting, r)
		if j.lsm {
			j.keys.Update(key, e) // marks it for the store's cache
		}
	}
	if at := cleanupAt(exp); at > e.listed {
		j.cleanup.Add(at, key)
		e.listed = at
	}
}

// fireAt is the timer of a group closing at t: the first instant the
// watermark has passed t, saturated (a group closing at the end of time
// closes when the input ends).
func fireAt(t int64) int64 {
	if t == math.MaxInt64 {
		return t
	}
	return t + 1
}

// ProcessWatermark emits the groups whose close time the watermark passed,
// in the order of their close times and, within one, of their left
// records' arrival, and drops the waiting right records no left record to
// come can match.
func (j *groupJoin[L, R, K, A, O]) ProcessWatermark(wm int64) error {
	j.wm = wm
	err := j.closes.Advance(wm, func(key K, _ int64, _ int64) error {
		e, had := j.keys.Get(key)
		if !had || !e.open {
			return fmt.Errorf("%s: the group of key %v closed but holds nothing", j.task, key)
		}
		j.keys.Clear(key)
		if !e.paired {
			return nil
		}
		o, keep, err := j.fold.Result(key, e.left.Value, e.acc, e.until)
		if err != nil {
			return fmt.Errorf("%s: group of key %v: %w", j.task, key, err)
		}
		if keep {
			j.closed = append(j.closed, runtime.Record[O]{Value: o, Time: e.until})
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = j.cleanup.Fire(wm, func(k K, _ int64) error {
		e, had := j.keys.Get(k)
		if !had || e.open {
			return nil // opened since it was listed
		}
		keep := dropExpired(e.waiting, func(r runtime.Record[R]) bool { return j.expiryR(r) < wm })
		switch {
		case len(keep) == 0:
			j.keys.Clear(k)
		case len(keep) < len(e.waiting):
			j.keys.Update(k, &entry[L, R, A]{waiting: keep, listed: e.listed, gen: j.gen})
		}
		return nil
	})
	if len(j.closed) == 0 {
		return nil
	}
	out := j.closed
	j.closed = nil
	return j.output.Emit(out)
}

// groupsLead is how far ahead of the right input in event time the task
// reads the left input first (runtime.InputLeader).
const groupsLead = time.Second

// InputLead implements runtime.InputLeader: a right record that finds its
// left record is folded and forgotten, one that comes first is kept until
// it does, so the task reads the left input first while it is less than a
// second of event time ahead.
func (j *groupJoin[L, R, K, A, O]) InputLead() (int, time.Duration) { return 0, groupsLead }

// Snapshot starts a new generation: the entries the checkpoint captures
// are copied before they change again.
func (j *groupJoin[L, R, K, A, O]) Snapshot(int64) (runtime.Snapshot, error) {
	j.gen++
	return runtime.Snapshot{}, nil
}

// NotifyComplete does nothing.
func (j *groupJoin[L, R, K, A, O]) NotifyComplete(int64) error { return nil }

// Close reports the late records dropped.
func (j *groupJoin[L, R, K, A, O]) Close() error {
	j.late.report()
	return nil
}
