package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// On a Fake clock the context's deadline passes when the clock's time does,
// not after that much real time.
func TestWithTimeoutCauseFollowsTheFakeClock(t *testing.T) {
	f := NewFake(epoch)
	cause := errors.New("too slow")
	ctx, cancel := WithTimeoutCause(context.Background(), f, time.Millisecond, cause)
	defer cancel()
	if n := f.Waiters(); n != 1 {
		t.Fatalf("%d timers wait on the clock, want the context's", n)
	}
	f.Advance(999 * time.Microsecond)
	time.Sleep(10 * time.Millisecond) // a real-time deadline would pass meanwhile
	if err := ctx.Err(); err != nil {
		t.Fatalf("1ms before the deadline on the clock: Err = %v", err)
	}
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a deadline on a fake clock reported as a wall-clock Deadline")
	}
	f.Advance(time.Microsecond)
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the context is not done once the clock passed its deadline")
	}
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want context.DeadlineExceeded", err)
	}
	if got := context.Cause(ctx); got != cause {
		t.Fatalf("Cause = %v, want %v", got, cause)
	}
}

// Cancelling, or the parent ending, is not the deadline passing; either
// stops the context's timer.
func TestWithTimeoutCauseCancelled(t *testing.T) {
	f := NewFake(epoch)
	ctx, cancel := WithTimeoutCause(context.Background(), f, time.Second, errors.New("too slow"))
	cancel()
	<-ctx.Done()
	if err := ctx.Err(); err != context.Canceled {
		t.Fatalf("after cancel: Err = %v, want context.Canceled", err)
	}
	parent, cancelParent := context.WithCancelCause(context.Background())
	gone := errors.New("parent gone")
	ctx2, cancel2 := WithTimeoutCause(parent, f, time.Second, errors.New("too slow"))
	defer cancel2()
	cancelParent(gone)
	<-ctx2.Done()
	if err, cause := ctx2.Err(), context.Cause(ctx2); err != context.Canceled || cause != gone {
		t.Fatalf("after the parent ended: Err, Cause = %v, %v; want context.Canceled, %v", err, cause, gone)
	}
	deadline := time.Now().Add(time.Minute)
	for f.Waiters() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers still wait after both contexts ended", f.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
	f.Advance(time.Hour)
	if err := ctx2.Err(); err != context.Canceled {
		t.Fatalf("the time passing after the parent ended changed Err to %v", err)
	}
}

// On the wall clock it is context.WithTimeoutCause: a wall-clock Deadline.
func TestWithTimeoutCauseOnTheWallClock(t *testing.T) {
	for _, c := range []Clock{nil, Wall()} {
		ctx, cancel := WithTimeoutCause(context.Background(), c, time.Hour, nil)
		if d, ok := ctx.Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Errorf("clock %v: Deadline = %v, %v; want about an hour from now", c, d, ok)
		}
		cancel()
	}
}
