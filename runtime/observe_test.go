package runtime_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// nodeObs returns node id of o, failing the test when it is missing.
func nodeObs(t *testing.T, o runtime.Observation, id string) runtime.NodeObservation {
	t.Helper()
	for _, n := range o.Nodes {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("observation has no node %s: %+v", id, o.Nodes)
	return runtime.NodeObservation{}
}

// sums returns a node's records in and out over its subtasks.
func sums(n runtime.NodeObservation) (in, out int64) {
	for _, s := range n.Subtasks {
		in += s.RecordsIn
		out += s.RecordsOut
	}
	return in, out
}

// The observation of a bounded run agrees with the job's own counters and
// with the records the pipeline moved: every record is counted once in and
// once out per node, the records read from channels are the records sent
// between subtasks (Stats.Records), and the checkpoint history holds every
// checkpoint with the final one complete, committed and sized as its
// metadata says.
func TestObserveBoundedRun(t *testing.T) {
	const n = 20000
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: n, Keys: 10, Rate: 200000}, 2, 2, store, nil)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(5*time.Millisecond), quickRestarts(0))
	if o := job.Observe(); o.Phase != runtime.PhaseStarting || o.Checkpoints.LastCompleted != nil {
		t.Fatalf("before Run: phase %s, last completed %+v", o.Phase, o.Checkpoints.LastCompleted)
	}
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	o, stats := job.Observe(), job.Stats()
	if o.Phase != runtime.PhaseFinished || o.StartedAt.IsZero() || o.JobID == "" {
		t.Fatalf("phase %s, started %v, job %q: want finished, a start time and a job id", o.Phase, o.StartedAt, o.JobID)
	}
	events, count, sink := nodeObs(t, o, "events"), nodeObs(t, o, "count"), nodeObs(t, o, "sink")
	if events.Kind != runtime.KindSource || count.Kind != runtime.KindOperator || sink.Kind != runtime.KindSink {
		t.Fatalf("kinds %s %s %s, want source operator sink", events.Kind, count.Kind, sink.Kind)
	}
	for _, c := range []struct {
		node    runtime.NodeObservation
		in, out int64
	}{{events, n, n}, {count, n, n}, {sink, n, 0}} {
		if in, out := sums(c.node); in != c.in || out != c.out {
			t.Errorf("%s: records in %d, out %d; want %d, %d", c.node.ID, in, out, c.in, c.out)
		}
	}
	countIn, _ := sums(count)
	sinkIn, _ := sums(sink)
	if countIn+sinkIn != stats.Records {
		t.Errorf("records read from channels %d, Stats.Records %d: want equal", countIn+sinkIn, stats.Records)
	}
	var read int64
	for _, s := range events.Subtasks {
		read += s.ReadSinceRestore
		if s.Watermark != runtime.MaxWatermark {
			t.Errorf("%v: watermark %d at the end, want MaxWatermark", s.Task, s.Watermark)
		}
	}
	if read != n {
		t.Errorf("sources read %d records since the restore, want %d", read, n)
	}

	c := o.Checkpoints
	if c.Completed != stats.Completed || c.Failed != stats.Failed || c.Triggered != c.Completed+c.Failed || c.InProgress != 0 {
		t.Errorf("checkpoints %+v, stats completed %d failed %d", c, stats.Completed, stats.Failed)
	}
	if c.Completed < 2 || c.Committed != c.Completed || c.PendingCommit != 0 {
		t.Errorf("completed %d, committed %d, pending %d: want >= 2 completed, all committed", c.Completed, c.Committed, c.PendingCommit)
	}
	if o.CheckpointDuration.Count != uint64(c.Completed) || o.StorageWrite["metadata"].Count != uint64(c.Completed) {
		t.Errorf("duration observations %d, metadata writes %d: want %d each", o.CheckpointDuration.Count, o.StorageWrite["metadata"].Count, c.Completed)
	}
	if o.StorageWrite["state"].Count == 0 || o.SinkPrepare["sink"].Count < uint64(c.Completed) || o.SinkCommit["sink"].Count == 0 {
		t.Errorf("state writes %d, sink prepares %d, sink commits %d: want some of each", o.StorageWrite["state"].Count,
			o.SinkPrepare["sink"].Count, o.SinkCommit["sink"].Count)
	}
	if len(o.SinkPrepare) != 1 {
		t.Errorf("sink prepare histograms for %v, want only the sink", o.SinkPrepare)
	}
	if got := o.Alignment["count"].Count; got < uint64(2*c.Completed) {
		t.Errorf("alignment observations of count: %d, want one per subtask and checkpoint (>= %d)", got, 2*c.Completed)
	}

	hist := job.Checkpoints()
	if int64(len(hist)) != c.Triggered {
		t.Fatalf("history has %d checkpoints, %d were triggered", len(hist), c.Triggered)
	}
	for i, r := range hist {
		if i > 0 && r.ID >= hist[i-1].ID {
			t.Fatalf("history not newest first: %d after %d", r.ID, hist[i-1].ID)
		}
	}
	last := hist[0]
	meta := latestMetadata(t, st)
	if last.ID != stats.Latest || last.ID != meta.ID || !last.Final || last.Status != runtime.CheckpointCompleted || !last.Committed {
		t.Fatalf("newest history entry %+v, latest %d: want the final checkpoint, completed and committed", last, stats.Latest)
	}
	if last.Tasks != 5 || len(last.Subtasks) != 5 {
		t.Errorf("checkpoint %d: %d tasks, %d subtasks acknowledged; want 5 (2 sources, 2 counts, 1 sink)", last.ID, last.Tasks, len(last.Subtasks))
	}
	// The final checkpoint is self-contained: it wrote all of its state.
	if last.StateSizeFull != meta.Size() || last.StateSizeIncremental != meta.Size() || last.FilesReused != 0 {
		t.Errorf("checkpoint %d: full size %d, incremental %d, files reused %d; metadata says %d, all written", last.ID, last.StateSizeFull, last.StateSizeIncremental, last.FilesReused, meta.Size())
	}
	if last.Duration <= 0 || last.EndedAt.Before(last.TriggeredAt) || last.MetadataWrite <= 0 || last.StateWriteMax <= 0 {
		t.Errorf("checkpoint %d timing: %+v", last.ID, last)
	}
	if lc := c.LastCompleted; lc == nil || lc.ID != last.ID || lc.Duration != last.Duration {
		t.Errorf("last completed %+v, want checkpoint %d", lc, last.ID)
	}
	if got, ok := job.Checkpoint(last.ID); !ok || got.ID != last.ID || len(got.Subtasks) != 5 {
		t.Errorf("Checkpoint(%d) = %+v, %v", last.ID, got, ok)
	}
	if _, ok := job.Checkpoint(last.ID + 100); ok {
		t.Errorf("Checkpoint(%d) found a checkpoint that was never taken", last.ID+100)
	}
	if len(o.Recoveries) != 0 || o.ReplayedRecords != 0 || o.LastFailure != nil {
		t.Errorf("recoveries %v, replayed %d, last failure %v: want none", o.Recoveries, o.ReplayedRecords, o.LastFailure)
	}
}

