package clock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when Advance is called: timers and
// tickers fire, in deadline order, as the time passes their deadlines. A
// test drives a job on it by advancing the time and then waiting for an
// event of the protocol (a checkpoint completing, a record arriving), never
// for a duration of real time. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced when waiters change
}

// fakeWaiter is a timer (period 0) or a ticker of a Fake clock.
type fakeWaiter struct {
	c      chan time.Time
	at     time.Time
	period time.Duration
}

// NewFake returns a Fake clock at start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires once the time has advanced by d; at
// once when d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{c: make(chan time.Time, 1)}
	t := &fakeTimer{f: f, w: w}
	t.Reset(d)
	return t
}

// NewTicker returns a ticker that fires every d of advanced time. It panics
// when d <= 0, as time.NewTicker does.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic(fmt.Sprintf("clock: non-positive interval %v for NewTicker", d))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{c: make(chan time.Time, 1), at: f.now.Add(d), period: d}
	f.add(w)
	return &fakeTicker{f: f, w: w}
}

// Advance moves the time forward by d (d >= 0), firing every timer and
// ticker whose deadline it passes, in deadline order; a ticker fires once
// per period passed, dropping the ticks its reader has not taken, as
// time.Ticker does.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clock: Advance(%v) moves the time back", d))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		i := f.earliest()
		if i < 0 || f.waiters[i].at.After(end) {
			break
		}
		w := f.waiters[i]
		f.now = w.at
		select {
		case w.c <- w.at:
		default: // a tick the reader did not take yet: dropped
		}
		if w.period > 0 {
			w.at = w.at.Add(w.period)
		} else {
			f.remove(w)
		}
	}
	f.now = end
}

// Waiters returns how many timers and tickers are waiting for the time.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// WaitForWaiters waits until at least n timers and tickers wait for the
// time (the code under test is blocked on the clock), or until ctx ends.
func (f *Fake) WaitForWaiters(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		got, changed := len(f.waiters), f.changed
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("clock: %d waiters, want %d: %w", got, n, ctx.Err())
		}
	}
}

// earliest returns the index of the waiter with the earliest deadline, -1
// if none; the first added wins a tie. Called with f.mu held.
func (f *Fake) earliest() int {
	best := -1
	for i, w := range f.waiters {
		if best < 0 || w.at.Before(f.waiters[best].at) {
			best = i
		}
	}
	return best
}

// add and remove change the waiters; called with f.mu held.
func (f *Fake) add(w *fakeWaiter) {
	f.waiters = append(f.waiters, w)
	f.notify()
}

func (f *Fake) remove(w *fakeWaiter) bool {
	i := slices.Index(f.waiters, w)
	if i < 0 {
		return false
	}
	f.waiters = slices.Delete(f.waiters, i, i+1)
	f.notify()
	return true
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	drain(t.w.c)
	return t.f.remove(t.w)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.f.remove(t.w)
	drain(t.w.c)
	if d <= 0 {
		t.w.c <- t.f.now
		return active
	}
	t.w.at = later(t.f.now, d)
	t.f.add(t.w)
	return active
}

type fakeTicker struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTicker) C() <-chan time.Time { return t.w.c }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.remove(t.w)
	drain(t.w.c)
}

// later returns t+d, or the latest time when that overflows (a timer that
// is never meant to fire: time.Duration(math.MaxInt64)).
func later(t time.Time, d time.Duration) time.Time {
	if at := t.Add(d); !at.Before(t) {
		return at
	}
	return time.Unix(1<<62, 0)
}

// drain takes a value the channel holds, if any.
func drain(c chan time.Time) {
	select {
	case <-c:
	default:
	}
}
