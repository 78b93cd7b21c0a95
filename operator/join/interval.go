package join

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/operator/internal/startkeys"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Interval joins left and right on their key: for each left record l and
// right record r of the same key with
//
//	l.Time+lower <= r.Time <= l.Time+upper
//
// it emits output(key, l, r) with event time max(l.Time, r.Time). Both
// bounds are inclusive and may be negative; lower must not be after upper.
// This is Flink's interval join (KeyedStream.intervalJoin(...).between(lower,
// upper)).
//
// Each record first joins the buffered records of the other side, then is
// buffered itself until no record still to come can match it: a left record
// until the watermark passes l.Time+upper, a right one until it passes
// r.Time-lower (a record that can no longer match anything to come is not
// buffered at all). Records are bucketed by time, in buckets as wide as the
// interval (upper-lower, at least 1ns): a record looks at the at most two
// buckets its interval overlaps, and a bucket is dropped by one timer when
// its last record expires, so a record stays at most upper-lower longer
// than needed.
//
// A record whose event time is below the current watermark is late: it is
// dropped and counted, as Flink's IntervalJoinOperator does. A record at
// exactly the watermark is not late and still finds every partner: buffers
// are kept until the watermark is strictly past their last match.
func Interval[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	lower, upper time.Duration, output func(K, L, R) O, opts ...Option) stream.Stream[O] {
	const kind = "interval join"
	s := resolve(kind, id, left, right, opts)
	noUniqueLeft(left.Pipeline(), kind, id, s)
	p := left.Pipeline()
	if lower > upper {
		p.Errorf("%s %s: the lower bound %v is after the upper bound %v", kind, id, lower, upper)
		lower, upper = upper, lower
	}
	if lower == math.MinInt64 {
		// The right side's view of the interval is [-upper, -lower]:
		// -lower must be representable.
		p.Errorf("%s %s: the lower bound %v is out of range: it must be above %v", kind, id, lower, time.Duration(math.MinInt64))
		lower = math.MinInt64 + 1
		upper = max(upper, lower)
	}
	if output == nil {
		p.Errorf("%s %s: the output function is nil", kind, id)
	}
	g := boundedGeometry(int64(lower), int64(upper))
	schema := fmt.Sprintf("interval-join(key=%s,lower=%v,upper=%v,bucket=%v)", s.keyCodec.Name(), lower, upper, time.Duration(g.width))
	return newBucketJoin(kind, id, left, right, s, g, schema, fmt.Sprintf("interval join [%v, %v]", lower, upper), output)
}

// Inner is a regular inner equi-join of left and right on their key: each
// arriving record joins every stored record of the other side with the same
// key, emitting output(key, l, r) with event time max(l.Time, r.Time), and
// is stored itself.
//
// With ttl > 0 a stored record expires ttl after its event time, in event
// time: a pair is emitted if and only if
//
//	|l.Time - r.Time| < ttl
//
// that is, if the earlier of the two has not expired at the event time of the
// later one, whichever arrived first. State is cleaned by timers once the
// watermark passes a record's expiry, plus at most one bucket (2×ttl wide),
// so a key's state spans between ttl and 3×ttl of event time. Records below the
// watermark are late: dropped and counted, since some of their partners may
// already be cleaned.
//
// This differs on purpose from Flink's state TTL, which expires state in
// processing time after its last access: which pairs a processing-time TTL
// lets through depends on how fast the job ran and on when it failed and
// replayed, so the output after a recovery would differ from a run without
// failure. Measured in event time and decided by the two records' times
// alone, the output is the same in every run and across recoveries, which
// exactly-once requires. (The watermark only decides when state is removed,
// never whether a pair matches.)
//
// With ttl == 0 records never expire: the state keeps every record of both
// sides forever and grows without bound with the number of records (use it
// when the inputs are bounded or their key space and per-key volume are).
// Nothing is ever late then: every record joins.
func Inner[L, R any, K comparable, O any](left stream.KeyedStream[L, K], right stream.KeyedStream[R, K], id string,
	ttl time.Duration, output func(K, L, R) O, opts ...Option) stream.Stream[O] {
	const kind = "inner join"
	s := resolve(kind, id, left, right, opts)
	noUniqueLeft(left.Pipeline(), kind, id, s)
	p := left.Pipeline()
	if ttl < 0 {
		p.Errorf("%s %s: ttl %v is negative (0 keeps records forever)", kind, id, ttl)
		ttl = 0
	}
	if output == nil {
		p.Errorf("%s %s: the output function is nil", kind, id)
	}
	g := geometry{lo: [2]int64{math.MinInt64, math.MinInt64}, hi: [2]int64{math.MaxInt64, math.MaxInt64}}
	describe := "inner join, records kept forever"
	if ttl > 0 {
		// |Δ| < ttl is the inclusive interval [-(ttl-1ns), ttl-1ns].
		g = boundedGeometry(-int64(ttl-1), int64(ttl-1))
		describe = fmt.Sprintf("inner join, state ttl %v in event time", ttl)
	}
	schema := fmt.Sprintf("inner-join(key=%s,ttl=%v,bucket=%v)", s.keyCodec.Name(), ttl, time.Duration(g.width))
	return newBucketJoin(kind, id, left, right, s, g, schema, describe, output)
}

