package join

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// IntervalUntil joins left and right on their key: for each left record l and
// right record r of the same key with
//
//	l.Time+lower <= r.Time <= until(l)
//
// it emits output(key, l, r) with event time max(l.Time, r.Time). It is an
// interval join whose upper bound is each left record's own time, such as an
// auction's expiry (SQL's b.t BETWEEN a.t AND a.expires): a left record is
// kept until the watermark passes until(l), a right record until it passes
// r.Time-lower, so the state holds what records to come can still match and
// no more. A left record for which until reports false (a NULL bound)
// matches nothing and is not kept.
//
// As in Interval, a record whose event time is below the watermark is late:
// dropped and counted. A record at exactly the watermark still finds every
// partner.
//
// untilName names the bound in the plan and in checkpoints: a checkpoint of
// a join with another lower bound or bound name is refused.
//
// With UniqueLeft, a right record that finds its key's left record is not
// kept, and a left record takes the right records that waited for it out of
// state: the join then holds each left record until its bound and each right
// record only until its left one comes (see UniqueLeft).
func IntervalUntil[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	lower time.Duration, until func(L) (int64, bool), untilName string, output func(K, L, R) O, opts ...Option) stream.Stream[O] {
	const kind = "interval join"
	s := resolve(kind, id, left, right, opts)
	p := left.Pipeline()
	if lower == math.MinInt64 {
		p.Errorf("%s %s: the lower bound %v is out of range: it must be above %v", kind, id, lower, time.Duration(math.MinInt64))
		lower = math.MinInt64 + 1
	}
	if output == nil || until == nil {
		p.Errorf("%s %s: the output and bound functions are required", kind, id)
	}
	schema := fmt.Sprintf("interval-join-until(key=%s,lower=%v,upper=left %s)", s.keyCodec.Name(), lower, untilName)
	describe := fmt.Sprintf("interval join [%v, left %s]", lower, untilName)
	if s.uniqueLeft {
		// A unique left side keeps no right record its left one has
		// seen: state of the other declaration means something else.
		schema = strings.TrimSuffix(schema, ")") + ",unique left)"
		describe += ", left unique by key (declared)"
	}
	n := &runtime.Node{ID: id, Describe: describe, Type: kind, DropsLate: true}
	n.NewOperator = func() runtime.Operator {
		return &untilJoin[L, R, K, O]{schema: schema, sides: s, lower: int64(lower), until: until, output: output}
	}
	return addNode[L, R, K, O](left, right, n, s)
}

// untilGrain is the granularity of cleanup times: a key's records expiring
// within one grain are dropped together, at most a grain late, so that the
// cleanup index holds a key once per grain instead of once per record.
const untilGrain = int64(100 * time.Millisecond)

// untilJoin is one subtask of IntervalUntil. Each side keeps one list of
// records per key (bucketKey slot 0).
type untilJoin[L, R any, K comparable, O any] struct {
	schema string
	sides[L, R, K]
	lower  int64
	until  func(L) (int64, bool)
	output func(K, L, R) O

	task  string
	out   runtime.Output
	hash  func(K) uint64
	left  *state.ListState[bucketKey[K], runtime.Record[L]]
	right *state.ListState[bucketKey[K], runtime.Record[R]]
	// cleanup[s] holds the keys of side s by the grain after their
	// records' expiries. Not state: Open rebuilds it from the lists.
	// INVARIANT: a key with records of side s is listed at a time after
	// the expiry of each of them (more than once when they expire in
	// several grains).
	cleanup [2]startkeys.Index[bucketKey[K]]
	// wm is the watermark processed. INVARIANT: it never decreases.
	wm   int64
	late lateCount
	// replays is set under at-least-once checkpoints, whose restores send
	// again left records the join holds: a repeated key is then no error
	// (UniqueLeft), and joins as that mode's duplicates do.
	replays bool
}

// expiryL is when left record l stops matching: until(l), or false.
func (j *untilJoin[L, R, K, O]) expiryL(l runtime.Record[L]) (int64, bool) { return j.until(l.Value) }

