package runtime

import (
	"log/slog"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
)

// SlowCheckpointShare is the part of the checkpoint interval beyond which a
// completed checkpoint counts as slow: the product description asks that
// checkpoint duration normally stay below the interval, and a checkpoint
// that takes most of it leaves the next one no room (checkpoints then run
// back to back and recovery points drift apart).
const SlowCheckpointShare = 0.8

// SlowCheckpointWarnEvery is the least time between two warnings about slow
// checkpoints in the job's log; the checkpoints in between are counted in
// the next warning.
const SlowCheckpointWarnEvery = time.Minute

// SlowCheckpoint is a completed checkpoint that took more than
// SlowCheckpointShare of the interval, with the largest part of it.
type SlowCheckpoint struct {
	ID       int64
	At       time.Time // when it completed, on the job's clock
	Duration time.Duration
	Interval time.Duration
	// Phase is the largest part: "alignment", "sync" (a subtask's
	// synchronous snapshot, a sink's prepare), "async" (encoding and writing
	// a subtask's state) or "metadata write" (the file that completes the
	// checkpoint). Task is the subtask it belongs to (zero for the metadata
	// write); PhaseDuration its length.
	Phase         string
	Task          checkpoint.TaskID
	PhaseDuration time.Duration
	// Count is the number of slow checkpoints since the job was created.
	Count int64
}

// slowest returns the largest part of checkpoint r: the phase, the subtask
// it belongs to and its length.
func slowest(r *CheckpointRecord) (phase string, task checkpoint.TaskID, d time.Duration) {
	phase, d = "metadata write", r.MetadataWrite
	for _, s := range r.Subtasks {
		for _, p := range []struct {
			name string
			d    time.Duration
		}{{"alignment", s.Alignment}, {"sync", s.Sync}, {"async", s.Async}} {
			if p.d > d {
				phase, task, d = p.name, s.Task, p.d
			}
		}
	}
	return phase, task, d
}

// slowCheckpoint records checkpoint r, completed after took, if it was slow
// against interval; it returns the warning to log (nil: none, because it was
// not slow or a warning went out less than SlowCheckpointWarnEvery ago) and
// how many slow checkpoints that warning covers. The caller holds ob.mu.
func (ob *observer) slowCheckpoint(r *CheckpointRecord, took, interval time.Duration) (warn *SlowCheckpoint, since int64) {
	if interval <= 0 || float64(took) <= SlowCheckpointShare*float64(interval) {
		return nil, 0
	}
	ob.slowN++
	ob.slowSinceWarn++
	phase, task, d := slowest(r)
	s := &SlowCheckpoint{ID: r.ID, At: r.EndedAt, Duration: took, Interval: interval, Phase: phase, Task: task, PhaseDuration: d, Count: ob.slowN}
	ob.lastSlow = s
	if !ob.slowWarnedAt.IsZero() && r.EndedAt.Sub(ob.slowWarnedAt) < SlowCheckpointWarnEvery {
		return nil, 0
	}
	since = ob.slowSinceWarn
	ob.slowWarnedAt, ob.slowSinceWarn = r.EndedAt, 0
	return s, since
}

// warnSlow logs a slow checkpoint warning at WARN.
func warnSlow(log *slog.Logger, s *SlowCheckpoint, since int64) {
	attrs := []any{"checkpoint", s.ID, "duration", s.Duration, "interval", s.Interval, "slowest_phase", s.Phase, "phase_duration", s.PhaseDuration,
		"slow_checkpoints", since}
	if s.Task != (checkpoint.TaskID{}) {
		attrs = append(attrs, "slowest_subtask", s.Task.String())
	}
	log.Warn("checkpoints take more than 80% of the interval: reduce state pressure (less state, fewer keys, a shorter window or TTL, more parallelism) "+
		"or lengthen the interval; the count is of slow checkpoints since the last warning", attrs...)
}
