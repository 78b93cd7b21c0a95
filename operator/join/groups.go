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

// group is the open group of one left record.
type group[L, A any] struct {
	left runtime.Record[L]
	// until is until(left.Value), the group's close time.
	until int64
	// paired says acc holds at least one pair; before, acc is unset.
	paired bool
	acc    A
	// gen is the generation acc was made or cloned in (not stored): one of
	// the current generation belongs to no checkpoint yet and may be
	// changed in place (Groups.Clone).
	gen uint64
}

// groupCodec stores a group as its left record, close time, a paired flag
// and, when paired, the accumulator.
type groupCodec[L, A any] struct {
	left recordCodec[L]
	acc  state.Codec[A]
}

func (c groupCodec[L, A]) Name() string {
	return "group(" + c.left.Name() + "," + c.acc.Name() + ")"
}

func (c groupCodec[L, A]) Append(dst []byte, g *group[L, A]) []byte {
	dst = binary.AppendVarint(c.left.Append(dst, g.left), g.until)
	if !g.paired {
		return append(dst, 0)
	}
	return c.acc.Append(append(dst, 1), g.acc)
}

func (c groupCodec[L, A]) Decode(src []byte) (*group[L, A], int, error) {
	g := &group[L, A]{}
	l, n, err := c.left.Decode(src)
	if err != nil {
		return nil, 0, fmt.Errorf("join group: %w", err)
	}
	g.left = l
	u, m := binary.Varint(src[n:])
	if m <= 0 {
		return nil, 0, errors.New("join group: truncated or overflowing close time")
	}
	g.until, n = u, n+m
	if n >= len(src) {
		return nil, 0, errors.New("join group: truncated before its paired flag")
	}
	switch src[n] {
	case 0:
		return g, n + 1, nil
	case 1:
	default:
		return nil, 0, fmt.Errorf("join group: paired flag %d, want 0 or 1", src[n])
	}
	a, m, err := c.acc.Decode(src[n+1:])
	if err != nil {
		return nil, 0, fmt.Errorf("join group accumulator: %w", err)
	}
	g.paired, g.acc = true, a
	return g, n + 1 + m, nil
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
	// open holds each key's open group; closes has a timer at the group's
	// close time + 1 (fireAt) for each.
	// INVARIANT: a key has an open group iff it has a timer, and every
	// open group's close time is at or after wm: the timers of the others
	// fired, and their groups were emitted and forgotten.
	//
	// A group is held by pointer: one made in the current generation
	// (group.gen) is changed in place, without a state write, on the memory
	// backend (see right).
	open   *state.ValueState[K, *group[L, A]]
	closes *state.Timers[K]
	// waiting holds the right records of keys without a group, each until
	// the watermark passes its time - lower.
	waiting *state.ListState[K, runtime.Record[R]]
	// cleanup holds the keys of waiting by the grain after their records'
	// expiries. Not state: Open rebuilds it from waiting.
	// INVARIANT: a key with waiting records is listed at a time after the
	// expiry of each of them.
	cleanup startkeys.Index[K]
	// gen counts the checkpoints that captured the state (see group.gen).
	// INVARIANT: incremented at every Snapshot; restored groups have gen 0,
	// and gen starts at 1.
	gen uint64
	// wm is the watermark processed. INVARIANT: it never decreases.
	wm      int64
	late    lateCount
	replays bool
	// lsm is set on an LSM backend, whose cached values are written back
	// only by a state write: groups are not changed in place there.
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
		if errors.Is(err, state.ErrStateMismatch) {
			return fmt.Errorf("%s: the checkpoint holds state of a join with other parameters, record codecs or aggregates (this one is %s): %w", j.task, j.schema, err)
		}
		return fmt.Errorf("%s: %w", j.task, err)
	}
	kc := state.Codec[K](schemaKeyCodec[K]{Codec: j.keyCodec, name: j.schema})
	if j.open, err = state.NewValueState(ctx.State, "groups", kc, state.Codec[*group[L, A]](groupCodec[L, A]{left: recordCodec[L]{j.codecL}, acc: j.groups.Codec})); err != nil {
		return restoreError(err)
	}
	if j.closes, err = state.NewTimers(ctx.State, "group-closes", kc); err != nil {
		return restoreError(err)
	}
	if j.waiting, err = state.NewListState(ctx.State, "waiting-right", kc, state.Codec[runtime.Record[R]](recordCodec[R]{j.codecR})); err != nil {
		return restoreError(err)
	}
	j.waiting.All(func(k K, recs []runtime.Record[R]) bool {
		for _, r := range recs {
			j.cleanup.AddOnce(cleanupAt(j.expiryR(r)), k)
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

// add folds the pair (g.left, r) of key into g.
func (j *groupJoin[L, R, K, A, O]) add(g *group[L, A], key K, r runtime.Record[R]) {
	switch {
	case !g.paired:
		g.acc, g.paired = j.fold.Init(), true
	case j.groups.Clone != nil && g.gen != j.gen:
		g.acc = j.groups.Clone(g.acc) // a checkpoint may hold g.acc
	}
	g.acc = j.fold.Add(g.acc, key, g.left.Value, r.Value)
	g.gen = j.gen
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
	if first, open := j.open.Get(key); open {
		if j.replays {
			return nil // the restored group holds it already
		}
		return fmt.Errorf("%s: two left records share key %v (event times %s and %s), but the left input was declared unique by its key (PRIMARY KEY … NOT ENFORCED): the join's groups would be wrong: %w",
			j.task, key, time.Unix(0, first.left.Time).UTC().Format(time.RFC3339Nano), time.Unix(0, l.Time).UTC().Format(time.RFC3339Nano), runtime.ErrUnrecoverable)
	}
	waiting := j.waiting.Get(key)
	if len(waiting) > 0 {
		// No other left record can come for them.
		j.waiting.Clear(key)
	}
	if until < j.wm {
		// No pair: each would have r.Time >= l.Time >= wm > until.
		return nil
	}
	g := &group[L, A]{left: l, until: until, gen: j.gen}
	for _, w := range waiting {
		if j.pairs(l, until, w) {
			j.add(g, key, w)
		}
	}
	j.open.Update(key, g)
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
	if g, open := j.open.Get(key); open {
		// Its key's only left record has come: r is folded or, outside
		// its interval, matches nothing, now or later.
		if !j.pairs(g.left, g.until, r) {
			return
		}
		if g.gen == j.gen && !j.lsm {
			// Written since the last checkpoint captured the state: no
			// checkpoint holds it, and the state logged its key then.
			j.add(g, key, r)
			return
		}
		c := *g // a checkpoint may hold g (add clones its accumulator)
		j.add(&c, key, r)
		j.open.Update(key, &c)
		return
	}
	exp := j.expiryR(r)
	if exp < j.wm {
		return // every left record to come is after exp
	}
	j.cleanup.AddOnce(cleanupAt(exp), key)
	j.waiting.Add(key, r)
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
// records' arrival, and drops the right records no left record to come can
// match.
func (j *groupJoin[L, R, K, A, O]) ProcessWatermark(wm int64) error {
	j.wm = wm
	err := j.closes.Advance(wm, func(key K, _ int64, _ int64) error {
		g, open := j.open.Get(key)
		if !open {
			return fmt.Errorf("%s: the group of key %v closed but holds nothing", j.task, key)
		}
		j.open.Clear(key)
		if !g.paired {
			return nil
		}
		o, keep, err := j.fold.Result(key, g.left.Value, g.acc, g.until)
		if err != nil {
			return fmt.Errorf("%s: group of key %v: %w", j.task, key, err)
		}
		if keep {
			j.closed = append(j.closed, runtime.Record[O]{Value: o, Time: g.until})
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = j.cleanup.Fire(wm, func(k K, _ int64) error {
		keep := dropExpired(j.waiting.Get(k), func(r runtime.Record[R]) bool { return j.expiryR(r) < wm })
		if len(keep) == 0 {
			j.waiting.Clear(k)
		} else {
			j.waiting.Update(k, keep)
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

// Snapshot starts a new generation: the accumulators the checkpoint
// captures are cloned before they change again.
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
