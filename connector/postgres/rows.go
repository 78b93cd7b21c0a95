package postgres

import (
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/row"
)

// ColumnType is the PostgreSQL type a row field of kind k is stored as by
// default: bigint, double precision, text, boolean, timestamptz, bytea
// (Null: text).
func ColumnType(k row.Kind) string {
	switch k {
	case row.Bytes:
		return "bytea"
	case row.Int:
		return "bigint"
	case row.Float:
		return "double precision"
	case row.Bool:
		return "boolean"
	case row.Time:
		return "timestamptz"
	}
	return "text"
}

// RowColumns returns one column per field of schema, named after the field,
// of type ColumnType(field kind).
func RowColumns(schema *row.Schema) []Column {
	cols := make([]Column, len(schema.Fields))
	for i, f := range schema.Fields {
		cols[i] = Column{Name: f.Name, Type: ColumnType(f.Kind)}
	}
	return cols
}

// RowValues appends r's values as pgx encodes them: int64, float64, string,
// bool, time.Time (UTC), []byte and nil for Null. It is the Values function of
// NewRowSink: a row with another number of values than the sink has columns
// fails the sink subtask.
func RowValues(dst []any, r row.Row) []any {
	for _, v := range r {
		dst = append(dst, rowValue(v))
	}
	return dst
}

func rowValue(v row.Value) any {
	switch v.Kind() {
	case row.Int:
		return v.Int()
	case row.Float:
		return v.Float()
	case row.String:
		return v.Str()
	case row.Bool:
		return v.Bool()
	case row.Time:
		return time.Unix(0, v.Int()).UTC()
	case row.Bytes:
		return []byte(v.Str())
	}
	return nil
}

// NewRowSink returns a sink for the dynamic rows of YAML pipelines: one
// column per field of schema, in order, named after the field. columns, when
// not nil, overrides the columns (to choose types other than ColumnType's);
// it must have one column per field.
func NewRowSink(cfg SinkConfig, schema *row.Schema, columns []Column) (*Sink[row.Row], error) {
	if columns == nil {
		columns = RowColumns(schema)
	}
	if len(columns) != len(schema.Fields) {
		return nil, fmt.Errorf("postgres sink %s: %d columns for the %d fields %q of the input rows", cfg.Table, len(columns), len(schema.Fields), schema.Names())
	}
	return NewSink(cfg, columns, RowValues)
}
