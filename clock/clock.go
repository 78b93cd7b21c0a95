// Package clock is the time the runtime reads and waits on. The runtime never
// calls time.Now, time.NewTimer or time.NewTicker directly: it asks its
// Clock, so that a test can run a job on a Fake clock and decide when an
// interval, a timeout or a processing-time timer has passed, instead of
// assuming how much happens in a second of a machine that may be busy. Flink
// passes a Clock to its checkpoint coordinator and barrier handler for the
// same reason.
package clock

import "time"

// Clock reads the time and makes timers and tickers on it. Implementations
// are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that fires every d (d > 0); like
	// time.Ticker, it drops ticks a slow reader misses.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer of a Clock.
type Timer interface {
	// C is the channel the time is sent on when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it
	// (false if it had fired or was stopped already). Like time.Timer since
	// Go 1.23, no stale value is received from C after Stop returns.
	Stop() bool
	// Reset makes the timer fire d from now, as if new; it reports whether
	// it was active. No stale value is received from C after it returns.
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker of a Clock.
type Ticker interface {
	// C is the channel the ticks are sent on.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is sent after it returns.
	Stop()
}

// Wall returns the real clock: time.Now, time.NewTimer and time.NewTicker.
func Wall() Clock { return wall{} }

// OrWall returns c, or the wall clock when c is nil.
func OrWall(c Clock) Clock {
	if c == nil {
		return wall{}
	}
	return c
}

type wall struct{}

func (wall) Now() time.Time                   { return time.Now() }
func (wall) NewTimer(d time.Duration) Timer   { return wallTimer{time.NewTimer(d)} }
func (wall) NewTicker(d time.Duration) Ticker { return wallTicker{time.NewTicker(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time        { return w.t.C }
func (w wallTimer) Stop() bool                 { return w.t.Stop() }
func (w wallTimer) Reset(d time.Duration) bool { return w.t.Reset(d) }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

// After waits d on c and returns the channel the time is sent on, like
// time.After. The timer is not stopped if the caller stops waiting; use it
// where that is harmless (a restart pause).
func After(c Clock, d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
