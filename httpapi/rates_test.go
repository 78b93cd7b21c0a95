package httpapi

import (
	"math"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// obs is an observation at t of one node with two subtasks.
func obs(t time.Time, in, out int64, blocked time.Duration) runtime.Observation {
	sub := func(i int) runtime.SubtaskObservation {
		return runtime.SubtaskObservation{Task: checkpoint.TaskID{Operator: "n", Subtask: i}, RecordsIn: in / 2, RecordsOut: out / 2, Backpressure: blocked / 2}
	}
	return runtime.Observation{At: t, StartedAt: time.Unix(0, 0),
		Nodes: []runtime.NodeObservation{{ID: "n", Subtasks: []runtime.SubtaskObservation{sub(0), sub(1)}}}}
}

// Rates compare an observation with the newest kept one at least a second
// older: records per second, and the share of the subtasks' time spent
// blocked. The first request measures since the job started.
func TestSamplerRates(t *testing.T) {
	var s sampler
	t0 := time.Unix(100, 0)
	r := s.rates(obs(t0, 1000, 500, 0))["n"]
	if math.Abs(r.in-10) > 1e-9 || math.Abs(r.out-5) > 1e-9 {
		t.Fatalf("first rates %+v, want since the start at 0: 10/s in, 5/s out", r)
	}
	// Half a second later: still compared with t0 (the only sample).
	r = s.rates(obs(t0.Add(500*time.Millisecond), 2000, 1000, 500*time.Millisecond))["n"]
	if math.Abs(r.in-2000) > 1e-9 || math.Abs(r.backpressure-0.5) > 1e-9 {
		t.Fatalf("rates %+v, want 2000/s in and half the time blocked", r)
	}
	// Two seconds later: compared with t0 again (the 0.5s one was not kept).
	r = s.rates(obs(t0.Add(2*time.Second), 5000, 2500, 4*time.Second))["n"]
	if math.Abs(r.in-2000) > 1e-9 || r.backpressure != 1 {
		t.Fatalf("rates %+v, want 2000/s in and backpressure capped at 1", r)
	}
	// Three seconds after t0: compared with the sample at 2s.
	r = s.rates(obs(t0.Add(3*time.Second), 5100, 2500, 4*time.Second))["n"]
	if math.Abs(r.in-100) > 1e-9 || r.out != 0 || r.backpressure != 0 {
		t.Fatalf("rates %+v, want 100/s in, nothing out, not blocked", r)
	}
	if len(s.samples) != 3 {
		t.Fatalf("kept %d samples, want 3 (0s, 2s, 3s)", len(s.samples))
	}
	// Much later the old samples go, but one a second older is kept.
	s.rates(obs(t0.Add(60*time.Second), 5100, 2500, 4*time.Second))
	if len(s.samples) != 2 {
		t.Fatalf("kept %d samples after a minute, want the last two", len(s.samples))
	}
}
