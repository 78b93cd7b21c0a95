package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/runtime"
)

// This file shows `ingest run`'s progress: on a terminal a status line
// refreshed once a second under the log, otherwise a progress log record
// every progressLogInterval.

// progressLogInterval is how often progress is logged when stderr is not a
// terminal.
const progressLogInterval = 10 * time.Second

// isTerminal reports whether w is a terminal (a character device: a tty,
// not a pipe or a file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// statusLine keeps one status line at the bottom of a terminal: what is
// written through it (the log) appears above the line, which is redrawn
// after each write. The line is kept narrower than the terminal: a line
// that reaches the last column wraps, and erasing it then leaves its first
// part behind, one more line scrolled up each second.
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	line string // the status shown, "" for none
	// width returns the terminal's width in columns (read at every update,
	// so a resized window is followed); nil or a result < 1 is 80.
	width func() int
}

// defaultWidth is the width assumed when the terminal's is unknown.
const defaultWidth = 80

// columns returns the width the line may take: one less than the
// terminal's, so the cursor never moves past the last column.
func (s *statusLine) columns() int {
	w := 0
	if s.width != nil {
		w = s.width()
	}
	if w < 1 {
		w = defaultWidth
	}
	return max(w-1, 1)
}

// terminalColumns returns how wide the terminal f is: its size, else
// $COLUMNS, else 0 (unknown).
func terminalColumns(f *os.File) func() int {
	return func() int {
		if w := terminalWidth(f); w > 0 {
			return w
		}
		w, _ := strconv.Atoi(os.Getenv("COLUMNS"))
		return w
	}
}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// Write writes p above the status line.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		if _, err := io.WriteString(s.w, clearLine); err != nil {
			return 0, err
		}
	}
	n, err := s.w.Write(p)
	if err == nil && s.line != "" {
		_, err = io.WriteString(s.w, s.line)
	}
	return n, err
}

// set shows p as the status, as much of it as fits.
func (s *statusLine) set(p progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = p.fit(s.columns())
	_, _ = io.WriteString(s.w, clearLine+s.line) // a terminal that fails a write has nothing to show it on
}

// finish leaves the last status on its own line: what follows goes below.
func (s *statusLine) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		_, _ = io.WriteString(s.w, "\n")
	}
	s.line = ""
}

// progress is what the status line shows.
type progress struct {
	phase runtime.Phase
	// in is the records per second the sources read, out those the sinks
	// received, over the last interval.
	in, out float64
	// last is the newest complete checkpoint (nil before one), age the time
	// since it completed.
	last *runtime.CompletedCheckpoint
	age  time.Duration
	// committed counts checkpoints whose output was committed.
	committed, restarts int64
}

// progressOf computes the progress between two observations of a job.
func progressOf(prev, cur runtime.Observation) progress {
	p := progress{phase: cur.Phase, last: cur.Checkpoints.LastCompleted, committed: cur.Checkpoints.Committed, restarts: cur.Stats.Restarts}
	if p.last != nil {
		p.age = cur.At.Sub(p.last.CompletedAt)
	}
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return p
	}
	in0, out0 := pipelineRecords(prev)
	in1, out1 := pipelineRecords(cur)
	p.in, p.out = float64(in1-in0)/dt, float64(out1-out0)/dt
	return p
}

// pipelineRecords returns the records the sources read and the sinks
// received.
func pipelineRecords(o runtime.Observation) (in, out int64) {
	for _, n := range o.Nodes {
		for _, s := range n.Subtasks {
			switch n.Kind {
			case runtime.KindSource:
				in += s.RecordsIn
			case runtime.KindSink:
				out += s.RecordsIn
			}
		}
	}
	return in, out
}

// String renders the status line, e.g.
//
//	running · in 12.3k rec/s · out 1.2k rec/s · checkpoint 42 400ms ago (took 35ms) · 40 committed
func (p progress) String() string { return p.fit(math.MaxInt) }

// statusPart is a piece of the status line; the pieces of lowest rank are
// left out first when the line is too wide.
type statusPart struct {
	text string
	rank int
	// detail is appended to the text while it fits; it goes first.
	detail string
}

