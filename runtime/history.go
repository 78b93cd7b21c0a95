package runtime

import (
	"slices"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
)

// This file keeps the checkpoint history that Job.Checkpoints serves: the
// last HistorySize checkpoints the job triggered, each with its timing,
// size and fate, per subtask too.

// HistorySize is how many checkpoints the history keeps; older ones are
// forgotten (their metadata stays in checkpoint storage while retained).
const HistorySize = 1000

// CheckpointStatus is where a checkpoint of the history stands.
type CheckpointStatus string

const (
	// CheckpointInProgress: triggered, neither complete nor failed yet.
	CheckpointInProgress CheckpointStatus = "in_progress"
	// CheckpointCompleted: its metadata is durable; it is a recovery point.
	CheckpointCompleted CheckpointStatus = "completed"
	// CheckpointFailed: it will never complete (declined, timed out, a
	// storage error, subsumed by a newer one, or the job failed while it was
	// in flight). The recovery point is unchanged.
	CheckpointFailed CheckpointStatus = "failed"
)

// CheckpointRecord is one checkpoint of the history.
type CheckpointRecord struct {
	// ID is the checkpoint id; Final marks the job's last checkpoint.
	ID    int64
	Final bool
	// Attempt is the job attempt (Context.Attempt) that triggered it.
	Attempt int
	// Status is where the checkpoint stands; FailureReason says why it
	// failed ("" unless Status is CheckpointFailed).
	Status        CheckpointStatus
	FailureReason string
	// TriggeredAt is when the coordinator triggered it; EndedAt when it
	// completed (its metadata became durable) or failed, zero while in
	// progress. Duration is the time between them.
	TriggeredAt, EndedAt time.Time
	Duration             time.Duration
	// Tasks is the number of subtasks that must acknowledge it; Subtasks are
	// those that did, in acknowledgement order.
	Tasks    int
	Subtasks []SubtaskCheckpoint
	// SyncMax, AsyncMax and AlignmentMax are the largest per-subtask
	// synchronous snapshot, asynchronous write and barrier alignment times.
	SyncMax, AsyncMax, AlignmentMax time.Duration
	// StateSizeFull is the size of the checkpoint's state as a full
	// snapshot holds it: its state files, the parts of earlier checkpoints'
	// files its incremental snapshots reuse, and inline state
	// (checkpoint.Metadata.Size). StateSizeIncremental is what this
	// checkpoint wrote: its own state files and inline state.
	StateSizeFull, StateSizeIncremental int64
	// FilesReused counts the earlier checkpoints' state files its subtasks'
	// incremental snapshots build on (checkpoint.SubtaskState.Shared).
	FilesReused int
	// StateWriteMax is the slowest state file write to checkpoint storage;
	// MetadataWrite is the write of the metadata file, which makes the
	// checkpoint complete (0 until written).
	StateWriteMax, MetadataWrite time.Duration
	// Committables counts the staged sink items this checkpoint publishes,
	// by sink (its own, not those of earlier checkpoints it re-publishes).
	Committables map[string]int
	// Committed is set once the checkpoint's output commit was confirmed;
	// CommittedAt is when.
	Committed   bool
	CommittedAt time.Time
}

// SubtaskCheckpoint is one subtask's part of a checkpoint.
type SubtaskCheckpoint struct {
	Task checkpoint.TaskID
	// Sync is the synchronous snapshot (a sink's prepare), Async the
	// encoding and writing of its state, Alignment the time from its first
	// to its last barrier.
	Sync, Async, Alignment time.Duration
	// StateSize is the size of the state file it wrote plus its inline
	// state; StateReused the bytes of earlier files its incremental
	// snapshot takes, from SharedFiles files.
	StateSize, StateReused int64
	SharedFiles            int
	// StorageWrite is the time its state file write took; 0 without one.
	StorageWrite time.Duration
}

// history is a ring of the last HistorySize checkpoints. The observer's
// mutex guards it.
type history struct {
	ring []*CheckpointRecord
	next int // ring index the next record goes to
	byID map[int64]*CheckpointRecord
}

// add starts the record of a triggered checkpoint, forgetting the oldest
// when the ring is full.
func (h *history) add(r *CheckpointRecord) {
	if h.byID == nil {
		h.byID = map[int64]*CheckpointRecord{}
	}
	if len(h.ring) < HistorySize {
		h.ring = append(h.ring, r)
	} else {
		delete(h.byID, h.ring[h.next].ID)
		h.ring[h.next] = r
	}
	h.next = (h.next + 1) % HistorySize
	h.byID[r.ID] = r
}

// get returns the record of checkpoint id, nil when it is not kept.
func (h *history) get(id int64) *CheckpointRecord { return h.byID[id] }

// newestFirst returns copies of the records, newest first.
func (h *history) newestFirst() []CheckpointRecord {
	out := make([]CheckpointRecord, 0, len(h.ring))
	for k := 1; k <= len(h.ring); k++ {
		i := (h.next - k + len(h.ring)) % len(h.ring)
		out = append(out, h.ring[i].clone())
	}
	return out
}

// inProgress returns the records still in progress.
func (h *history) inProgress() []*CheckpointRecord {
	var out []*CheckpointRecord
	for _, r := range h.ring {
		if r.Status == CheckpointInProgress {
			out = append(out, r)
		}
	}
	return out
}

// clone returns a copy that shares nothing mutable with r.
func (r *CheckpointRecord) clone() CheckpointRecord {
	c := *r
	c.Subtasks = slices.Clone(r.Subtasks)
	if r.Committables != nil {
		c.Committables = make(map[string]int, len(r.Committables))
		for k, v := range r.Committables {
			c.Committables[k] = v
		}
	}
	return c
}

// end marks r completed or failed at t.
func (r *CheckpointRecord) end(status CheckpointStatus, reason string, t time.Time) {
	r.Status, r.FailureReason, r.EndedAt = status, reason, t
	r.Duration = t.Sub(r.TriggeredAt)
}

// ack adds a subtask's acknowledgement to r.
func (r *CheckpointRecord) ack(s SubtaskCheckpoint) {
	r.Subtasks = append(r.Subtasks, s)
	r.SyncMax = max(r.SyncMax, s.Sync)
	r.AsyncMax = max(r.AsyncMax, s.Async)
	r.AlignmentMax = max(r.AlignmentMax, s.Alignment)
	r.StateWriteMax = max(r.StateWriteMax, s.StorageWrite)
	r.StateSizeFull += s.StateSize + s.StateReused
	r.StateSizeIncremental += s.StateSize
	r.FilesReused += s.SharedFiles
}
