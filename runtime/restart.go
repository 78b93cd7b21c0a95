package runtime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/clock"
)

// RestartOptions is the restart strategy of a job: after a failure the job
// restarts in process from its last complete checkpoint, after a pause that
// grows exponentially while restarts keep failing, and gives up once they
// have failed for a time budget without a completed checkpoint (Flink's
// exponential-delay strategy, with a budget in time rather than in
// attempts). A completed checkpoint proves the job makes progress again: it
// resets the pause to Delay and starts a new budget.
//
// Start from DefaultRestartOptions. Zero fields keep a literal written for
// the former fixed-delay strategy meaningful: RestartOptions{Delay: d,
// MaxAttempts: n} is a fixed delay d with at most n restarts in a row, and
// RestartOptions{} never restarts.
type RestartOptions struct {
	// Delay is the pause before the first restart after a completed
	// checkpoint (or after the start), and the least pause of any restart.
	// The default value is 1s. Flink: restart-strategy.exponential-delay.initial-backoff.
	Delay time.Duration
	// MaxDelay caps the pause. It is required (and at least Delay) when
	// Multiplier is above 1, so that a pause never outgrows the budget.
	// The default value is 1m. Flink: restart-strategy.exponential-delay.max-backoff.
	MaxDelay time.Duration
	// Multiplier is what each restart in a row multiplies the pause by:
	// 1 s, 2 s, 4 s … with 2. 0 and 1 mean a fixed pause of Delay.
	// The default value is 2. Flink: restart-strategy.exponential-delay.backoff-multiplier (1.5 there).
	Multiplier float64
	// Jitter varies each pause at random by up to this fraction either way
	// (0.1: ±10 %), so that jobs that failed together, because a store they
	// share went down, do not all come back at the same instant. 0 disables
	// it; it must be below 1.
	// The default value is 0.1. Flink: restart-strategy.exponential-delay.jitter-factor.
	Jitter float64
	// GiveUpAfter is the time budget: a failure that comes GiveUpAfter or
	// more after the first failure since the last completed checkpoint (or
	// the start) ends Run with the error instead of restarting. An outage of
	// a store or destination shorter than the budget is ridden out; a job
	// that cannot complete a checkpoint for that long stops, and says so.
	// Zero means no time budget (MaxAttempts must then be set, or the job
	// never restarts).
	// The default value is 10m.
	GiveUpAfter time.Duration
	// MaxAttempts caps the restarts in a row without a completed checkpoint
	// in between; one more failure ends Run with the error. Zero means no
	// cap: GiveUpAfter bounds the restarts. When both MaxAttempts and
	// GiveUpAfter are zero the job never restarts (Flink's no-restart).
	// The default value is 0. Flink: restart-strategy.fixed-delay.attempts.
	MaxAttempts int
	// Clock measures the budget and waits out the pauses; nil is the wall
	// clock. Tests give a fake one, so that a strategy whose pauses add up
	// to minutes runs in milliseconds. Its dynamic type must be comparable
	// (a pointer, say): options are compared with their zero value.
	Clock RestartClock
}

// DefaultRestartOptions returns the documented defaults: a pause of 1 s
// doubling up to 1 min, ±10 % jitter, giving up after 10 minutes of failures
// without a completed checkpoint.
func DefaultRestartOptions() RestartOptions {
	return RestartOptions{Delay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: 0.1, GiveUpAfter: 10 * time.Minute}
}

// Validate says what is wrong with o, or returns nil.
func (o RestartOptions) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case o.Delay < 0:
		add("delay %v must not be negative", o.Delay)
	case o.MaxDelay < 0:
		add("max delay %v must not be negative", o.MaxDelay)
	case o.MaxDelay > 0 && o.MaxDelay < o.Delay:
		add("max delay %v is shorter than the delay %v", o.MaxDelay, o.Delay)
	}
	switch {
	case o.Multiplier < 0 || math.IsNaN(o.Multiplier) || math.IsInf(o.Multiplier, 0):
		add("multiplier %v must be 0 (fixed delay) or at least 1", o.Multiplier)
	case o.Multiplier > 0 && o.Multiplier < 1:
		add("multiplier %v would shrink the delay: use 1 for a fixed delay", o.Multiplier)
	case o.Multiplier > 1 && o.MaxDelay == 0:
		add("multiplier %v needs a max delay: without one the delay outgrows any budget", o.Multiplier)
	case o.Multiplier > 1 && o.Delay == 0 && (o.GiveUpAfter > 0 || o.MaxAttempts > 0):
		add("multiplier %v with a zero delay never grows: give a positive delay, or multiplier 1", o.Multiplier)
	}
	if o.Jitter < 0 || o.Jitter >= 1 || math.IsNaN(o.Jitter) {
		add("jitter %v must be at least 0 and below 1", o.Jitter)
	}
	if o.GiveUpAfter < 0 {
		add("give up after %v must not be negative", o.GiveUpAfter)
	}
	if o.MaxAttempts < 0 {
		add("max attempts %d must not be negative", o.MaxAttempts)
	}
	return errors.Join(errs...)
}

