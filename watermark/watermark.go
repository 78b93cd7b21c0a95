// Package watermark derives a source subtask's watermark from the event
// times of the records it reads, split by split.
//
// Two strategies combine. Bounded out-of-orderness (MaxDelay): a split that
// has seen event times up to T promises nothing earlier than T - MaxDelay
// follows, so its watermark is T - MaxDelay - 1ns (a record exactly MaxDelay
// behind the newest one is still on time). Idleness (IdleTimeout): a split
// that produced nothing for IdleTimeout of processing time, and that its
// source has since seen with nothing more to read (CaughtUp), stops holding
// the subtask's watermark back; it holds it again as soon as it produces a
// record, or when the source has not seen it caught up for IdleTimeout. The
// subtask's watermark is the minimum over its active splits; when every
// split is idle (or it has none) the subtask is idle.
//
// Time alone never makes a split idle. A split the engine did not look at
// for a while (a long GC pause, VM steal, SIGSTOP, a busy machine) may hold
// records of that whole while; counting it idle would let the other splits'
// records of the same while move the watermark past them, and they would be
// dropped as late. Only the source can tell "nothing to read" from "not
// read": a Kafka partition's position at its end offset, a NATS consumer
// without pending messages, a file read to its end.
package watermark

import (
	"fmt"
	"math"
	"time"
)

// Min is the watermark of an input that has promised nothing yet.
const Min int64 = math.MinInt64

// Strategy says how a source turns event times into watermarks.
type Strategy struct {
	// MaxDelay is how far behind the newest event time of a split a record
	// may still arrive without being late. The default value is 0: each
	// split is in event-time order.
	MaxDelay time.Duration
	// IdleTimeout is how long a split may produce nothing before it stops
	// holding the watermark back, provided its source has seen it with
	// nothing more to read after that long (see Tracker.CaughtUp). The
	// default value 0 means never: a quiet split holds the watermark until
	// it produces again.
	IdleTimeout time.Duration
}

// Validate reports a negative duration.
func (s Strategy) Validate() error {
	if s.MaxDelay < 0 {
		return fmt.Errorf("max_delay %v must not be negative", s.MaxDelay)
	}
	if s.IdleTimeout < 0 {
		return fmt.Errorf("idle_timeout %v must not be negative", s.IdleTimeout)
	}
	return nil
}

// split is one split's progress.
type split struct {
	// max is the newest event time seen; valid when seen.
	max  int64
	seen bool
	// touched is set by Observe and cleared by Current, which then takes
	// the split as active at its now.
	touched bool
	// lastActive is the processing time (Unix ns) the split last produced.
	lastActive int64
	// caughtUp is the processing time (Unix ns) of the newest look at which
	// the source saw the split with nothing more to read; valid when proven.
	caughtUp int64
	proven   bool
	finished bool
}

// Tracker tracks the splits of one source subtask. It is not safe for
// concurrent use; a source subtask calls it from its own goroutine.
type Tracker struct {
	s      Strategy
	splits []split
	// emitted is the last watermark Current returned.
	// INVARIANT: emitted never decreases.
	emitted int64
}

// NewTracker returns a tracker with no splits.
func NewTracker(s Strategy) *Tracker {
	return &Tracker{s: s, emitted: Min}
}

// AddSplit adds a split, active from now (Unix ns), and returns its index.
func (t *Tracker) AddSplit(now int64) int {
	t.splits = append(t.splits, split{lastActive: now})
	return len(t.splits) - 1
}

// Observe records an event time read from split i. It is called per record
// and costs a comparison.
func (t *Tracker) Observe(i int, eventTime int64) {
	sp := &t.splits[i]
	if !sp.seen || eventTime > sp.max {
		sp.max, sp.seen = eventTime, true
	}
	sp.touched = true
}

// Finish marks split i as ended: it no longer holds the watermark back.
func (t *Tracker) Finish(i int) { t.splits[i].finished = true }

// CaughtUp records that the source looked at split i at processing time at
// (Unix ns) and found nothing more to read: every record available then has
// been passed to Observe. at must not be later than the look itself: for a
// request, the time it was sent, not the time its answer came. A look taken
// before the split's last record, or before that record plus IdleTimeout,
// proves nothing about the quiet that followed and does not make it idle.
//
// INVARIANT: a split is idle at now only when its newest look satisfies
// lastActive + IdleTimeout <= at and now - at <= IdleTimeout: a look counts
// for IdleTimeout, so a source keeps looking at its quiet splits at least
// that often, and a look from before a longer stall counts for nothing after
// it.
func (t *Tracker) CaughtUp(i int, at int64) {
	sp := &t.splits[i]
	if !sp.proven || at > sp.caughtUp {
		sp.caughtUp, sp.proven = at, true
	}
}

// Quiet reports whether split i, active, has produced nothing for
// IdleTimeout at processing time now, so that only a look finding nothing
// to read (CaughtUp) is missing to make it idle. Sources whose looks cost a
// request (Kafka: listing end offsets) ask it to look only at such splits.
func (t *Tracker) Quiet(i int, now int64) bool {
	sp := &t.splits[i]
	return t.s.IdleTimeout > 0 && !sp.finished && !sp.touched && now-sp.lastActive >= int64(t.s.IdleTimeout)
}

// idle reports whether sp, not touched since the last Current, is idle at
// now (see the invariant at CaughtUp).
func (t *Tracker) idle(sp *split, now int64) bool {
	it := int64(t.s.IdleTimeout)
	return it > 0 && sp.proven && sp.caughtUp-sp.lastActive >= it && now-sp.caughtUp <= it
}

// Current returns the subtask's watermark at processing time now (Unix ns)
// and whether the subtask is idle. The watermark never decreases: a split
// that rejoins behind it produces late records, it does not move it back.
func (t *Tracker) Current(now int64) (wm int64, idle bool) {
	wm = math.MaxInt64
	active := false
	for i := range t.splits {
		sp := &t.splits[i]
		if sp.finished {
			continue
		}
		if sp.touched {
			sp.touched, sp.lastActive = false, now
		} else if t.idle(sp, now) {
			continue
		}
		active = true
		w := Min
		if sp.seen {
			w = sp.max - int64(t.s.MaxDelay) - 1
			if w > sp.max { // overflow near MinInt64
				w = Min
			}
		}
		wm = min(wm, w)
	}
	if !active {
		return t.emitted, true
	}
	if wm > t.emitted {
		t.emitted = wm
	}
	return t.emitted, false
}
