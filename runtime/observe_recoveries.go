package runtime

import (
	"slices"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
)

// This file keeps the log of the job's recoveries that Job.RecoveryLog
// serves: when each happened, after which failure, and which checkpoint it
// restored — or that none existed. Observation.Recoveries only counts them;
// a dashboard that must say "restored checkpoint 41" or "started over: no
// complete checkpoint existed" after a page reload needs the events.

// RecoveryLogSize is how many recoveries RecoveryLog keeps; older ones are
// forgotten (Observation.Recoveries still counts them).
const RecoveryLogSize = 100

// RecoveryEvent is one recovery: an attempt that restored the latest
// complete checkpoint (or found none) and started its tasks.
type RecoveryEvent struct {
	// At is when the attempt's tasks started, the recovery done.
	At time.Time
	// Attempt is the attempt that recovered (Context.Attempt; 0 is the
	// job's first).
	Attempt int
	// Cause is "restart" (an in-process restart after the previous attempt
	// failed) or "checkpoint" (the first attempt started from a checkpoint
	// an earlier process completed), as in RecoveryCount.
	Cause string
	// Class is the failure's class (ErrorClass) for a restart, "" for a
	// start from a checkpoint. Failure is that failure's error and FailedAt
	// when it happened ("" and zero for a start from a checkpoint).
	Class, Failure string
	FailedAt       time.Time
	// Restored is the id of the checkpoint the attempt restored: its source
	// positions, state and committed output. 0 when no complete checkpoint
	// existed: the attempt started over from the sources' initial positions
	// with empty state.
	Restored int64
}

// RecoveryLog returns the last RecoveryLogSize recoveries, newest first. A
// start without a checkpoint to restore is not a recovery and is not
// listed; a restart that found none is, with Restored 0.
func (j *Job) RecoveryLog() []RecoveryEvent {
	j.obs.mu.Lock()
	defer j.obs.mu.Unlock()
	out := slices.Clone(j.obs.recoveryLog)
	slices.Reverse(out)
	return out
}

// CheckpointOptions returns the checkpoint options the job runs with: its
// interval, timeout and tolerable failures are what a monitor compares the
// checkpoint history with (a complete checkpoint older than two intervals is
// stale).
func (j *Job) CheckpointOptions() checkpoint.Options { return j.opts.Checkpoint }

// logRecovery records the recovery of attempt n, which restored checkpoint
// restored (0: none), at started. The caller holds the observer's mutex.
func (ob *observer) logRecovery(n int, restored int64) {
	e := RecoveryEvent{At: ob.clock.Now(), Attempt: n, Restored: restored}
	switch {
	case n > 0:
		e.Cause, e.Class = "restart", "unknown"
		if f := ob.lastFailure; f != nil {
			e.Class, e.Failure, e.FailedAt = f.Class, f.Err, f.At
		}
	case restored != 0:
		e.Cause = "checkpoint"
	default:
		return
	}
	if len(ob.recoveryLog) == RecoveryLogSize {
		ob.recoveryLog = slices.Delete(ob.recoveryLog, 0, 1)
	}
	ob.recoveryLog = append(ob.recoveryLog, e)
}
