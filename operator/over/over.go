// Package over is SQL's aggregate window function over a frame of rows,
// agg(x) OVER (PARTITION BY p ORDER BY o ROWS BETWEEN n PRECEDING AND
// CURRENT ROW), over an updating result: each row of a partition gets the
// aggregate of itself and the n rows before it in the order.
//
// # Input
//
// The input is a changelog (the aggregate package's: each row an insert,
// update or delete of its key's row), keyed by the partition. Its key must
// include the partition columns: a key then stays in one partition, so all
// its rows reach one subtask in order, and the subtask finds a key's
// previous row among its partition's rows. As a sink applies a changelog,
// an insert or update replaces the key's row and a delete removes it.
//
// # The order
//
// Rows are ordered by the ORDER BY values and, among equal ones, by their
// changelog key. That makes the order total: the same rows give the same
// frames whatever order they arrived in, so the result does not depend on
// how the input's subtasks interleave (SQL leaves the order of peers
// unspecified; this picks one).
//
// # The changelog
//
// The output is a changelog keyed by the input's key: each row is the input
// row without its operation, the aggregates of its frame, then the
// operation. A change leaves its key's row and the n rows after it, and
// enters the n rows after the key's new place: of those rows, each whose
// result or row changed is emitted, inserted, updated or deleted. A change
// emits at most 2n+2 rows.
//
// # State and cost
//
// Each partition's rows are keyed state, in order, held for as long as
// they are in the input's result. A change copies its partition's rows
// (the stored list may belong to a checkpoint being written) and computes
// up to 4n+2 frames of n+1 rows: it suits partitions of up to thousands
// of rows and frames of up to hundreds.
//
// # Checkpoints
//
// The rows are keyed state: a recovery replays the records after the
// checkpoint onto the partitions as they were at its barrier.
package over

