package aggregate

import (
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// CloseField says where a closing group's close time is.
type CloseField struct {
	// Index is the field's position in the input records, Key its position
	// among the key's fields (cfg.Key's row), Name its name for errors.
	Index, Key int
	Name       string
}

// Closing applies the aggregate to ks as groups that close: every record of
// a group holds the group's close time in field at, a time field that
// is part of the key (so the records of one group agree on it). Once the
// watermark passes a group's close time, no record of it can come on time:
// the aggregate emits the group's result once, with the close time as its
// event time and without an operation field, and forgets the group. The
// output is append-only: a stream of final rows, not a changelog.
//
// It is what a GROUP BY becomes when the planner knows when each group's
// records stop: q4's maximum bid per auction, over an interval join whose
// left side is unique by the auction's id and bounds each pair by the
// auction's expiry, closes at the expiry.
//
// A record whose close time the watermark has passed is late: its group was
// emitted, or would have been. It is dropped and counted
// (Context.DropLate). A record whose close field is not a time (NULL) fails
// the job, unrecoverably: its group would never close. cfg.Retract must be nil (the input
// is append-only); cfg.Having, when set, decides whether a closed group's
// result is emitted.
func Closing(ks stream.KeyedStream[row.Row, row.Value], id string, cfg Config, at CloseField, opts ...stream.NodeOption) stream.Stream[row.Row] {
	if cfg.Agg.Init == nil || cfg.Agg.Add == nil || cfg.Agg.Codec == nil || cfg.Key == nil || cfg.Result == nil {
		ks.Pipeline().Errorf("aggregate %s: the aggregate needs Init, Add, a codec and a result function", id)
	}
	if cfg.Retract != nil {
		ks.Pipeline().Errorf("aggregate %s: groups that close read an append-only input, not a changelog", id)
	}
	return process.Keyed(ks, id, func() process.Function[row.Row, row.Value, row.Row] {
		return &closing{cfg: cfg, at: at}
	}, opts...)
}

// closing is one subtask of Closing.
type closing struct {
	cfg Config
	at  CloseField
	// accs holds each open group's accumulator; each open group has an
	// event-time timer at its close time + 1ns.
	// INVARIANT: a group has an accumulator iff its timer is set.
	accs   *state.ValueState[row.Value, stampedAcc]
	having func(row.Row, int64) (bool, error)
	// gen counts the checkpoints that captured the state: an accumulator
	// stamped with gen was made since the last one, so no checkpoint holds
	// it and it may be changed in place (as updating's fresh, without a
	// second map). INVARIANT: incremented at every Snapshotting; restored
	// accumulators are stamped 0, and gen starts at 1.
	gen uint64
}

// stampedAcc is an accumulator with the gen it was made in (not stored).
type stampedAcc struct {
	gen uint64
	acc window.RowAcc
}

// stampedCodec stores a stampedAcc as its accumulator alone, under the
// accumulator codec's name; a decoded one is stamped 0 (held by a
// checkpoint).
type stampedCodec struct{ acc state.Codec[window.RowAcc] }

func (c stampedCodec) Name() string { return c.acc.Name() }
func (c stampedCodec) Append(dst []byte, v stampedAcc) []byte {
	return c.acc.Append(dst, v.acc)
}
func (c stampedCodec) Decode(src []byte) (stampedAcc, int, error) {
	a, n, err := c.acc.Decode(src)
	return stampedAcc{acc: a}, n, err
}

// Snapshotting implements process.Snapshotter.
func (u *closing) Snapshotting(int64) { u.gen++ }

// Open implements process.Function.
func (u *closing) Open(s process.Setup[row.Value]) error {
	var err error
	u.gen = 1
	if u.accs, err = state.NewValueState(s.State, "closing-accumulators", s.KeyCodec, state.Codec[stampedAcc](stampedCodec{u.cfg.Agg.Codec})); err != nil {
		return err
	}
	if u.cfg.Having != nil {
		if u.having, err = u.cfg.Having(); err != nil {
			return err
		}
	}
	return nil
}

// fireAt is the timer of a group closing at t: the first instant the
// watermark has passed t, saturated (a group closing at the end of time
// closes when the input ends).
func fireAt(t int64) int64 {
	if t == math.MaxInt64 {
		return t
	}
	return t + 1
}

// ProcessRecord implements process.Function: it folds v into its group,
// opening the group (and its timer) at its first record.
func (u *closing) ProcessRecord(c *process.Context[row.Value, row.Row], v row.Row) error {
	cv := v[u.at.Index]
	if cv.Kind() != row.Time {
		// A restart would read the same record again.
		return fmt.Errorf("a record whose %s is %v, not a time: its group would never close: %w", u.at.Name, cv, runtime.ErrUnrecoverable)
	}
	t := cv.Int()
	if t < c.Watermark() {
		// The group closed (or would have, had it had a record).
		c.DropLate()
		return nil
	}
	k := c.Key()
	old, had := u.accs.Get(k)
	var acc window.RowAcc
	switch {
	case !had:
		acc = u.cfg.Agg.Init()
		c.SetTimer(process.EventTime, fireAt(t))
	case u.cfg.Agg.Clone != nil && old.gen != u.gen:
		acc = u.cfg.Agg.Clone(old.acc)
	default:
		acc = old.acc
	}
	u.accs.Update(k, stampedAcc{gen: u.gen, acc: u.cfg.Agg.Add(acc, v)})
	return nil
}

// OnTimer implements process.Function: the watermark passed the group's
// close time, so its result is final.
func (u *closing) OnTimer(c *process.Context[row.Value, row.Row], d process.Domain) error {
	if d != process.EventTime {
		return fmt.Errorf("a %v timer: groups close in event time only", d)
	}
	k := c.Key()
	st, had := u.accs.Get(k)
	if !had {
		return fmt.Errorf("group %v closed at %s holds no accumulator", k, time.Unix(0, c.Time()).UTC().Format(time.RFC3339Nano))
	}
	u.accs.Clear(k)
	key := u.cfg.Key(k)
	res := u.cfg.Result(key, st.acc)
	close := key[u.at.Key].Int()
	if u.having != nil {
		ok, err := u.having(res, close)
		if err != nil {
			return fmt.Errorf("HAVING: %w", err)
		}
		if !ok {
			return nil
		}
	}
	c.EmitAt(res, close)
	return nil
}
