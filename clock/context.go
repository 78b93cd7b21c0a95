package clock

import (
	"context"
	"sync"
	"time"
)

// WithTimeoutCause is context.WithTimeoutCause on c: the context is done,
// with ctx.Err() == context.DeadlineExceeded and context.Cause == cause (when
// cause is not nil), once d has passed on c, or when parent is done or
// cancel is called. On the wall clock (or nil) it is
// context.WithTimeoutCause. On any other clock the deadline passes only as
// that clock's time does, so a Fake clock decides when it has passed, however
// slow the machine is; such a context has no Deadline (a time of another
// clock is no wall-clock deadline), and a context derived from it reports
// context.Canceled when the time passes, with the same cause.
func WithTimeoutCause(parent context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if _, ok := OrWall(c).(wall); ok {
		return context.WithTimeoutCause(parent, d, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	inner, cancel := context.WithCancelCause(parent)
	ctx := &clockCtx{Context: inner}
	t := c.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			ctx.mu.Lock()
			if inner.Err() == nil { // else the parent or cancel came first
				ctx.expired = true
				cancel(cause)
			}
			ctx.mu.Unlock()
		case <-inner.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// clockCtx is a context whose deadline is on a Clock.
type clockCtx struct {
	context.Context
	mu      sync.Mutex
	expired bool // the time passed before the context was otherwise done
}

// Err returns context.DeadlineExceeded once the time has passed, as a
// context.WithTimeout's Err does.
func (c *clockCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Context.Err(); err == nil || !c.expired {
		return err
	}
	return context.DeadlineExceeded
}