import (
	"fmt"
	"slices"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// MaxPreceding bounds Config.Preceding: a change computes up to 4n+2
// frames of n+1 rows each.
const MaxPreceding = 1000

// Config is what Rows computes.
type Config struct {
	// Preceding is n: the rows before a row that its frame holds. 0 to
	// MaxPreceding.
	Preceding int
	// Compare orders two rows of a partition (negative when a comes
	// first): by the ORDER BY values, then by the key fields. Required.
	// INVARIANT: it returns 0 only for rows of equal keys, so the order is
	// total and every row has one place.
	Compare func(a, b row.Row) int
	// Key holds the positions of the changelog key's fields (none for a
	// result of one row).
	Key []int
	// Op is the position of the operation field (aggregate.OpInsert,
	// OpUpdate or OpDelete).
	Op int
	// Agg and Result compute the aggregates of a frame (window.
	// RowAggregates).
	Agg    window.Aggregate[row.Row, window.RowAcc]
	Result func(window.RowAcc, []row.Value) []row.Value
	// Signature names the rows' fields, the order and the frame in
	// checkpoints: a checkpoint of other ones is refused at restore.
	Signature string
}

// Rows applies the window function to ks (keyed by the partition) and
// returns its changelog (see the package documentation).
func Rows(ks stream.KeyedStream[row.Row, row.Value], id string, cfg Config, opts ...stream.NodeOption) stream.Stream[row.Row] {
	switch {
	case cfg.Preceding < 0 || cfg.Preceding > MaxPreceding:
		ks.Pipeline().Errorf("over %s: %d preceding rows: want 0 to %d", id, cfg.Preceding, MaxPreceding)
	case cfg.Compare == nil || cfg.Agg.Init == nil || cfg.Result == nil:
		ks.Pipeline().Errorf("over %s: the order and the aggregates are required", id)
	}
	return process.Keyed(ks, id, func() process.Function[row.Row, row.Value, row.Row] { return &framer{cfg: cfg} }, opts...)
}

// framer is one subtask.
type framer struct {
	cfg Config
	// rows holds each partition's rows, in order, each as it arrived
	// (with its operation, an insert or an update).
	// INVARIANT: sorted by Config.Compare, one row per key.
	rows *state.ValueState[row.Value, []row.Row]
	// touched is scratch: the rows a change may alter.
	touched []touched
}

// Open implements process.Function.
func (f *framer) Open(s process.Setup[row.Value]) error {
	var err error
	f.rows, err = state.NewValueState(s.State, "rows", s.KeyCodec, row.RowsCodec{Label: "over.rows.v1[" + f.cfg.Signature + "]"})
	return err
}

// result returns the aggregates of the frame of rows[i].
func (f *framer) result(rows []row.Row, i int) []row.Value {
	acc := f.cfg.Agg.Init()
	for _, r := range rows[max(0, i-f.cfg.Preceding) : i+1] {
		acc = f.cfg.Agg.Add(acc, r)
	}
	return f.cfg.Result(acc, nil)
}

// touched is a row whose result a change may alter, as it was before it.
type touched struct {
	row row.Row     // as stored before the change, or the new row
	was []row.Value // its result before the change
	had bool        // whether it was in the partition before the change
}

// ProcessRecord implements process.Function: it applies v (an insert or an
// update of its key's row, or its deletion) to its partition and emits the
// rows whose results changed.
func (f *framer) ProcessRecord(c *process.Context[row.Value, row.Row], v row.Row) error {
	op := v[f.cfg.Op].Str()
	if op != aggregate.OpInsert && op != aggregate.OpUpdate && op != aggregate.OpDelete {
		return fmt.Errorf("over: a changelog row whose operation is %v, not %s, %s or %s", v[f.cfg.Op], aggregate.OpInsert, aggregate.OpUpdate, aggregate.OpDelete)
	}
	k := c.Key()
	rows, _ := f.rows.Get(k)
	n := f.cfg.Preceding
	f.touched = f.touched[:0]
	// note records the result of rows[p] before the change, once per key.
	note := func(rows []row.Row, p int) {
		if !slices.ContainsFunc(f.touched, func(t touched) bool { return f.sameKey(t.row, rows[p]) }) {
			f.touched = append(f.touched, touched{row: rows[p], was: f.result(rows, p), had: true})
		}
	}
	// The key's previous row leaves: it and the n rows after it change.
	// A new list, with room for the new row: the stored one may belong to
	// a checkpoint being written.
	i := slices.IndexFunc(rows, func(r row.Row) bool { return f.sameKey(r, v) })
	for p := i; i >= 0 && p <= min(i+n, len(rows)-1); p++ {
		note(rows, p)
	}
	rows = append(make([]row.Row, 0, len(rows)+1), rows...)
	if i >= 0 {
		rows = slices.Delete(rows, i, i+1)
	}
	// The new row enters: the n rows after its place change.
	if op != aggregate.OpDelete {
		j, found := slices.BinarySearchFunc(rows, v, f.cfg.Compare)
		if found {
			return fmt.Errorf("over: two rows of key %v in one partition: the order compares rows of different keys as equal", f.keyOf(v))
		}
		for p := j; p <= min(j+n-1, len(rows)-1); p++ {
			note(rows, p)
		}
		if !slices.ContainsFunc(f.touched, func(t touched) bool { return f.sameKey(t.row, v) }) {
			f.touched = append(f.touched, touched{row: v})
		}
		rows = slices.Insert(rows, j, v)
	}
	if len(rows) == 0 {
		f.rows.Clear(k)
	} else {
		f.rows.Update(k, rows)
	}
	for _, t := range f.touched {
		now := t.row
		if op != aggregate.OpDelete && f.sameKey(now, v) {
			now = v
		}
		q, present := slices.BinarySearchFunc(rows, now, f.cfg.Compare)
		switch {
		case !present && t.had:
			f.emit(c, t.row, t.was, opDelete)
		case !present:
		case !t.had:
			f.emit(c, rows[q], f.result(rows, q), opInsert)
		default:
			if res := f.result(rows, q); !slices.Equal(res, t.was) || !f.sameRow(t.row, rows[q]) {
				f.emit(c, rows[q], res, opUpdate)
			}
		}
	}
	return nil
}

// sameKey reports whether a and b have equal key fields.
func (f *framer) sameKey(a, b row.Row) bool {
	for _, k := range f.cfg.Key {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// emit emits r without its operation, then the aggregates, then op.
func (f *framer) emit(c *process.Context[row.Value, row.Row], r row.Row, aggs []row.Value, op row.Value) {
	out := make(row.Row, 0, len(r)+len(aggs))
	out = append(out, r[:f.cfg.Op]...)
	out = append(out, r[f.cfg.Op+1:]...)
	out = append(out, aggs...)
	c.Emit(append(out, op))
}

// sameRow reports whether a and b hold equal values but for their
// operations.
func (f *framer) sameRow(a, b row.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if i != f.cfg.Op && a[i] != b[i] {
			return false
		}
	}
	return true
}

// keyOf returns v's key fields, for errors.
func (f *framer) keyOf(v row.Row) []row.Value {
	k := make([]row.Value, len(f.cfg.Key))
	for i, p := range f.cfg.Key {
		k[i] = v[p]
	}
	return k
}

// OnTimer implements process.Function; over sets no timers.
func (f *framer) OnTimer(*process.Context[row.Value, row.Row], process.Domain) error { return nil }

var (
	opInsert = row.StringValue(aggregate.OpInsert)
	opUpdate = row.StringValue(aggregate.OpUpdate)
	opDelete = row.StringValue(aggregate.OpDelete)
)
