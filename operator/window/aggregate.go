package window

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/ingest-engine/ingest/state"
)

// Aggregate folds the records of one key and window into an accumulator: it
// is the user-defined aggregate function (UDAF) of every window kind, and the
// built-ins (CountOf, SumOf, MinOf, AvgOf, CountDistinct, …) are values of
// it.
//
// The result is extracted by the window's output function,
// output(key, window, accumulator), so one accumulator type serves any output
// (an average's accumulator holds a count and a sum; the output divides).
//
// Functions are called from the task goroutines of every subtask at once:
// they must not share mutable state.
type Aggregate[T, A any] struct {
	// Init returns the accumulator of an empty window. Required.
	Init func() A
	// Add returns acc with v added. Required. Unless Clone is set, it must
	// not modify acc in place when A holds references (slices, maps,
	// pointers): the previous value may belong to a checkpoint being written
	// or to a result already emitted.
	Add func(acc A, v T) A
	// Merge returns the combination of two accumulators, as if a's records
	// and b's had been added to one. Optional for Tumbling; with it Sliding
	// keeps one accumulator per pane instead of one per window (a record
	// costs one state update instead of size/slide); Session requires it
	// (merging sessions merges their accumulators). It never modifies b;
	// it modifies a only when Clone is set.
	Merge func(a, b A) A
	// Clone returns a copy of acc that shares nothing mutable with it.
	// Optional. Setting it declares A mutable: Add and Merge may then modify
	// their first argument in place and return it. The window operator
	// clones an accumulator before its first modification after a
	// checkpoint, or after it was handed to an output function, so what a
	// checkpoint encodes or a result holds never changes. This makes large
	// accumulators (sets, sketches) cost O(1) per record instead of a copy.
	Clone func(acc A) A
	// Codec encodes accumulators in checkpoints. Required. Its name must
	// identify the aggregate, not only the accumulator type: a checkpoint
	// whose accumulator codec has another name is refused at restore (see
	// Named).
	Codec state.Codec[A]
}

// Named returns the aggregate with its codec's name extended by name, e.g.
// SumOf(price).Named("price"): two aggregates with the same accumulator type
// (a sum of price and a sum of quantity) then have different codec names, so
// a checkpoint written by one is refused by the other at restore instead of
// being continued as if it were the same.
func (a Aggregate[T, A]) Named(name string) Aggregate[T, A] {
	if a.Codec != nil {
		a.Codec = renamed[A]{Codec: a.Codec, name: a.Codec.Name() + "[" + name + "]"}
	}
	return a
}

// renamed is a codec under another name.
type renamed[A any] struct {
	state.Codec[A]
	name string
}

func (c renamed[A]) Name() string { return c.name }

// --- built-in aggregates ---------------------------------------------------

// CountOf counts records. Its accumulator is the count.
func CountOf[T any]() Aggregate[T, int64] {
	return Aggregate[T, int64]{
		Init:  func() int64 { return 0 },
		Add:   func(n int64, _ T) int64 { return n + 1 },
		Merge: func(a, b int64) int64 { return a + b },
		Codec: renamed[int64]{Codec: state.Int64Codec{}, name: "window.count/int64"},
	}
}

// SumOf sums value over the records, in int64 arithmetic (wrapping on
// overflow, like Go). Its accumulator is the sum.
func SumOf[T any](value func(T) int64) Aggregate[T, int64] {
	return Aggregate[T, int64]{
		Init:  func() int64 { return 0 },
		Add:   func(s int64, v T) int64 { return s + value(v) },
		Merge: func(a, b int64) int64 { return a + b },
		Codec: renamed[int64]{Codec: state.Int64Codec{}, name: "window.sum/int64"},
	}
}

// SumFloatOf sums value over the records in float64. Its accumulator is the
// sum.
func SumFloatOf[T any](value func(T) float64) Aggregate[T, float64] {
	return Aggregate[T, float64]{
		Init:  func() float64 { return 0 },
		Add:   func(s float64, v T) float64 { return s + value(v) },
		Merge: func(a, b float64) float64 { return a + b },
		Codec: renamed[float64]{Codec: state.Float64Codec{}, name: "window.sum/float64"},
	}
}

// Extreme is the accumulator of MinOf and MaxOf: the least (or greatest)
// value seen, and whether any was.
type Extreme[V any] struct {
	Value V
	Valid bool
}

// MinOf keeps the least value over the records, compared with cmp.Less (a
// NaN is less than every number). codec encodes V.
func MinOf[T any, V cmp.Ordered](value func(T) V, codec state.Codec[V]) Aggregate[T, Extreme[V]] {
	return extreme(value, codec, "min", func(a, b V) bool { return cmp.Less(a, b) })
}

// MaxOf keeps the greatest value over the records, compared with cmp.Less.
// codec encodes V.
func MaxOf[T any, V cmp.Ordered](value func(T) V, codec state.Codec[V]) Aggregate[T, Extreme[V]] {
	return extreme(value, codec, "max", func(a, b V) bool { return cmp.Less(b, a) })
}

// extreme keeps the value for which better(value, kept) holds over the rest.
func extreme[T any, V cmp.Ordered](value func(T) V, codec state.Codec[V], name string, better func(a, b V) bool) Aggregate[T, Extreme[V]] {
	var c state.Codec[Extreme[V]]
	if codec != nil {
		c = extremeCodec[V]{v: codec, name: "window." + name + "/" + codec.Name()}
	}
	return Aggregate[T, Extreme[V]]{
		Init: func() Extreme[V] { return Extreme[V]{} },
		Add: func(e Extreme[V], r T) Extreme[V] {
			if v := value(r); !e.Valid || better(v, e.Value) {
				return Extreme[V]{Value: v, Valid: true}
			}
			return e
		},
		Merge: func(a, b Extreme[V]) Extreme[V] {
			if b.Valid && (!a.Valid || better(b.Value, a.Value)) {
				return b
			}
			return a
		},
		Codec: c,
	}
}

