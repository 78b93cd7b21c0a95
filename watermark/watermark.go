// Package watermark derives a source subtask's watermark from the event
// times of the records it reads, split by split.
//
// Two strategies combine. Bounded out-of-orderness (MaxDelay): a split that
// has seen event times up to T promises nothing earlier than T - MaxDelay
// follows, so its watermark is T - MaxDelay - 1ns (a record exactly MaxDelay
// behind the newest one is still on time). Idleness (IdleTimeout): a split
// that produced nothing for IdleTimeout of processing time stops holding the
// subtask's watermark back, and holds it again as soon as it produces a
// record. The subtask's watermark is the minimum over its active splits; when
// every split is idle (or it has none) the subtask is idle.
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
	// holding the watermark back. The default value 0 means never: a quiet
	// split holds the watermark until it produces again.
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
	finished   bool
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
		} else if t.s.IdleTimeout > 0 && now-sp.lastActive >= int64(t.s.IdleTimeout) {
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