// expiryR is when right record r stops matching: r.Time - lower.
func (j *untilJoin[L, R, K, O]) expiryR(r runtime.Record[R]) int64 {
	return satAdd(r.Time, satNeg(j.lower))
}

// cleanupAt is the cleanup time of a record expiring at e: the start of the
// grain after e's (after e), saturated. The record is dropped once the
// watermark reaches it, when it is past e.
func cleanupAt(e int64) int64 {
	return satAdd(e, untilGrain-floorMod(e, untilGrain))
}

// Open registers the lists, takes the restored watermark and rebuilds the
// cleanup index.
func (j *untilJoin[L, R, K, O]) Open(ctx *runtime.Context) error {
	j.task = fmt.Sprintf("interval join %v", ctx.Task)
	j.out = ctx.Output
	j.late.ctx = ctx
	j.wm = ctx.Watermark()
	j.replays = ctx.CheckpointMode == checkpoint.AtLeastOnce
	var err error
	if j.hash, err = state.Hasher[K](); err != nil {
		return fmt.Errorf("%s: %w", j.task, err)
	}
	if j.left, j.right, err = openSides(ctx, j.task, j.schema, j.sides, j.hash); err != nil {
		return err
	}
	j.left.All(func(bk bucketKey[K], recs []runtime.Record[L]) bool {
		for _, r := range recs {
			if e, ok := j.expiryL(r); ok {
				j.cleanup[0].AddOnce(cleanupAt(e), bk)
			}
		}
		return true
	})
	j.right.All(func(bk bucketKey[K], recs []runtime.Record[R]) bool {
		for _, r := range recs {
			j.cleanup[1].AddOnce(cleanupAt(j.expiryR(r)), bk)
		}
		return true
	})
	return nil
}

// BorrowsBatches implements runtime.BatchBorrower: stored records are
// copies.
func (j *untilJoin[L, R, K, O]) BorrowsBatches() {}

// ProcessBatch joins each record with the kept records of the other side
// that it matches, and keeps it while records to come can match it.
func (j *untilJoin[L, R, K, O]) ProcessBatch(input int, r runtime.Records) error {
	var out runtime.Batch[O]
	switch input {
	case 0:
		b, err := runtime.BatchOf[L](r)
		if err != nil {
			return fmt.Errorf("%s: input 0: %w", j.task, err)
		}
		for _, l := range b {
			if l.Time < j.wm {
				j.late.add(0, l.Time, j.wm)
				continue
			}
			until, ok := j.expiryL(l)
			if !ok {
				continue
			}
			key := j.keyL(l.Value)
			bk := bucketKey[K]{key: key, hash: j.hash(key)}
			if j.uniqueLeft && !j.replays {
				if first, ok := j.liveLeft(j.left.Get(bk)); ok {
					return duplicateLeft(j.task, key, first.Time, l.Time)
				}
			}
			waiting := j.right.Get(bk)
			for _, p := range waiting {
				if atLeastLower(p.Time, l.Time, j.lower) && p.Time <= until {
					out = append(out, runtime.Record[O]{Value: j.output(key, l.Value, p.Value), Time: max(l.Time, p.Time)})
				}
			}
			if j.uniqueLeft && len(waiting) > 0 {
				// No other left record can come for them.
				j.right.Clear(bk)
			}
			if until < j.wm {
				continue // every right record to come is after until
			}
			j.cleanup[0].AddOnce(cleanupAt(until), bk)
			j.left.Add(bk, l)
		}
	case 1:
		b, err := runtime.BatchOf[R](r)
		if err != nil {
			return fmt.Errorf("%s: input 1: %w", j.task, err)
		}
		for _, rr := range b {
			if rr.Time < j.wm {
				j.late.add(1, rr.Time, j.wm)
				continue
			}
			key := j.keyR(rr.Value)
			bk := bucketKey[K]{key: key, hash: j.hash(key)}
			exp := j.expiryR(rr)
			held := j.left.Get(bk)
			for _, p := range held {
				if until, ok := j.expiryL(p); ok && atLeastLower(rr.Time, p.Time, j.lower) && rr.Time <= until {
					out = append(out, runtime.Record[O]{Value: j.output(key, p.Value, rr.Value), Time: max(p.Time, rr.Time)})
				}
			}
			if exp < j.wm {
				continue // every left record to come is after exp
			}
			if j.uniqueLeft {
				if _, live := j.liveLeft(held); live {
					continue // its key's only left record has seen it
				}
			}
			j.cleanup[1].AddOnce(cleanupAt(exp), bk)
			j.right.Add(bk, rr)
		}
	default:
		return inputError(j.task, input)
	}
	if len(out) == 0 {
		return nil
	}
	return j.out.Emit(out)
}

