package watermark

import (
	"testing"
	"time"
)

func TestBoundedOutOfOrderness(t *testing.T) {
	tr := NewTracker(Strategy{MaxDelay: 4 * time.Second})
	s := tr.AddSplit(0)
	if wm, idle := tr.Current(0); wm != Min || idle {
		t.Fatalf("before any record: %d idle=%v, want Min, active", wm, idle)
	}
	tr.Observe(s, int64(10*time.Second))
	tr.Observe(s, int64(7*time.Second)) // out of order, within the delay
	if wm, _ := tr.Current(1); wm != int64(6*time.Second)-1 {
		t.Fatalf("watermark %d, want 6s-1ns", wm)
	}
}

func TestMinimumOverSplitsAndIdleness(t *testing.T) {
	const sec = int64(time.Second)
	tr := NewTracker(Strategy{IdleTimeout: 5 * time.Second})
	a, b := tr.AddSplit(0), tr.AddSplit(0)
	tr.Observe(a, 100)
	tr.Observe(b, 50)
	if wm, _ := tr.Current(1 * sec); wm != 49 {
		t.Fatalf("watermark %d, want the slower split's 49", wm)
	}
	// b goes quiet; a keeps producing. Before the timeout b holds it back.
	tr.Observe(a, 200)
	if wm, _ := tr.Current(4 * sec); wm != 49 {
		t.Fatalf("watermark %d before b's idle timeout, want 49", wm)
	}
	tr.Observe(a, 300)
	tr.CaughtUp(b, 6*sec) // the source found nothing more to read in b
	if wm, idle := tr.Current(6 * sec); wm != 299 || idle {
		t.Fatalf("after b idled: %d idle=%v, want 299 active", wm, idle)
	}
	// b rejoins behind the watermark: it holds back again, but the
	// watermark does not go back.
	tr.Observe(b, 60)
	if wm, _ := tr.Current(7 * sec); wm != 299 {
		t.Fatalf("after b rejoined behind: %d, want 299 kept", wm)
	}
	tr.Observe(a, 400)
	if wm, _ := tr.Current(8 * sec); wm != 299 {
		t.Fatalf("b (at 60) holds the watermark at 299: got %d", wm)
	}
	// Everything idle: the subtask is idle and keeps its watermark.
	tr.CaughtUp(a, 20*sec)
	tr.CaughtUp(b, 20*sec)
	if wm, idle := tr.Current(20 * sec); wm != 299 || !idle {
		t.Fatalf("all idle: %d idle=%v, want 299 idle", wm, idle)
	}
	tr.Finish(b)
	tr.Observe(a, 500)
	if wm, idle := tr.Current(21 * sec); wm != 499 || idle {
		t.Fatalf("b finished: %d idle=%v, want 499 active", wm, idle)
	}
}

func TestNoSplitsIsIdle(t *testing.T) {
	if _, idle := NewTracker(Strategy{}).Current(0); !idle {
		t.Fatal("a subtask without splits must be idle, or it holds every downstream watermark")
	}
}

func TestNoIdleTimeoutHoldsForever(t *testing.T) {
	tr := NewTracker(Strategy{})
	a, _ := tr.AddSplit(0), tr.AddSplit(0)
	tr.Observe(a, 10)
	if wm, idle := tr.Current(int64(time.Hour)); wm != Min || idle {
		t.Fatalf("got %d idle=%v: without idle_timeout a quiet split holds the watermark", wm, idle)
	}
}

func TestValidate(t *testing.T) {
	if err := (Strategy{MaxDelay: -1}).Validate(); err == nil {
		t.Fatal("negative max_delay accepted")
	}
	if err := (Strategy{IdleTimeout: -1}).Validate(); err == nil {
		t.Fatal("negative idle_timeout accepted")
	}
}

func BenchmarkObserve(b *testing.B) {
	tr := NewTracker(Strategy{MaxDelay: time.Second})
	s := tr.AddSplit(0)
	for i := 0; i < b.N; i++ {
		tr.Observe(s, int64(i))
	}
}
