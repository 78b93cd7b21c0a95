package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

var errDiskFull = errors.New("disk full")

// failingCalls fails the given 1-based calls of op and records the checkpoint
// ids it failed and those of op's calls that passed.
type failingCalls struct {
	mu     sync.Mutex
	calls  int
	failed map[int64]bool
	passed []int64
}

func failCalls(f *storagetest.Faulty, op storagetest.Op, which ...int) *failingCalls {
	fc := &failingCalls{failed: map[int64]bool{}}
	f.FailWhen(func(o storagetest.Op, id int64, _ string) error {
		if o != op {
			return nil
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		fc.calls++
		for _, n := range which {
			if fc.calls == n {
				fc.failed[id] = true
				return errDiskFull
			}
		}
		fc.passed = append(fc.passed, id)
		return nil
	})
	return fc
}

func (fc *failingCalls) isFailed(id int64) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.failed[id]
}

// watchLatest samples job.Stats().Latest until stop is closed and reports the
// values it saw.
func watchLatest(job *runtime.Job, stop <-chan struct{}) <-chan []int64 {
	out := make(chan []int64, 1)
	go func() {
		var seen []int64
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			if l := job.Stats().Latest; len(seen) == 0 || seen[len(seen)-1] != l {
				seen = append(seen, l)
			}
			select {
			case <-stop:
				out <- seen
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// runWatched runs job to the end while sampling Stats().Latest.
func runWatched(t *testing.T, job *runtime.Job) ([]int64, error) {
	t.Helper()
	stop := make(chan struct{})
	latest := watchLatest(job, stop)
	err := runBounded(t, job)
	close(stop)
	return <-latest, err
}

// checkRecoveryPoints asserts DESIGN.md §3 invariant 1 on the sampled
// recovery points: never going back and, unless fc is nil, never a failed
// checkpoint (ids are never reused, also across restarts).
func checkRecoveryPoints(t *testing.T, seen []int64, fc *failingCalls) {
	t.Helper()
	for i, l := range seen {
		if l != 0 && fc != nil && fc.isFailed(l) {
			t.Errorf("Stats().Latest was %d, a checkpoint whose write failed (sampled %v)", l, seen)
		}
		if i > 0 && l < seen[i-1] {
			t.Errorf("Stats().Latest went back from %d to %d (sampled %v)", seen[i-1], l, seen)
		}
	}
}

// checkStorageClean asserts that only complete checkpoints remain, and
// trimmed ones that a complete one references files of (retention keeps
// those files: a checkpoint's state builds on them), and, unless fc is nil,
// none of them is one that failed.
func checkStorageClean(t *testing.T, st storage.Storage, fc *failingCalls) {
	t.Helper()
	ctx := context.Background()
	entries, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[int64]bool{}
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		data, err := st.ReadMetadata(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.SharedFiles() {
			referenced[f.Checkpoint] = true
		}
	}
	for _, e := range entries {
		if (!e.Complete && !referenced[e.ID]) || (fc != nil && fc.isFailed(e.ID)) {
			t.Errorf("checkpoint %d (complete %v) left in storage after the job ended", e.ID, e.Complete)
		}
	}
}

// DESIGN.md §3 invariant 1 ("a failed … checkpoint leaves the recovery
// point unchanged and the pipeline running"): two metadata writes fail
// (within the tolerance of 3); the checkpoints fail and are counted, the
// recovery point never points to them, their staged output is published by a
// later checkpoint, and the job finishes without a restart, with exact output.
func TestMetadataWriteFailuresKeepPipelineRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 20_000, 10
	local := newLocal(t)
	f := storagetest.NewFaulty(local)
	fc := failCalls(f, storagetest.OpWriteMetadata, 2, 3)
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 100_000}, 2, 2, store, nil)
	job := newJob(t, p, f, fastCheckpoints(10*time.Millisecond), quickRestarts(0))

	seen, err := runWatched(t, job)
	if err != nil {
		t.Fatalf("Run = %v, want nil: failures within the tolerance must not stop the job", err)
	}
	s := job.Stats()
	if s.Failed != 2 || s.Restarts != 0 || s.Completed < 2 {
		t.Errorf("Stats = %+v, want Failed 2, no restart, Completed >= 2", s)
	}
	checkRecoveryPoints(t, seen, fc)
	if m := latestMetadata(t, local); !m.Final || m.ID != s.Latest {
		t.Errorf("recovery point %d (final %v), Stats().Latest %d: want the final checkpoint", m.ID, m.Final, s.Latest)
	}
	for _, id := range store.checkpoints() {
		if fc.isFailed(id) {
			t.Errorf("output published as checkpoint %d, whose metadata write failed", id)
		}
	}
	checkStorageClean(t, local, fc)
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
}

// DESIGN.md §3 invariant 1 for a failure of a subtask's state write (the
// subtask declines): the checkpoint fails, the pipeline keeps running with
// exact output, and Stats().Failed counts the failed checkpoint ("Completed
// and Failed count checkpoints", job.go).
func TestStateWriteFailureFailsCheckpointOnly(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 20_000, 10
	local := newLocal(t)
	f := storagetest.NewFaulty(local)
	// Call 1 is a state file of checkpoint 1; fail one of checkpoint 2 or later.
	fc := failCalls(f, storagetest.OpWriteFile, 3)
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 100_000}, 2, 2, store, nil)
	job := newJob(t, p, f, fastCheckpoints(10*time.Millisecond), quickRestarts(0))

	seen, err := runWatched(t, job)
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	fc.mu.Lock()
	nFailed := len(fc.failed)
	fc.mu.Unlock()
	if nFailed != 1 {
		t.Fatalf("%d state writes failed, want 1: the job ended too early", len(fc.failed))
	}
	checkRecoveryPoints(t, seen, fc)
	checkStorageClean(t, local, fc)
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
	s := job.Stats()
	if s.Restarts != 0 {
		t.Errorf("Restarts = %d, want 0", s.Restarts)
	}
	if s.Failed != 1 {
		t.Errorf("Stats().Failed = %d after a checkpoint failed because a state write failed, want 1", s.Failed)
	}
}

