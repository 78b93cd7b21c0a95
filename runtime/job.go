package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// Options configures a Job.
type Options struct {
	// Checkpoint configures checkpointing; start from checkpoint.DefaultOptions.
	Checkpoint checkpoint.Options
	// Storage keeps the checkpoints. Required.
	Storage storage.Storage
	// Restart is the restart strategy; start from DefaultRestartOptions.
	Restart RestartOptions
	// Log receives the job's log; nil discards it.
	Log *slog.Logger
	// AllowDuplicates lets recovery fall back from a damaged newest
	// checkpoint to an older one even though a sink already published output
	// of a checkpoint after the older one (or cannot tell): that output is
	// then published again, at-least-once for this recovery. Without it such
	// a recovery is refused with an error that explains the choice.
	// The default value is false. CLI: ingest run --allow-duplicates.
	AllowDuplicates bool
	// AllowNonRestoredState lets a job restore a checkpoint that holds state
	// of operators the pipeline no longer has: that state (and the unpublished
	// output of removed sinks) is dropped, each operator logged. Without it
	// such a restore is refused. Flink: --allowNonRestoredState.
	// The default value is false. CLI: ingest run --allow-non-restored-state.
	AllowNonRestoredState bool
	// AcceptLostOutput lets commits publish what is left of staged output
	// that was deleted or damaged outside the protocol (a staged file gone or
	// failing its checksum), logging each item left out, instead of stopping
	// the job: an explicit acceptance of data loss (--accept-lost-output).
	AcceptLostOutput bool
	// Clock is the time the job reads and waits on: the checkpoint
	// interval, timeouts and alignment, source rate waits, processing-time
	// timers, the restart strategy (unless Restart.Clock is set) and the
	// times in the job's status. Nil is the wall clock. A test runs a job on
	// a clock.Fake and advances it, instead of assuming how much happens in
	// a second of real time. Durations of work (how long a write took) are
	// measured on the wall clock whatever this is.
	Clock clock.Clock
	// LSM keeps keyed state in Pebble stores on local disk, for state
	// larger than memory, when set (see state.NewLSMBackend); nil keeps it
	// in memory. YAML: state: {backend: pebble, dir: ..., cache: ...}.
	LSM *state.LSMOptions
}

// Stats are counters of a job, safe to read while it runs.
type Stats struct {
	// Restarts is the number of in-process restarts after failures, counted
	// when the restart's pause begins.
	Restarts int64
	// Attempts counts the attempts whose tasks started (the first run and
	// each restart that got as far as running), counted once the attempt's
	// checkpoint interval and driver tick are on the job's clock.
	Attempts int64
	// Completed counts checkpoints that became complete; Failed counts
	// checkpoints abandoned (declined, timed out, storage errors, subsumed).
	Completed, Failed int64
	// Latest is the newest complete checkpoint (the recovery point).
	Latest int64
	// RestoredFrom is the checkpoint the current attempt restored, 0 if none.
	RestoredFrom int64
	// Abandoned counts staged sink output deleted at recovery because no
	// checkpoint will publish it.
	Abandoned int64
	// Records counts records sent between subtasks.
	Records int64
	// CheckpointTime is the summed duration, trigger to durable metadata, of
	// the completed checkpoints.
	CheckpointTime time.Duration
}

// Progress counts the job's protocol events so far: checkpoints completed
// and failed, restarts and attempts started. It grows by at least one for
// each thing a run on a stepped clock waits for (see clock.Fake), so a test
// can step the job's clock once per event instead of guessing how much
// happens in a second of real time.
func (s Stats) Progress() int64 { return s.Completed + s.Failed + s.Restarts + s.Attempts }

// Job runs a plan with checkpoints and restarts.
type Job struct {
	plan    *Plan
	opts    Options
	storage storage.Storage
	log     *slog.Logger
	clock   clock.Clock
	// jobID is set by the first recovery: from the checkpoint, or new.
	jobID string

	stopOnce sync.Once
	stop     chan struct{}

	restarts, attempts, completed, failed, latest, restored, abandoned atomic.Int64
	// triggered is the highest checkpoint id any attempt triggered.
	triggered atomic.Int64
	// checkpointTime sums completed checkpoints' durations in ns.
	checkpointTime atomic.Int64
	records        atomic.Int64

	// obs collects what Observe reports (observe.go).
	obs observer

	// lsm is the job's LSM environment (Options.LSM), created by the first
	// attempt that needs it and closed when Run returns.
	lsm *state.LSMEnv
}