// extremeCodec encodes an Extreme as a validity byte followed, when valid,
// by the value.
type extremeCodec[V any] struct {
	v    state.Codec[V]
	name string
}

func (c extremeCodec[V]) Name() string { return c.name }

func (c extremeCodec[V]) Append(dst []byte, e Extreme[V]) []byte {
	if !e.Valid {
		return append(dst, 0)
	}
	return c.v.Append(append(dst, 1), e.Value)
}

func (c extremeCodec[V]) Decode(src []byte) (Extreme[V], int, error) {
	if len(src) == 0 {
		return Extreme[V]{}, 0, errAccTruncated
	}
	switch src[0] {
	case 0:
		return Extreme[V]{}, 1, nil
	case 1:
		v, n, err := c.v.Decode(src[1:])
		if err != nil {
			return Extreme[V]{}, 0, fmt.Errorf("window %s accumulator: %w", c.name, err)
		}
		return Extreme[V]{Value: v, Valid: true}, 1 + n, nil
	}
	return Extreme[V]{}, 0, fmt.Errorf("window %s accumulator: invalid validity byte %#x", c.name, src[0])
}

// Mean is the accumulator of AvgOf: a count and a sum.
type Mean struct {
	Count int64
	Sum   float64
}

// Value returns the mean, NaN for no values.
func (m Mean) Value() float64 {
	if m.Count == 0 {
		return math.NaN()
	}
	return m.Sum / float64(m.Count)
}

// AvgOf averages value over the records; the output function reads the mean
// with Mean.Value.
func AvgOf[T any](value func(T) float64) Aggregate[T, Mean] {
	return Aggregate[T, Mean]{
		Init:  func() Mean { return Mean{} },
		Add:   func(m Mean, v T) Mean { return Mean{Count: m.Count + 1, Sum: m.Sum + value(v)} },
		Merge: func(a, b Mean) Mean { return Mean{Count: a.Count + b.Count, Sum: a.Sum + b.Sum} },
		Codec: meanCodec{},
	}
}

// meanCodec encodes a Mean as a varint count and the sum's 8 bytes.
type meanCodec struct{}

func (meanCodec) Name() string { return "window.avg/v1" }
func (meanCodec) Append(dst []byte, m Mean) []byte {
	return state.Float64Codec{}.Append(binary.AppendVarint(dst, m.Count), m.Sum)
}
func (meanCodec) Decode(src []byte) (Mean, int, error) {
	c, n := binary.Varint(src)
	if n <= 0 {
		return Mean{}, 0, errAccTruncated
	}
	s, m, err := state.Float64Codec{}.Decode(src[n:])
	if err != nil {
		return Mean{}, 0, errAccTruncated
	}
	return Mean{Count: c, Sum: s}, n + m, nil
}

// Distinct is the accumulator of CountDistinct: the set of distinct values
// of a window. The set an output function receives never changes afterwards
// (a window kept for its allowed lateness copies it before adding to it), so
// a result may hold it.
type Distinct[V comparable] struct {
	set map[V]struct{}
}

// Len returns the number of distinct values.
func (d *Distinct[V]) Len() int64 { return int64(len(d.set)) }

// Contains reports whether v was seen.
func (d *Distinct[V]) Contains(v V) bool {
	_, ok := d.set[v]
	return ok
}

// CountDistinct collects the distinct values of value over the records; the
// output function reads the count with Distinct.Len. codec encodes V in
// checkpoints.
//
// The set is a mutable accumulator (Aggregate.Clone): a record costs one map
// insertion, and the set is copied once per checkpoint at most, at its first
// change after the checkpoint, never per record. Its state is O(distinct
// values) per open window, or per pane in a sliding window.
func CountDistinct[T any, V comparable](value func(T) V, codec state.Codec[V]) Aggregate[T, *Distinct[V]] {
	var c state.Codec[*Distinct[V]]
	if codec != nil {
		c = distinctCodec[V]{v: codec, name: "window.count_distinct/" + codec.Name()}
	}
	return Aggregate[T, *Distinct[V]]{
		Init: func() *Distinct[V] { return &Distinct[V]{set: make(map[V]struct{})} },
		Add: func(d *Distinct[V], r T) *Distinct[V] {
			d.set[value(r)] = struct{}{}
			return d
		},
		Merge: func(a, b *Distinct[V]) *Distinct[V] {
			for v := range b.set {
				a.set[v] = struct{}{}
			}
			return a
		},
		Clone: func(d *Distinct[V]) *Distinct[V] { return &Distinct[V]{set: maps.Clone(d.set)} },
		Codec: c,
	}
}

// distinctCodec encodes a Distinct as a uvarint count followed by the values
// in map order.
type distinctCodec[V comparable] struct {
	v    state.Codec[V]
	name string
}

func (c distinctCodec[V]) Name() string { return c.name }

func (c distinctCodec[V]) Append(dst []byte, d *Distinct[V]) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(d.set)))
	for v := range d.set {
		dst = c.v.Append(dst, v)
	}
	return dst
}

func (c distinctCodec[V]) Decode(src []byte) (*Distinct[V], int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)) {
		return nil, 0, errAccTruncated
	}
	d := &Distinct[V]{set: make(map[V]struct{}, l)}
	for range l {
		v, m, err := c.v.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("window %s accumulator: %w", c.name, err)
		}
		d.set[v] = struct{}{}
		n += m
	}
	if uint64(len(d.set)) != l {
		return nil, 0, errors.New("window count_distinct accumulator: duplicate values")
	}
	return d, n, nil
}
