package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/nexmark/query"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

var (
	nxSeed = flag.Uint64("nexmarkseed", 0, "replay TestNexmarkInjectedFailures and TestNexmarkKillNine with this seed (0: random)")
	nxKeep = flag.Bool("nexmarkkeep", false, "keep TestNexmarkKillNine's working directories (they are always kept when it fails)")
)

// The Nexmark crash tests run every query over the same bounded stream, so
// one failure-free reference per query serves both tests.
//
// Event-time density: nxEventsPerSecond = 100 is 10 ms of event time per
// event, as Beam's default generator configuration, and what the CLI's
// --events-per-second 100 selects. nxEvents events then span 400 s of event
// time: 40 tumbling (q8) and 200 sliding (q5) windows of 10 s, and 4,609
// bidder sessions (q11). A failure anywhere in the stream interrupts open
// windows, sessions and a populated join state (the tests check it: see
// nxRestore.midStream).
const (
	nxEvents          = 40_000
	nxEventsPerSecond = 100
	nxParallelism     = 2
	// nxSource is the source node of query.Pipeline; its replay position is
	// {"next": N}, as datagen's (knProgress reads either).
	nxSource = "events"
)

// nxQueries are the queries the crash tests run, in order, with their
// stateful operators; the first holds what a failure must not lose
// mid-stream: open windows, sessions, join sides. (q5's second stage holds a
// window's counts only from when they arrive until the same watermark fires
// its timer, so it is nearly empty at barriers.)
var nxQueries = []struct {
	name     string
	stateful []string
	what     string
}{
	{"q5", []string{"q5-counts", "q5"}, "sliding windows (10 s every 2 s) and a keyed process function"},
	{"q11", []string{"q11"}, "session windows (gap 10 s)"},
	{"q3", []string{"q3"}, "regular inner join"},
	{"q8", []string{"q8"}, "window join (10 s tumbling cogroup)"},
}

// nxGenerator is the generator configuration of every run: Beam's defaults
// with nxEventsPerSecond, exactly what `ingest bench nexmark
// --events-per-second 100` runs.
func nxGenerator() nexmark.Config { return query.BenchGenerator(nxEventsPerSecond) }

// nxSeedFor returns the seed of a test: -nexmarkseed, or a random one, logged
// with the command that replays it.
func nxSeedFor(t *testing.T) uint64 {
	t.Helper()
	seed := knSeed(*nxSeed)
	t.Logf("seed %d (replay with go test ./internal/e2e -run '%s' -v -nexmarkseed=%d)", seed, t.Name(), seed)
	return seed
}

// nxRunOptions configure one in-process run.
type nxRunOptions struct {
	// Rate limits the source (events per second of the job's clock, a fake
	// one stepped an interval per checkpoint); 0 is as fast as possible, on
	// the wall clock.
	Rate float64
	// Interval is the checkpoint interval; 0 means 50 ms.
	Interval time.Duration
	// Prepare, when set, sees the job before it runs (to arm failpoints
	// that read its stats).
	Prepare func(*runtime.Job)
}

// nxRestore is what one recovery restored, read from the checkpoint's
// metadata while the recovery ran.
type nxRestore struct {
	Checkpoint int64
	// Pos is the lowest replay position of the source subtasks: every event
	// below it is in the checkpoint's state; MaxPos the highest.
	Pos, MaxPos int64
	// StateBytes is the size of each stateful operator's keyed state files,
	// summed over its subtasks; Watermark its lowest subtask watermark.
	StateBytes map[string]int64
	Watermark  map[string]int64
	Err        error
}

// EventTime is the event time of the last event every source subtask emitted
// before the checkpoint, in Unix ms.
func (r nxRestore) EventTime() int64 {
	return nexmark.BaseTime + (r.Pos-1)*1000/nxEventsPerSecond
}

func (r nxRestore) String() string {
	if r.Err != nil {
		return fmt.Sprintf("checkpoint %d (unreadable: %v)", r.Checkpoint, r.Err)
	}
	var st []string
	for _, op := range slices.Sorted(maps.Keys(r.StateBytes)) {
		wm := "none"
		if w := r.Watermark[op]; w > runtime.MinWatermark {
			wm = fmt.Sprintf("%+.1fs", float64(w/1e6-nexmark.BaseTime)/1000)
		}
		st = append(st, fmt.Sprintf("%s %d B, watermark %s", op, r.StateBytes[op], wm))
	}
	return fmt.Sprintf("checkpoint %d at events %d..%d (event time +%.1fs; %s)", r.Checkpoint, r.Pos, r.MaxPos,
		float64(r.EventTime()-nexmark.BaseTime)/1000, strings.Join(st, "; "))
}