// A restart after a failure is counted with the failure's class, and the
// replayed records are exactly the records the sources read twice: a
// bounded source of n records emits n plus the replay.
func TestObserveRestartReplay(t *testing.T) {
	const n = 30000
	store := newTxStore[keyCount]()
	var failed atomic.Bool
	hook := func(ctx *runtime.Context, completed int64) error {
		if completed >= 2 && ctx.Attempt == 0 && failed.CompareAndSwap(false, true) {
			return errors.New("boom")
		}
		return nil
	}
	src := datagen.Config{Count: n, Keys: 10, Rate: 50000}
	p := countPipeline(t, src, 2, 2, store, hook)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(3))
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	o := job.Observe()
	if !failed.Load() || o.Stats.Restarts != 1 {
		t.Fatalf("failed %v, restarts %d: want one injected failure", failed.Load(), o.Stats.Restarts)
	}
	want := []runtime.RecoveryCount{{Cause: "restart", Class: "task", Count: 1}}
	if len(o.Recoveries) != 1 || o.Recoveries[0] != want[0] {
		t.Fatalf("recoveries %+v, want %+v", o.Recoveries, want)
	}
	if o.LastFailure == nil || o.LastFailure.Class != "task" || o.LastFailure.At.IsZero() {
		t.Fatalf("last failure %+v, want class task", o.LastFailure)
	}
	_, read := sums(nodeObs(t, o, "events"))
	if o.ReplayUnknown != 0 || o.ReplayedRecords <= 0 || read != n+o.ReplayedRecords {
		t.Fatalf("sources emitted %d records of %d, replayed %d (unknown %d): want emitted = %d + replayed > 0",
			read, n, o.ReplayedRecords, o.ReplayUnknown, n)
	}
	verifyCounts(t, store.values(), 10, 2, nil)
	// The checkpoints in flight when the attempt failed failed with it,
	// and the history tells why.
	var failedWithJob int
	for _, r := range job.Checkpoints() {
		if r.Status == runtime.CheckpointInProgress {
			t.Errorf("checkpoint %d still in progress after Run returned", r.ID)
		}
		if r.Status == runtime.CheckpointFailed && r.FailureReason == "" {
			t.Errorf("checkpoint %d failed without a reason", r.ID)
		}
		if r.Status == runtime.CheckpointFailed {
			failedWithJob++
		}
	}
	if int64(failedWithJob) != o.Checkpoints.Failed {
		t.Errorf("%d failed checkpoints in the history, %d counted", failedWithJob, o.Checkpoints.Failed)
	}
}

