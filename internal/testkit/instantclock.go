package testkit

import (
	"sync"
	"time"
)

// InstantClock is a clock (Now, After: runtime.RestartClock) whose time
// moves only when a pause is waited for: After advances it by the pause and
// fires at once. A restart strategy whose pauses add up to minutes then runs
// in milliseconds, and its budget is measured exactly. It is safe for
// concurrent use.
type InstantClock struct {
	mu     sync.Mutex
	now    time.Time
	pauses []time.Duration
	// onPause, when set, is called with the number of pauses so far before
	// each pause ends, under the clock's lock.
	onPause func(n int)
}

// NewInstantClock returns an InstantClock at a fixed instant.
func NewInstantClock() *InstantClock { return &InstantClock{now: time.Unix(1_700_000_000, 0)} }

// Now returns the clock's time.
func (c *InstantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After advances the clock by d and returns a channel that has fired.
func (c *InstantClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.pauses = append(c.pauses, d)
	if c.onPause != nil {
		c.onPause(len(c.pauses))
	}
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// Pauses returns the pauses waited for so far, in order.
func (c *InstantClock) Pauses() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.pauses...)
}

// AtPause calls f once the clock has waited for n more pauses than it has
// now: f(n) runs as the n-th of those pauses ends, before the waiter goes
// on, so it acts at a point of the waiter's progress, not of wall-clock
// time.
func (c *InstantClock) AtPause(n int, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := len(c.pauses) + n
	c.onPause = func(k int) {
		if k == at {
			f()
		}
	}
}
