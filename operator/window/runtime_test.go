package window_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

// This file runs windows through the real runtime: a replayable source of
// generated steps, hash partitioning, checkpoints every few milliseconds, a
// transactional sink, and failures injected into the window's subtask that
// make the job restart from its last complete checkpoint. The committed
// output must equal the model's (and so the failure-free output) exactly:
// nothing lost, nothing twice.

// stepSource replays steps: subtask s of P reads steps s, s+P, …, one per
// Read, reporting the step's watermark after it. Its position is the next
// step index.
type stepSource struct {
	steps []step
	par   int
	// perCheckpoint, when positive, paces a subtask to that many steps
	// between two checkpoints (Position calls), so a run spans a known
	// number of checkpoints whatever the machine's speed.
	perCheckpoint int
}

func (s stepSource) NewSubtask() runtime.SourceSubtask[ev] { return &stepReader{src: s} }
func (stepSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (stepSource) Describe() string { return "test steps" }

type stepReader struct {
	src  stepSource
	ctx  *runtime.Context
	out  runtime.Emitter[ev]
	next int
	wm   int64
	// since counts the steps read since the last checkpoint.
	since int
}

func (r *stepReader) Open(ctx *runtime.Context, out runtime.Emitter[ev]) error {
	r.out = out
	r.ctx, r.next, r.wm = ctx, ctx.Task.Subtask, runtime.MinWatermark
	if ctx.Restored != nil && len(ctx.Restored.Inline) == 8 {
		r.next = int(binary.LittleEndian.Uint64(ctx.Restored.Inline))
	}
	if prev := r.next - r.src.par; prev >= 0 {
		r.wm = r.src.steps[prev].wm
	}
	return nil
}

func (r *stepReader) Read() (runtime.ReadResult, error) {
	if r.next >= len(r.src.steps) {
		return runtime.ReadResult{Watermark: r.wm, Exhausted: true}, nil
	}
	if r.src.perCheckpoint > 0 && r.since >= r.src.perCheckpoint {
		return runtime.ReadResult{Watermark: r.wm, Wait: 100 * time.Microsecond}, nil
	}
	r.since++
	st := r.src.steps[r.next]
	r.next += r.src.par
	r.wm = max(r.wm, st.wm)
	if err := r.out.Emit(runtime.Batch[ev](slices.Clone(st.recs))); err != nil {
		return runtime.ReadResult{}, err
	}
	return runtime.ReadResult{Watermark: r.wm}, nil
}

func (r *stepReader) Position() ([]byte, error) {
	r.since = 0
	return binary.LittleEndian.AppendUint64(nil, uint64(r.next)), nil
}

func (r *stepReader) Close() error { return nil }

// txStore is where txSink's output lives, outside any job: staged by
// checkpoint, published idempotently by the committer.
type txStore[T any] struct {
	mu        sync.Mutex
	seq       int
	staged    map[string][]runtime.Record[T]
	published map[string]bool
	values    []runtime.Record[T]
}

func newTxStore[T any]() *txStore[T] {
	return &txStore[T]{staged: map[string][]runtime.Record[T]{}, published: map[string]bool{}}
}

func (s *txStore[T]) committed() []runtime.Record[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values)
}

// txSink is a transactional sink: each barrier stages what arrived since
// the previous one; a completed checkpoint's commit publishes it.
type txSink[T any] struct{ store *txStore[T] }

func (s txSink[T]) NewSubtask() runtime.SinkSubtask[T] { return &txWriter[T]{store: s.store} }
func (s txSink[T]) Committer() runtime.Committer       { return txCommitter[T](s) }
func (txSink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (txSink[T]) Describe() string { return "test transactional sink" }

type txWriter[T any] struct {
	stream.Stateless
	store   *txStore[T]
	buf     []runtime.Record[T]
	pending []checkpoint.Committable
}

func (w *txWriter[T]) Write(batch runtime.Batch[T]) error {
	w.buf = append(w.buf, batch...)
	return nil
}

func (w *txWriter[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	if len(w.buf) > 0 {
		s := w.store
		s.mu.Lock()
		s.seq++
		key := strconv.Itoa(s.seq)
		s.staged[key] = w.buf
		s.mu.Unlock()
		w.buf = nil
		w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: []byte(key)})
	}
	return runtime.Snapshot{Committables: slices.Clone(w.pending)}, nil
}