// midStream reports whether the restore resumed inside the stream with the
// keyed state of operator op beyond empty: at least minBytes bytes.
func (r nxRestore) midStream(op string, minBytes int64) bool {
	return r.Err == nil && r.Pos > 0 && r.MaxPos < nxEvents && r.StateBytes[op] >= minBytes
}

// nxReadRestore reads checkpoint id's metadata from dir.
func nxReadRestore(dir string, id int64, stateful []string) nxRestore {
	r := nxRestore{Checkpoint: id, Pos: -1, StateBytes: map[string]int64{}, Watermark: map[string]int64{}}
	st, err := storage.NewLocal(dir)
	if err != nil {
		r.Err = err
		return r
	}
	data, err := st.ReadMetadata(context.Background(), id)
	if err != nil {
		r.Err = err
		return r
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		r.Err = err
		return r
	}
	for _, s := range m.Tasks {
		switch {
		case s.Task.Operator == nxSource:
			var p struct {
				Next int64 `json:"next"`
			}
			if err := json.Unmarshal(s.Inline, &p); err != nil {
				r.Err = fmt.Errorf("position of %v: %w", s.Task, err)
				return r
			}
			if r.Pos < 0 || p.Next < r.Pos {
				r.Pos = p.Next
			}
			r.MaxPos = max(r.MaxPos, p.Next)
		case slices.Contains(stateful, s.Task.Operator):
			if s.State != nil {
				r.StateBytes[s.Task.Operator] += s.State.Size
			}
			if w, ok := r.Watermark[s.Task.Operator]; !ok || s.Watermark < w {
				r.Watermark[s.Task.Operator] = s.Watermark
			}
		}
	}
	return r
}

// nxRestoreLog is a slog handler that records every "restored from
// checkpoint" of a job: it reads the checkpoint's metadata on the spot, while
// the recovery that logged it still runs (retention cannot have deleted it).
type nxRestoreLog struct {
	dir      string
	stateful []string
	mu       *sync.Mutex
	restores *[]nxRestore
	failures *[]string
}

func newNxRestoreLog(dir string, stateful []string) *nxRestoreLog {
	return &nxRestoreLog{dir: dir, stateful: stateful, mu: &sync.Mutex{}, restores: &[]nxRestore{}, failures: &[]string{}}
}

func (h *nxRestoreLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *nxRestoreLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *nxRestoreLog) WithGroup(string) slog.Handler            { return h }

func (h *nxRestoreLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Message == "restored from checkpoint":
		var id int64
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "checkpoint" {
				id = a.Value.Int64()
			}
			return true
		})
		rs := nxReadRestore(h.dir, id, h.stateful)
		h.mu.Lock()
		*h.restores = append(*h.restores, rs)
		h.mu.Unlock()
	case strings.HasPrefix(r.Message, "job failed"):
		var cause string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				cause = a.Value.String()
			}
			return true
		})
		h.mu.Lock()
		*h.failures = append(*h.failures, cause)
		h.mu.Unlock()
	}
	return nil
}

// report returns the restores and the job failures logged so far.
func (h *nxRestoreLog) report() ([]nxRestore, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(*h.restores), slices.Clone(*h.failures)
}

