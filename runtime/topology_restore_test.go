package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// This file checks the stable processing contract (DESIGN.md §4): every
// checkpoint records the pipeline's topology, and restoring it into a
// pipeline that cannot take its state fails before processing, with an error
// naming the operator and the difference; a restart cannot cure it, so Run
// returns it at once. AllowNonRestoredState drops the state of removed
// operators explicitly.

// topoShape is one version of the pipeline events → key by → tumbling window
// "w" → transactional sink "out".
type topoShape struct {
	// removed leaves the window out: events go to the sink directly.
	removed bool
	size    time.Duration
	sum     bool // sum of ids instead of a count
	keyDesc string
	byID    bool // key by id % 5 instead of the key
	maxP    int
	par     int // the window's parallelism
}

// original is the shape that writes the checkpoint.
var original = topoShape{size: time.Hour, keyDesc: "key", maxP: 128, par: 2}

// topoRecords is how many records the source emits before it idles; its
// windows (one hour) never fire, so they are all in the checkpoint's state.
const topoRecords = 100

func (s topoShape) pipeline(src pacedEvents, counts *txStore[wCount], events *txStore[cEvent], tapped *atomic.Int64) *stream.Pipeline {
	p := stream.New("topology", stream.MaxParallelism(s.maxP))
	in := stream.From[cEvent](p, "events", src, stream.Parallelism(1))
	// A sink that writes at once: a refused restore must not reach it.
	stream.To(in, "tap", tapSink{tapped}, stream.Parallelism(1))
	if s.removed {
		stream.To(in, "out", stream.Sink[cEvent](txSink[cEvent]{events}), stream.Parallelism(1))
		return p
	}
	key := func(e cEvent) int64 { return e.Key }
	if s.byID {
		key = func(e cEvent) int64 { return e.ID % 5 }
	}
	agg := window.CountOf[cEvent]()
	if s.sum {
		agg = window.SumOf(func(e cEvent) int64 { return e.ID })
	}
	desc := func(n *runtime.Node) { n.KeyDesc = s.keyDesc }
	w := window.Tumbling(stream.KeyBy(in, key), "w", s.size, agg,
		func(k int64, w window.Window, n int64) wCount { return wCount{Key: k, Start: w.Start, Count: n} },
		stream.Parallelism(s.par), desc)
	stream.To(w, "out", stream.Sink[wCount](txSink[wCount]{counts}), stream.Parallelism(1))
	return p
}

// tapSink counts the records it receives; it is not transactional, so every
// record it receives is visible at once.
type tapSink struct{ n *atomic.Int64 }

func (s tapSink) NewSubtask() runtime.SinkSubtask[cEvent] { return &tapWriter{n: s.n} }
func (tapSink) Committer() runtime.Committer              { return nil }
func (tapSink) Descriptor() connector.Descriptor          { return connector.Descriptor{} }
func (tapSink) Describe() string                          { return "test sink that writes at once" }

type tapWriter struct{ n *atomic.Int64 }

func (w *tapWriter) Open(*runtime.Context) error { return nil }
func (w *tapWriter) Write(batch runtime.Batch[cEvent]) error {
	w.n.Add(int64(len(batch)))
	return nil
}
func (w *tapWriter) ProcessWatermark(int64) error             { return nil }
func (w *tapWriter) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (w *tapWriter) NotifyComplete(int64) error               { return nil }
func (w *tapWriter) Close() error                             { return nil }

// topoRun is one run of a shape on a checkpoint directory.
type topoRun struct {
	job    *runtime.Job
	counts *txStore[wCount]
	events *txStore[cEvent]
	tapped *atomic.Int64 // records the tap sink received
	log    *testkit.SyncBuffer
}

