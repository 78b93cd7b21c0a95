package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/row"
)

// AggregateSpec is one named aggregate of a YAML window, e.g. sum: sum(value).
type AggregateSpec struct {
	// Name is the output field.
	Name string
	// Func is count, count_distinct, sum, min, max or avg.
	Func string
	// Field is the input field; empty for count().
	Field string
}

var aggPattern = regexp.MustCompile(`^\s*([a-z_]+)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)?\s*\)\s*$`)

// ParseAggregate parses "count()", "count_distinct(x)", "sum(value)",
// "min(x)", "max(x)" or "avg(x)".
func ParseAggregate(name, expr string) (AggregateSpec, error) {
	m := aggPattern.FindStringSubmatch(expr)
	if m == nil {
		return AggregateSpec{}, fmt.Errorf("%q is not an aggregate: want count(), count_distinct(field), sum(field), min(field), max(field) or avg(field)", expr)
	}
	s := AggregateSpec{Name: name, Func: m[1], Field: m[2]}
	switch s.Func {
	case "count":
		if s.Field != "" {
			return s, fmt.Errorf("%q: count() takes no field", expr)
		}
	case "count_distinct", "sum", "min", "max", "avg":
		if s.Field == "" {
			return s, fmt.Errorf("%q: %s needs a field", expr, s.Func)
		}
	default:
		return s, fmt.Errorf("%q: unknown aggregate %s: want count, count_distinct, sum, min, max or avg", expr, s.Func)
	}
	return s, nil
}

// RowAcc is the accumulator of a row window: one cell per aggregate. It is a
// mutable accumulator (see Aggregate.Clone): Add and Merge update their first
// argument in place, and the window operator clones it before writing one
// that a checkpoint or an emitted result may reference.
type RowAcc []aggCell

type aggCell struct {
	count int64
	sumI  int64
	sumF  float64
	v     row.Value // min, max
	// set holds the distinct values of count_distinct; nil for the others.
	set map[row.Value]struct{}
}

// compiled is one aggregate with its input position resolved.
type compiled struct {
	spec  AggregateSpec
	field int
	kind  row.Kind // input field kind
}

// RowAggregates compiles specs against the input schema. It returns the
// aggregate, the output fields it produces, and the function that turns a
// final accumulator into those fields' values.
func RowAggregates(in *row.Schema, specs []AggregateSpec) (Aggregate[row.Row, RowAcc], []row.Field, func(RowAcc, []row.Value) []row.Value, error) {
	var errs []error
	cs := make([]compiled, len(specs))
	fields := make([]row.Field, len(specs))
	for i, s := range specs {
		c := compiled{spec: s, field: -1}
		if s.Field != "" {
			c.field = in.Index(s.Field)
			if c.field < 0 {
				errs = append(errs, fmt.Errorf("aggregate %s: input has no field %q (fields: %s)", s.Name, s.Field, strings.Join(in.Names(), ", ")))
				continue
			}
			c.kind = in.Fields[c.field].Kind
		}
		out := row.Int
		switch s.Func {
		case "sum":
			if c.kind != row.Int && c.kind != row.Float {
				errs = append(errs, fmt.Errorf("aggregate %s: sum needs a numeric field, %s is %s", s.Name, s.Field, c.kind))
			}
			out = c.kind
		case "avg":
			if c.kind != row.Int && c.kind != row.Float {
				errs = append(errs, fmt.Errorf("aggregate %s: avg needs a numeric field, %s is %s", s.Name, s.Field, c.kind))
			}
			out = row.Float
		case "min", "max":
			if c.kind == row.Bool || c.kind == row.Null {
				errs = append(errs, fmt.Errorf("aggregate %s: %s needs an ordered field, %s is %s", s.Name, s.Func, s.Field, c.kind))
			}
			out = c.kind
		}
		cs[i] = c
		fields[i] = row.Field{Name: s.Name, Kind: out}
	}
	if len(errs) > 0 {
		return Aggregate[row.Row, RowAcc]{}, nil, nil, errors.Join(errs...)
	}
	distinct := make([]bool, len(cs))
	for i, c := range cs {
		distinct[i] = c.spec.Func == "count_distinct"
	}
	agg := Aggregate[row.Row, RowAcc]{
		Init: func() RowAcc {
			acc := make(RowAcc, len(cs))
			for i, d := range distinct {
				if d {
					acc[i].set = make(map[row.Value]struct{})
				}
			}
			return acc
		},
		Add:   func(acc RowAcc, r row.Row) RowAcc { return addRow(cs, acc, r) },
		Merge: func(a, b RowAcc) RowAcc { return mergeRows(cs, a, b) },
		Clone: cloneRow,
		Codec: rowAccCodec{signature: signature(specs), distinct: distinct},
	}
	result := func(acc RowAcc, dst []row.Value) []row.Value {
		for i, c := range cs {
			cell := acc[i]
			switch c.spec.Func {
			case "count":
				dst = append(dst, row.IntValue(cell.count))
			case "count_distinct":
				dst = append(dst, row.IntValue(int64(len(cell.set))))
			case "sum", "avg":
				// Of no value (every one NULL) there is no sum or mean:
				// NULL, as in SQL, not 0 or NaN.
				switch {
				case cell.count == 0:
					dst = append(dst, row.Value{})
				case c.spec.Func == "avg" && c.kind == row.Int:
					// The integer sum is exact, as sum's is: a float sum
					// loses small values that updates add and take back.
					dst = append(dst, row.FloatValue(float64(cell.sumI)/float64(cell.count)))
				case c.spec.Func == "avg":
					dst = append(dst, row.FloatValue(cell.sumF/float64(cell.count)))
				case c.kind == row.Float:
					dst = append(dst, row.FloatValue(cell.sumF))
				default:
					dst = append(dst, row.IntValue(cell.sumI))
				}
			default:
				dst = append(dst, cell.v)
			}
		}
		return dst
	}
	return agg, fields, result, nil
}

