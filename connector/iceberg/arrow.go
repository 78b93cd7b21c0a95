//go:build iceberg

package iceberg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/row"
)

// layout is how the sink's columns map onto one table: the written
// columns' table fields, in input order, and the Arrow schemas of a data
// file and of an equality delete file.
type layout struct {
	fields []iceberg.NestedField // per Sink.cols
	kinds  []row.Kind            // the row kind each column takes
	data   *arrow.Schema
	// keyIDs are the table field ids of the key; keyCols their positions in
	// fields; keys the Arrow schema of an equality delete file.
	keyIDs  []int
	keyCols []int
	keys    *arrow.Schema
}

// planLayout checks the table against the input and plans the columns: every
// written field must be a column of the table of the same type, and every
// column the input lacks must be optional.
func (s *Sink) planLayout(tbl *table.Table) (*layout, error) {
	sch := tbl.Schema()
	l := &layout{}
	written := map[int]bool{}
	for _, c := range s.cols {
		f, ok := sch.FindFieldByName(c.name)
		if !ok {
			return nil, fmt.Errorf("the table has no column %q, a field of the input (columns: %s)", c.name, columnNames(sch))
		}
		kind := c.kind
		if kind == row.Null { // a field of unknown kind takes the column's
			kind = kindOf(f.Type)
		}
		if t, ok := icebergType(kind); !ok || !t.Equals(f.Type) {
			return nil, fmt.Errorf("column %q is %v, but the input's field is %v (which writes %v)", c.name, f.Type, c.kind, t)
		}
		written[f.ID] = true
		l.fields = append(l.fields, f)
		l.kinds = append(l.kinds, kind)
	}
	for _, f := range sch.Fields() {
		if !written[f.ID] && f.Required {
			return nil, fmt.Errorf("column %q is required, but the input has no such field", f.Name)
		}
	}
	var err error
	if l.data, err = table.SchemaToArrowSchema(iceberg.NewSchema(sch.ID, l.fields...), nil, true, false); err != nil {
		return nil, err
	}
	if s.cfg.Key != nil {
		var kf []iceberg.NestedField
		for _, k := range s.cfg.Key {
			i := s.colIndex(k)
			if i < 0 {
				return nil, fmt.Errorf("the key field %q is not written", k)
			}
			l.keyIDs = append(l.keyIDs, l.fields[i].ID)
			l.keyCols = append(l.keyCols, i)
			kf = append(kf, l.fields[i])
		}
		if l.keys, err = table.SchemaToArrowSchema(iceberg.NewSchema(sch.ID, kf...), nil, true, false); err != nil {
			return nil, err
		}
	}
	spec := tbl.Spec()
	for _, p := range spec.Fields() {
		if s.cfg.Key == nil {
			break
		}
		if !slices.Contains(l.keyIDs, p.SourceID()) {
			f, _ := sch.FindFieldByID(p.SourceID())
			return nil, fmt.Errorf("the table is partitioned by %s of column %q, which is not in the changelog's key [%s]: a delete carries only the key, so it could not find its partition", p.Transform, f.Name, strings.Join(s.cfg.Key, ", "))
		}
	}
	return l, nil
}

func (s *Sink) colIndex(name string) int {
	for i, c := range s.cols {
		if c.name == name {
			return i
		}
	}
	return -1
}

func columnNames(sch *iceberg.Schema) string {
	var n []string
	for _, f := range sch.Fields() {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

// kindOf is the row kind an Iceberg column takes, Null for none.
func kindOf(t iceberg.Type) row.Kind {
	for _, k := range []row.Kind{row.Int, row.Float, row.String, row.Bool, row.Time, row.Bytes} {
		if it, _ := icebergType(k); it.Equals(t) {
			return k
		}
	}
	return row.Null
}

// batcher collects rows into Arrow record batches of one schema.
type batcher struct {
	b     *array.RecordBuilder
	kinds []row.Kind
	names []string
	rows  int
}

func newBatcher(sc *arrow.Schema, kinds []row.Kind) *batcher {
	names := make([]string, sc.NumFields())
	for i := range names {
		names[i] = sc.Field(i).Name
	}
	return &batcher{b: array.NewRecordBuilder(memory.DefaultAllocator, sc), kinds: kinds, names: names}
}

// add appends the values vals(i) of the columns; the error names the column.
func (bt *batcher) add(vals func(i int) row.Value) error {
	for i, k := range bt.kinds {
		v := vals(i)
		fb := bt.b.Field(i)
		if v.Kind() == row.Null {
			if !bt.b.Schema().Field(i).Nullable {
				return fmt.Errorf("column %q is NULL, but the table requires it", bt.names[i])
			}
			fb.AppendNull()
			continue
		}
		if v.Kind() != k && !(k == row.Float && v.Kind() == row.Int) {
			return fmt.Errorf("column %q holds %v value %v, not %v", bt.names[i], v.Kind(), v, k)
		}
		switch k {
		case row.Int:
			fb.(*array.Int64Builder).Append(v.Int())
		case row.Float:
			fb.(*array.Float64Builder).Append(v.Float())
		case row.String:
			fb.(*array.StringBuilder).Append(v.Str())
		case row.Bool:
			fb.(*array.BooleanBuilder).Append(v.Bool())
		case row.Time:
			// Iceberg v2 keeps microseconds: nanoseconds below are dropped
			// (rounded toward the past).
			ns := v.Int()
			us := ns / 1000
			if ns%1000 < 0 {
				us--
			}
			fb.(*array.TimestampBuilder).Append(arrow.Timestamp(us))
		case row.Bytes:
			fb.(*array.BinaryBuilder).Append([]byte(v.Str()))
		}
	}
	bt.rows++
	return nil
}

// take returns the rows added since the last take as a record batch, nil
// when there are none.
func (bt *batcher) take() arrow.RecordBatch {
	if bt.rows == 0 {
		return nil
	}
	bt.rows = 0
	return bt.b.NewRecordBatch()
}

func (bt *batcher) release() { bt.b.Release() }

// checkChangelogTable refuses a table a changelog's equality deletes would
// not apply to in full: one of format version 1, which has no deletes, or
// one whose current snapshot holds files of an older partition spec (a
// partitioned delete applies to files of its own spec only).
func checkChangelogTable(ctx context.Context, tbl *table.Table) error {
	if v := tbl.Metadata().Version(); v < 2 {
		return fmt.Errorf("the table has format version %d, which has no deletes: a changelog needs version 2 or later (ALTER TABLE … SET TBLPROPERTIES ('format-version'='2'))", v)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	mans, err := snap.Manifests(fs)
	if err != nil {
		return fmt.Errorf("reading the current snapshot's manifests: %w", err)
	}
	spec := tbl.Spec()
	for _, m := range mans {
		if id := int(m.PartitionSpecID()); id != spec.ID() {
			return fmt.Errorf("the table holds files of partition spec %d, and its current spec is %d: the changelog's deletes, written under the current spec, would not remove their rows; restore the table's former partition spec, or write the changelog to a new table", id, spec.ID())
		}
	}
	return nil
}
