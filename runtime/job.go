package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/storage"
)

// RestartOptions is the fixed-delay restart strategy.
type RestartOptions struct {
	// Delay is the pause before a failed job restarts.
	// The default value is 1s. Flink: restart-strategy.fixed-delay.delay.
	Delay time.Duration
	// MaxAttempts is how many restarts in a row the job may make without
	// completing a checkpoint in between; one more failure ends Run with the
	// error. A completed checkpoint resets the count, so a long-running job
	// survives occasional failures but not a crash loop.
	// The default value is 10. Flink: restart-strategy.fixed-delay.attempts.
	MaxAttempts int
}

// DefaultRestartOptions returns the documented defaults.
func DefaultRestartOptions() RestartOptions {
	return RestartOptions{Delay: time.Second, MaxAttempts: 10}
}

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
}

// Stats are counters of a job, safe to read while it runs.
type Stats struct {
	// Restarts is the number of in-process restarts after failures.
	Restarts int64
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

// Job runs a plan with checkpoints and restarts.
type Job struct {
	plan    *Plan
	opts    Options
	storage storage.Storage
	log     *slog.Logger
	// jobID is set by the first recovery: from the checkpoint, or new.
	jobID string

	stopOnce sync.Once
	stop     chan struct{}

	restarts, completed, failed, latest, restored, abandoned atomic.Int64
	// triggered is the highest checkpoint id any attempt triggered.
	triggered atomic.Int64
	// checkpointTime sums completed checkpoints' durations in ns.
	checkpointTime atomic.Int64
	records        atomic.Int64

	// obs collects what Observe reports (observe.go).
	obs observer
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
	if opts.Restart.Delay < 0 || opts.Restart.MaxAttempts < 0 {
		return nil, fmt.Errorf("restart options: delay %v and max attempts %d must not be negative", opts.Restart.Delay, opts.Restart.MaxAttempts)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Job{plan: plan, opts: opts, storage: opts.Storage, log: log, stop: make(chan struct{})}, nil
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats {
	return Stats{
		Restarts: j.restarts.Load(), Completed: j.completed.Load(), Failed: j.failed.Load(),
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
	failures := 0
	for n := 0; ; n++ {
		before := j.completed.Load()
		err := j.runAttempt(ctx, n)
		if err == nil {
			return nil
		}
		// A lost or foreign lock (storage.ErrLocked) is not cured by a
		// restart either: another process owns the checkpoints now, and a
		// recovery would abandon its staged sink output.
		if ctx.Err() != nil || errors.Is(err, ErrIncompatible) || errors.Is(err, storage.ErrLocked) {
			return err
		}
		if j.completed.Load() > before {
			failures = 0
		}
		failures++
		if failures > j.opts.Restart.MaxAttempts {
			return fmt.Errorf("pipeline %s failed and %d restarts in a row did not help: %w", j.plan.Name, j.opts.Restart.MaxAttempts, err)
		}
		j.log.Warn("job failed; restarting from the last complete checkpoint", "err", err, "attempt", n+1, "delay", j.opts.Restart.Delay)
		select {
		case <-time.After(j.opts.Restart.Delay):
		case <-ctx.Done():
			return err
		}
		j.restarts.Add(1)
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
