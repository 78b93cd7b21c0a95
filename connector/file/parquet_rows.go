package file

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// ParquetRows returns a sink writing dynamic rows (YAML pipelines' records)
// as Parquet, with one nullable column per field, in the fields' order:
//
//	int    INT64
//	float  DOUBLE
//	string BYTE_ARRAY (STRING)
//	bool   BOOLEAN
//	time   INT64 (TIMESTAMP(NANOS, UTC))
//
// A null value is a null. An int value in a float column is converted; any
// other value whose kind is not its column's fails the sink subtask with an
// error naming the column. Files are staged and committed like JSONLines.
func ParquetRows(dir string, fields []row.Field, opts ...ParquetOption) (*Sink[row.Row], error) {
	wopts, err := writerOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", dir, err)
	}
	schema, err := rowSchema(fields)
	if err != nil {
		return nil, fmt.Errorf("file sink %s: %w", dir, err)
	}
	return &Sink[row.Row]{dir: dir, format: parquetRows{fields: fields, opts: append(wopts, schema)}}, nil
}

// rowSchema builds the Parquet schema of fields: a group whose columns keep
// the fields' order (parquet.Group alone would sort them by name).
func rowSchema(fields []row.Field) (*parquet.Schema, error) {
	if len(fields) == 0 {
		return nil, errors.New("parquet: no columns")
	}
	g := orderedGroup{Group: parquet.Group{}}
	var errs []error
	for _, f := range fields {
		var leaf parquet.Node
		switch f.Kind {
		case row.Int:
			leaf = parquet.Int(64)
		case row.Float:
			leaf = parquet.Leaf(parquet.DoubleType)
		case row.String:
			leaf = parquet.String()
		case row.Bool:
			leaf = parquet.Leaf(parquet.BooleanType)
		case row.Time:
			leaf = parquet.Timestamp(parquet.Nanosecond)
		case row.Bytes:
			leaf = parquet.Leaf(parquet.ByteArrayType) // no logical type: any bytes
		default:
			errs = append(errs, fmt.Errorf("parquet: column %q has kind %v; want int, float, string, bool, time or bytes", f.Name, f.Kind))
			continue
		}
		if f.Name == "" {
			errs = append(errs, errors.New("parquet: a column has no name"))
			continue
		}
		if _, dup := g.Group[f.Name]; dup {
			errs = append(errs, fmt.Errorf("parquet: column %q appears twice", f.Name))
			continue
		}
		g.Group[f.Name] = parquet.Optional(leaf)
		g.names = append(g.names, f.Name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := parquet.NewSchema("row", g)
	// The encoder writes field i to column i: check the schema agrees.
	for i, f := range fields {
		leaf, ok := s.Lookup(f.Name)
		if !ok || leaf.ColumnIndex != i {
			return nil, fmt.Errorf("parquet: column %q is not at index %d of the schema %v", f.Name, i, s)
		}
	}
	return s, nil
}

// orderedGroup is a parquet.Group whose fields come in the order of names.
type orderedGroup struct {
	parquet.Group
	names []string
}

// Fields returns the group's fields in declaration order.
func (g orderedGroup) Fields() []parquet.Field {
	byName := map[string]parquet.Field{}
	for _, f := range g.Group.Fields() {
		byName[f.Name()] = f
	}
	out := make([]parquet.Field, len(g.names))
	for i, n := range g.names {
		out[i] = byName[n]
	}
	return out
}

// parquetRows is the Parquet format of dynamic rows.
type parquetRows struct {
	fields []row.Field
	opts   []parquet.WriterOption
}

func (parquetRows) ext() string      { return ".parquet" }
func (parquetRows) describe() string { return "parquet rows" }
func (f parquetRows) newEncoder(string) encoder[row.Row] {
	return &parquetRowEncoder{fields: f.fields, w: parquet.NewGenericWriter[any](io.Discard, f.opts...)}
}

type parquetRowEncoder struct {
	fields []row.Field
	w      *parquet.GenericWriter[any]
	rows   []parquet.Row
	values []parquet.Value
}

func (e *parquetRowEncoder) reset(w io.Writer) { e.w.Reset(w) }

func (e *parquetRowEncoder) write(b runtime.Batch[row.Row]) error {
	n := len(e.fields)
	if cap(e.values) < len(b)*n {
		e.values = make([]parquet.Value, len(b)*n)
	}
	vals := e.values[:len(b)*n]
	e.rows = e.rows[:0]
	for i, rec := range b {
		out := vals[i*n : (i+1)*n : (i+1)*n]
		for c, f := range e.fields {
			var v row.Value
			if c < len(rec.Value) {
				v = rec.Value[c]
			}
			pv, err := parquetValue(v, f.Kind)
			if err != nil {
				return fmt.Errorf("parquet: column %q: %w", f.Name, err)
			}
			def := 1
			if v.Kind() == row.Null {
				def = 0
			}
			out[c] = pv.Level(0, def, c)
		}
		e.rows = append(e.rows, out)
	}
	_, err := e.w.WriteRows(e.rows)
	clear(vals) // drop references to the rows' strings
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	return nil
}

// parquetValue converts v for a column of kind k.
func parquetValue(v row.Value, k row.Kind) (parquet.Value, error) {
	if v.Kind() == row.Null {
		return parquet.NullValue(), nil
	}
	switch {
	case v.Kind() == k:
	case v.Kind() == row.Int && k == row.Float:
		return parquet.DoubleValue(float64(v.Int())), nil
	default:
		return parquet.Value{}, fmt.Errorf("%v value %v in a %v column", v.Kind(), v, k)
	}
	switch k {
	case row.Int:
		return parquet.Int64Value(v.Int()), nil
	case row.Float:
		return parquet.DoubleValue(v.Float()), nil
	case row.String, row.Bytes:
		// The writer copies the bytes into its pages and never writes to
		// them, so the string's memory can be lent without a copy.
		s := v.Str()
		return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s))), nil
	case row.Bool:
		return parquet.BooleanValue(v.Bool()), nil
	case row.Time:
		return parquet.Int64Value(v.Int()), nil
	}
	return parquet.Value{}, fmt.Errorf("unsupported column kind %v", k)
}

func (e *parquetRowEncoder) finish() error {
	if err := e.w.Close(); err != nil {
		return fmt.Errorf("parquet: writing the footer: %w", err)
	}
	return nil
}