// A job started on storage that holds a complete checkpoint counts a
// recovery from a checkpoint, and reports that checkpoint as the last
// completed one until a newer one completes.
func TestObserveStartFromCheckpoint(t *testing.T) {
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := newTxStore[keyCount]()
	first := newJob(t, countPipeline(t, datagen.Config{Count: 1000, Keys: 10}, 1, 1, store, nil), st,
		fastCheckpoints(time.Hour), quickRestarts(0))
	if err := runBounded(t, first); err != nil {
		t.Fatal(err)
	}
	restored := first.Stats().Latest
	second := newJob(t, countPipeline(t, datagen.Config{Count: 1000, Keys: 10}, 1, 1, store, nil), st,
		fastCheckpoints(time.Hour), quickRestarts(0))
	if err := runBounded(t, second); err != nil {
		t.Fatal(err)
	}
	o := second.Observe()
	want := runtime.RecoveryCount{Cause: "checkpoint", Count: 1}
	if len(o.Recoveries) != 1 || o.Recoveries[0] != want {
		t.Fatalf("recoveries %+v, want %+v", o.Recoveries, want)
	}
	if lc := o.Checkpoints.LastCompleted; lc == nil || lc.ID <= restored || lc.Restored {
		t.Fatalf("last completed %+v, want the second run's final checkpoint after %d", lc, restored)
	}
}

// slowSink takes delay per batch: a consumer slower than its producer.
type slowSink struct{ delay time.Duration }

func (s slowSink) NewSubtask() runtime.SinkSubtask[datagen.Event] { return &slowWriter{delay: s.delay} }
func (slowSink) Committer() runtime.Committer                     { return nil }
func (slowSink) Descriptor() connector.Descriptor                 { return connector.Descriptor{} }
func (slowSink) Describe() string                                 { return "slow test sink" }

type slowWriter struct{ delay time.Duration }

func (w *slowWriter) Open(*runtime.Context) error { return nil }
func (w *slowWriter) Write(runtime.Batch[datagen.Event]) error {
	time.Sleep(w.delay)
	return nil
}
func (w *slowWriter) ProcessWatermark(int64) error             { return nil }
func (w *slowWriter) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (w *slowWriter) NotifyComplete(int64) error               { return nil }
func (w *slowWriter) Close() error                             { return nil }

