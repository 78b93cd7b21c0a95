package runtime_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

func newLocal(t *testing.T) *storage.Local {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// DESIGN.md §3 invariant 6: a bounded pipeline ends with a final checkpoint
// whose output is committed before Run returns nil; the committed output is
// exactly the input (every datagen id once, per-key counts 1..n), also when
// periodic checkpoints are disabled. No goroutine outlives Run.
func TestBoundedPipelineEndsWithCommittedFinalCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		rate     float64
	}{
		{"final checkpoint only", 0, 0},
		{"periodic checkpoints", 5 * time.Millisecond, 50_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const count, keys = 5000, 10
			st := newLocal(t)
			store := newTxStore[keyCount]()
			p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: tc.rate}, 2, 2, store, nil)
			job := newJob(t, p, st, fastCheckpoints(tc.interval), quickRestarts(0))
			if err := runBounded(t, job); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			m := latestMetadata(t, st)
			if !m.Final {
				t.Errorf("the recovery point %d is not marked final", m.ID)
			}
			s := job.Stats()
			if s.Latest != m.ID || s.Completed < 1 || s.Failed != 0 || s.Restarts != 0 {
				t.Errorf("Stats = %+v, want Latest %d, Completed >= 1, no failures or restarts", s, m.ID)
			}
			if tc.interval == 0 && s.Completed != 1 {
				t.Errorf("Completed = %d with periodic checkpoints disabled, want only the final one", s.Completed)
			}
			pos := sourcePositions(t, m, 2)
			if pos[0] != count || pos[1] != count+1 {
				t.Errorf("final source positions %v, want [%d %d] (input exhausted)", pos, count, count+1)
			}
			got := store.values()
			if len(got) != count {
				t.Fatalf("%d values committed, want %d", len(got), count)
			}
			verifyCounts(t, got, keys, 2, pos)
			checkNothingAfterFinal(t, store)
			ids := store.checkpoints()
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("publications in checkpoint order %v: want increasing", ids)
				}
			}
		})
	}
}

// Job.Stop (job.go) and DESIGN.md §3 invariant 2: a graceful stop of an
// unbounded pipeline takes a final checkpoint, commits its output and returns
// nil; a new run on the same checkpoint directory restores from it — sources
// continue at the saved positions, keyed state continues — so across the two
// runs every id is committed once and the committed ids are exactly those
// before the last final checkpoint's source positions.
func TestStopTakesFinalCheckpointAndNextRunResumes(t *testing.T) {
	defer goleak.VerifyNone(t)
	const keys = 10
	st := newLocal(t)
	store := newTxStore[keyCount]()
	cfg := datagen.Config{Keys: keys, Rate: 20_000}
	ck := fastCheckpoints(10 * time.Millisecond)

	job1 := newJob(t, countPipeline(t, cfg, 2, 2, store, nil), st, ck, quickRestarts(0))
	if err := runUntilStopped(t, job1, func() bool { return job1.Stats().Completed >= 2 }); err != nil {
		t.Fatalf("first run: Run after Stop = %v, want nil", err)
	}
	m1 := latestMetadata(t, st)
	if !m1.Final || job1.Stats().Latest != m1.ID {
		t.Fatalf("first run: recovery point %d (final %v), Stats().Latest %d: want the final checkpoint", m1.ID, m1.Final, job1.Stats().Latest)
	}
	pos1 := sourcePositions(t, m1, 2)
	checkNothingAfterFinal(t, store)
	n1 := store.count()
	if n1 == 0 {
		t.Fatal("first run committed nothing")
	}
	verifyCounts(t, store.values(), keys, 2, pos1)

	job2 := newJob(t, countPipeline(t, cfg, 2, 2, store, nil), st, ck, quickRestarts(0))
	if err := runUntilStopped(t, job2, func() bool { return job2.Stats().Completed >= 2 && store.count() > n1 }); err != nil {
		t.Fatalf("second run: Run after Stop = %v, want nil", err)
	}
	if got := job2.Stats().RestoredFrom; got != m1.ID {
		t.Errorf("second run restored from %d, want the first run's final checkpoint %d", got, m1.ID)
	}
	m2 := latestMetadata(t, st)
	if !m2.Final || m2.ID <= m1.ID || m2.JobID != m1.JobID {
		t.Fatalf("second run: recovery point %d (final %v, job %s), want a final checkpoint after %d of job %s", m2.ID, m2.Final, m2.JobID, m1.ID, m1.JobID)
	}
	pos2 := sourcePositions(t, m2, 2)
	for s := range pos2 {
		if pos2[s] < pos1[s] {
			t.Fatalf("source %d went back from %d to %d", s, pos1[s], pos2[s])
		}
	}
	verifyCounts(t, store.values(), keys, 2, pos2)
	checkNothingAfterFinal(t, store)
}

