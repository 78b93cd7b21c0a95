package clock

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

// fired reports whether c holds a value, and which.
func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtItsDeadlineOnly(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("the timer fired 1s before its deadline")
	}
	f.Advance(time.Second)
	v, ok := fired(tm.C())
	if !ok || !v.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("at its deadline the timer sent %v, %v; want %v", v, ok, epoch.Add(10*time.Second))
	}
	if f.Waiters() != 0 {
		t.Fatalf("a fired timer still waits (%d waiters)", f.Waiters())
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it active")
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an active timer reported it inactive")
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	f.Advance(59 * time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a reset timer fired before its new deadline")
	}
	f.Advance(time.Second)
	if v, ok := fired(tm.C()); !ok || !v.Equal(epoch.Add(time.Hour+time.Minute)) {
		t.Fatalf("the reset timer sent %v, %v", v, ok)
	}
	// A timer that fired but was not read yet: Reset drops the stale value.
	tm.Reset(time.Second)
	f.Advance(time.Second)
	tm.Reset(time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stale value was received after Reset")
	}
	if tm := f.NewTimer(0); true {
		if _, ok := fired(tm.C()); !ok {
			t.Fatal("a timer of 0 did not fire at once")
		}
	}
}

func TestFakeTickerFiresEachPeriodAndDropsUntakenTicks(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Second)
	f.Advance(999 * time.Millisecond)
	if _, ok := fired(tk.C()); ok {
		t.Fatal("the ticker fired before its period")
	}
	f.Advance(time.Millisecond)
	if v, ok := fired(tk.C()); !ok || !v.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick %v, %v", v, ok)
	}
	// Five periods while nobody reads: one tick waits, the first one
	// (time.Ticker drops the later ones), and the next is a period on.
	f.Advance(5 * time.Second)
	if v, ok := fired(tk.C()); !ok || !v.Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("after five periods unread the tick is %v, %v; want the first one missed", v, ok)
	}
	if _, ok := fired(tk.C()); ok {
		t.Fatal("more than one tick was kept")
	}
	f.Advance(time.Second)
	if v, ok := fired(tk.C()); !ok || !v.Equal(epoch.Add(7*time.Second)) {
		t.Fatalf("next tick %v, %v", v, ok)
	}
	tk.Stop()
	f.Advance(time.Hour)
	if _, ok := fired(tk.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
}

// Timers fire in deadline order within one Advance, and Now during the
// firing is the deadline.
func TestFakeAdvanceFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	f.Advance(10 * time.Second)
	a, _ := fired(early.C())
	b, _ := fired(late.C())
	if !a.Equal(epoch.Add(time.Second)) || !b.Equal(epoch.Add(3*time.Second)) {
		t.Fatalf("fired at %v and %v", a, b)
	}
	if !f.Now().Equal(epoch.Add(10 * time.Second)) {
		t.Fatalf("Now %v after Advance", f.Now())
	}
}

func TestFakeWaitForWaiters(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- f.WaitForWaiters(ctx, 2)
	}()
	f.NewTimer(time.Second)
	f.NewTicker(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitForWaiters(ctx, 3); err == nil {
		t.Fatal("WaitForWaiters returned without 3 waiters")
	}
}

func TestWallTimer(t *testing.T) {
	c := OrWall(nil)
	tm := c.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(time.Minute):
		t.Fatal("a 1ms wall timer did not fire within a minute")
	}
	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Stop()
	if d := time.Since(c.Now()); d < 0 || d > time.Minute {
		t.Fatalf("wall Now is %v off", d)
	}
}