// geometry is where a bucket join looks for a record's partners and how long
// it keeps records; fixed when the join is built.
type geometry struct {
	// A record of side s (0 left, 1 right) at time t matches the records of
	// the other side with times in [t+lo[s], t+hi[s]] (decided on the
	// times' difference exactly, so both sides agree at the ends of int64
	// too: atLeastLower, atMostUpper), and is kept until the watermark
	// passes t+hi[s] (saturated).
	// INVARIANT: lo[0] <= hi[0], lo[1] == -hi[0], hi[1] == -lo[0] (exactly:
	// no bound is MinInt64), so both sides agree on every pair; or, when
	// width == 0, every bound is infinite.
	lo, hi [2]int64
	// width is the bucket width in ns; 0 means unbounded: one bucket per key,
	// no range check, no cleanup and no late records.
	// INVARIANT: width == 0 or width >= 1.
	width int64
}

// boundedGeometry is the geometry of an interval [lower, upper]: buckets as
// wide as the interval, at least 1ns. A record's interval then overlaps at
// most two buckets of the other side. Narrower buckets would drop records
// sooner but cost more lookups, buckets and timers per record (measured:
// half-width buckets made the join about 1.5x slower with sparse keys).
func boundedGeometry(lower, upper int64) geometry {
	span := satAdd(upper, satNeg(lower))
	return geometry{
		lo:    [2]int64{lower, satNeg(upper)},
		hi:    [2]int64{upper, satNeg(lower)},
		width: max(span, 1),
	}
}

// bucket returns the index of the bucket holding time t.
func (g *geometry) bucket(t int64) int64 {
	if g.width == 0 {
		return 0
	}
	return floorDiv(t, g.width)
}

// cleanupTime is when the bucket of side s holding time t can be dropped:
// once the watermark passes the bucket's last time plus hi[s], no record to
// come can match any record in it.
func (g *geometry) cleanupTime(s int, t int64) int64 {
	last := satAdd(t, g.width-1-floorMod(t, g.width))
	return satAdd(satAdd(last, g.hi[s]), 1)
}

// bucketJoin is one subtask of an interval or inner join.
type bucketJoin[L, R any, K comparable, O any] struct {
	kind   string
	g      geometry
	schema string
	sides[L, R, K]
	output func(K, L, R) O
	// outputRL is output with its record arguments swapped, for records
	// arriving on the right; built once so no closure is made per batch.
	outputRL func(K, R, L) O

	task  string
	out   runtime.Output
	hash  func(K) uint64
	left  *state.ListState[bucketKey[K], runtime.Record[L]]
	right *state.ListState[bucketKey[K], runtime.Record[R]]
	// cleanup[s] holds the buckets of side s with records by cleanup time
	// (g.cleanupTime, the same for every key of a bucket). Not state: Open
	// rebuilds it from the buffers instead of keeping a timer per key and
	// bucket. Unused when the geometry is unbounded.
	// INVARIANT: a bucket of side s has records if and only if cleanup[s]
	// lists it, once.
	cleanup [2]startkeys.Index[bucketKey[K]]
	// wm is the watermark processed. INVARIANT: it never decreases.
	wm   int64
	late lateCount
	// sizeHint is the length of the previous output batch: the next starts
	// with that capacity.
	sizeHint int
}

func newBucketJoin[L, R any, K comparable, O any](kind, id string, left stream.KeyedStream[L, K], right stream.KeyedStream[R, K],
	s sides[L, R, K], g geometry, schema, describe string, output func(K, L, R) O) stream.Stream[O] {
	// Only a bounded join drops late records (an unbounded one joins all).
	n := &runtime.Node{ID: id, Describe: describe, Type: kind, DropsLate: g.width > 0}
	outputRL := func(k K, r R, l L) O { return output(k, l, r) }
	n.NewOperator = func() runtime.Operator {
		return &bucketJoin[L, R, K, O]{kind: kind, g: g, schema: schema, sides: s, output: output, outputRL: outputRL}
	}
	return addNode[L, R, K, O](left, right, n, s)
}

// Open registers the buffers, takes the restored watermark and rebuilds the
// bucket index.
func (j *bucketJoin[L, R, K, O]) Open(ctx *runtime.Context) error {
	j.task = fmt.Sprintf("%s %v", j.kind, ctx.Task)
	j.out = ctx.Output
	j.late.ctx = ctx
	j.wm = ctx.Watermark()
	var err error
	if j.hash, err = state.Hasher[K](); err != nil {
		return fmt.Errorf("%s: %w", j.task, err)
	}
	if j.left, j.right, err = openSides(ctx, j.task, j.schema, j.sides, j.hash); err != nil {
		return err
	}
	// Earlier builds kept a cleanup timer per key and bucket: the bucket
	// index replaces them. (Such a build restoring a checkpoint of this one
	// finds no timers for the restored buckets and keeps them: more memory,
	// the same output, since matches are checked against the bounds.)
	unclaimed := ctx.State.Unclaimed()
	for _, name := range [2]string{"left-cleanup", "right-cleanup"} {
		if slices.Contains(unclaimed, name) {
			ctx.State.DropState(name)
		}
	}
	if j.g.width > 0 {
		j.left.All(func(bk bucketKey[K], recs []runtime.Record[L]) bool {
			j.cleanup[0].Add(j.g.cleanupTime(0, recs[0].Time), bk)
			return true
		})
		j.right.All(func(bk bucketKey[K], recs []runtime.Record[R]) bool {
			j.cleanup[1].Add(j.g.cleanupTime(1, recs[0].Time), bk)
			return true
		})
	}
	return nil
}