// parts returns the pieces of the status line, in their order.
func (p progress) parts() []statusPart {
	parts := []statusPart{{text: string(p.phase), rank: 9}, {text: "in " + rate(p.in), rank: 6}, {text: "out " + rate(p.out), rank: 3}}
	if p.last == nil {
		parts = append(parts, statusPart{text: "no checkpoint yet", rank: 7})
	} else {
		restored := ""
		if p.last.Restored {
			restored = " (restored)"
		}
		parts = append(parts, statusPart{text: fmt.Sprintf("checkpoint %d%s %s ago", p.last.ID, restored, short(p.age)), rank: 7,
			detail: fmt.Sprintf(" (took %s)", short(p.last.Duration))})
	}
	parts = append(parts, statusPart{text: fmt.Sprintf("%d committed", p.committed), rank: 4})
	if p.restarts > 0 {
		parts = append(parts, statusPart{text: fmt.Sprintf("%d restarts", p.restarts), rank: 8})
	}
	return parts
}

// fit renders the status line in at most cols columns: whole, else
// without the details, else without its least important pieces (out, the
// committed count, the input rate), else cut with "…".
func (p progress) fit(cols int) string {
	if cols < 1 {
		return ""
	}
	parts := p.parts()
	join := func(details bool) string {
		texts := make([]string, 0, len(parts))
		for _, part := range parts {
			if details {
				part.text += part.detail
			}
			texts = append(texts, part.text)
		}
		return strings.Join(texts, " · ")
	}
	line := join(true)
	if utf8.RuneCountInString(line) <= cols {
		return line
	}
	for line = join(false); utf8.RuneCountInString(line) > cols && len(parts) > 1; line = join(false) {
		lowest := 0
		for i, part := range parts {
			if part.rank < parts[lowest].rank {
				lowest = i
			}
		}
		parts = slices.Delete(parts, lowest, lowest+1)
	}
	if r := []rune(line); len(r) > cols {
		line = string(r[:cols-1]) + "…"
	}
	return line
}

// rate formats records per second: 950, 12.3k, 4.56M.
func rate(r float64) string {
	switch {
	case r < 999.5:
		return fmt.Sprintf("%.0f rec/s", r)
	case r < 999_950:
		return fmt.Sprintf("%.1fk rec/s", r/1e3)
	}
	return fmt.Sprintf("%.2fM rec/s", r/1e6)
}

// short formats a duration for the status line: 35ms, 0.4s, 12s, 5m3s.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// observer is what the progress display reads; *runtime.Job implements it.
type observer interface{ Observe() runtime.Observation }

// startProgress shows the job's progress once a second on the status line,
// or logs it every progressLogInterval when there is none, until the
// returned function is called.
func startProgress(job *runtime.Job, status *statusLine, log *slog.Logger) (stop func()) {
	every := progressLogInterval
	if status != nil {
		every = time.Second
	}
	return showProgress(job, status, log, clock.Wall(), every)
}

// showProgress is startProgress with the interval given, on clk.
func showProgress(job observer, status *statusLine, log *slog.Logger, clk clock.Clock, every time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := clk.NewTicker(every)
		defer tick.Stop()
		prev := job.Observe()
		for {
			select {
			case <-quit:
				if status != nil {
					status.set(progressOf(prev, job.Observe()))
					status.finish()
				}
				return
			case <-tick.C():
			}
			cur := job.Observe()
			p := progressOf(prev, cur)
			prev = cur
			if status != nil {
				status.set(p)
				continue
			}
			attrs := []any{"status", p.phase, "records_in_per_second", round1(p.in), "records_out_per_second", round1(p.out),
				"committed_checkpoints", p.committed}
			if p.last != nil {
				attrs = append(attrs, "last_checkpoint", p.last.ID, "last_checkpoint_age_seconds", p.age.Round(time.Millisecond).Seconds(),
					"last_checkpoint_duration_seconds", p.last.Duration.Round(time.Microsecond).Seconds())
			}
			log.Info("progress", attrs...)
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// round1 rounds to one decimal.
func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