func startShape(t *testing.T, s topoShape, dir string, src pacedEvents, allowNonRestored bool) topoRun {
	t.Helper()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := topoRun{counts: newTxStore[wCount](), events: newTxStore[cEvent](), tapped: &atomic.Int64{}, log: &testkit.SyncBuffer{}}
	r.job, err = s.pipeline(src, r.counts, r.events, r.tapped).NewJob(stream.RunOptions{
		Storage: st, Checkpoint: fastCheckpoints(5 * time.Millisecond), Restart: quickRestarts(3),
		Log: slog.New(slog.NewTextHandler(r.log, nil)), AllowNonRestoredState: allowNonRestored,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeCheckpoint runs the original shape until its records are in a
// checkpoint and stops it: the final checkpoint holds open windows.
func writeCheckpoint(t *testing.T) (dir string, final int64) {
	t.Helper()
	return writeCheckpointOf(t, topoRecords)
}

// writeCheckpointOf is writeCheckpoint with records events; with none, the
// window's states are registered and recorded but empty.
func writeCheckpointOf(t *testing.T, records int64) (dir string, final int64) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "ck")
	r := startShape(t, original, dir, pacedEvents{count: records, per: 50, idle: true}, false)
	if err := runUntilStopped(t, r.job, func() bool { return r.job.Stats().Completed >= 3 }); err != nil {
		t.Fatalf("writing the checkpoint: %v", err)
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := latestMetadata(t, st)
	w, ok := m.Task(checkpoint.TaskID{Operator: "w", Subtask: 0})
	if !ok || w.State == nil {
		t.Fatalf("checkpoint %d holds no keyed state of w", m.ID)
	}
	return dir, m.ID
}

// copyDir copies a checkpoint directory, so each case restores its own.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	c := filepath.Join(t.TempDir(), "ck")
	if err := os.CopyFS(c, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return c
}

// Each checkpoint records the pipeline's topology: node ids, types,
// parallelism, max parallelism and key descriptions.
func TestCheckpointRecordsTopology(t *testing.T) {
	dir, _ := writeCheckpoint(t)
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := latestMetadata(t, st)
	topo := m.Topology
	if topo == nil {
		t.Fatalf("checkpoint %d records no topology", m.ID)
	}
	if topo.MaxParallelism != 128 {
		t.Errorf("max parallelism %d, want 128", topo.MaxParallelism)
	}
	var ids []string
	for _, n := range topo.Nodes {
		ids = append(ids, n.ID)
	}
	if !slices.Equal(ids, []string{"events", "out", "tap", "w"}) {
		t.Fatalf("topology nodes %q, want events, out, tap, w", ids)
	}
	if w, _ := topo.Node("w"); w.Parallelism != 2 || w.Key != "key" {
		t.Errorf("w recorded as %+v, want parallelism 2, key %q", w, "key")
	}
	if e, _ := topo.Node("events"); e.Parallelism != 1 || e.Key != "" {
		t.Errorf("events recorded as %+v, want parallelism 1, no key", e)
	}
	// Each subtask of the window records the schema of its states; the
	// codec names carry the window's size and aggregate.
	for sub := range 2 {
		w, _ := m.Task(checkpoint.TaskID{Operator: "w", Subtask: sub})
		var names []string
		for _, st := range w.States {
			names = append(names, st.Name+":"+st.Kind)
		}
		if !slices.Equal(names, []string{"aligned-windows:value", "aligned-windows-fired:value"}) {
			t.Errorf("w[%d] records states %q, want aligned-windows:value, aligned-windows-fired:value", sub, names)
		}
	}
	states := m.OperatorStates("w")
	if len(states) != 2 || !strings.Contains(strings.Join(states[0].Codecs, " "), "size=1h0m0s") ||
		!strings.Contains(strings.Join(states[0].Codecs, " "), "window.count/int64") {
		t.Errorf("w's recorded states %v, want the windows state's codecs to name size=1h0m0s and window.count/int64", states)
	}
	if got := m.OperatorStates("events"); len(got) != 0 {
		t.Errorf("the source records keyed states %v, want none", got)
	}
}

// A restore into a pipeline that cannot take the checkpoint's state is
// refused with an error naming the operator and the difference, wrapping
// ErrIncompatible (Run returns at once, no restart) — before anything is
// processed: no record is sent and nothing reaches a sink, not even one that
// writes at once. The topology is checked before any subtask starts; the
// state schema (window size, aggregate) when the window registers its
// states, while every subtask waits at the start gate.
func TestIncompatibleRestoreRefused(t *testing.T) {
	dir, final := writeCheckpoint(t)
	change := func(f func(*topoShape)) topoShape { s := original; f(&s); return s }
	for _, tc := range []struct {
		name  string
		shape topoShape
		// early: refused before any subtask starts (no record sent).
		early bool
		// schema: refused as a mismatch of the keyed state itself
		// (state.ErrStateMismatch).
		schema bool
		wants  []string
	}{
		{name: "removed stateful operator", shape: change(func(s *topoShape) { s.removed = true }), early: true,
			wants: []string{`operator "w" was removed (or renamed)`, "keyed state of 2 subtasks", "--allow-non-restored-state"}},
		{name: "changed key", shape: change(func(s *topoShape) { s.byID, s.keyDesc = true, "user" }), early: true, schema: true,
			wants: []string{`operator "w": key changed from "key" to "user"`}},
		{name: "changed max parallelism", shape: change(func(s *topoShape) { s.maxP = 64 }), early: true, schema: true,
			wants: []string{`operator "w": max parallelism changed from 128 to 64`, "128 key groups"}},
		{name: "changed window size", shape: change(func(s *topoShape) { s.size = 2 * time.Hour }), schema: true,
			wants: []string{`operator "w"`, "size=1h0m0s", "size=2h0m0s"}},
		{name: "changed aggregate", shape: change(func(s *topoShape) { s.sum = true }), schema: true,
			wants: []string{`operator "w"`, "window.count/int64", "window.sum/int64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startShape(t, tc.shape, copyDir(t, dir), pacedEvents{count: 2 * topoRecords, per: 50, idle: true}, false)
			err := runWithin(r.job, runTimeout)
			if !errors.Is(err, runtime.ErrIncompatible) {
				t.Fatalf("Run = %v, want a refusal wrapping runtime.ErrIncompatible", err)
			}
			if tc.schema && !errors.Is(err, state.ErrStateMismatch) {
				t.Errorf("Run = %v, want it to wrap state.ErrStateMismatch", err)
			}
			for _, want := range tc.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			s := r.job.Stats()
			if s.Restarts != 0 || s.Completed != 0 {
				t.Errorf("stats %+v: want no restart and no checkpoint", s)
			}
			if s.Records != 0 {
				t.Errorf("stats %+v: refused after records were sent; want before", s)
			}
			if tc.early && s.RestoredFrom != 0 {
				t.Errorf("stats %+v: refused after state was restored; want before", s)
			}
			if n := r.counts.count() + r.events.count(); n != 0 {
				t.Errorf("%d records published by a refused run", n)
			}
			if n := r.tapped.Load(); n != 0 {
				t.Errorf("the sink that writes at once received %d records from a refused run", n)
			}
			t.Logf("checkpoint %d refused: %v", final, err)
		})
	}
}

// A state schema change is refused even when the checkpoint holds no entry
// of the state (every window had fired, or none had opened): the schemas the
// checkpoint records are compared with what the operator registers, so
// whether a restore is refused does not depend on when the checkpoint was
// taken. The unchanged pipeline restores the same checkpoint.
func TestSchemaChangeOfEmptyStateRefused(t *testing.T) {
	dir, final := writeCheckpointOf(t, 0)
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(latestMetadata(t, st).OperatorStates("w")) == 0 {
		t.Fatal("the checkpoint records no state schema of w")
	}
	for _, tc := range []struct {
		name  string
		shape topoShape
		wants []string
	}{
		{"changed window size", func() topoShape { s := original; s.size = 2 * time.Hour; return s }(),
			[]string{`operator "w" state "aligned-windows"`, "size=1h0m0s", "size=2h0m0s", "give it a new id and run with --allow-non-restored-state"}},
		{"changed aggregate", func() topoShape { s := original; s.sum = true; return s }(),
			[]string{`operator "w" state "aligned-windows"`, "window.count/int64", "window.sum/int64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startShape(t, tc.shape, copyDir(t, dir), pacedEvents{count: topoRecords, per: 50, idle: true}, false)
			err := runWithin(r.job, runTimeout)
			if !errors.Is(err, runtime.ErrIncompatible) || !errors.Is(err, state.ErrStateMismatch) {
				t.Fatalf("Run = %v, want a refusal wrapping runtime.ErrIncompatible and state.ErrStateMismatch", err)
			}
			for _, want := range tc.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			if s := r.job.Stats(); s.Records != 0 || s.Restarts != 0 {
				t.Errorf("stats %+v: want no record sent and no restart", s)
			}
			if n := r.tapped.Load() + int64(r.counts.count()); n != 0 {
				t.Errorf("a refused run delivered %d records to sinks", n)
			}
		})
	}
	t.Run("unchanged", func(t *testing.T) {
		r := startShape(t, original, copyDir(t, dir), pacedEvents{count: topoRecords, per: 50, idle: true}, false)
		if err := runUntilStopped(t, r.job, func() bool { return r.tapped.Load() >= topoRecords }); err != nil {
			t.Fatalf("Run = %v, want the restore to succeed", err)
		}
		if got := r.job.Stats().RestoredFrom; got != final {
			t.Errorf("restored checkpoint %d, want %d", got, final)
		}
	})
}

// The same pipeline, and one whose keyed window runs at another parallelism
// (its state is redistributed by key group), restore the checkpoint: the
// refusals above come from the changes, not from restoring as such.
func TestCompatibleRestoreAccepted(t *testing.T) {
	dir, final := writeCheckpoint(t)
	for _, tc := range []struct {
		name  string
		shape topoShape
	}{
		{"unchanged", original},
		{"window parallelism 2 to 3", func() topoShape { s := original; s.par = 3; return s }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startShape(t, tc.shape, copyDir(t, dir), pacedEvents{count: topoRecords, per: 50, idle: true}, false)
			if err := runUntilStopped(t, r.job, func() bool { return r.job.Stats().Completed >= 1 }); err != nil {
				t.Fatalf("Run = %v, want the restore to succeed", err)
			}
			if got := r.job.Stats().RestoredFrom; got != final {
				t.Errorf("restored checkpoint %d, want %d", got, final)
			}
		})
	}
}

// With AllowNonRestoredState (--allow-non-restored-state) the pipeline
// without the window starts from the checkpoint: the window's state is
// dropped and logged, the source resumes from its restored position, and the
// sink publishes exactly the records after it.
func TestAllowNonRestoredStateDropsRemovedOperator(t *testing.T) {
	dir, final := writeCheckpoint(t)
	removed := original
	removed.removed = true
	r := startShape(t, removed, copyDir(t, dir), pacedEvents{count: 2 * topoRecords, per: 50, idle: true}, true)
	if err := runUntilStopped(t, r.job, func() bool { return r.events.count() >= topoRecords }); err != nil {
		t.Fatalf("Run with AllowNonRestoredState = %v", err)
	}
	if got := r.job.Stats().RestoredFrom; got != final {
		t.Errorf("restored checkpoint %d, want %d", got, final)
	}
	var ids []int64
	for _, e := range r.events.values() {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	want := make([]int64, topoRecords)
	for i := range want {
		want[i] = topoRecords + int64(i)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("published ids %v, want %d..%d once each", ids, topoRecords, 2*topoRecords-1)
	}
	for _, want := range []string{"dropping the state of an operator the pipeline no longer has", "operator=w"} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, r.log.String())
		}
	}
}