// nxRun runs query name over the nxEvents events in process, exactly-once,
// with its checkpoints under dir/ck and its output under dir/out, and
// returns the job's stats, the restores it made and the committed lines.
// Restarts are allowed (delay 5 ms, up to 1000 in a row).
func nxRun(t *testing.T, name string, stateful []string, dir string, o nxRunOptions) (runtime.Stats, *nxRestoreLog, []string) {
	t.Helper()
	q, err := query.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	out, ck := dir+"/out", dir+"/ck"
	p, err := query.Pipeline(q, nexmark.SourceConfig{Generator: nxGenerator(), Events: nxEvents, Rate: o.Rate, MaxDelay: query.WatermarkDelay},
		nxParallelism, out)
	if err != nil {
		t.Fatal(err)
	}
	opts := checkpoint.DefaultOptions()
	opts.Interval = o.Interval
	if opts.Interval == 0 {
		opts.Interval = 50 * time.Millisecond
	}
	opts.TolerableFailures = 100
	logs := newNxRestoreLog(ck, stateful)
	ro := stream.RunOptions{CheckpointDir: ck, Checkpoint: opts, Log: slog.New(logs),
		Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 1000}}
	// A rate-limited run is on a fake clock, stepped one interval per
	// checkpoint: how many events lie between two checkpoints, and so how
	// many checkpoints the stream lasts, does not depend on the machine.
	var fake *clock.Fake
	if o.Rate > 0 {
		fake = clock.NewFake(time.Unix(1_800_000_000, 0))
		ro.Clock = fake
	}
	job, err := p.NewJob(ro)
	if err != nil {
		t.Fatal(err)
	}
	if o.Prepare != nil {
		o.Prepare(job)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := job.Run
	if fake != nil {
		run = func(ctx context.Context) error {
			return testkit.RunStepped(ctx, fake, opts.Interval, job.Run, func() int64 { return job.Stats().Progress() })
		}
	}
	if err := run(ctx); err != nil {
		t.Fatalf("%s: run: %v", name, err)
	}
	return job.Stats(), logs, nxCommitted(t, out)
}

// nxCommitted returns the committed lines under out.
func nxCommitted(t *testing.T, out string) []string {
	t.Helper()
	lines, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatalf("reading committed output: %v", err)
	}
	s := make([]string, len(lines))
	for i, l := range lines {
		s[i] = string(l.Text)
	}
	return s
}

var (
	nxRefMu sync.Mutex
	nxRefs  = map[string][]string{}
)

// nxReference returns the committed output of a failure-free, unthrottled
// run of query name, computed once per test binary.
func nxReference(t *testing.T, name string) []string {
	t.Helper()
	nxRefMu.Lock()
	defer nxRefMu.Unlock()
	if ref, ok := nxRefs[name]; ok {
		return ref
	}
	start := time.Now()
	st, logs, ref := nxRun(t, name, nil, t.TempDir(), nxRunOptions{})
	if restores, failures := logs.report(); st.Restarts > 0 || len(restores) > 0 || len(failures) > 0 {
		t.Fatalf("%s: the failure-free reference run restarted: %+v, failures %q", name, st, failures)
	}
	if len(ref) < 40 {
		t.Fatalf("%s: the failure-free run committed %d rows: too few to prove anything", name, len(ref))
	}
	t.Logf("%s: failure-free reference: %d rows (%v)", name, len(ref), time.Since(start).Round(time.Millisecond))
	nxRefs[name] = ref
	return ref
}

// nxDiff compares committed lines with the reference as multisets.
type nxDiff struct {
	Got, Want int
	// Missing counts reference rows committed fewer times than in the
	// reference; Duplicated rows committed more times than in the reference
	// (which has them); Unexpected rows the reference does not have.
	Missing, Duplicated, Unexpected int
	Examples                        []string
}

func (d nxDiff) OK() bool { return d.Missing == 0 && d.Duplicated == 0 && d.Unexpected == 0 }

func (d nxDiff) String() string {
	return fmt.Sprintf("%d rows committed, %d in the failure-free output: %d missing, %d duplicated, %d unexpected; e.g.\n  %s",
		d.Got, d.Want, d.Missing, d.Duplicated, d.Unexpected, strings.Join(d.Examples, "\n  "))
}

func nxCompare(got, want []string) nxDiff {
	d := nxDiff{Got: len(got), Want: len(want)}
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	wantCount := maps.Clone(count)
	for _, l := range got {
		count[l]--
	}
	shown := map[string]int{} // examples per kind
	example := func(kind string, n int, line string) {
		if shown[kind]++; shown[kind] <= 3 {
			d.Examples = append(d.Examples, fmt.Sprintf("%s ×%d: %s", kind, n, line))
		}
	}
	for _, l := range slices.Sorted(maps.Keys(count)) {
		n := count[l]
		switch {
		case n > 0:
			d.Missing += n
			example("missing", n, l)
		case n < 0 && wantCount[l] > 0:
			d.Duplicated += -n
			example("duplicated", -n, l)
		case n < 0:
			d.Unexpected += -n
			example("unexpected", -n, l)
		}
	}
	return d
}
