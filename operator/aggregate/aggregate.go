// Package aggregate is the updating aggregate: a GROUP BY without a window.
// Each key's accumulator lives in keyed state for as long as the job runs,
// and every record that changes a key's result emits the key's new result,
// so the output is a changelog keyed by the group key rather than a stream
// of final rows.
//
// # The changelog
//
// Every output row is the key's whole result followed by one more value,
// the operation (field OpField):
//
//	insert  the key's first visible result;
//	update  a later result of a key whose previous result was visible;
//	delete  the key's result stops being visible (HAVING no longer holds);
//	        the row is the previous result, the one deleted.
//
// A record that leaves the result as it was (a max that did not change)
// emits nothing. Applying the rows in order, per key, to a table keyed by the
// group key — upsert for insert and update, delete for delete — gives the
// table of results of all records so far. All the rows of one key come from
// one subtask in order; a consumer must keep that order per key (the config
// package routes a changelog by its key to every sink).
//
// # Checkpoints
//
// The accumulators are keyed state: a checkpoint holds each key's
// accumulator as of its barrier, and the changelog rows emitted before the
// barrier are the ones a consumer has applied when it commits that
// checkpoint. A recovery replays the records after the barrier onto the
// restored accumulators, so it emits exactly the rows the failed run emitted
// after the barrier, which the sinks had not committed.
package aggregate