// NewJob validates plan and options.
func NewJob(plan *Plan, opts Options) (*Job, error) {
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", plan.Name, err)
	}
	if err := opts.Checkpoint.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint options: %w", err)
	}
	if opts.Storage == nil {
		return nil, errors.New("job options: Storage is required")
	}
	if err := opts.Restart.Validate(); err != nil {
		return nil, fmt.Errorf("restart options: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Storage calls that hang are reported in the job's log while they hang.
	if r, ok := opts.Storage.(storage.SlowCallReporter); ok && opts.Log != nil {
		r.ReportSlowCalls(log, 0)
	}
	j := &Job{plan: plan, opts: opts, storage: opts.Storage, log: log, clock: clock.OrWall(opts.Clock), stop: make(chan struct{})}
	j.obs.clock = j.clock
	return j, nil
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	return Stats{
		Restarts: j.restarts.Load(), Attempts: j.attempts.Load(), Completed: j.completed.Load(), Failed: j.failed.Load(),
		Latest: j.latest.Load(), RestoredFrom: j.restored.Load(), Abandoned: j.abandoned.Load(),
		Records: j.records.Load(), CheckpointTime: time.Duration(j.checkpointTime.Load()),
	}
}

// Stop asks the job to stop gracefully: sources stop reading, a final
// checkpoint is taken and committed, and Run returns nil. The next run of the
// same pipeline resumes from that checkpoint. Cancel Run's context instead to
// stop at once.
func (j *Job) Stop() { j.stopOnce.Do(func() { close(j.stop) }) }

// Run executes the job until a bounded pipeline finished, a graceful stop
// completed (both return nil), ctx is cancelled, or restarts are exhausted.
// Each attempt first recovers from the latest complete checkpoint.
func (j *Job) Run(ctx context.Context) error {
	if l, ok := j.storage.(storage.Locker); ok {
		release, err := l.Lock(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	defer j.closeLSM()
	clock := j.restartClock()
	b := newBackoff(j.opts.Restart)
	// stop ends one pause, the first after Stop; later ones run their course
	// so that an attempt failing at once while stopping does not spin.
	stop := j.stop
	for n := 0; ; n++ {
		before := j.completed.Load()
		err := j.runAttempt(ctx, n)
		if err == nil {
			return nil
		}
		// A lost or foreign lock (storage.ErrLocked) is not cured by a
		// restart either: another process owns the checkpoints now, and a
		// recovery would abandon its staged sink output.
		if ctx.Err() != nil || errors.Is(err, ErrIncompatible) || errors.Is(err, ErrUnrecoverable) || errors.Is(err, storage.ErrLocked) {
			return err
		}
		now := clock.Now()
		delay, giveUp := b.failed(now, j.completed.Load() > before, mrand.Float64())
		if giveUp != nil {
			return fmt.Errorf("pipeline %s failed and %w: %w", j.plan.Name, giveUp, err)
		}
		j.log.Warn("job failed; restarting from the last complete checkpoint", "err", err, "attempt", n+1,
			"delay", delay.Round(time.Millisecond), "restarts_in_a_row", b.streak, "budget_left", b.remaining(now).Round(time.Second))
		// Counted once the pause waits on the clock, before it ends: a test
		// driving the job's clock sees the restart and moves the time
		// through its pause.
		pause := clock.After(delay)
		j.restarts.Add(1)
		// A Stop during the pause ends it: the next attempt starts at once
		// and stops gracefully, with its final checkpoint.
		select {
		case <-pause:
		case <-stop:
			stop = nil
		case <-ctx.Done():
			return err
		}
	}
}

// ErrIncompatible marks failures a restart cannot cure: the checkpoint to
// restore does not fit the pipeline (another pipeline's checkpoint, state of
// operators the pipeline no longer has, per-subtask state at a changed
// parallelism). Run returns them at once instead of restarting.
var ErrIncompatible = errors.New("checkpoint incompatible with the pipeline")

// incompatible wraps err with ErrIncompatible.
func incompatible(err error) error { return fmt.Errorf("%w: %w", ErrIncompatible, err) }

// newJobID returns a random job id for a job that has no checkpoint yet.
func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// runAttempt recovers, starts every task and drives the coordinator until the
// job finishes or fails.
func (j *Job) runAttempt(ctx context.Context, n int) (err error) {
	j.obs.recovering(j, n)
	defer j.obs.endAttempt(&err) // observe_hooks.go
	rec, err := j.recover(ctx)
	if err != nil {
		return err
	}
	att, err := j.build(ctx, n, rec)
	if err != nil {
		return err
	}
	return att.drive()
}
