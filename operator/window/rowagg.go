package window

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	// Func is count, sum, min, max or avg.
	Func string
	// Field is the input field; empty for count().
	Field string
}

var aggPattern = regexp.MustCompile(`^\s*([a-z]+)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)?\s*\)\s*$`)

// ParseAggregate parses "count()", "sum(value)", "min(x)", "max(x)" or "avg(x)".
func ParseAggregate(name, expr string) (AggregateSpec, error) {
	m := aggPattern.FindStringSubmatch(expr)
	if m == nil {
		return AggregateSpec{}, fmt.Errorf("%q is not an aggregate: want count(), sum(field), min(field), max(field) or avg(field)", expr)
	}
	s := AggregateSpec{Name: name, Func: m[1], Field: m[2]}
	switch s.Func {
	case "count":
		if s.Field != "" {
			return s, fmt.Errorf("%q: count() takes no field", expr)
		}
	case "sum", "min", "max", "avg":
		if s.Field == "" {
			return s, fmt.Errorf("%q: %s needs a field", expr, s.Func)
		}
	default:
		return s, fmt.Errorf("%q: unknown aggregate %s: want count, sum, min, max or avg", expr, s.Func)
	}
	return s, nil
}

// RowAcc is the accumulator of a row window: one cell per aggregate. It is
// treated as immutable: Add returns a new one.
type RowAcc []aggCell

type aggCell struct {
	count int64
	sumI  int64
	sumF  float64
	v     row.Value // min, max
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
	agg := Aggregate[row.Row, RowAcc]{
		Init:  func() RowAcc { return make(RowAcc, len(cs)) },
		Add:   func(acc RowAcc, r row.Row) RowAcc { return addRow(cs, acc, r) },
		Codec: rowAccCodec{signature: signature(specs)},
	}
	result := func(acc RowAcc, dst []row.Value) []row.Value {
		for i, c := range cs {
			cell := acc[i]
			switch c.spec.Func {
			case "count":
				dst = append(dst, row.IntValue(cell.count))
			case "sum":
				if c.kind == row.Float {
					dst = append(dst, row.FloatValue(cell.sumF))
				} else {
					dst = append(dst, row.IntValue(cell.sumI))
				}
			case "avg":
				dst = append(dst, row.FloatValue(cell.sumF/float64(cell.count)))
			default:
				dst = append(dst, cell.v)
			}
		}
		return dst
	}
	return agg, fields, result, nil
}

// addRow returns a copy of acc with r added; acc is not modified (it may be
// part of a snapshot being written).
func addRow(cs []compiled, acc RowAcc, r row.Row) RowAcc {
	next := slices.Clone(acc)
	for i, c := range cs {
		cell := &next[i]
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
		}
	}
	return next
}

// less orders two values of the same kind.
func less(a, b row.Value) bool {
	switch a.Kind() {
	case row.Float:
		return a.Float() < b.Float()
	case row.String:
		return a.Str() < b.Str()
	}
	return a.Int() < b.Int()
}

// rowAccCodec encodes a RowAcc: a uvarint cell count, then per cell count,
// integer sum (varints), float sum (8 bytes) and the min/max value.
type rowAccCodec struct {
	// signature lists the aggregates in order, e.g. "count(),sum(value)".
	signature string
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

func (rowAccCodec) Append(dst []byte, acc RowAcc) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(acc)))
	for _, c := range acc {
		dst = binary.AppendVarint(dst, c.count)
		dst = binary.AppendVarint(dst, c.sumI)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.sumF))
		dst = row.ValueCodec{}.Append(dst, c.v)
	}
	return dst
}

var errAccTruncated = errors.New("window accumulator: truncated input")

func (rowAccCodec) Decode(src []byte) (RowAcc, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)) {
		return nil, 0, errAccTruncated
	}
	acc := make(RowAcc, l)
	for i := range acc {
		var m int
		if acc[i].count, m = binary.Varint(src[n:]); m <= 0 {
			return nil, 0, errAccTruncated
		}
		n += m
		if acc[i].sumI, m = binary.Varint(src[n:]); m <= 0 {
			return nil, 0, errAccTruncated
		}
		n += m
		if len(src[n:]) < 8 {
			return nil, 0, errAccTruncated
		}
		acc[i].sumF = math.Float64frombits(binary.LittleEndian.Uint64(src[n:]))
		n += 8
		v, m, err := row.ValueCodec{}.Decode(src[n:])
		if err != nil {
			return nil, 0, err
		}
		acc[i].v = v
		n += m
	}
	return acc, n, nil
}
