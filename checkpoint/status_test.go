package checkpoint

import (
	"reflect"
	"testing"
	"time"
)

// Status follows a checkpoint through the protocol: triggered, acknowledged
// one subtask at a time, written, complete and committing, committed.
func TestStatusFollowsACheckpoint(t *testing.T) {
	s := newScenario(t, testOptions(), src0, sink0)
	want := Status{Tasks: 2}
	check := func(when string) {
		t.Helper()
		if got := s.c.Status(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Status\n  %+v\nwant\n  %+v", when, got, want)
		}
	}
	check("before the first step")
	s.tick(0)
	x := s.triggerNext()
	want.Pending = []PendingStatus{{ID: x.ID, TriggeredAt: x.Timestamp}}
	check("triggered")
	s.ack(x.ID, SubtaskState{Task: src0})
	want.Pending[0].Acked = 1
	check("one ack")
	s.ack(x.ID, SubtaskState{Task: sink0})
	want.Pending[0].Acked, want.Pending[0].Writing = 2, true
	check("every ack: writing")
	s.tick(s.now.Sub(t0) + time.Second)
	s.step(MetadataWritten{ID: x.ID})
	want.Pending, want.LatestComplete, want.Committing, want.Retained = nil, x.ID, []int64{x.ID}, []int64{x.ID}
	check("complete")
	s.step(Committed{ID: x.ID})
	want.Committing = []int64{}
	check("committed")
	if got := s.c.Status(); len(got.Committing) != 0 {
		t.Fatalf("Committing %v after Committed", got.Committing)
	}
}

// A failed checkpoint leaves the pending set and counts as a failure.
func TestStatusCountsFailures(t *testing.T) {
	o := testOptions()
	o.TolerableFailures = 5
	s := newScenario(t, o, src0)
	s.tick(0)
	x := s.triggerNext()
	s.step(Declined{ID: x.ID, Task: src0, Reason: errBoom})
	st := s.c.Status()
	if len(st.Pending) != 0 || st.ConsecutiveFailures != 1 || st.LatestComplete != 0 {
		t.Fatalf("Status after a decline: %+v, want nothing pending, one failure, no recovery point", st)
	}
}