func (w *txWriter[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	return nil
}

type txCommitter[T any] struct{ store *txStore[T] }

func (c txCommitter[T]) Commit(_ context.Context, _ string, cm checkpoint.Commit) error {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, data := range cm.Committables {
		key := string(data)
		if s.published[key] {
			continue
		}
		v, ok := s.staged[key]
		if !ok {
			return fmt.Errorf("committable %s of checkpoint %d is neither staged nor published", key, cm.Checkpoint)
		}
		s.published[key] = true
		delete(s.staged, key)
		s.values = append(s.values, v...)
	}
	return nil
}

func (c txCommitter[T]) Abandon(context.Context, string) (int, error) {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	n := len(c.store.staged)
	clear(c.store.staged)
	return n, nil
}

// failPlan says when the window fails: in attempt a, subtask 0 fails at its
// first batch holding a record with event time >= at[a], once a checkpoint
// completed in that attempt (so the restart restores one).
type failPlan struct {
	mu     sync.Mutex
	at     []int64
	failed []bool
}

// failAt plans failures at the event times of the records at the given
// fractions of steps.
func failAt(steps []step, fractions ...float64) *failPlan {
	p := &failPlan{failed: make([]bool, len(fractions))}
	for _, f := range fractions {
		p.at = append(p.at, steps[int(f*float64(len(steps)))].recs[0].Time)
	}
	return p
}

// injected counts the failures that happened.
func (p *failPlan) injected() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.failed {
		if f {
			n++
		}
	}
	return n
}

var errInjected = errors.New("injected window failure")

// failing wraps the node's operator so that it fails as plan says.
func failing(plan *failPlan) stream.NodeOption {
	return func(n *runtime.Node) {
		next := n.NewOperator
		n.NewOperator = func() runtime.Operator { return &failingOp{Operator: next(), plan: plan} }
	}
}

type failingOp struct {
	runtime.Operator
	plan      *failPlan
	ctx       *runtime.Context
	completed int
}

func (o *failingOp) Open(ctx *runtime.Context) error { o.ctx = ctx; return o.Operator.Open(ctx) }

func (o *failingOp) NotifyComplete(id int64) error {
	o.completed++
	return o.Operator.NotifyComplete(id)
}

func (o *failingOp) ProcessBatch(input int, r runtime.Records) error {
	if p := o.plan; p != nil && o.ctx.Task.Subtask == 0 && o.completed > 0 {
		p.mu.Lock()
		a := o.ctx.Attempt
		fail := a < len(p.at) && !p.failed[a] && slices.ContainsFunc(r.(runtime.Batch[ev]), func(r runtime.Record[ev]) bool { return r.Time >= p.at[a] })
		if fail {
			p.failed[a] = true
		}
		p.mu.Unlock()
		if fail {
			return fmt.Errorf("attempt %d after %d checkpoints: %w", a, o.completed, errInjected)
		}
	}
	return o.Operator.ProcessBatch(input, r)
}

// job describes one run through the runtime.
type job struct {
	spec
	steps          []step
	srcPar, winPar int
	perCheckpoint  int // see stepSource
	interval       time.Duration
	fail           *failPlan
	// declareLate declares the late side output (LateRecordsTo("late"));
	// late, when set, connects it to a sink writing there.
	declareLate bool
	late        *txStore[ev]
	log         *slog.Logger
}