// liveLeft returns the first of held whose bound the watermark has not
// passed. One it passed is no longer held, though cleanup drops it up to a
// grain later: a right record to come cannot match it, so under UniqueLeft
// the key is free (what happens then must not depend on when cleanup ran).
func (j *untilJoin[L, R, K, O]) liveLeft(held []runtime.Record[L]) (runtime.Record[L], bool) {
	for _, h := range held {
		if e, ok := j.expiryL(h); ok && e >= j.wm {
			return h, true
		}
	}
	return runtime.Record[L]{}, false
}

// duplicateLeft is the error of a second left record of key, at event time
// second, while the one at first is kept, under UniqueLeft (task names the
// subtask): the declaration is false, and the join's output without it
// would differ (both records would match the key's right ones). A restart
// replays the same records, so it is unrecoverable.
func duplicateLeft(task string, key any, first, second int64) error {
	return fmt.Errorf("%s: two left records share key %v (event times %s and %s), but the left input was declared unique by its key (PRIMARY KEY … NOT ENFORCED): the join's result would be wrong: %w",
		task, key, time.Unix(0, first).UTC().Format(time.RFC3339Nano), time.Unix(0, second).UTC().Format(time.RFC3339Nano), runtime.ErrUnrecoverable)
}

// ProcessWatermark drops the records no record to come can match: those
// whose expiry the watermark passed.
func (j *untilJoin[L, R, K, O]) ProcessWatermark(wm int64) error {
	j.wm = wm
	_ = j.cleanup[0].Fire(wm, func(bk bucketKey[K], _ int64) error {
		keep := dropExpired(j.left.Get(bk), func(r runtime.Record[L]) bool {
			e, ok := j.expiryL(r)
			return !ok || e < wm
		})
		if len(keep) == 0 {
			j.left.Clear(bk)
		} else {
			j.left.Update(bk, keep)
		}
		return nil
	})
	_ = j.cleanup[1].Fire(wm, func(bk bucketKey[K], _ int64) error {
		keep := dropExpired(j.right.Get(bk), func(r runtime.Record[R]) bool { return j.expiryR(r) < wm })
		if len(keep) == 0 {
			j.right.Clear(bk)
		} else {
			j.right.Update(bk, keep)
		}
		return nil
	})
	return nil
}

// dropExpired returns the records of recs that are not expired, in a new
// slice (the stored one may belong to a checkpoint being written), or recs
// itself when none is.
func dropExpired[T any](recs []runtime.Record[T], expired func(runtime.Record[T]) bool) []runtime.Record[T] {
	n := 0
	for _, r := range recs {
		if !expired(r) {
			n++
		}
	}
	if n == len(recs) {
		return recs
	}
	keep := make([]runtime.Record[T], 0, n)
	for _, r := range recs {
		if !expired(r) {
			keep = append(keep, r)
		}
	}
	return keep
}

// Snapshot has no non-keyed state: the lists are keyed state.
func (j *untilJoin[L, R, K, O]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}

// NotifyComplete does nothing.
func (j *untilJoin[L, R, K, O]) NotifyComplete(int64) error { return nil }

// Close reports the late records dropped.
func (j *untilJoin[L, R, K, O]) Close() error {
	j.late.report()
	return nil
}
