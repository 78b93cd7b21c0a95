package watermark

import (
	"testing"
	"time"
)

// Hostile cases of the watermark tracker. Each names the sentence of
// checkpointing.txt it defends and the issue item.

const sec = int64(time.Second)

// A stall of the engine itself (a long GC, VM steal, SIGSTOP) is not
// idleness. Three splits, idle_timeout 2s, all with records flowing; the
// engine pauses 3s; the first batch after the pause holds records of split a
// only. Splits b and c were not looked at for 3s, but nothing says they have
// nothing to read: they must keep holding the watermark, or their records of
// the pause come in behind it and are dropped as late.
//
// checkpointing.txt: "A restart must not lose accepted data" — nor may a
// run without any failure lose it; #12 item 4c.
func TestStallIsNotIdleness(t *testing.T) {
	tr := NewTracker(Strategy{IdleTimeout: 2 * time.Second})
	a, b, c := tr.AddSplit(0), tr.AddSplit(0), tr.AddSplit(0)
	// Records flow on every split until the pause begins at 1s.
	for now := int64(0); now <= 1*sec; now += sec / 10 {
		tr.Observe(a, now)
		tr.Observe(b, now)
		tr.Observe(c, now)
		if _, idle := tr.Current(now); idle {
			t.Fatalf("at %v: idle while every split produces", time.Duration(now))
		}
	}
	held := 1*sec - 1
	// The engine stops for 3s. At 4s the first batch holds split a's
	// records of the pause only.
	for ts := 1 * sec; ts <= 4*sec; ts += sec / 10 {
		tr.Observe(a, ts)
	}
	wm, idle := tr.Current(4 * sec)
	if wm != held || idle {
		t.Fatalf("first read after a 3s stall: watermark %v idle %v, want %v (splits b and c hold it: nothing says they have nothing to read)",
			time.Duration(wm), idle, time.Duration(held))
	}
	// b and c's records of the pause follow: none is late.
	for ts := 1*sec + sec/10; ts <= 4*sec; ts += sec / 10 {
		if ts <= wm {
			t.Fatalf("record at %v of split b is late behind watermark %v", time.Duration(ts), time.Duration(wm))
		}
		tr.Observe(b, ts)
		tr.Observe(c, ts)
	}
	if wm, _ := tr.Current(4*sec + 1); wm != 4*sec-1 {
		t.Fatalf("after every split's records of the pause: watermark %v, want %v", time.Duration(wm), time.Duration(4*sec-1))
	}
}

// A split that really has nothing to read still becomes idle: once its
// source has looked at it after the timeout and found it caught up. A look
// before the timeout proves nothing about the quiet after it; a look counts
// for idle_timeout, so one taken before a longer stall counts for nothing
// after it; a record makes the split active again at once.
//
// checkpointing.txt: "A restart must not lose accepted data"; #12 item 4c.
func TestIdleNeedsAFreshLook(t *testing.T) {
	tr := NewTracker(Strategy{IdleTimeout: 2 * time.Second})
	a, b := tr.AddSplit(0), tr.AddSplit(0)
	tr.Observe(a, 10)
	tr.Observe(b, 5)
	tr.Current(0)
	// b is drained at once, but a look at 1s is before its timeout.
	tr.CaughtUp(b, 1*sec)
	tr.Observe(a, 20)
	if wm, _ := tr.Current(2*sec + sec/2); wm != 4 {
		t.Fatalf("b looked at before its timeout: watermark %d, want b's 4", wm)
	}
	if !tr.Quiet(b, 2*sec+sec/2) || tr.Quiet(a, 2*sec+sec/2) {
		t.Fatalf("Quiet: b %v a %v, want b quiet (2.5s without records) and a not", tr.Quiet(b, 2*sec+sec/2), tr.Quiet(a, 2*sec+sec/2))
	}
	// A look after the timeout: b is idle, a alone sets the watermark.
	tr.CaughtUp(b, 2*sec+sec/2)
	tr.Observe(a, 30)
	if wm, idle := tr.Current(2*sec + sec/2); wm != 29 || idle {
		t.Fatalf("b caught up after its timeout: watermark %d idle %v, want a's 29, active", wm, idle)
	}
	// The engine stalls 3s. b's look is older than the timeout: b holds the
	// watermark again (it does not go back) until its source looks again.
	tr.Observe(a, 40)
	if wm, _ := tr.Current(5*sec + sec/2); wm != 29 {
		t.Fatalf("after a 3s stall b's look from before it counts: watermark %d, want 29 kept", wm)
	}
	tr.CaughtUp(b, 5*sec+sec/2)
	tr.Observe(a, 50)
	if wm, _ := tr.Current(5*sec + sec/2); wm != 49 {
		t.Fatalf("b looked at again after the stall: watermark %d, want a's 49", wm)
	}
	// Everything caught up: the subtask is idle.
	tr.CaughtUp(a, 8*sec)
	tr.CaughtUp(b, 8*sec)
	if wm, idle := tr.Current(8 * sec); wm != 49 || !idle {
		t.Fatalf("every split caught up: watermark %d idle %v, want 49 idle", wm, idle)
	}
	// A record read after a look was sent, whose answer (caught up) comes
	// after the record: the look is older than the record and proves
	// nothing about b's quiet after it.
	tr.Observe(b, 60)
	tr.CaughtUp(b, 8*sec+1)
	tr.Observe(a, 70)
	if wm, idle := tr.Current(9 * sec); wm != 59 || idle {
		t.Fatalf("b produced: watermark %d idle %v, want b's 59, active", wm, idle)
	}
	tr.Observe(a, 80)
	if wm, _ := tr.Current(10*sec + sec/2); wm != 59 {
		t.Fatalf("b's look from before its record made it idle: watermark %d, want 59", wm)
	}
}