// run runs the job to the end and returns the committed output and the
// job's stats.
func (j job) run(t *testing.T) ([]out, runtime.Stats) {
	t.Helper()
	p := stream.New("windows")
	src := stream.From[ev](p, "src", stream.Source[ev](stepSource{steps: j.steps, par: j.srcPar, perCheckpoint: j.perCheckpoint}), stream.Parallelism(j.srcPar))
	opts := []stream.NodeOption{stream.Parallelism(j.winPar)}
	if j.fail != nil {
		opts = append(opts, failing(j.fail))
	}
	if j.declareLate || j.late != nil {
		opts = append(opts, window.LateRecordsTo("late"))
	}
	w := j.build(src, opts...)
	store := newTxStore[res]()
	stream.To(w, "sink", stream.Sink[res](txSink[res]{store}), stream.Parallelism(2))
	if j.late != nil {
		stream.To(stream.SideOutput[ev](w, "late"), "late_sink", stream.Sink[ev](txSink[ev]{j.late}), stream.Parallelism(1))
	}
	// In-memory storage: checkpoints cost no fsync, so they come as often
	// as the interval says.
	st, err := storagetest.NewCrashFS().NewLocal("/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = j.interval
	jb, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 5}, Log: j.log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := jb.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return outsOf(store.committed()), jb.Stats()
}

// Every window kind through the runtime at window parallelism 1 and 3, with
// two failures and restarts: the committed output is the model's, exactly.
// Inputs in order within the watermark delay come from two source subtasks;
// inputs with late records from one (so which records are late does not
// depend on how two sources interleave).
func TestRuntimeWindowsMatchModelWithFailures(t *testing.T) {
	for _, s := range []spec{
		{kind: "tumbling", size: 100, lateness: 250},
		{kind: "sliding", size: 100, slide: 25, merge: true},
		{kind: "sliding", size: 100, slide: 40, lateness: 100},
		{kind: "session", gap: 30},
		{kind: "session", gap: 30, lateness: 200},
	} {
		for _, input := range []string{"in-delay", "late"} {
			for _, par := range []int{1, 3} {
				name := fmt.Sprintf("%v/%s/parallelism=%d", s, input, par)
				t.Run(name, func(t *testing.T) {
					steps := inputs(11)[input].steps()
					want, _ := s.expected(steps)
					srcPar := 2
					if input == "late" {
						srcPar = 1
					}
					plan := failAt(steps, 0.4, 0.7)
					got, stats := job{spec: s, steps: steps, srcPar: srcPar, winPar: par, perCheckpoint: 20,
						interval: time.Millisecond, fail: plan}.run(t)
					if !slices.Equal(got, want) {
						t.Fatalf("committed output differs from the model\n%s", diffOuts(got, want))
					}
					if n := plan.injected(); n != 2 || stats.Restarts != 2 {
						t.Errorf("%d failures injected, %d restarts; want 2 and 2 (the run ended too soon?)", n, stats.Restarts)
					}
				})
			}
		}
	}
}

