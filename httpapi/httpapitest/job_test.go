package httpapitest_test

import (
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/httpapi/httpapitest"
	"github.com/ingest-engine/ingest/runtime"
)

// With a clock, every time of the state moves with it, "never" stays
// never, and a subtask with a rate counts at that rate from the first
// observation on.
func TestJobMovesTheStateWithTheClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := at.Add(time.Hour)
	id := checkpoint.TaskID{Operator: "src", Subtask: 0}
	job := httpapitest.NewJob(httpapitest.State{
		Observation: runtime.Observation{At: at, StartedAt: at.Add(-10 * time.Second),
			Nodes: []runtime.NodeObservation{{ID: "src", Subtasks: []runtime.SubtaskObservation{
				{Task: id, Watermark: at.Add(-time.Minute).UnixNano()},
				{Task: checkpoint.TaskID{Operator: "src", Subtask: 1}, Watermark: runtime.MinWatermark, RecordsOut: 7},
			}}},
			LastFailure: &runtime.Failure{At: at.Add(-time.Second)}},
		History:    []runtime.CheckpointRecord{{ID: 1, TriggeredAt: at.Add(-2 * time.Second), EndedAt: at.Add(-time.Second)}},
		Recoveries: []runtime.RecoveryEvent{{At: at.Add(-3 * time.Second)}},
		Clock:      func() time.Time { return now },
		Rates:      map[checkpoint.TaskID]httpapitest.Rate{id: {In: 100, Out: 50, Backpressure: 0.5}},
	})
	o := job.Observe()
	s0, s1 := o.Nodes[0].Subtasks[0], o.Nodes[0].Subtasks[1]
	if !o.At.Equal(now) || !o.StartedAt.Equal(now.Add(-10*time.Second)) || !o.LastFailure.At.Equal(now.Add(-time.Second)) {
		t.Errorf("at %v, started %v, failed %v: want now, 10 s and 1 s before", o.At, o.StartedAt, o.LastFailure.At)
	}
	if s0.Watermark != now.Add(-time.Minute).UnixNano() || s1.Watermark != runtime.MinWatermark || s1.RecordsOut != 7 {
		t.Errorf("subtasks %+v: want the watermark a minute behind now, none for the second, its counters kept", o.Nodes[0].Subtasks)
	}
	if s0.RecordsIn != 1000 || s0.RecordsOut != 500 || s0.Backpressure != 5*time.Second {
		t.Errorf("subtask 0 %+v: want 10 s at 100/s in, 50/s out, half blocked", s0)
	}
	now = now.Add(2 * time.Second)
	if s := job.Observe().Nodes[0].Subtasks[0]; s.RecordsIn != 1200 || s.RecordsOut != 600 {
		t.Errorf("two seconds later %+v: want 200 more in, 100 more out", s)
	}
	if r := job.Checkpoints()[0]; !r.TriggeredAt.Equal(now.Add(-2*time.Second)) || !r.EndedAt.Equal(now.Add(-time.Second)) || !r.CommittedAt.IsZero() {
		t.Errorf("record %+v: want its times moved to now, the commit still never", r)
	}
	if e := job.RecoveryLog()[0]; !e.At.Equal(now.Add(-3*time.Second)) || !e.FailedAt.IsZero() {
		t.Errorf("recovery %+v: want 3 s before now, no failure time", e)
	}
	if n := job.Served(); n != 2 {
		t.Errorf("served %d observations, want 2", n)
	}
}
