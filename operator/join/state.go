package join

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// bucketKey is the state key of one key's records in one time slot: a bucket
// of an interval or inner join, a window of a window join.
type bucketKey[K comparable] struct {
	key K
	// slot is the bucket index (interval and inner joins) or the window start
	// (window joins).
	slot int64
	// hash is the hash of key alone, so all of a key's slots live in the key
	// group the partitioner routed the key to.
	// INVARIANT: hash == the key type's state.Hasher applied to key.
	hash uint64
}

// HashKey returns the key's hash: bucketKey implements state.KeyHasher.
func (b bucketKey[K]) HashKey() uint64 { return b.hash }

// bucketKeyCodec encodes a bucketKey as the key's encoding and a varint slot;
// decoding recomputes the hash.
type bucketKeyCodec[K comparable] struct {
	key  state.Codec[K]
	hash func(K) uint64
	// name describes the join kind and every parameter that gives slots
	// their meaning, so state of a join with other parameters is refused.
	name string
}

// Name returns the schema name given at construction.
func (c bucketKeyCodec[K]) Name() string { return c.name }

// Append appends the key, then the slot.
func (c bucketKeyCodec[K]) Append(dst []byte, b bucketKey[K]) []byte {
	return binary.AppendVarint(c.key.Append(dst, b.key), b.slot)
}

// Decode decodes a key and a slot and recomputes the key's hash.
func (c bucketKeyCodec[K]) Decode(src []byte) (bucketKey[K], int, error) {
	k, n, err := c.key.Decode(src)
	if err != nil {
		return bucketKey[K]{}, 0, fmt.Errorf("join state key: %w", err)
	}
	slot, m := binary.Varint(src[n:])
	if m <= 0 {
		return bucketKey[K]{}, 0, errors.New("join state key: truncated or overflowing slot")
	}
	return bucketKey[K]{key: k, slot: slot, hash: c.hash(k)}, n + m, nil
}

// recordCodec encodes a runtime.Record[T] as a varint event time and the
// value.
type recordCodec[T any] struct {
	value state.Codec[T]
}

// Name is "record(" + the value codec's name + ")".
func (c recordCodec[T]) Name() string { return "record(" + c.value.Name() + ")" }

// Append appends the time, then the value.
func (c recordCodec[T]) Append(dst []byte, r runtime.Record[T]) []byte {
	return c.value.Append(binary.AppendVarint(dst, r.Time), r.Value)
}

// Decode decodes a time and a value.
func (c recordCodec[T]) Decode(src []byte) (runtime.Record[T], int, error) {
	t, n := binary.Varint(src)
	if n <= 0 {
		return runtime.Record[T]{}, 0, errors.New("join record: truncated or overflowing event time")
	}
	v, m, err := c.value.Decode(src[n:])
	if err != nil {
		return runtime.Record[T]{}, 0, fmt.Errorf("join record: %w", err)
	}
	return runtime.Record[T]{Value: v, Time: t}, n + m, nil
}

// satAdd returns a+b, saturated at the int64 bounds: event time arithmetic
// near the ends of representable time must not wrap around (a wrapped
// cleanup time would fire at once and drop state that can still match).
func satAdd(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

// satNeg returns -a, with -MinInt64 saturated to MaxInt64.
func satNeg(a int64) int64 {
	if a == math.MinInt64 {
		return math.MaxInt64
	}
	return -a
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b) for b > 0.
func floorMod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// lateCount counts the records a join dropped as late, per side: each drop
// is reported to the runtime (Context.DroppedLate), which counts it for
// ingest_late_records_total and warns about it, and the subtask's totals
// are logged when it closes.
type lateCount struct {
	ctx *runtime.Context
	n   [2]int64
}

// add counts one late record of side at event time t with watermark wm.
func (l *lateCount) add(side int, t, wm int64) {
	l.n[side]++
	l.ctx.DroppedLate(t, wm)
}

// report logs the totals, if any, in the words the window operators use.
func (l *lateCount) report() {
	if l.n[0]+l.n[1] > 0 && l.ctx != nil && l.ctx.Log != nil {
		l.ctx.Log.Warn("late records dropped since the subtask opened", "operator", l.ctx.Task.Operator,
			"dropped", l.n[0]+l.n[1], "left", l.n[0], "right", l.n[1])
	}
}

// openSides registers the two record lists of an interval, inner or until
// join, "left" and "right", keyed by bucketKey under schema (the join's
// kind and parameters): a checkpoint of a join with other parameters or
// record codecs is refused, naming this one's schema. task names the
// subtask in errors.
func openSides[L, R any, K comparable](ctx *runtime.Context, task, schema string, s sides[L, R, K], hash func(K) uint64) (
	*state.ListState[bucketKey[K], runtime.Record[L]], *state.ListState[bucketKey[K], runtime.Record[R]], error) {
	kc := bucketKeyCodec[K]{key: s.keyCodec, hash: hash, name: schema}
	restoreError := func(err error) error {
		return stateError(task, "a join with other parameters or record codecs", schema, err)
	}
	left, err := state.NewListState(ctx.State, "left", kc, state.Codec[runtime.Record[L]](recordCodec[L]{s.codecL}))
	if err != nil {
		return nil, nil, restoreError(err)
	}
	right, err := state.NewListState(ctx.State, "right", kc, state.Codec[runtime.Record[R]](recordCodec[R]{s.codecR}))
	if err != nil {
		return nil, nil, restoreError(err)
	}
	return left, right, nil
}

// stateError explains why subtask task could not register its state: a
// checkpoint of other (what) than this join, whose schema is schema, or
// another failure.
func stateError(task, other, schema string, err error) error {
	if errors.Is(err, state.ErrStateMismatch) {
		return fmt.Errorf("%s: the checkpoint holds state of %s (this one is %s): %w", task, other, schema, err)
	}
	return fmt.Errorf("%s: %w", task, err)
}

// atLeastLower reports whether r - l >= lower, exactly: both sides of a
// pair decide it alike, at the ends of representable time too (a saturated
// l + lower would not).
func atLeastLower(r, l, lower int64) bool {
	if lower >= 0 {
		return l <= math.MaxInt64-lower && r >= l+lower
	}
	return l < math.MinInt64-lower || r >= l+lower
}

// atMostUpper reports whether r - l <= upper, exactly (see atLeastLower).
func atMostUpper(r, l, upper int64) bool {
	if upper >= 0 {
		return l > math.MaxInt64-upper || r <= l+upper
	}
	return l >= math.MinInt64-upper && r <= l+upper
}