// Long windows (an hour of event time, and sessions of an hour and more) stay open
// across dozens of checkpoints while failures hit the job three times; each
// restart restores the open windows from the last complete checkpoint. The
// committed output equals the failure-free run's, and the model's, exactly.
func TestLongWindowsAcrossManyCheckpointsAndFailures(t *testing.T) {
	sec := int64(time.Second)
	g := gen{n: 9000, keys: 4, batch: 20, stepT: sec / 2, jitter: 20 * sec, start: 1_767_225_600 * sec, seed: 5}
	steps := g.steps() // 1.25 hours of event time from 00:00, 2 records a second, in 450 steps
	for _, s := range []spec{
		{kind: "tumbling", size: 3600 * sec},
		{kind: "sliding", size: 3600 * sec, slide: 900 * sec, merge: true},
		{kind: "session", gap: 600 * sec}, // each key is active all along: one session per key
	} {
		t.Run(s.String(), func(t *testing.T) {
			want, _ := s.expected(steps)
			// 225 reads per source subtask, 4 per checkpoint: more than 50
			// checkpoints, 45 of them while the first hour is open.
			j := job{spec: s, steps: steps, srcPar: 2, winPar: 3, perCheckpoint: 4, interval: time.Millisecond}
			clean, cleanStats := j.run(t)
			if !slices.Equal(clean, want) {
				t.Fatalf("failure-free output differs from the model\n%s", diffOuts(clean, want))
			}
			j.fail = failAt(steps, 0.3, 0.55, 0.8)
			got, stats := j.run(t)
			if !slices.Equal(got, clean) {
				t.Fatalf("output with failures differs from the failure-free output\n%s", diffOuts(got, clean))
			}
			if n := j.fail.injected(); n != 3 || stats.Restarts != 3 {
				t.Errorf("%d failures injected, %d restarts; want 3 and 3", n, stats.Restarts)
			}
			if cleanStats.Completed < 50 {
				t.Errorf("the failure-free run completed %d checkpoints; the windows should span dozens", cleanStats.Completed)
			}
			t.Logf("%d results; %d checkpoints failure-free, %d with %d restarts", len(got), cleanStats.Completed, stats.Completed, stats.Restarts)
		})
	}
}

// Late records go, unchanged, to the window's late side output, exactly
// once across a failure; without a consumer they are dropped, counted, and
// the count is logged when the subtasks close.
func TestLateRecordsSideOutputAndDropCount(t *testing.T) {
	steps := inputs(13)["late"].steps()
	for _, s := range []spec{
		{kind: "tumbling", size: 100, lateness: 50},
		{kind: "sliding", size: 100, slide: 25, merge: true},
		{kind: "session", gap: 30, lateness: 40},
	} {
		t.Run(s.String(), func(t *testing.T) {
			m := newModel(s)
			var wantLate []runtime.Record[ev]
			for _, st := range steps {
				for _, r := range st.recs {
					n := m.late
					m.record(r)
					if m.late > n {
						wantLate = append(wantLate, r)
					}
				}
				m.watermark(st.wm)
			}
			if len(wantLate) == 0 {
				t.Fatal("no late records in the input")
			}
			late := newTxStore[ev]()
			got, _ := job{spec: s, steps: steps, srcPar: 1, winPar: 3, perCheckpoint: 20, interval: time.Millisecond,
				fail: failAt(steps, 0.5), late: late}.run(t)
			want, _ := s.expected(steps)
			if !slices.Equal(got, want) {
				t.Fatalf("main output differs from the model\n%s", diffOuts(got, want))
			}
			if gotLate := sortRecs(late.committed()); !slices.Equal(gotLate, sortRecs(wantLate)) {
				t.Fatalf("late side output: %d records, want %d", len(gotLate), len(wantLate))
			}

			// No side output, or one nothing consumes: dropped and
			// counted, the counts logged at close.
			for _, declare := range []bool{false, true} {
				logs := &logCapture{}
				job{spec: s, steps: steps, srcPar: 1, winPar: 3, interval: time.Millisecond, declareLate: declare, log: slog.New(logs)}.run(t)
				if d := logs.sum("late records dropped since the subtask opened", "dropped"); d != int64(len(wantLate)) {
					t.Fatalf("side output declared %v: logged %d dropped late records, want %d", declare, d, len(wantLate))
				}
			}
		})
	}
}

func sortRecs(rs []runtime.Record[ev]) []runtime.Record[ev] {
	slices.SortFunc(rs, func(a, b runtime.Record[ev]) int {
		if a.Time != b.Time {
			return int(a.Time - b.Time)
		}
		if c := strings.Compare(a.Value.Key, b.Value.Key); c != 0 {
			return c
		}
		return int(a.Value.V - b.Value.V)
	})
	return rs
}

// logCapture is a slog.Handler keeping records.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// sum adds up the int attribute attr of the records with message msg.
func (l *logCapture) sum(msg, attr string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == attr {
				n += a.Value.Int64()
			}
			return true
		})
	}
	return n
}
