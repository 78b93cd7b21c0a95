package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

func TestWarmupEvents(t *testing.T) {
	q5, q0 := All["q5"], All["q0"]
	for _, c := range []struct {
		q              Query
		events, perSec int64
		want           int64
	}{
		{q5, 20_000_000, 200_000, 2_800_000},      // (10 s + 4 s) × 200 K
		{q0, 20_000_000, 200_000, 2_000_000},      // a tenth: 4 s × 200 K is less
		{q5, 20_000_000, 0, 2_000_000},            // Beam's timeline: a tenth
		{q5, 10_000_000, 10_000_000, 140_000_000}, // Flink's density: more than the run
	} {
		if got := WarmupEvents(c.q, c.events, c.perSec); got != c.want {
			t.Errorf("WarmupEvents(%s, %d, %d) = %d, want %d", c.q.Name, c.events, c.perSec, got, c.want)
		}
	}
}

func TestPhaseCountsCheckpointsWithinIt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var history []runtime.CheckpointRecord
	// 100 completed checkpoints inside [1 s, 200 s], durations 1..100 ms.
	for i := 1; i <= 100; i++ {
		history = append(history, runtime.CheckpointRecord{ID: int64(i), Status: runtime.CheckpointCompleted,
			TriggeredAt: at(float64(i)), EndedAt: at(float64(i)).Add(ms(i)), Duration: ms(i)})
	}
	history = append(history,
		runtime.CheckpointRecord{ID: 101, Status: runtime.CheckpointFailed, TriggeredAt: at(150), EndedAt: at(151), Duration: time.Second},
		runtime.CheckpointRecord{ID: 102, Status: runtime.CheckpointCompleted, TriggeredAt: at(0.5), EndedAt: at(1.5), Duration: time.Second}, // began before
		runtime.CheckpointRecord{ID: 103, Status: runtime.CheckpointCompleted, TriggeredAt: at(199.9), EndedAt: at(201), Duration: ms(1100)},  // ended after
	)
	a := mark{at: at(1), cpu: 2 * time.Second, events: 1000}
	b := mark{at: at(200), cpu: 102 * time.Second, events: 1000 + 199_000_000}
	p := phase(a, b, history, false)
	want := Phase{Events: 199_000_000, Seconds: 199, CPUSeconds: 100, EventsPerSecond: 1_000_000, EventsPerSecondPerCore: 1_990_000,
		Checkpoints: 100, MeanCheckpointMs: 50.5, P99CheckpointMs: 99, MaxCheckpointMs: 100}
	if p != want {
		t.Errorf("phase:\n got %+v\nwant %+v", p, want)
	}
	if p := phase(b, b, history, false); p.Checkpoints != 0 || p.EventsPerSecond != 0 || p.MeanCheckpointMs != 0 {
		t.Errorf("an empty phase: %+v", p)
	}
	// The final checkpoint belongs to the end of input, even when the
	// sources' end triggered it before the bench saw that end.
	final := runtime.CheckpointRecord{ID: 104, Final: true, Status: runtime.CheckpointCompleted, TriggeredAt: at(199), EndedAt: at(200.5), Duration: ms(1500)}
	history = append(history, final)
	if p := phase(a, b, history, false); p.Checkpoints != 100 {
		t.Errorf("the steady part counts %d checkpoints with the final one, want 100", p.Checkpoints)
	}
	// Checkpoint 103 straddles the boundary: it counts for neither part.
	if p := phase(b, mark{at: at(201), cpu: b.cpu, events: b.events}, history, true); p.Checkpoints != 1 || p.MaxCheckpointMs != 1500 {
		t.Errorf("end of input: %+v, want the final checkpoint alone", p)
	}
}

// A run splits into warm-up, steady part and end of input: the steady part
// starts no earlier than the warm-up's events, and the parts' events add up.
func TestBenchSteadyAndEndOfInput(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("a million events through the engine: several times slower under -race, and the runtime's races are the runtime tests' job")
	}
	const events, perSec = 1_000_000, 20_000 // 50 s of event time, 14 s of it warm-up
	r, err := Bench(context.Background(), BenchOptions{Query: "q5", Events: events, CheckpointDir: t.TempDir(),
		CheckpointInterval: 100 * time.Millisecond, Generator: BenchGenerator(perSec)})
	if err != nil {
		t.Fatal(err)
	}
	warmup := WarmupEvents(All["q5"], events, perSec)
	if r.Steady.Events <= 0 || r.Steady.Events > events-warmup {
		t.Errorf("steady part: %d events, want some and at most the %d after the warm-up", r.Steady.Events, events-warmup)
	}
	if r.EndOfInput.Events != 0 {
		t.Errorf("end of input: %d events read, want 0 (every event was read before it)", r.EndOfInput.Events)
	}
	if r.Steady.Checkpoints+r.EndOfInput.Checkpoints > int(r.Checkpoints) {
		t.Errorf("phases count %d and %d checkpoints of the run's %d", r.Steady.Checkpoints, r.EndOfInput.Checkpoints, r.Checkpoints)
	}
	if r.EndOfInput.Checkpoints < 1 {
		t.Errorf("end of input: %+v, want the final checkpoint in it", r.EndOfInput)
	}
	if r.Events != events || r.EventsPerEventSecond != perSec || r.CheckpointIntervalMs != 100 {
		t.Errorf("result: %+v", r)
	}
}

func TestBenchRefusesARunWithoutSteadyPart(t *testing.T) {
	_, err := Bench(context.Background(), BenchOptions{Query: "q5", Events: 20_000_000, CheckpointDir: t.TempDir(), Generator: BenchGenerator(10_000_000)})
	if err == nil || !strings.Contains(err.Error(), "no steady part") || !strings.Contains(err.Error(), "give at least 280000000 events") {
		t.Fatalf("err = %v, want the refusal naming the events it needs", err)
	}
}