// checkNothingAfterFinal asserts checkpoint.Trigger's Final contract: the
// sources have stopped and emit nothing after the final barrier, so no sink
// subtask receives a record it will never stage.
func checkNothingAfterFinal(t *testing.T, store *txStore[keyCount]) {
	t.Helper()
	if n := store.unstagedValues(); n != 0 {
		t.Errorf("%d records reached the sink after the final barrier: the sources kept reading", n)
	}
}

var errInjected = errors.New("injected operator failure")

// DESIGN.md §6 ("any subtask error fails the job; the job restarts from the
// last complete checkpoint") and §3 invariants 2 and 3: a subtask error
// after a completed checkpoint restarts the job in process; the new attempt
// restores keyed state and source positions of that checkpoint, so the
// committed output is still exactly once with unbroken per-key counts.
func TestSubtaskErrorRestartsFromLastCompleteCheckpoint(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 20_000, 10
	var failed atomic.Bool
	hook := func(ctx *runtime.Context, completed int64) error {
		if ctx.Attempt == 0 && completed >= 1 && failed.CompareAndSwap(false, true) {
			return errInjected
		}
		return nil
	}
	st := newLocal(t)
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 100_000}, 2, 2, store, hook)
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(3))
	if err := runBounded(t, job); err != nil {
		t.Fatalf("Run = %v, want nil after one restart", err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure never fired: the job ended before a checkpoint completed")
	}
	s := job.Stats()
	if s.Restarts != 1 {
		t.Errorf("Restarts = %d, want 1", s.Restarts)
	}
	if s.RestoredFrom == 0 {
		t.Errorf("RestoredFrom = 0: the restart did not restore a checkpoint")
	}
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
}

// RestartOptions.MaxAttempts (job.go): a job that keeps failing without
// completing a checkpoint restarts MaxAttempts times, then Run returns the
// error, naming the restart count and wrapping the subtask's error.
func TestRestartsExhaustedFailsRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	errBoom := errors.New("boom")
	var calls atomic.Int64
	hook := func(*runtime.Context, int64) error { calls.Add(1); return errBoom }
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: 2000, Keys: 10}, 1, 1, store, hook)
	job := newJob(t, p, newLocal(t), fastCheckpoints(10*time.Millisecond), quickRestarts(2))
	err := runBounded(t, job)
	if err == nil {
		t.Fatal("Run = nil, want an error after the restarts are exhausted")
	}
	if !errors.Is(err, errBoom) {
		t.Errorf("Run error %q does not wrap the subtask's error", err)
	}
	if !strings.Contains(err.Error(), "2 restarts") || !strings.Contains(err.Error(), "count[0]") {
		t.Errorf("Run error %q should name the restart count (2 restarts) and the failing subtask (count[0])", err)
	}
	if s := job.Stats(); s.Restarts != 2 {
		t.Errorf("Restarts = %d, want 2", s.Restarts)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the failing operator ran %d times, want 3 (one attempt + 2 restarts)", n)
	}
	if n := store.count(); n != 0 {
		t.Errorf("%d values committed by a job that never completed a checkpoint", n)
	}
}

// recovery.go and job.go (ErrIncompatible): a checkpoint directory belongs
// to one pipeline; running another pipeline on it fails at once, without
// restarts, with a message saying so instead of restoring foreign state.
func TestCheckpointOfAnotherPipelineIsRefused(t *testing.T) {
	defer goleak.VerifyNone(t)
	st := newLocal(t)
	store := newTxStore[keyCount]()
	job := newJob(t, countPipeline(t, datagen.Config{Count: 100}, 1, 1, store, nil), st, fastCheckpoints(0), quickRestarts(0))
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	src, err := datagen.Events(datagen.Config{Count: 100})
	if err != nil {
		t.Fatal(err)
	}
	other := stream.New("other")
	stream.To(stream.From[datagen.Event](other, "events", src), "sink", stream.Discard[datagen.Event]())
	job = newJob(t, other, st, fastCheckpoints(0), quickRestarts(3))
	err = runBounded(t, job)
	if err == nil || !strings.Contains(err.Error(), `belongs to pipeline "counts", not "other"`) {
		t.Fatalf("Run of another pipeline on the directory = %v, want a refusal naming both pipelines", err)
	}
	// A restart cannot cure it: Run reports it at once.
	if !errors.Is(err, runtime.ErrIncompatible) || job.Stats().Restarts != 0 {
		t.Errorf("Run = %v after %d restarts, want runtime.ErrIncompatible without restarting", err, job.Stats().Restarts)
	}
}

