// Package topn keeps the first N rows of each key in an order: SQL's
// ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) filtered to rank <= N, which
// is top-N, and deduplication for N = 1.
//
// # The changelog
//
// The ranks of a key change as records arrive, so the output is a changelog
// (the aggregate package's): each row is an input row with, when ranks are
// output, its rank after it, and then the operation (aggregate.OpField).
// With ranks the changelog is keyed by (key, rank): a record that enters at
// rank r emits the rows now at ranks r … (an update of each slot that held
// a row, an insert of a slot that was empty). Without ranks (N = 1 only)
// it is keyed by the key: the key's first row is an insert, a row that takes
// its place an update. Rows never leave, so there are no deletes.
//
// A record ranks after the rows it ties with: among equals the earlier
// arrival keeps its rank, so a deduplication ordered by time keeps the
// first row of a key.
//
// # Checkpoints
//
// Each key's ranked rows are keyed state, so a recovery replays the records
// after the checkpoint onto the ranks as they were at its barrier.
package topn

import (
	"fmt"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Config is what Rows keeps.
type Config struct {
	// Limit is N: the ranks kept per key. Required, at least 1.
	Limit int
	// Before reports whether row a ranks before row b. Required; it must be
	// a strict weak order.
	Before func(a, b row.Row) bool
	// Rank outputs each row's rank (from 1) after its fields. Required when
	// Limit > 1: the changelog is then keyed by it.
	Rank bool
	// Signature names the order in checkpoints (e.g. "price desc"): a
	// checkpoint of another order or limit is refused at restore.
	Signature string
}

// Rows applies top-N to ks and returns its changelog (see the package
// documentation).
func Rows(ks stream.KeyedStream[row.Row, row.Value], id string, cfg Config, opts ...stream.NodeOption) stream.Stream[row.Row] {
	switch {
	case cfg.Limit < 1 || cfg.Before == nil:
		ks.Pipeline().Errorf("top-n %s: the limit must be at least 1, and the order is required", id)
	case cfg.Limit > 1 && !cfg.Rank:
		ks.Pipeline().Errorf("top-n %s: %d ranks need the rank in the output, by which their rows are updated", id, cfg.Limit)
	}
	return process.Keyed(ks, id, func() process.Function[row.Row, row.Value, row.Row] { return &ranker{cfg: cfg} }, opts...)
}

// ranker is one subtask.
type ranker struct {
	cfg   Config
	ranks *state.ValueState[row.Value, []row.Row]
}

// Open implements process.Function.
func (r *ranker) Open(s process.Setup[row.Value]) error {
	var err error
	r.ranks, err = state.NewValueState(s.State, "ranks", s.KeyCodec, row.RowsCodec{Label: fmt.Sprintf("topn.rows.v1[%d %s]", r.cfg.Limit, r.cfg.Signature)})
	return err
}

// ProcessRecord implements process.Function: it places v among its key's
// ranks and emits the ranks that changed.
func (r *ranker) ProcessRecord(c *process.Context[row.Value, row.Row], v row.Row) error {
	k := c.Key()
	old, _ := r.ranks.Get(k)
	at := len(old)
	for i, o := range old {
		if r.cfg.Before(v, o) {
			at = i
			break
		}
	}
	if at >= r.cfg.Limit {
		return nil // ranks after the kept ones
	}
	// A new list: the stored one may belong to a checkpoint being written.
	n := min(len(old)+1, r.cfg.Limit)
	ranks := make([]row.Row, 0, n)
	ranks = append(append(append(ranks, old[:at]...), v), old[at:n-1]...)
	r.ranks.Update(k, ranks)
	if !r.cfg.Rank {
		op := opUpdate
		if len(old) == 0 {
			op = opInsert
		}
		c.Emit(append(v[:len(v):len(v)], op))
		return nil
	}
	for i := at; i < n; i++ {
		op := opUpdate
		if i >= len(old) {
			op = opInsert
		}
		out := make(row.Row, 0, len(ranks[i])+2)
		c.Emit(append(append(out, ranks[i]...), row.IntValue(int64(i+1)), op))
	}
	return nil
}

// OnTimer implements process.Function; top-N sets no timers.
func (r *ranker) OnTimer(*process.Context[row.Value, row.Row], process.Domain) error { return nil }

var (
	opInsert = row.StringValue(aggregate.OpInsert)
	opUpdate = row.StringValue(aggregate.OpUpdate)
)
