package runtime

import (
	"strings"
	"testing"
	"time"
)

// sec is a duration in seconds, for tables of pauses.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// The default strategy's pauses double from 1 s to the 1 min cap, and it
// gives up at the first failure 10 minutes or more after the streak's first
// one: at t = 603 s, after 15 restarts. (#12 item 4d)
func TestBackoffDefaultSequence(t *testing.T) {
	o := DefaultRestartOptions()
	o.Jitter = 0
	b := newBackoff(o)
	now := time.Unix(1000, 0)
	want := []float64{1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60, 60, 60, 60, 60}
	for i, w := range want {
		d, err := b.failed(now, false, 0.5)
		if err != nil {
			t.Fatalf("failure %d at +%v: gave up (%v), want a pause of %vs", i+1, now.Sub(time.Unix(1000, 0)), err, w)
		}
		if d != sec(w) {
			t.Fatalf("failure %d: pause %v, want %vs", i+1, d, w)
		}
		now = now.Add(d)
	}
	_, err := b.failed(now, false, 0.5)
	if err == nil || !strings.Contains(err.Error(), "15 restarts over 10m3s") || !strings.Contains(err.Error(), "restart budget of 10m0s") {
		t.Fatalf("failure at +603s = %v, want giving up after 15 restarts over 10m3s", err)
	}
}

// A completed checkpoint resets the pause to Delay and starts a new budget:
// a job that fails every few minutes but checkpoints in between restarts
// for ever, each time after the initial pause.
func TestBackoffResetsAfterCompletedCheckpoint(t *testing.T) {
	o := DefaultRestartOptions()
	o.Jitter = 0
	b := newBackoff(o)
	now := time.Unix(0, 0)
	for i := range 5 { // a streak: 1, 2, 4, 8, 16 s
		d, err := b.failed(now, false, 0)
		if err != nil || d != sec(float64(int(1)<<i)) {
			t.Fatalf("streak failure %d: %v, %v", i, d, err)
		}
		now = now.Add(d)
	}
	for i := range 100 { // then a failure after a checkpoint every 9 minutes: 15 hours
		now = now.Add(9 * time.Minute)
		d, err := b.failed(now, true, 0)
		if err != nil || d != time.Second {
			t.Fatalf("failure %d after a completed checkpoint: pause %v, %v; want 1s", i, d, err)
		}
	}
}

// MaxAttempts alone is the former fixed-delay strategy: n restarts in a row,
// then the error; RestartOptions{} never restarts.
func TestBackoffFixedDelayAttempts(t *testing.T) {
	b := newBackoff(RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 3})
	now := time.Unix(0, 0)
	for i := range 3 {
		d, err := b.failed(now, false, 0.9)
		if err != nil || d != 5*time.Millisecond {
			t.Fatalf("failure %d: %v, %v; want 5ms", i, d, err)
		}
		now = now.Add(time.Hour) // no time budget
	}
	if _, err := b.failed(now, false, 0); err == nil || err.Error() != "3 restarts in a row did not help" {
		t.Fatalf("fourth failure = %v, want 3 restarts in a row did not help", err)
	}
	if _, err := newBackoff(RestartOptions{}).failed(now, false, 0); err == nil {
		t.Fatal("RestartOptions{} restarted")
	}
}

// Jitter spreads a pause by up to ±Jitter, from the random input.
func TestBackoffJitter(t *testing.T) {
	o := DefaultRestartOptions() // jitter 0.1
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{{0, 900 * time.Millisecond}, {0.5, time.Second}, {0.999999, 1100 * time.Millisecond}} {
		d, err := newBackoff(o).failed(time.Unix(0, 0), false, c.u)
		if err != nil || (d-c.want).Abs() > time.Millisecond {
			t.Errorf("u=%v: pause %v, %v; want %v", c.u, d, err, c.want)
		}
	}
}

// Validate refuses strategies that never end or make no sense, with a
// sentence; the defaults and the former fixed-delay literals pass.
func TestRestartOptionsValidate(t *testing.T) {
	for _, ok := range []RestartOptions{DefaultRestartOptions(), {}, {Delay: time.Millisecond, MaxAttempts: 3}, {Delay: time.Second, Multiplier: 1, GiveUpAfter: time.Minute}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", ok, err)
		}
	}
	d := DefaultRestartOptions()
	for _, c := range []struct {
		edit func(*RestartOptions)
		want string
	}{
		{func(o *RestartOptions) { o.Delay = -1 }, "delay -1ns must not be negative"},
		{func(o *RestartOptions) { o.MaxDelay = 0 }, "needs a max delay"},
		{func(o *RestartOptions) { o.MaxDelay = time.Millisecond }, "max delay 1ms is shorter than the delay 1s"},
		{func(o *RestartOptions) { o.Multiplier = 0.5 }, "would shrink the delay"},
		{func(o *RestartOptions) { o.Delay = 0 }, "with a zero delay never grows"},
		{func(o *RestartOptions) { o.Jitter = 1 }, "jitter 1 must be at least 0 and below 1"},
		{func(o *RestartOptions) { o.GiveUpAfter = -time.Second }, "must not be negative"},
		{func(o *RestartOptions) { o.MaxAttempts = -1 }, "max attempts -1 must not be negative"},
	} {
		o := d
		c.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", o, err, c.want)
		}
	}
}

// String says in a line what the strategy does, as ingest validate prints it.
func TestRestartOptionsString(t *testing.T) {
	for _, c := range []struct {
		o    RestartOptions
		want string
	}{
		{DefaultRestartOptions(), "exponential delay 1s ×2 up to 1m0s ±10%, for at most 10m0s without a completed checkpoint"},
		{RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 3}, "fixed delay 5ms, at most 3 in a row without a completed checkpoint"},
		{RestartOptions{}, "off (a failure ends the job)"},
	} {
		if got := c.o.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}
