// Package httpapitest provides a scripted job for tests of clients of the
// HTTP API (package httpapi) and of the dashboard: the test sets what the
// job reports — healthy, failing, restarting — and the real API serves it,
// so a page can be driven into each state deterministically, without a
// pipeline and without waiting for wall-clock time to produce the state.
package httpapitest

import (
	"slices"
	"sync"
	"time"

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

	// Clock, when set, makes the job report the state as of Clock(): every
	// time of the state (in the observation, the history, the recoveries,
	// the watermarks) moves by Clock() minus Observation.At, so that ages,
	// lags and the times between events stay as set however long the test
	// runs and whenever a client asks. Nil reports the times as set.
	Clock func() time.Time
	// Rates, by subtask, replace the subtask's counters with what it counted
	// at these rates: over Observation.At minus StartedAt, plus, with a
	// Clock, the time since the job was first observed. A client that
	// compares two answers sees exactly these rates.
	Rates map[checkpoint.TaskID]Rate
}

// Rate is a subtask's steady rates.
type Rate struct {
	// In and Out are records per second.
	In, Out float64
	// Backpressure is the share of the time it waits on full channels, 0..1.
	Backpressure float64
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
	// origin is State.Clock() at the first observation: the counters of
	// State.Rates grow from then on.
	origin time.Time
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
	d, running := j.shift()
	o := j.state.Observation
	o.At = o.At.Add(d)
	o.StartedAt = at(o.StartedAt, d)
	if lc := o.Checkpoints.LastCompleted; lc != nil {
		c := *lc
		c.TriggeredAt, c.CompletedAt = at(c.TriggeredAt, d), at(c.CompletedAt, d)
		o.Checkpoints.LastCompleted = &c
	}
	if f := o.LastFailure; f != nil {
		c := *f
		c.At = at(c.At, d)
		o.LastFailure = &c
	}
	o.Nodes = slices.Clone(o.Nodes)
	for i := range o.Nodes {
		subs := slices.Clone(o.Nodes[i].Subtasks)
		for k := range subs {
			s := &subs[k]
			if s.Watermark != runtime.MinWatermark && s.Watermark != runtime.MaxWatermark {
				s.Watermark += int64(d)
			}
			if r, ok := j.state.Rates[s.Task]; ok {
				up := j.state.Observation.At.Sub(j.state.Observation.StartedAt) + running
				s.RecordsIn, s.RecordsOut = int64(r.In*up.Seconds()), int64(r.Out*up.Seconds())
				s.Backpressure = time.Duration(r.Backpressure * float64(up))
			}
		}
		o.Nodes[i].Subtasks = subs
	}
	return o
}

// shift returns how far the state's times move (State.Clock) and how long
// the job has been observed, from one reading of the clock; both are 0
// without one. The caller holds mu.
func (j *Job) shift() (d, running time.Duration) {
	if j.state.Clock == nil {
		return 0, 0
	}
	now := j.state.Clock()
	if j.origin.IsZero() {
		j.origin = now
	}
	return now.Sub(j.state.Observation.At), now.Sub(j.origin)
}

// at is t moved by d; the zero time stays zero ("never").
func at(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}

// record is r with its times moved by d.
func record(r runtime.CheckpointRecord, d time.Duration) runtime.CheckpointRecord {
	r.TriggeredAt, r.EndedAt, r.CommittedAt = at(r.TriggeredAt, d), at(r.EndedAt, d), at(r.CommittedAt, d)
	r.Subtasks = slices.Clone(r.Subtasks)
	return r
}

// Checkpoints returns the state's history.
func (j *Job) Checkpoints() []runtime.CheckpointRecord {
	j.mu.Lock()
	defer j.mu.Unlock()
	d, _ := j.shift()
	out := make([]runtime.CheckpointRecord, len(j.state.History))
	for i, r := range j.state.History {
		out[i] = record(r, d)
	}
	return out
}

// Checkpoint returns the history's record of id.
func (j *Job) Checkpoint(id int64) (runtime.CheckpointRecord, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.state.History {
		if r.ID == id {
			d, _ := j.shift()
			return record(r, d), true
		}
	}
	return runtime.CheckpointRecord{}, false
}

// RecoveryLog returns the state's recoveries.
func (j *Job) RecoveryLog() []runtime.RecoveryEvent {
	j.mu.Lock()
	defer j.mu.Unlock()
	d, _ := j.shift()
	out := slices.Clone(j.state.Recoveries)
	for i := range out {
		out[i].At, out[i].FailedAt = at(out[i].At, d), at(out[i].FailedAt, d)
	}
	return out
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
