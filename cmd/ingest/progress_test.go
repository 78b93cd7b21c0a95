package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// observation is a pipeline of a source and a sink whose counters are
// given, at t.
func observation(t time.Time, read, written int64, last *runtime.CompletedCheckpoint, committed int64) runtime.Observation {
	o := runtime.Observation{At: t, Phase: runtime.PhaseRunning, Nodes: []runtime.NodeObservation{
		{ID: "src", Kind: runtime.KindSource, Subtasks: []runtime.SubtaskObservation{
			{Task: checkpoint.TaskID{Operator: "src"}, RecordsIn: read / 2, RecordsOut: read / 2},
			{Task: checkpoint.TaskID{Operator: "src", Subtask: 1}, RecordsIn: read - read/2, RecordsOut: read - read/2}}},
		{ID: "win", Kind: runtime.KindOperator, Subtasks: []runtime.SubtaskObservation{{RecordsIn: read, RecordsOut: written}}},
		{ID: "out", Kind: runtime.KindSink, Subtasks: []runtime.SubtaskObservation{{RecordsIn: written}}},
	}}
	o.Checkpoints.LastCompleted = last
	o.Checkpoints.Committed = committed
	return o
}

// The status line shows the records per second read and written over the
// interval, the last checkpoint's age and duration, and the committed count.
func TestProgressLine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name      string
		prev, cur runtime.Observation
		restarts  int64
		phase     runtime.Phase
		want      string
	}{
		{
			name: "no checkpoint yet",
			prev: observation(t0, 0, 0, nil, 0), cur: observation(t0.Add(time.Second), 950, 10, nil, 0),
			want: "running · in 950 rec/s · out 10 rec/s · no checkpoint yet · 0 committed",
		},
		{
			name: "thousands over two seconds",
			prev: observation(t0, 1000, 0, nil, 0),
			cur: observation(t0.Add(2*time.Second), 25_600, 2_468,
				&runtime.CompletedCheckpoint{ID: 42, CompletedAt: t0.Add(1600 * time.Millisecond), Duration: 35 * time.Millisecond}, 40),
			want: "running · in 12.3k rec/s · out 1.2k rec/s · checkpoint 42 400ms ago (took 35ms) · 40 committed",
		},
		{
			name: "millions, an old restored checkpoint, restarts",
			prev: observation(t0, 0, 0, nil, 0),
			cur: observation(t0.Add(time.Second), 4_560_000, 3_000_000,
				&runtime.CompletedCheckpoint{ID: 7, CompletedAt: t0.Add(-303 * time.Second), Duration: 2500 * time.Millisecond, Restored: true}, 3),
			restarts: 2, phase: runtime.PhaseRecovering,
			want: "recovering · in 4.56M rec/s · out 3.00M rec/s · checkpoint 7 (restored) 5m4s ago (took 2.5s) · 3 committed · 2 restarts",
		},
	} {
		if c.phase != "" {
			c.cur.Phase = c.phase
		}
		c.cur.Stats.Restarts = c.restarts
		if got := progressOf(c.prev, c.cur).String(); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Log records written through the status line appear above it: the line
// is erased first and redrawn after; finish leaves it on its own line.
func TestStatusLineKeepsLogAbove(t *testing.T) {
	var b bytes.Buffer
	s := &statusLine{w: &b}
	if _, err := s.Write([]byte("first log\n")); err != nil {
		t.Fatal(err)
	}
	s.set("status 1")
	if _, err := s.Write([]byte("second log\n")); err != nil {
		t.Fatal(err)
	}
	s.set("status 2")
	s.finish()
	want := "first log\n" + clearLine + "status 1" + clearLine + "second log\nstatus 1" + clearLine + "status 2\n"
	if got := b.String(); got != want {
		t.Fatalf("terminal got %q\nwant %q", got, want)
	}
	if isTerminal(&b) {
		t.Error("a buffer is not a terminal")
	}
}

// fixedJob is an observer whose source reads 1000 records between two
// observations.
type fixedJob struct {
	mu sync.Mutex
	n  int64
}

func (f *fixedJob) Observe() runtime.Observation {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return observation(time.Unix(1000+f.n, 0), 1000*f.n, 0, nil, 0)
}

// Without a terminal, progress goes to the log as records with the status
// line's figures; with one, to the status line, left on its own line at the
// end.
func TestProgressOutputs(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	stop := showProgress(&fixedJob{}, nil, log, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	stop()
	first, _, _ := strings.Cut(logged.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(first), &rec); err != nil {
		t.Fatalf("progress log %q: %v", logged.String(), err)
	}
	if rec["msg"] != "progress" || rec["status"] != "running" || rec["records_in_per_second"] != 1000.0 || rec["committed_checkpoints"] != 0.0 {
		t.Errorf("progress record %v", rec)
	}

	var term bytes.Buffer
	status := &statusLine{w: &term}
	stop = showProgress(&fixedJob{}, status, log, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	stop()
	out := term.String()
	if !strings.HasPrefix(out, clearLine+"running · in 1.0k rec/s") || !strings.HasSuffix(out, " · 0 committed\n") {
		t.Errorf("status line output %q", out)
	}
}
