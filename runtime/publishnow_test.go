package runtime_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// TestPublishNow: a committer may hold output back for a later commit only
// when runtime.PublishNow is false. It is true exactly for the recovery's
// re-commit of the restored checkpoint (its subtasks start afresh and never
// offer that output again) and for the final checkpoint's commit; false for
// the commits of checkpoints as they complete.
func TestPublishNow(t *testing.T) {
	var fails atomic.Int64
	// The first commit of the job fails once, after its checkpoint completed:
	// the restart's recovery re-commits it.
	t.Cleanup(failpoint.Enable("job/after-metadata-before-commit", func() error {
		if fails.Add(1) == 1 {
			return fmt.Errorf("before the first commit: %w", failpoint.ErrInjected)
		}
		return nil
	}))
	src, err := datagen.New(datagen.Config{Count: 3000, Rate: 20000}, func(id, _, _ int64) int64 { return id })
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("publish-now")
	store := newTxStore[int64]()
	stream.To(stream.From(p, "gen", src), "sink", stream.Sink[int64](txSink[int64]{store}), stream.Parallelism(1))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(3))
	if err := runWithin(job, runTimeout); err != nil {
		t.Fatalf("run: %v", err)
	}
	calls, final := store.publishNow, job.Stats().Latest
	if len(calls) < 3 {
		t.Fatalf("%d commits (%v): want the recovery's and the running ones", len(calls), calls)
	}
	// The failed attempt made no Commit call: the first call is the
	// recovery's re-commit. The final checkpoint's commit is called when it
	// has output (the records after the last periodic checkpoint).
	t.Logf("final %d, last call %d", final, calls[len(calls)-1].checkpoint)
	for i, c := range calls {
		want := i == 0 || c.checkpoint == final
		if c.now != want {
			t.Errorf("commit %d of checkpoint %d (the final checkpoint is %d): PublishNow %v, want %v; calls %v", i, c.checkpoint, final, c.now, want, calls)
		}
	}
	if got := store.values(); len(got) != 3000 {
		t.Errorf("%d values published, want 3000", len(got))
	}
}