// addRow adds r to acc in place and returns it.
func addRow(cs []compiled, acc RowAcc, r row.Row) RowAcc {
	for i, c := range cs {
		cell := &acc[i]
		if c.field < 0 {
			cell.count++
			continue
		}
		v := r[c.field]
		if v.Kind() == row.Null {
			continue
		}
		first := cell.count == 0
		cell.count++
		switch c.spec.Func {
		case "sum", "avg":
			cell.sumI += v.Int()
			cell.sumF += v.Float()
		case "min":
			if first || less(v, cell.v) {
				cell.v = v
			}
		case "max":
			if first || less(cell.v, v) {
				cell.v = v
			}
		case "count_distinct":
			cell.set[distinctValue(v)] = struct{}{}
		}
	}
	return acc
}

// distinctValue is v as count_distinct compares it: floats by value, so -0
// and +0 are one value (NaNs compare by their bits).
func distinctValue(v row.Value) row.Value {
	if v.Kind() == row.Float && v.Float() == 0 {
		return row.FloatValue(0)
	}
	return v
}

// mergeRows adds b's cells to a's in place and returns a; b is not modified.
func mergeRows(cs []compiled, a, b RowAcc) RowAcc {
	for i, c := range cs {
		x, y := &a[i], &b[i]
		if y.count == 0 {
			continue
		}
		switch c.spec.Func {
		case "min":
			if x.count == 0 || less(y.v, x.v) {
				x.v = y.v
			}
		case "max":
			if x.count == 0 || less(x.v, y.v) {
				x.v = y.v
			}
		case "count_distinct":
			for v := range y.set {
				x.set[v] = struct{}{}
			}
		}
		x.count += y.count
		x.sumI += y.sumI
		x.sumF += y.sumF
	}
	return a
}

// cloneRow returns a copy of acc sharing no memory with it.
func cloneRow(acc RowAcc) RowAcc {
	c := slices.Clone(acc)
	for i := range c {
		if c[i].set != nil {
			c[i].set = maps.Clone(c[i].set)
		}
	}
	return c
}

// less orders two values of the same kind.
func less(a, b row.Value) bool {
	switch a.Kind() {
	case row.Float:
		return a.Float() < b.Float()
	case row.String, row.Bytes:
		return a.Str() < b.Str()
	}
	return a.Int() < b.Int()
}

// rowAccCodec encodes a RowAcc: a uvarint cell count, then per cell count,
// integer sum (varints), float sum (8 bytes) and the min/max value, and for a
// count_distinct cell a uvarint number of values followed by the values.
type rowAccCodec struct {
	// signature lists the aggregates in order, e.g. "count(),sum(value)".
	signature string
	// distinct marks the count_distinct cells.
	distinct []bool
}

// Name includes the aggregates: accumulators of another list are other
// state, so restoring them after the aggregates changed fails instead of
// reading one aggregate's cell as another's.
func (c rowAccCodec) Name() string { return "window.rowacc.v1[" + c.signature + "]" }

// signature renders the aggregates a RowAcc holds, in order.
func signature(specs []AggregateSpec) string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = s.Func + "(" + s.Field + ")"
	}
	return strings.Join(parts, ",")
}