// checkpoint.Options.TolerableFailures: one failure more than tolerated
// fails the attempt; the job restarts from the last complete checkpoint and
// still finishes with exact output.
func TestExceedingTolerableFailuresRestartsJob(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 20_000, 10
	local := newLocal(t)
	f := storagetest.NewFaulty(local)
	fc := failCalls(f, storagetest.OpWriteMetadata, 2, 3)
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 100_000}, 2, 2, store, nil)
	ck := fastCheckpoints(10 * time.Millisecond)
	ck.TolerableFailures = 1
	job := newJob(t, p, f, ck, quickRestarts(3))

	seen, err := runWatched(t, job)
	if err != nil {
		t.Fatalf("Run = %v, want nil after a restart", err)
	}
	s := job.Stats()
	if s.Restarts != 1 || s.Failed != 2 {
		t.Errorf("Stats = %+v, want 1 restart after 2 failed checkpoints", s)
	}
	fc.mu.Lock()
	first := fc.passed[0]
	fc.mu.Unlock()
	if s.RestoredFrom != first {
		t.Errorf("restarted from checkpoint %d, want %d, the last one complete before the failures", s.RestoredFrom, first)
	}
	checkRecoveryPoints(t, seen, nil)
	checkStorageClean(t, local, nil)
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
}

// DESIGN.md §3 invariant 1 and Stats.Latest ("the newest complete
// checkpoint (the recovery point)"), with MaxConcurrent 2: checkpoint 2's
// state write is slow, so checkpoint 3 gets every acknowledgement first and
// its metadata is written while 2's acknowledgements complete. 3 becomes the
// recovery point and subsumes 2, yet 2's queued metadata write still runs and
// its success must not move Stats().Latest back to 2 (nor count 2 as
// completed), since the coordinator discards 2 right after.
//
// The test holds storage still at the Discard of 2 (nothing else can
// complete meanwhile) and looks at Stats().Latest there.
func TestLatestNeverGoesBackWithConcurrentCheckpoints(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 20_000, 10
	local := newLocal(t)
	f := storagetest.NewFaulty(local)
	var job *runtime.Job
	release2 := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var atDiscard2 []int64 // Stats().Latest values seen while Discard(2) is held
	f.FailWhen(func(op storagetest.Op, id int64, _ string) error {
		switch {
		case op == storagetest.OpWriteFile && id == 2:
			select { // checkpoint 2's state write waits for checkpoint 3's metadata
			case <-release2:
			case <-time.After(5 * time.Second):
			}
		case op == storagetest.OpWriteMetadata && id == 3:
			once.Do(func() { close(release2) })
			// Widen the window: let the driver take 2's last acknowledgement
			// and queue 2's metadata write behind this one.
			time.Sleep(100 * time.Millisecond)
		case op == storagetest.OpDiscard && id == 2:
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				l := job.Stats().Latest
				mu.Lock()
				if len(atDiscard2) == 0 || atDiscard2[len(atDiscard2)-1] != l {
					atDiscard2 = append(atDiscard2, l)
				}
				mu.Unlock()
				if l < 3 {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	})
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys, Rate: 100_000}, 2, 1, store, nil)
	ck := fastCheckpoints(5 * time.Millisecond)
	ck.MaxConcurrent = 2
	job = newJob(t, p, f, ck, quickRestarts(0))

	seen, err := runWatched(t, job)
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
	mu.Lock()
	defer mu.Unlock()
	for _, l := range atDiscard2 {
		if l < 3 {
			t.Errorf("Stats().Latest was %d after checkpoint 3 completed (while checkpoint 2 was being discarded): the recovery point went back (seen there: %v)", l, atDiscard2)
		}
	}
	checkRecoveryPoints(t, seen, nil)
}

// checkpoint.RequestFinal ("retried until it completes") and DESIGN.md §3
// invariant 6: when the final checkpoint of a bounded pipeline fails (its
// metadata write fails), the job does not end or restart: the final
// checkpoint is taken again, and the output staged for the failed one is
// published with it.
func TestFailedFinalCheckpointIsRetried(t *testing.T) {
	defer goleak.VerifyNone(t)
	const count, keys = 5000, 10
	local := newLocal(t)
	f := storagetest.NewFaulty(local)
	fc := failCalls(f, storagetest.OpWriteMetadata, 1)
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: count, Keys: keys}, 2, 2, store, nil)
	job := newJob(t, p, f, fastCheckpoints(0), quickRestarts(0))
	if err := runBounded(t, job); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	s := job.Stats()
	if s.Failed != 1 || s.Completed != 1 || s.Restarts != 0 {
		t.Errorf("Stats = %+v, want the final checkpoint failed once, then completed, without restart", s)
	}
	m := latestMetadata(t, local)
	if !m.Final || fc.isFailed(m.ID) {
		t.Errorf("recovery point %d (final %v): want a final checkpoint other than the failed one", m.ID, m.Final)
	}
	if ids := store.checkpoints(); len(ids) != 1 || ids[0] != m.ID {
		t.Errorf("output published as checkpoints %v, want all of it once as %d", ids, m.ID)
	}
	checkStorageClean(t, local, fc)
	verifyCounts(t, store.values(), keys, 2, []int64{count, count + 1})
}
