package checkpoint

import (
	"slices"
	"time"
)

// Status is the coordinator's protocol state after its last Step, as plain
// data. The runtime feeds it, with each step's event and actions, to the
// job's observer, so what Job.Observe reports about checkpoints in flight
// is read from the coordinator rather than kept a second time.
type Status struct {
	// Tasks is the number of subtasks that acknowledge each checkpoint.
	Tasks int
	// Pending are the checkpoints in flight, by increasing id.
	Pending []PendingStatus
	// LatestComplete is the recovery point (LatestComplete).
	LatestComplete int64
	// Committing are the complete checkpoints whose CommitOutput was emitted
	// and whose Committed was not yet stepped, increasing.
	Committing []int64
	// Retained and Held are as Retained and Held return them.
	Retained, Held []int64
	// ConsecutiveFailures is as ConsecutiveFailures returns it.
	ConsecutiveFailures int
}

// PendingStatus is one checkpoint in flight.
type PendingStatus struct {
	ID          int64
	TriggeredAt time.Time
	Final       bool
	// Acked is the number of subtasks that acknowledged it so far.
	Acked int
	// Writing says its metadata is being written: only the write's outcome
	// decides its fate now.
	Writing bool
}

// Status returns the coordinator's state after its last Step.
func (c *Coordinator) Status() Status {
	s := Status{
		Tasks:               len(c.tasks),
		LatestComplete:      c.latest,
		Committing:          slices.Clone(c.committing),
		Retained:            c.Retained(),
		Held:                c.Held(),
		ConsecutiveFailures: c.failures,
	}
	for _, id := range c.Pending() {
		p := c.pending[id]
		s.Pending = append(s.Pending, PendingStatus{ID: id, TriggeredAt: p.triggeredAt, Final: p.final, Acked: len(p.acks), Writing: p.writing})
	}
	return s
}
