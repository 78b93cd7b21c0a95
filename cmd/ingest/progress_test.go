package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/testkit"
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
	p1, p2 := progress{phase: runtime.PhaseRunning}, progress{phase: runtime.PhaseRunning, committed: 2}
	status1, status2 := p1.String(), p2.String()
	if _, err := s.Write([]byte("first log\n")); err != nil {
		t.Fatal(err)
	}
	s.set(p1)
	if _, err := s.Write([]byte("second log\n")); err != nil {
		t.Fatal(err)
	}
	s.set(p2)
	s.finish()
	want := "first log\n" + clearLine + status1 + clearLine + "second log\n" + status1 + clearLine + status2 + "\n"
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
	var logged testkit.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	fake := clock.NewFake(time.Unix(1000, 0))
	stop := showProgress(&fixedJob{}, nil, log, fake, 10*time.Millisecond)
	// One tick of the display's clock logs one record: wait for it.
	if err := fake.WaitForWaiters(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	fake.Advance(10 * time.Millisecond)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logged.String(), "\n"); {
		if time.Now().After(deadline) {
			t.Fatal("no progress record was logged a minute after the display's tick")
		}
		time.Sleep(time.Millisecond)
	}
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
	// Stopped before any tick: the last figures still make the final line.
	stop = showProgress(&fixedJob{}, status, log, fake, 10*time.Millisecond)
	stop()
	out := term.String()
	if !strings.HasPrefix(out, clearLine+"running · in 1.0k rec/s") || !strings.HasSuffix(out, " · 0 committed\n") {
		t.Errorf("status line output %q", out)
	}
}

// The status line never reaches the terminal's last column, where it would
// wrap and scroll a line up at every update: it drops the checkpoint's
// duration, then the output rate, the committed count, the input rate, the
// checkpoint and the restarts, and cuts the phase with "…" only when even
// it is too wide.
func TestStatusLineFitsTerminal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := progressOf(observation(t0, 0, 0, nil, 0), observation(t0.Add(time.Second), 4_560_000, 3_000_000,
		&runtime.CompletedCheckpoint{ID: 7, CompletedAt: t0.Add(-303 * time.Second), Duration: 2500 * time.Millisecond, Restored: true}, 3))
	p.phase, p.restarts = runtime.PhaseRecovering, 2
	full := "recovering · in 4.56M rec/s · out 3.00M rec/s · checkpoint 7 (restored) 5m4s ago (took 2.5s) · 3 committed · 2 restarts"
	for _, c := range []struct {
		width int
		want  string
	}{
		{200, full},
		{len([]rune(full)) + 1, full},
		{len([]rune(full)), "recovering · in 4.56M rec/s · out 3.00M rec/s · checkpoint 7 (restored) 5m4s ago · 3 committed · 2 restarts"},
		{80, "recovering · in 4.56M rec/s · checkpoint 7 (restored) 5m4s ago · 2 restarts"},
		{60, "recovering · checkpoint 7 (restored) 5m4s ago · 2 restarts"},
		{40, "recovering · 2 restarts"},
		{20, "recovering"},
		{8, "recove…"},
		{2, "…"},
	} {
		var b bytes.Buffer
		s := &statusLine{w: &b, width: func() int { return c.width }}
		s.set(p)
		got := strings.TrimPrefix(b.String(), clearLine)
		if got != c.want {
			t.Errorf("width %d:\n got %q\nwant %q", c.width, got, c.want)
		}
	}
	for width := 1; width <= 130; width++ {
		if n := len([]rune(p.fit(width - 1))); width > 1 && n > width-1 {
			t.Errorf("width %d: a line of %d columns", width, n)
		}
	}
	// An unknown width is 80 columns.
	var b bytes.Buffer
	(&statusLine{w: &b, width: func() int { return 0 }}).set(p)
	if got := strings.TrimPrefix(b.String(), clearLine); len([]rune(got)) > 79 {
		t.Errorf("unknown width: %q", got)
	}
}

// The status line is drawn only on a terminal, and not on the terminal a
// stdout sink prints its records to: they would land in the middle of it.
// (/dev/null stands for a terminal: both are character devices.)
func TestNoStatusLineOnTheStdoutSinksTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	open := func() *os.File {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	tty, sameTTY := open(), open()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		name       string
		stderr     io.Writer
		stdout     *os.File
		stdoutSink bool
		want       bool
	}{
		{"a terminal", tty, sameTTY, false, true},
		{"a stdout sink on the same terminal", tty, sameTTY, true, false},
		{"a stdout sink redirected to a file", tty, file, true, true},
		{"stderr not a terminal", &bytes.Buffer{}, sameTTY, false, false},
		{"stderr a file", file, sameTTY, false, false},
	} {
		var s serving
		out := s.output(c.stderr, c.stdout, c.stdoutSink)
		if got := s.status != nil; got != c.want {
			t.Errorf("%s: status line %v, want %v", c.name, got, c.want)
		}
		if _, isStatus := out.(*statusLine); isStatus != c.want {
			t.Errorf("%s: the log goes to %T", c.name, out)
		}
	}
}