// plan.go Validate and job.go NewJob: an invalid plan is rejected before
// anything runs, with a message naming the pipeline, the node and the
// problem; several problems are all reported.
func TestPlanValidationErrors(t *testing.T) {
	t.Parallel()
	src := func(id string, p int) *runtime.Node {
		return &runtime.Node{ID: id, Parallelism: p, NewSource: func() runtime.Source { return nil }}
	}
	op := func(id string, p int, in ...runtime.Edge) *runtime.Node {
		return &runtime.Node{ID: id, Parallelism: p, NewOperator: func() runtime.Operator { return nil }, Inputs: in}
	}
	from := func(n *runtime.Node, part runtime.Partitioner) runtime.Edge {
		return runtime.Edge{From: n, Partitioner: part}
	}
	st := newLocal(t)

	for _, tc := range []struct {
		name  string
		plan  func() *runtime.Plan
		wants []string
	}{
		{"forward edge with different parallelism", func() *runtime.Plan {
			s := src("src", 2)
			return &runtime.Plan{Nodes: []*runtime.Node{s, op("map", 3, from(s, runtime.Forward()))}}
		}, []string{"node map: forward input from src needs equal parallelism (2 vs 3)"}},
		{"duplicate node id", func() *runtime.Plan {
			s := src("a", 1)
			return &runtime.Plan{Nodes: []*runtime.Node{s, op("a", 1, from(s, runtime.Rebalance()))}}
		}, []string{`node id "a" used twice`}},
		{"cycle", func() *runtime.Plan {
			s := src("src", 1)
			a := op("a", 1, from(s, runtime.Rebalance()))
			b := op("b", 1, from(a, runtime.Rebalance()))
			a.Inputs = append(a.Inputs, runtime.Edge{From: b, Input: 1, Partitioner: runtime.Rebalance()})
			return &runtime.Plan{Nodes: []*runtime.Node{s, a, b}}
		}, []string{"cycle"}},
		{"invalid node id", func() *runtime.Plan {
			return &runtime.Plan{Nodes: []*runtime.Node{src("my source", 1)}}
		}, []string{`node id "my source"`}},
		{"edge without partitioner", func() *runtime.Plan {
			s := src("src", 1)
			return &runtime.Plan{Nodes: []*runtime.Node{s, op("sink", 1, runtime.Edge{From: s})}}
		}, []string{"node sink: input from src has no partitioner"}},
		{"input from a node outside the plan", func() *runtime.Plan {
			return &runtime.Plan{Nodes: []*runtime.Node{src("src", 1), op("sink", 1, from(src("ghost", 1), runtime.Rebalance()))}}
		}, []string{"node sink: input from a node that is not in the plan"}},
		{"parallelism above max parallelism", func() *runtime.Plan {
			return &runtime.Plan{MaxParallelism: 4, Nodes: []*runtime.Node{src("src", 5)}}
		}, []string{"node src: parallelism 5 must be between 1 and the max parallelism 4"}},
		{"source with inputs, operator without, node with both constructors", func() *runtime.Plan {
			s := src("src", 1)
			s2 := src("src2", 1)
			s2.Inputs = []runtime.Edge{from(s, runtime.Rebalance())}
			both := op("both", 1, from(s, runtime.Rebalance()))
			both.NewSource = s.NewSource
			return &runtime.Plan{Nodes: []*runtime.Node{s, s2, op("lonely", 1), both}}
		}, []string{"node src2: a source has no inputs", "node lonely: an operator needs at least one input", "node both: exactly one of NewSource and NewOperator must be set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.plan()
			plan.Name = "bad"
			_, err := runtime.NewJob(plan, runtime.Options{Checkpoint: checkpoint.DefaultOptions(), Storage: st})
			if err == nil {
				t.Fatal("NewJob accepted an invalid plan")
			}
			for _, want := range append([]string{"pipeline bad: "}, tc.wants...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewJob error %q does not contain %q", err, want)
				}
			}
		})
	}

	// Options are validated too.
	s := src("src", 1)
	plan := &runtime.Plan{Name: "ok", Nodes: []*runtime.Node{s, op("sink", 1, from(s, runtime.Forward()))}}
	if _, err := runtime.NewJob(plan, runtime.Options{Checkpoint: checkpoint.DefaultOptions()}); err == nil || !strings.Contains(err.Error(), "Storage is required") {
		t.Errorf("NewJob without storage = %v, want a message that Storage is required", err)
	}
	bad := checkpoint.DefaultOptions()
	bad.MaxConcurrent = 0
	if _, err := runtime.NewJob(plan, runtime.Options{Checkpoint: bad, Storage: st}); err == nil || !strings.Contains(err.Error(), "max_concurrent") {
		t.Errorf("NewJob with max concurrent 0 = %v, want a checkpoint options error", err)
	}
}
