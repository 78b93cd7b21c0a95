package testkit

import (
	"context"
	"time"

	"github.com/ingest-engine/ingest/clock"
)

// DriveClock runs a job's fake clock in steps until ctx ends: it advances
// fake by step, then waits until progress (a count of protocol events: the
// job's completed and failed checkpoints, restarts and attempts started)
// moves on before the
// next step. So each step of the job's time, one checkpoint interval
// typically, yields about one checkpoint however slow the machine is, and
// how much of a rate-limited stream lies between two checkpoints does not
// depend on the machine's speed. When progress does not move within
// patience of real time it steps anyway: patience only bounds how long a
// run can stall on an event the count misses, the outcome never depends on
// it.
//
// The job's driver looks at the checkpoint interval every 10 ms of the job's
// clock: a step shorter than that leaves some steps without a trigger.
//
// It returns when ctx is done; run it in its own goroutine.
func DriveClock(ctx context.Context, fake *clock.Fake, step, patience time.Duration, progress func() int64) {
	poll := time.NewTicker(200 * time.Microsecond)
	defer poll.Stop()
	for {
		last := progress()
		fake.Advance(step)
		deadline := time.Now().Add(patience)
		for progress() == last && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-poll.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// RunStepped calls run (a job's Run) with fake stepped by DriveClock until run
// returns, and returns its error. progress is the job's protocol event count
// (runtime.Stats.Progress); the job must have been built with fake as its
// clock.
func RunStepped(ctx context.Context, fake *clock.Fake, step time.Duration, run func(context.Context) error, progress func() int64) error {
	driving, stop := context.WithCancel(ctx)
	defer stop()
	go DriveClock(driving, fake, step, 10*time.Second, progress)
	return run(ctx)
}
