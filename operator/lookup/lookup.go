// Package lookup joins a stream with a bounded table held in memory: each
// record is matched, when it arrives, against the table's rows of its key
// (a lookup join, SQL's JOIN t FOR SYSTEM_TIME AS OF PROCTIME()).
//
// The table is no part of any checkpoint. Every subtask loads it whole when
// it opens, at the job's start and at every restore, so a record is joined
// with the table as it was when its subtask last opened. A table edited
// between two runs gives the records processed after the restore the new
// rows, records processed before it the old ones: the result depends on
// when the table was read, which plans report as nondeterministic. Output a
// transactional sink committed is never repeated or taken back; records
// whose output was not committed before a failure are joined again, with
// the table the restore read.
package lookup

import (
	"fmt"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Table is a bounded table's rows grouped by their key field. A row whose
// key is NULL is in no group: a NULL key matches nothing.
type Table struct {
	byKey map[row.Value][]row.Row
	rows  int
}

// NewTable groups rows by field key.
func NewTable(rows []row.Row, key int) *Table {
	t := &Table{byKey: make(map[row.Value][]row.Row, len(rows)), rows: len(rows)}
	for _, r := range rows {
		if k := r[key]; k.Kind() != row.Null {
			t.byKey[k] = append(t.byKey[k], r)
		}
	}
	return t
}

// Rows returns how many rows the table holds, those with a NULL key
// included.
func (t *Table) Rows() int { return t.rows }

// Match returns the rows whose key is k, nil for none and for a NULL k.
// The rows are shared: callers do not change them.
func (t *Table) Match(k row.Value) []row.Row {
	if k.Kind() == row.Null {
		return nil
	}
	return t.byKey[k]
}

// Config is a lookup join.
type Config struct {
	// Load reads the table. Each subtask calls it when it opens; an error
	// fails the subtask's start, naming the table.
	Load func() (*Table, error)
	// Key is the input field whose value is looked up.
	Key int
	// Output makes an output row of an input row and a table row matching
	// it.
	Output func(in, t row.Row) row.Row
}

// Join returns the rows Output makes of every input row and every table row
// whose key equals the input's key field, in input order, each with its
// input's event time. An input row no table row matches has no output (an
// inner join). The input is not repartitioned: each subtask holds the whole
// table.
func Join(in stream.Stream[row.Row], id string, cfg Config, opts ...stream.NodeOption) stream.Stream[row.Row] {
	n := &runtime.Node{ID: id, Type: "lookup_join", Describe: "lookup join",
		NewOperator: func() runtime.Operator { return &joinOp{cfg: cfg} }}
	return stream.Add[row.Row, row.Row](in, n, opts...)
}

// joinOp is one subtask of a lookup join.
type joinOp struct {
	stream.Stateless
	cfg   Config
	table *Table
	buf   runtime.BatchBuffer[row.Row]
}

// BorrowsBatches implements runtime.BatchBorrower: input rows are read into
// new output rows.
func (*joinOp) BorrowsBatches() {}

// Open loads the table.
func (o *joinOp) Open(ctx *runtime.Context) error {
	t, err := o.cfg.Load()
	if err != nil {
		return fmt.Errorf("lookup join %s: %w", ctx.Task.Operator, err)
	}
	o.table = t
	o.buf.Open(ctx.Output)
	return o.Stateless.Open(ctx)
}

func (o *joinOp) ProcessBatch(_ int, r runtime.Records) error {
	in, err := runtime.BatchOf[row.Row](r)
	if err != nil {
		return err
	}
	out := o.buf.Get(len(in))
	for _, rec := range in {
		for _, t := range o.table.Match(rec.Value[o.cfg.Key]) {
			out = append(out, stream.Record[row.Row]{Value: o.cfg.Output(rec.Value, t), Time: rec.Time})
		}
	}
	return o.buf.Emit(out)
}