// String describes the strategy in a line, as ingest validate prints it.
func (o RestartOptions) String() string {
	if o.GiveUpAfter == 0 && o.MaxAttempts == 0 {
		return "off (a failure ends the job)"
	}
	var s string
	if o.Multiplier > 1 {
		s = fmt.Sprintf("exponential delay %s ×%s up to %s", o.Delay, strconv.FormatFloat(o.Multiplier, 'g', -1, 64), o.MaxDelay)
	} else {
		s = fmt.Sprintf("fixed delay %s", o.Delay)
	}
	if o.Jitter > 0 {
		s += fmt.Sprintf(" ±%s%%", strconv.FormatFloat(o.Jitter*100, 'g', -1, 64))
	}
	var limits []string
	if o.GiveUpAfter > 0 {
		limits = append(limits, fmt.Sprintf("for at most %s", o.GiveUpAfter))
	}
	if o.MaxAttempts > 0 {
		limits = append(limits, fmt.Sprintf("at most %d in a row", o.MaxAttempts))
	}
	return s + ", " + strings.Join(limits, " and ") + " without a completed checkpoint"
}

// RestartClock is the time a restart strategy reads and waits on. It is the
// part of a clock the strategy needs; a runtime-wide clock that has these
// two methods can take its place.
type RestartClock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// restartClock returns Restart.Clock, or else the job's clock.
func (j *Job) restartClock() RestartClock {
	if j.opts.Restart.Clock != nil {
		return j.opts.Restart.Clock
	}
	return restartOn{j.clock}
}

// restartOn is the RestartClock of a clock.Clock.
type restartOn struct{ c clock.Clock }

func (r restartOn) Now() time.Time                         { return r.c.Now() }
func (r restartOn) After(d time.Duration) <-chan time.Time { return clock.After(r.c, d) }

// backoff is the state of a restart strategy between failures. Like the
// checkpoint coordinator it reads no clock and draws no random numbers: the
// time of each failure and the random value of its jitter are inputs, so
// every sequence of pauses can be tested exactly.
type backoff struct {
	o RestartOptions // immutable

	// streak counts the restarts since the last completed checkpoint (or
	// the start).
	streak int
	// first is the time of the first failure of the streak; zero when
	// streak is 0.
	first time.Time
	// pause is the pause before the next restart, before jitter.
	// INVARIANT: Delay <= pause <= max(Delay, MaxDelay).
	pause time.Duration
}

func newBackoff(o RestartOptions) *backoff { return &backoff{o: o, pause: o.Delay} }

// failed records an attempt failure at now. progressed says whether a
// checkpoint completed during that attempt: it resets the pause and the
// budget. u, in [0, 1), draws the jitter. failed returns the pause before the
// restart, or an error saying why the strategy gives up.
func (b *backoff) failed(now time.Time, progressed bool, u float64) (time.Duration, error) {
	o := b.o
	if progressed {
		b.streak, b.first, b.pause = 0, time.Time{}, o.Delay
	}
	if b.streak == 0 {
		b.first = now
	}
	switch elapsed := now.Sub(b.first); {
	case o.GiveUpAfter == 0 && o.MaxAttempts == 0:
		return 0, errors.New("restarts are off")
	case o.MaxAttempts > 0 && b.streak >= o.MaxAttempts:
		return 0, fmt.Errorf("%d restarts in a row did not help", b.streak)
	case o.GiveUpAfter > 0 && elapsed >= o.GiveUpAfter:
		return 0, fmt.Errorf("%d restarts over %v did not help: no checkpoint completed within the restart budget of %v",
			b.streak, elapsed.Round(time.Millisecond), o.GiveUpAfter)
	}
	d := b.pause
	if o.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + o.Jitter*(2*u-1)))
	}
	b.streak++
	if o.Multiplier > 1 {
		next := float64(b.pause) * o.Multiplier
		b.pause = time.Duration(min(next, float64(o.MaxDelay)))
	}
	return d, nil
}

// remaining returns how much of the budget is left at now, for the log; 0
// when there is no time budget.
func (b *backoff) remaining(now time.Time) time.Duration {
	if b.o.GiveUpAfter == 0 {
		return 0
	}
	return max(b.o.GiveUpAfter-now.Sub(b.first), 0)
}

// ErrUnrecoverable marks a failure no restart can cure that is not about the
// checkpoint: a destination that refuses a record's value or violates a
// constraint the same way on every replay, a sink configured against
// another's tables. Connectors wrap their permanent errors with it (as
// franz-go's kerr marks errors not retriable); Run returns them at once
// instead of restarting. A checkpoint that does not fit the pipeline is
// ErrIncompatible instead.
var ErrUnrecoverable = errors.New("unrecoverable failure")