// A checkpoint written before topologies were recorded still restores: the
// checks that need the topology are skipped, which the log says. A changed
// max parallelism is still refused, when the state is read.
func TestCheckpointWithoutTopologyRestores(t *testing.T) {
	dir, final := writeCheckpoint(t)
	old := copyDir(t, dir)
	st, err := storage.NewLocal(old)
	if err != nil {
		t.Fatal(err)
	}
	m := latestMetadata(t, st)
	m.Topology = nil
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"topology":`) {
		t.Fatal("the rewritten metadata still has a topology")
	}
	if err := os.Remove(filepath.Join(old, storage.CheckpointDirName(final), storage.MetadataName)); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteMetadata(context.Background(), final, data); err != nil {
		t.Fatal(err)
	}

	maxP := original
	maxP.maxP = 64
	r := startShape(t, maxP, copyDir(t, old), pacedEvents{count: topoRecords, per: 50, idle: true}, false)
	if err := runWithin(r.job, runTimeout); !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "max parallelism") {
		t.Errorf("changed max parallelism without a recorded topology: Run = %v, want a refusal", err)
	}

	key := original
	key.byID, key.keyDesc = true, "user"
	r = startShape(t, key, copyDir(t, old), pacedEvents{count: topoRecords, per: 50, idle: true}, false)
	if err := runUntilStopped(t, r.job, func() bool { return r.job.Stats().Completed >= 1 }); err != nil {
		t.Fatalf("Run = %v, want a restore without the topology checks", err)
	}
	if got := r.job.Stats().RestoredFrom; got != final {
		t.Errorf("restored checkpoint %d, want %d", got, final)
	}
	if !strings.Contains(r.log.String(), "records no pipeline topology") {
		t.Errorf("the log does not say the topology checks were skipped:\n%s", r.log.String())
	}
}

// A source whose per-subtask position cannot be merged and split (pacedEvents:
// its position is an opaque per-subtask offset, and it declares no
// RescalableInline) is not restored at another parallelism: the job refuses
// at once, naming the node, before anything is read. Kafka, file and datagen
// sources can (their connector tests).
func TestSourceRescaleRefusedWithoutRescalableInline(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := newTxStore[cEvent]()
	pipeline := func(par int) *stream.Pipeline {
		p := stream.New("paced")
		in := stream.From[cEvent](p, "events", pacedEvents{count: 500, per: 50}, stream.Parallelism(par))
		stream.To(in, "sink", stream.Sink[cEvent](txSink[cEvent]{store}), stream.Parallelism(1))
		return p
	}
	if err := runBounded(t, newJob(t, pipeline(2), st, fastCheckpoints(5*time.Millisecond), quickRestarts(3))); err != nil {
		t.Fatal(err)
	}
	published := store.count()
	job := newJob(t, pipeline(3), st, fastCheckpoints(5*time.Millisecond), quickRestarts(3))
	err = runBounded(t, job)
	if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "node events") || !strings.Contains(err.Error(), "per-subtask state cannot be redistributed") {
		t.Fatalf("restore of the paced source at parallelism 3 from 2: %v, want a refusal naming node events", err)
	}
	if s := job.Stats(); s.Restarts != 0 || s.Records != 0 || store.count() != published {
		t.Errorf("stats %+v, %d published (was %d): want no restart, nothing read or published", s, store.count(), published)
	}
}