// BorrowsBatches implements runtime.BatchBorrower: stored records are
// copies.
func (j *bucketJoin[L, R, K, O]) BorrowsBatches() {}

// ProcessBatch joins each record with the buffered records of the other side
// and buffers it.
func (j *bucketJoin[L, R, K, O]) ProcessBatch(input int, r runtime.Records) error {
	var out runtime.Batch[O]
	if j.sizeHint > 0 {
		out = make(runtime.Batch[O], 0, j.sizeHint)
	}
	// Switch on the input, not on the batch type: with L == R both sides
	// deliver the same type.
	switch input {
	case 0:
		b, err := runtime.BatchOf[L](r)
		if err != nil {
			return fmt.Errorf("%s: input 0: %w", j.task, err)
		}
		out = probeAndStore(j, 0, b, j.keyL, j.left, j.right, j.output, out)
	case 1:
		b, err := runtime.BatchOf[R](r)
		if err != nil {
			return fmt.Errorf("%s: input 1: %w", j.task, err)
		}
		out = probeAndStore(j, 1, b, j.keyR, j.right, j.left, j.outputRL, out)
	default:
		return inputError(j.task, input)
	}
	j.sizeHint = len(out)
	if len(out) == 0 {
		return nil
	}
	return j.out.Emit(out)
}

// probeAndStore processes records of side s (type T, partners of type U),
// appending output to out. pair(key, ours, theirs) builds an output value.
// It is a function, not a method, because it is generic in the side's types.
func probeAndStore[L, R any, K comparable, O any, T, U any](j *bucketJoin[L, R, K, O], s int, in runtime.Batch[T], keyOf func(T) K,
	mine *state.ListState[bucketKey[K], runtime.Record[T]], theirs *state.ListState[bucketKey[K], runtime.Record[U]],
	pair func(K, T, U) O, out runtime.Batch[O]) runtime.Batch[O] {
	g := &j.g
	bounded := g.width > 0
	for _, rec := range in {
		t := rec.Time
		if bounded && t < j.wm {
			j.late.add(s, t, j.wm)
			continue
		}
		key := keyOf(rec.Value)
		h := j.hash(key)
		lo, hi := satAdd(t, g.lo[s]), satAdd(t, g.hi[s])
		for b, last := g.bucket(lo), g.bucket(hi); ; b++ {
			for _, p := range theirs.Get(bucketKey[K]{key: key, slot: b, hash: h}) {
				if !bounded || (atLeastLower(p.Time, t, g.lo[s]) && atMostUpper(p.Time, t, g.hi[s])) {
					out = append(out, runtime.Record[O]{Value: pair(key, rec.Value, p.Value), Time: max(t, p.Time)})
				}
			}
			if b == last {
				break
			}
		}
		if bounded && hi < j.wm {
			// Every record to come has a time >= wm > hi: none can match
			// this one, so it is not kept.
			continue
		}
		bk := bucketKey[K]{key: key, slot: g.bucket(t), hash: h}
		if bounded && len(mine.Get(bk)) == 0 {
			// The bucket's first record: the bucket is dropped when the
			// watermark passes its cleanup time (> wm, as hi >= wm).
			j.cleanup[s].Add(g.cleanupTime(s, t), bk)
		}
		mine.Add(bk, rec)
	}
	return out
}

// ProcessWatermark drops the buckets no record to come can match.
func (j *bucketJoin[L, R, K, O]) ProcessWatermark(wm int64) error {
	j.wm = wm
	if j.g.width == 0 {
		return nil
	}
	_ = j.cleanup[0].Fire(wm, func(bk bucketKey[K], _ int64) error { j.left.Clear(bk); return nil })
	_ = j.cleanup[1].Fire(wm, func(bk bucketKey[K], _ int64) error { j.right.Clear(bk); return nil })
	return nil
}

// Snapshot has no non-keyed state: the buffers are keyed state.
func (j *bucketJoin[L, R, K, O]) Snapshot(int64) (runtime.Snapshot, error) {
	return runtime.Snapshot{}, nil
}

// NotifyComplete does nothing.
func (j *bucketJoin[L, R, K, O]) NotifyComplete(int64) error { return nil }

// Close reports the late records dropped.
func (j *bucketJoin[L, R, K, O]) Close() error {
	j.late.report()
	return nil
}
