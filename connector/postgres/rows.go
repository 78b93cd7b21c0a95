package postgres

import (
	"fmt"
	"strings"
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

// NewRowChangelogSink returns a sink applying a changelog of dynamic rows:
// an upsert sink (cfg.Mode Upsert, cfg.Key) with Deletes, whose row's field
// op says what the row does — "delete" deletes the row's key, any other
// value upserts the row. The table's columns are schema's fields, but those
// whose name starts with '_' (the changelog's metadata: the operation, and
// what else a producer adds, such as a change's log position), of type
// ColumnType(field kind). keepMetadata keeps the '_' fields but op.
func NewRowChangelogSink(cfg SinkConfig, schema *row.Schema, op string, keepMetadata bool) (*Sink[row.Row], error) {
	at := schema.Index(op)
	if at < 0 {
		return nil, fmt.Errorf("postgres sink %s: the changelog has no operation field %q (fields: %q)", cfg.Table, op, schema.Names())
	}
	var cols []Column
	var kept []int
	for i, f := range schema.Fields {
		if f.Name != op && (keepMetadata || !strings.HasPrefix(f.Name, "_")) {
			cols = append(cols, Column{Name: f.Name, Type: ColumnType(f.Kind)})
			kept = append(kept, i)
		}
	}
	cfg.Deletes = true
	return NewSink(cfg, cols, func(dst []any, r row.Row) []any {
		if len(r) != len(schema.Fields) {
			return dst // the writer reports the count of values
		}
		for _, i := range kept {
			dst = append(dst, rowValue(r[i]))
		}
		return append(dst, r[at].Str() == "delete")
	})
}
