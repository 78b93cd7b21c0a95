package runtime_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
)

// DESIGN.md §4 (rescaling: snapshots per key group are redistributed to a
// different parallelism) and §6 (hash partitioning via key groups): a keyed
// counting operator stopped gracefully at parallelism 2 resumes at 3, then at
// 1, from the same checkpoint directory; sources keep their parallelism and
// positions. Every key's count continues where it stopped (published counts
// of each key are 1, 2, 3, … across all runs), no event is lost or repeated,
// and the routing matches the new key group ranges (countOp fails on a key
// outside its ranges).
func TestRescaleKeyedStateAcrossRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	const srcP, keys = 2, 50
	st := newLocal(t)
	store := newTxStore[keyCount]()
	cfg := datagen.Config{Keys: keys, Rate: 20_000}
	var restoredFrom int64
	for run, countP := range []int{2, 3, 1} {
		before := store.count()
		job := newJob(t, countPipeline(t, cfg, srcP, countP, store, nil), st, fastCheckpoints(10*time.Millisecond), quickRestarts(0))
		err := runUntilStopped(t, job, func() bool { return job.Stats().Completed >= 1 && store.count() > before+200 })
		if err != nil {
			t.Fatalf("run %d at parallelism %d: %v", run, countP, err)
		}
		if got := job.Stats().RestoredFrom; got != restoredFrom {
			t.Fatalf("run %d restored from %d, want %d", run, got, restoredFrom)
		}
		m := latestMetadata(t, st)
		restoredFrom = m.ID
		for sub := range countP {
			s, ok := m.Task(checkpoint.TaskID{Operator: "count", Subtask: sub})
			if !ok || s.State == nil {
				t.Fatalf("run %d: checkpoint %d has no keyed state for count[%d]", run, m.ID, sub)
			}
		}
		if _, ok := m.Task(checkpoint.TaskID{Operator: "count", Subtask: countP}); ok {
			t.Fatalf("run %d: checkpoint %d has a count subtask beyond parallelism %d", run, m.ID, countP)
		}
		verifyCounts(t, store.values(), keys, srcP, sourcePositions(t, m, srcP))
		checkNothingAfterFinal(t, store)
	}
	// Every key made progress in some run after the first rescale.
	got := store.values()
	last := map[int64]int64{}
	for _, v := range got {
		last[v.Key] = v.Count
	}
	if len(last) != keys {
		t.Fatalf("%d keys counted, want %d", len(last), keys)
	}
}