// A producer whose consumer is slower waits on the full channel: the
// producer's backpressure grows with the time it waited, the consumer's
// stays 0. (DESIGN.md §6: a full channel is backpressure.)
func TestObserveBackpressure(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Keys: 10})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("slow")
	events := stream.From[datagen.Event](p, "events", src)
	stream.To(events.Rebalance(), "sink", stream.Sink[datagen.Event](slowSink{delay: 2 * time.Millisecond}))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(time.Hour), quickRestarts(0))
	start := time.Now()
	var elapsed time.Duration
	err = runUntilStopped(t, job, func() bool {
		elapsed = time.Since(start)
		return elapsed > 300*time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	o := job.Observe()
	bp := nodeObs(t, o, "events").Subtasks[0].Backpressure
	if bp < elapsed/3 || bp > time.Since(start) {
		t.Errorf("source backpressure %v over %v of running: want most of it", bp, elapsed)
	}
	if sink := nodeObs(t, o, "sink").Subtasks[0].Backpressure; sink != 0 {
		t.Errorf("sink backpressure %v: it sends nothing, want 0", sink)
	}
}

// TriggerCheckpoint takes a checkpoint at once although the interval is
// off, each with a new id; it is refused before Run and after it.
func TestTriggerCheckpoint(t *testing.T) {
	src := datagen.Config{Keys: 10, Rate: 20000}
	p := countPipeline(t, src, 1, 1, newTxStore[keyCount](), nil)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ck := fastCheckpoints(0) // only the final checkpoint, and triggered ones
	job := newJob(t, p, st, ck, quickRestarts(0))
	if _, err := job.TriggerCheckpoint(); !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("TriggerCheckpoint before Run = %v, want ErrNotRunning", err)
	}
	var ids []int64
	err = runUntilStopped(t, job, func() bool {
		if job.Observe().Phase != runtime.PhaseRunning {
			return false
		}
		id, err := job.TriggerCheckpoint()
		if err != nil {
			t.Errorf("TriggerCheckpoint: %v", err)
			return true
		}
		ids = append(ids, id)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if r, ok := job.Checkpoint(id); ok && r.Status != runtime.CheckpointInProgress {
				if r.Status != runtime.CheckpointCompleted {
					t.Errorf("triggered checkpoint %d: %s (%s)", id, r.Status, r.FailureReason)
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
		return len(ids) == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[1] <= ids[0] {
		t.Fatalf("triggered %v, want two increasing ids", ids)
	}
	hist := job.Checkpoints()
	if len(hist) != 3 || !hist[0].Final || hist[1].ID != ids[1] || hist[2].ID != ids[0] {
		t.Fatalf("history %+v: want the two triggered checkpoints and the final one", hist)
	}
	if _, err := job.TriggerCheckpoint(); !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("TriggerCheckpoint after Run = %v, want ErrNotRunning", err)
	}
}

// TriggerNow (checkpoint package) starts a checkpoint at once, ignoring
// the interval and the min pause, but not beyond the max concurrent
// checkpoints: it then waits for room.
func TestCoordinatorTriggerNow(t *testing.T) {
	o := checkpoint.DefaultOptions()
	o.Interval, o.MinPause = time.Hour, time.Hour
	task := checkpoint.TaskID{Operator: "a"}
	c, err := checkpoint.New(checkpoint.Config{Options: o, Pipeline: "p", JobID: "j", Tasks: []checkpoint.TaskID{task}, NextID: 1, Reserved: 100})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	triggers := func(acts []checkpoint.Action) []int64 {
		var ids []int64
		for _, a := range acts {
			if tr, ok := a.(checkpoint.Trigger); ok {
				ids = append(ids, tr.ID)
			}
		}
		return ids
	}
	if got := triggers(c.Step(now, checkpoint.Tick{})); len(got) != 0 {
		t.Fatalf("tick triggered %v before the interval", got)
	}
	if got := triggers(c.Step(now, checkpoint.TriggerNow{})); len(got) != 1 || got[0] != 1 {
		t.Fatalf("TriggerNow triggered %v, want [1]", got)
	}
	if got := triggers(c.Step(now, checkpoint.TriggerNow{})); len(got) != 0 {
		t.Fatalf("TriggerNow with checkpoint 1 in flight triggered %v, want none (max concurrent 1)", got)
	}
	c.Step(now, checkpoint.Acked{ID: 1, State: checkpoint.SubtaskState{Task: task}})
	acts := c.Step(now, checkpoint.MetadataWritten{ID: 1})
	if got := triggers(acts); len(got) != 1 || got[0] != 2 {
		t.Fatalf("completing checkpoint 1 triggered %v, want the requested checkpoint 2 despite the min pause", got)
	}
	if got := triggers(c.Step(now, checkpoint.Tick{})); len(got) != 0 {
		t.Fatalf("a tick after the request was served triggered %v", got)
	}
}

// ErrorClass tells failures apart by their marker errors.
func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("x"), "task"},
		{runtime.ErrIncompatible, "incompatible"},
		{runtime.ErrUnrecoverable, "unrecoverable"},
		{storage.ErrLocked, "lock"},
		{storage.ErrCorrupt, "corrupt"},
		{errors.New("count[0]: panic: boom"), "panic"},
	} {
		if got := runtime.ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// While a complete checkpoint's commit has not returned, the observation
// shows it pending, with its committables: the coordinator's status says so
// (checkpoint.Status.Committing). Once the commit returns nothing is
// pending, and the checkpoint counts as committed.
func TestObservePendingCommitFollowsTheCoordinator(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer failpoint.Enable("job/after-metadata-before-commit", func() error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})()
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Count: 1000, Keys: 10}, 1, 1, store, nil)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(0), quickRestarts(0)) // the final checkpoint only
	done := make(chan error, 1)
	go func() { done <- runWithin(job, runTimeout) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the job ended (%v) before committing", err)
	}
	o := job.Observe()
	if c := o.Checkpoints; c.Completed != 1 || c.PendingCommit != 1 || c.Committed != 0 || o.PendingCommittables["sink"] != 1 {
		t.Errorf("during the commit: completed %d, pending commit %d, committed %d, pending committables %v; want 1, 1, 0, sink:1",
			c.Completed, c.PendingCommit, c.Committed, o.PendingCommittables)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o = job.Observe()
	if c := o.Checkpoints; c.Completed != 1 || c.PendingCommit != 0 || c.Committed != 1 || o.PendingCommittables["sink"] != 0 {
		t.Errorf("after the commit: completed %d, pending commit %d, committed %d, pending committables %v; want 1, 0, 1, none",
			c.Completed, c.PendingCommit, c.Committed, o.PendingCommittables)
	}
	if h := job.Checkpoints(); len(h) != 1 || !h[0].Committed {
		t.Errorf("history %+v, want the final checkpoint committed", h)
	}
}