func (rc rowAccCodec) Append(dst []byte, acc RowAcc) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(acc)))
	for i, c := range acc {
		dst = binary.AppendVarint(dst, c.count)
		dst = binary.AppendVarint(dst, c.sumI)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.sumF))
		dst = row.ValueCodec{}.Append(dst, c.v)
		if i < len(rc.distinct) && rc.distinct[i] {
			dst = binary.AppendUvarint(dst, uint64(len(c.set)))
			for v := range c.set {
				dst = row.ValueCodec{}.Append(dst, v)
			}
		}
	}
	return dst
}

var errAccTruncated = errors.New("window accumulator: truncated input")

func (rc rowAccCodec) Decode(src []byte) (RowAcc, int, error) {
	var acc RowAcc
	n, err := rc.decode(&acc, src, false)
	if err != nil {
		return nil, 0, err
	}
	return acc, n, nil
}

// DecodeInto decodes into *dst, reusing its cells when it has room
// (state.IntoDecoder): a window's state then updates an accumulator
// without allocating one. The sets of count_distinct cells are new maps.
func (rc rowAccCodec) DecodeInto(dst *RowAcc, src []byte) (int, error) {
	return rc.decode(dst, src, true)
}

// decode decodes one RowAcc into *dst: into its cells when reuse is set and
// they are enough, else into new ones. On error *dst is unspecified.
func (rc rowAccCodec) decode(dst *RowAcc, src []byte, reuse bool) (int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)) {
		return 0, errAccTruncated
	}
	if rc.distinct != nil && l != uint64(len(rc.distinct)) {
		return 0, fmt.Errorf("window accumulator: %d cells, want %d", l, len(rc.distinct))
	}
	acc := *dst
	if reuse && uint64(cap(acc)) >= l {
		acc = acc[:l]
		clear(acc)
	} else {
		acc = make(RowAcc, l)
	}
	*dst = acc
	for i := range acc {
		var m int
		if acc[i].count, m = binary.Varint(src[n:]); m <= 0 {
			return 0, errAccTruncated
		}
		n += m
		if acc[i].sumI, m = binary.Varint(src[n:]); m <= 0 {
			return 0, errAccTruncated
		}
		n += m
		if len(src[n:]) < 8 {
			return 0, errAccTruncated
		}
		acc[i].sumF = math.Float64frombits(binary.LittleEndian.Uint64(src[n:]))
		n += 8
		v, m, err := row.ValueCodec{}.Decode(src[n:])
		if err != nil {
			return 0, err
		}
		acc[i].v = v
		n += m
		if rc.distinct != nil && rc.distinct[i] {
			if acc[i].set, m, err = decodeValueSet(src[n:]); err != nil {
				return 0, err
			}
			n += m
		}
	}
	return n, nil
}

// decodeValueSet decodes a uvarint count followed by that many distinct values.
func decodeValueSet(src []byte) (map[row.Value]struct{}, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)) {
		return nil, 0, errAccTruncated
	}
	set := make(map[row.Value]struct{}, l)
	for range l {
		v, m, err := row.ValueCodec{}.Decode(src[n:])
		if err != nil {
			return nil, 0, err
		}
		set[v] = struct{}{}
		n += m
	}
	if uint64(len(set)) != l {
		return nil, 0, errors.New("window accumulator: duplicate distinct values")
	}
	return set, n, nil
}

// RowRetract returns the function that takes a row back out of an
// accumulator of specs it was added to (an update or delete of an input
// row retracts the row it replaces). count, sum and avg can; min, max and
// count_distinct cannot (the next minimum is not kept) and are refused. Sums
// of floats that are added and retracted may drift by rounding from the sum
// of the rows that remain; sums of integers are exact.
func RowRetract(in *row.Schema, specs []AggregateSpec) (func(RowAcc, row.Row) RowAcc, error) {
	fields := make([]int, len(specs))
	var errs []error
	for i, s := range specs {
		fields[i] = -1
		switch s.Func {
		case "count", "sum", "avg":
		default:
			errs = append(errs, fmt.Errorf("aggregate %s: %s cannot take back a row its input updates or deletes (count, sum and avg can)", s.Name, s.Func))
			continue
		}
		if s.Field != "" {
			if fields[i] = in.Index(s.Field); fields[i] < 0 {
				errs = append(errs, fmt.Errorf("aggregate %s: input has no field %q", s.Name, s.Field))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return func(acc RowAcc, r row.Row) RowAcc {
		for i, f := range fields {
			cell := &acc[i]
			if f < 0 {
				cell.count--
				continue
			}
			v := r[f]
			if v.Kind() == row.Null {
				continue
			}
			cell.count--
			cell.sumI -= v.Int()
			cell.sumF -= v.Float()
		}
		return acc
	}, nil
}

// Count returns the count of cell i of acc: the rows a count() aggregate
// counted, or the non-NULL values another aggregate took.
func Count(acc RowAcc, i int) int64 { return acc[i].count }
