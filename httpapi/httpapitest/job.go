// Package httpapitest provides a scripted job for tests of clients of the
// HTTP API (package httpapi) and of the dashboard: the test sets what the
// job reports — healthy, failing, restarting — and the real API serves it,
// so a page can be driven into each state deterministically, without a
// pipeline and without waiting for wall-clock time to produce the state.
package httpapitest

import (
	"slices"
	"sync"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// State is what a Job reports.
type State struct {
	// Observation is what Observe returns.
	Observation runtime.Observation
	// History is what Checkpoints returns (newest first); Checkpoint finds
	// its records by id.
	History []runtime.CheckpointRecord
	// Recoveries is what RecoveryLog returns (newest first).
	Recoveries []runtime.RecoveryEvent
	// Options is what CheckpointOptions returns.
	Options checkpoint.Options
	// TriggerErr, when set, is what TriggerCheckpoint fails with; else it
	// returns the id after the newest of History.
	TriggerErr error
}

// Job implements httpapi.Job with a State the test sets. It is safe for
// concurrent use: the API's handlers read it while the test changes it.
type Job struct {
	mu       sync.Mutex
	state    State
	triggers int
	stops    int
	// served counts Observe calls: every API answer observes the job once.
	served int
}

// NewJob returns a job that reports s.
func NewJob(s State) *Job { return &Job{state: s} }

// Set changes the state with f.
func (j *Job) Set(f func(*State)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(&j.state)
}

// Served returns how many times the job was observed: a test that changed
// the state can wait for a later count to know a poll has seen the change.
func (j *Job) Served() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.served
}

// Triggers and Stops count the calls of TriggerCheckpoint and Stop.
func (j *Job) Triggers() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.triggers
}

// Stops counts the calls of Stop.
func (j *Job) Stops() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stops
}

// Observe returns the state's observation.
func (j *Job) Observe() runtime.Observation {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.served++
	o := j.state.Observation
	o.Nodes = slices.Clone(o.Nodes)
	for i := range o.Nodes {
		o.Nodes[i].Subtasks = slices.Clone(o.Nodes[i].Subtasks)
	}
	return o
}

// Checkpoints returns the state's history.
func (j *Job) Checkpoints() []runtime.CheckpointRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.state.History)
}

// Checkpoint returns the history's record of id.
func (j *Job) Checkpoint(id int64) (runtime.CheckpointRecord, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.state.History {
		if r.ID == id {
			return r, true
		}
	}
	return runtime.CheckpointRecord{}, false
}

// RecoveryLog returns the state's recoveries.
func (j *Job) RecoveryLog() []runtime.RecoveryEvent {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.state.Recoveries)
}

// CheckpointOptions returns the state's options.
func (j *Job) CheckpointOptions() checkpoint.Options {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.Options
}

// TriggerCheckpoint counts the call and returns the id after the newest of
// the history, or the state's TriggerErr.
func (j *Job) TriggerCheckpoint() (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.triggers++
	if j.state.TriggerErr != nil {
		return 0, j.state.TriggerErr
	}
	var newest int64
	for _, r := range j.state.History {
		newest = max(newest, r.ID)
	}
	return newest + 1, nil
}

// Stop counts the call.
func (j *Job) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stops++
}
