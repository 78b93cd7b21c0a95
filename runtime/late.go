package runtime

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// This file is how operators report the late records they drop: a record
// behind the watermark whose window (or join partners) is gone. Dropping is
// Flink's default and sometimes right, but never silent: the runtime counts
// every drop per operator (Observation.LateRecords, exported as
// ingest_late_records_total{operator}), and warns at the first drop and then
// at most once every lateWarnEvery per operator, with the record's event
// time and the watermark, so that a watermark pushed ahead by an outlier or
// a too small max_delay shows at once in the log.

// lateWarnEvery is the least time between two warnings about the late
// records of one operator.
const lateWarnEvery = time.Minute

// Now returns the wall-clock time through Clock (time.Now when nil). Every
// reading of the wall clock that decides what happens to records goes
// through it (a source's max_future check, the late-record warnings), so a
// test can move time without sleeping.
func (c *Context) Now() time.Time {
	if c.Clock != nil {
		return c.Clock()
	}
	return time.Now()
}

// DroppedLate reports that the subtask dropped a late record with event time
// eventTime (Unix ns) at watermark watermark: it counts it for the operator
// and logs a warning for the first and then at most one every minute per
// operator (across its subtasks), saying how many came without one. It is
// cheap (two atomic operations and a clock reading). An operator whose
// Node.DropsLate is set calls it for every late record it drops; records it
// sends to a side output are not dropped.
func (c *Context) DroppedLate(eventTime, watermark int64) {
	if c.late == nil {
		c.late = &lateRecords{} // a context the runtime did not build (tests)
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c.late.drop(log, c.Task.Operator, c.Now(), eventTime, watermark)
}

// lateRecords counts one operator's dropped late records, over its subtasks
// and the job's attempts, and rate-limits the warnings about them. Its
// methods are safe for concurrent use.
type lateRecords struct {
	// n counts the drops.
	n atomic.Int64
	// next is the wall-clock time (Unix ns) from which the next drop warns;
	// 0 before the first warning.
	next atomic.Int64
	// unlogged counts the drops since the last warning that had none.
	unlogged atomic.Int64
}

// drop counts a late record of operator op dropped at wall-clock time now
// and warns when the last warning is lateWarnEvery old (or there was none).
func (l *lateRecords) drop(log *slog.Logger, op string, now time.Time, eventTime, watermark int64) {
	total := l.n.Add(1)
	ns := now.UnixNano()
	next := l.next.Load()
	if (next != 0 && ns < next) || !l.next.CompareAndSwap(next, ns+int64(lateWarnEvery)) {
		l.unlogged.Add(1)
		return
	}
	log.Warn("dropped a late record: its event time is behind the watermark, so its window (or join partners) is gone; "+
		"raise the source's max_delay, or send late records to a side output; at most one such warning a minute per operator",
		"operator", op, "event_time", formatEventTime(eventTime), "watermark", formatEventTime(watermark),
		"late_records_total", total, "unlogged_since_last_warning", l.unlogged.Swap(0))
}

// formatEventTime renders an event time (Unix ns) for messages: RFC 3339 in
// UTC, or the name of an extreme watermark.
func formatEventTime(t int64) string {
	switch t {
	case MinWatermark:
		return "min"
	case MaxWatermark:
		return "max (end of input)"
	}
	return time.Unix(0, t).UTC().Format(time.RFC3339Nano)
}

// lateOf returns the late-record counter of node id, created at its first
// subtask and kept across attempts. The caller holds the observer's mutex.
func (ob *observer) lateOf(id string) *lateRecords {
	if ob.late == nil {
		ob.late = map[string]*lateRecords{}
	}
	l := ob.late[id]
	if l == nil {
		l = &lateRecords{}
		ob.late[id] = l
	}
	return l
}

// lateRecords returns the late records dropped by every node that can drop
// them (Node.DropsLate, at 0 before the first drop) or did. The caller holds
// the observer's mutex.
func (ob *observer) lateRecords(p *Plan) map[string]int64 {
	out := map[string]int64{}
	for _, n := range p.Nodes {
		l := ob.late[n.ID]
		switch {
		case l != nil && (n.DropsLate || l.n.Load() > 0):
			out[n.ID] = l.n.Load()
		case n.DropsLate:
			out[n.ID] = 0
		}
	}
	return out
}