import (
	"fmt"
	"slices"

	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// OpField is the name of the changelog's operation field, the last of each
// output row.
const OpField = "_op"

// The operations of a changelog row.
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Ops are the values of OpField as row values, made once.
var (
	opInsert = row.StringValue(OpInsert)
	opUpdate = row.StringValue(OpUpdate)
	opDelete = row.StringValue(OpDelete)
)

// Config is what the aggregate computes.
type Config struct {
	// Agg folds a key's records. Required. Its codec's name goes into the
	// checkpoint: a restore with other aggregates is refused.
	Agg window.Aggregate[row.Row, window.RowAcc]
	// Key makes the key's part of a result row (its fields) from key k; it
	// runs once per record. Required.
	Key func(k row.Value) row.Row
	// Result makes a new result row, without the operation, from the key's
	// part and accumulator acc; it must not change key. Required.
	Result func(key row.Row, acc window.RowAcc) row.Row
	// Having, when set, makes one subtask's visibility test: a result is
	// part of the output only while it returns true (SQL's HAVING). t is
	// the event time of the record that made the result.
	Having func() (func(r row.Row, t int64) (bool, error), error)
	// Retract, when set, says the input is Normalize's: a row whose field
	// Op is OpRetract is taken out of its group's accumulator with Retract
	// instead of added. Empty then reports a group that holds no row any
	// more, which is deleted.
	Retract func(acc window.RowAcc, r row.Row) window.RowAcc
	Empty   func(acc window.RowAcc) bool
	Op      int
}

// Rows applies the aggregate to ks and returns its changelog (see the
// package documentation).
func Rows(ks stream.KeyedStream[row.Row, row.Value], id string, cfg Config, opts ...stream.NodeOption) stream.Stream[row.Row] {
	if cfg.Agg.Init == nil || cfg.Agg.Add == nil || cfg.Agg.Codec == nil || cfg.Key == nil || cfg.Result == nil {
		ks.Pipeline().Errorf("aggregate %s: the aggregate needs Init, Add, a codec and a result function", id)
	}
	return process.Keyed(ks, id, func() process.Function[row.Row, row.Value, row.Row] { return &updating{cfg: cfg} }, opts...)
}

// updating is one subtask of the aggregate.
type updating struct {
	cfg    Config
	accs   *state.ValueState[row.Value, window.RowAcc]
	having func(row.Row, int64) (bool, error)
	// fresh are the keys whose stored accumulator was made since the last
	// checkpoint captured the state: no checkpoint holds it, so it may be
	// changed in place. INVARIANT: cleared at every Snapshotting.
	fresh map[row.Value]struct{}
}

// Snapshotting implements process.Snapshotter: from now on the stored
// accumulators may belong to the checkpoint.
func (u *updating) Snapshotting(int64) { clear(u.fresh) }

// Open implements process.Function.
func (u *updating) Open(s process.Setup[row.Value]) error {
	var err error
	u.fresh = map[row.Value]struct{}{}
	u.accs, err = state.NewValueState(s.State, "accumulators", s.KeyCodec, u.cfg.Agg.Codec)
	if err != nil {
		return err
	}
	if u.cfg.Having != nil {
		if u.having, err = u.cfg.Having(); err != nil {
			return err
		}
	}
	return nil
}

// visible reports whether result r (made at time t) is part of the output.
func (u *updating) visible(r row.Row, t int64) (bool, error) {
	if u.having == nil {
		return true, nil
	}
	ok, err := u.having(r, t)
	if err != nil {
		return false, fmt.Errorf("HAVING: %w", err)
	}
	return ok, nil
}

// ProcessRecord implements process.Function: it folds v into its key's
// accumulator and emits the change of the key's result, if any.
func (u *updating) ProcessRecord(c *process.Context[row.Value, row.Row], v row.Row) error {
	k := c.Key()
	old, had := u.accs.Get(k)
	retract := u.cfg.Retract != nil && v[u.cfg.Op] == opRetract
	if retract && !had {
		return fmt.Errorf("a retraction of a row of group %v, which holds no row: the changelog read deletes or updates a row it never inserted", k)
	}
	// The result before the record, made before the accumulator changes.
	var key, before row.Row // the key's fields, made once
	shown := false
	if had {
		key = u.cfg.Key(k)
		before = u.cfg.Result(key, old)
		var err error
		if shown, err = u.visible(before, c.Time()); err != nil {
			return err
		}
	}
	var acc window.RowAcc
	_, fresh := u.fresh[k]
	switch {
	case !had:
		acc = u.cfg.Agg.Init()
		u.fresh[k] = struct{}{}
	case u.cfg.Agg.Clone != nil && !fresh:
		// The stored accumulator may belong to a checkpoint being
		// written: it is copied once per checkpoint, then changed in place.
		acc = u.cfg.Agg.Clone(old)
		u.fresh[k] = struct{}{}
	default:
		acc = old
	}
	if retract {
		acc = u.cfg.Retract(acc, v)
	} else {
		acc = u.cfg.Agg.Add(acc, v)
	}
	if u.cfg.Empty != nil && u.cfg.Empty(acc) {
		// The group holds no row: it is no result any more.
		u.accs.Clear(k)
		delete(u.fresh, k)
		if shown {
			c.Emit(append(before, opDelete))
		}
		return nil
	}
	u.accs.Update(k, acc)

	if key == nil {
		key = u.cfg.Key(k)
	}
	now := u.cfg.Result(key, acc)
	show, err := u.visible(now, c.Time())
	if err != nil {
		return err
	}
	switch {
	case show && shown:
		if slices.Equal(before, now) {
			return nil // nothing changed for a consumer
		}
		c.Emit(append(now, opUpdate))
	case show:
		c.Emit(append(now, opInsert))
	case shown:
		c.Emit(append(before, opDelete))
	}
	return nil
}

// The operations of Normalize's output, in the changelog's operation field.
const (
	OpAdd     = "add"
	OpRetract = "retract"
)

var (
	opAdd     = row.StringValue(OpAdd)
	opRetract = row.StringValue(OpRetract)
)

// Normalize turns a changelog keyed as ks is into additions and
// retractions, which an aggregate over it applies (Config.Retract): an
// insert is an addition; an update retracts the key's previous row, then
// adds the new one; a delete retracts the previous row. The operation field
// at op says which (OpAdd, OpRetract). It keeps each key's last row in
// keyed state, so a group of another key than the changelog's can be told
// what a row replaced. signature names the rows' fields (stored by
// position): a checkpoint of rows of other fields is refused at restore.
func Normalize(ks stream.KeyedStream[row.Row, row.Value], id string, op int, signature string, opts ...stream.NodeOption) stream.Stream[row.Row] {
	return process.Keyed(ks, id, func() process.Function[row.Row, row.Value, row.Row] { return &normalizer{op: op, signature: signature} }, opts...)
}

// normalizer is one subtask of Normalize.
type normalizer struct {
	op        int
	signature string
	last      *state.ValueState[row.Value, row.Row]
}

// Open implements process.Function.
func (n *normalizer) Open(s process.Setup[row.Value]) error {
	var err error
	n.last, err = state.NewValueState(s.State, "last-rows", s.KeyCodec, namedRows{name: row.RowCodec{}.Name() + n.signature})
	return err
}

// namedRows is row.RowCodec under a name that holds the rows' fields.
type namedRows struct {
	row.RowCodec
	name string
}

func (c namedRows) Name() string { return c.name }

// ProcessRecord implements process.Function.
func (n *normalizer) ProcessRecord(c *process.Context[row.Value, row.Row], v row.Row) error {
	k := c.Key()
	if op := v[n.op].Str(); op != OpInsert && op != OpUpdate && op != OpDelete {
		return fmt.Errorf("a changelog row whose operation is %v, not insert, update or delete", v[n.op])
	}
	if old, had := n.last.Get(k); had {
		r := slices.Clone(old)
		r[n.op] = opRetract
		c.Emit(r)
	}
	if v[n.op].Str() == OpDelete {
		n.last.Clear(k)
		return nil
	}
	r := slices.Clone(v)
	r[n.op] = opAdd
	n.last.Update(k, r)
	c.Emit(r)
	return nil
}

// OnTimer implements process.Function; Normalize sets no timers.
func (n *normalizer) OnTimer(*process.Context[row.Value, row.Row], process.Domain) error { return nil }

// OnTimer implements process.Function; the aggregate sets no timers.
func (u *updating) OnTimer(*process.Context[row.Value, row.Row], process.Domain) error {
	return nil
}
