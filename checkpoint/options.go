// Package checkpoint is the protocol core of Ingest Engine's coordinated
// checkpoints: the coordinator state machine, the barrier aligner and the
// metadata model. Like etcd's raft library it performs no I/O, starts no
// goroutines, reads no clock and draws no random numbers: time and every
// outside result are inputs, and each step returns the actions the caller
// must carry out. The runtime package drives it.
package checkpoint

import (
	"errors"
	"fmt"
	"time"
)

// Mode is the checkpointing mode: whether multi-input subtasks align barriers.
type Mode int

const (
	// ExactlyOnce aligns barriers: an input that delivered barrier N is not
	// read again until every input has delivered N, so the snapshot reflects
	// exactly the records before the cut. Flink: CheckpointingMode.EXACTLY_ONCE.
	ExactlyOnce Mode = iota
	// AtLeastOnce does not align: inputs keep flowing after their barrier, so
	// records after the cut may be in the snapshot and be replayed again after
	// a recovery. Flink: CheckpointingMode.AT_LEAST_ONCE.
	AtLeastOnce
)

// String returns the mode as written in pipeline files.
func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "exactly-once" or "at-least-once".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "exactly-once":
		return ExactlyOnce, nil
	case "at-least-once":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("unknown checkpoint mode %q: want exactly-once or at-least-once", s)
}

// Options configures checkpointing. Every field is used as given: start from
// DefaultOptions and change what you need, then call Validate.
type Options struct {
	// Interval is the time between the triggers of two periodic checkpoints.
	// Zero disables periodic checkpoints; a bounded or stopped pipeline still
	// takes its final checkpoint. Shorter intervals mean less replay after a
	// failure and more steady-state overhead.
	// The default value is 10s. Flink: execution.checkpointing.interval.
	Interval time.Duration

	// Timeout is how long a checkpoint may take from trigger to durable
	// metadata before it is declared failed and abandoned.
	// The default value is 10m. Flink: execution.checkpointing.timeout.
	Timeout time.Duration

	// MinPause is the least time between the completion of one checkpoint and
	// the trigger of the next. When it is positive no checkpoint is triggered
	// while another is pending. It keeps a pipeline whose checkpoints run long
	// from spending all its time checkpointing.
	// The default value is 0. Flink: execution.checkpointing.min-pause.
	MinPause time.Duration

	// MaxConcurrent is how many checkpoints may be pending at once.
	// The default value is 1. Flink: execution.checkpointing.max-concurrent-checkpoints.
	MaxConcurrent int

	// TolerableFailures is how many consecutive checkpoint failures (declines,
	// timeouts, storage errors) the job survives; one more fails the job, which
	// then restarts from the last complete checkpoint. A failure within the
	// tolerance leaves the recovery point unchanged and the pipeline running.
	// The default value is 3. Flink: execution.checkpointing.tolerable-failed-checkpoints.
	TolerableFailures int

	// Retain is how many complete checkpoints are kept; older ones are
	// deleted once a newer one is complete, unless a kept checkpoint's
	// state still builds on some of their files (incremental snapshots):
	// those are held, outside the count, trimmed to the files referenced
	// (Trim) until nothing references any (see Coordinator.Held).
	// The default value is 1. Flink: state.checkpoints.num-retained.
	Retain int

	// StagingMaxAge bounds how long abandoned sink output stays staged while
	// the job runs. After each completed checkpoint's output is published,
	// every transactional sink that can (runtime.StagingSweeper) deletes the
	// staged output no checkpoint will publish that was last written more
	// than StagingMaxAge before that checkpoint was triggered: everything a
	// running subtask staged before the trigger belongs to that checkpoint or
	// an earlier one and was just published, so what is left from before is
	// abandoned (left by a crashed process, a failed cleanup, a copy). The
	// age is a margin for wall-clock adjustments and for other processes
	// writing the same place; staged output is also abandoned at every
	// recovery, whatever its age. A negative value sweeps at recoveries only.
	// The default value is 10m.
	StagingMaxAge time.Duration

	// Mode chooses aligned (exactly-once) or unaligned-free (at-least-once)
	// barrier handling.
	// The default value is ExactlyOnce. Flink: execution.checkpointing.mode.
	Mode Mode
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Interval:          10 * time.Second,
		Timeout:           10 * time.Minute,
		MinPause:          0,
		MaxConcurrent:     1,
		TolerableFailures: 3,
		Retain:            1,
		StagingMaxAge:     10 * time.Minute,
		Mode:              ExactlyOnce,
	}
}

// Validate rejects options that cannot work, with a sentence naming the field.
func (o Options) Validate() error {
	var errs []error
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %v is negative", o.Interval))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout %v must be positive", o.Timeout))
	}
	if o.MinPause < 0 {
		errs = append(errs, fmt.Errorf("min_pause %v is negative", o.MinPause))
	}
	if o.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("max_concurrent %d must be at least 1", o.MaxConcurrent))
	}
	if o.TolerableFailures < 0 {
		errs = append(errs, fmt.Errorf("tolerable_failures %d is negative", o.TolerableFailures))
	}
	if o.Retain < 1 {
		errs = append(errs, fmt.Errorf("retain %d must be at least 1: the last complete checkpoint is the recovery point", o.Retain))
	}
	if o.Mode == AtLeastOnce && o.MaxConcurrent > 1 {
		// The aligner tracks one checkpoint at a time; without alignment a fast
		// input can bring barrier N+1 before a slow one brings N, abandoning N
		// every time under persistent skew.
		errs = append(errs, fmt.Errorf("max_concurrent %d is not supported with mode at-least-once: use 1", o.MaxConcurrent))
	}
	if o.Mode != ExactlyOnce && o.Mode != AtLeastOnce {
		errs = append(errs, fmt.Errorf("mode %v is unknown", o.Mode))
	}
	return errors.Join(errs...)
}
