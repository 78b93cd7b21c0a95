package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runTimeout bounds every job run of these tests: a hang fails, it does not
// stall the suite.
const runTimeout = 30 * time.Second

// txStore is the destination of txSink, kept outside any job so it survives
// restarts and runs like a real one: output staged by checkpoint, and the
// published output in publish order.
type txStore[T any] struct {
	mu        sync.Mutex
	seq       int
	staged    map[string][]T
	published map[string]bool
	commits   []txCommit[T]
	// unstaged counts values sink subtasks still held when they closed:
	// received after their last barrier.
	unstaged int
	// publishNow records, per Commit call, its checkpoint and whether its
	// context said runtime.PublishNow.
	publishNow []publishNowCall
}

// publishNowCall is one Commit call as txStore.publishNow records it.
type publishNowCall struct {
	checkpoint int64
	now        bool
}

// txCommit is one publication: the output a Commit made visible.
type txCommit[T any] struct {
	checkpoint int64
	values     []T
}

func newTxStore[T any]() *txStore[T] {
	return &txStore[T]{staged: map[string][]T{}, published: map[string]bool{}}
}

func (s *txStore[T]) stage(values []T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	key := strconv.Itoa(s.seq)
	s.staged[key] = values
	return key
}

// values returns everything published, in publish order.
func (s *txStore[T]) values() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	for _, c := range s.commits {
		out = append(out, c.values...)
	}
	return out
}

// count returns how many values are published.
func (s *txStore[T]) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.commits {
		n += len(c.values)
	}
	return n
}

// checkpoints returns the checkpoints whose publication made values visible.
func (s *txStore[T]) checkpoints() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, c := range s.commits {
		ids = append(ids, c.checkpoint)
	}
	return ids
}

// txSink is a transactional test sink (DESIGN.md §5): Snapshot stages what
// arrived since the previous barrier, Commit publishes it idempotently,
// Abandon drops staged output no checkpoint will publish.
type txSink[T any] struct{ store *txStore[T] }

func (s txSink[T]) NewSubtask() runtime.SinkSubtask[T] { return &txWriter[T]{store: s.store} }
func (s txSink[T]) Committer() runtime.Committer       { return txCommitter[T](s) }
func (txSink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (txSink[T]) Describe() string { return "test transactional sink" }

type txWriter[T any] struct {
	store *txStore[T]
	buf   []T
	// pending are staged keys not yet known committed (checkpoint.Committable's
	// invariant).
	pending []checkpoint.Committable
}

func (w *txWriter[T]) Open(*runtime.Context) error { return nil }
func (w *txWriter[T]) Write(batch runtime.Batch[T]) error {
	for _, rec := range batch {
		w.buf = append(w.buf, rec.Value)
	}
	return nil
}
func (w *txWriter[T]) ProcessWatermark(int64) error { return nil }
func (w *txWriter[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	if len(w.buf) > 0 {
		key := w.store.stage(w.buf)
		w.buf = nil
		w.pending = append(w.pending, checkpoint.Committable{PreparedAt: id, Data: []byte(key)})
	}
	return runtime.Snapshot{Committables: slices.Clone(w.pending)}, nil
}
func (w *txWriter[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	return nil
}
func (w *txWriter[T]) Close() error {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	w.store.unstaged += len(w.buf)
	return nil
}

// unstagedValues returns how many values arrived at sink subtasks after
// their last barrier.
func (s *txStore[T]) unstagedValues() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unstaged
}

type txCommitter[T any] struct{ store *txStore[T] }

func (c txCommitter[T]) Commit(ctx context.Context, _ string, cm checkpoint.Commit) error {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishNow = append(s.publishNow, publishNowCall{checkpoint: cm.Checkpoint, now: runtime.PublishNow(ctx)})
	var vals []T
	for _, data := range cm.Committables {
		key := string(data)
		if s.published[key] {
			continue // already published: idempotent
		}
		v, ok := s.staged[key]
		if !ok {
			return fmt.Errorf("committable %s of checkpoint %d is neither staged nor published: output lost", key, cm.Checkpoint)
		}
		s.published[key] = true
		delete(s.staged, key)
		vals = append(vals, v...)
	}
	if len(vals) > 0 {
		s.commits = append(s.commits, txCommit[T]{checkpoint: cm.Checkpoint, values: vals})
	}
	return nil
}

func (c txCommitter[T]) Abandon(context.Context, string) (int, error) {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.staged)
	clear(s.staged)
	return n, nil
}

// keyCount is the output of countOp: the event and its key's running count.
type keyCount struct {
	ID, Key, Count int64
}

// countOp counts events per key in keyed ValueState and emits each event with
// its key's new count. hook, when set, runs before each batch and may fail it.
type countOp struct {
	ctx    *runtime.Context
	counts *state.ValueState[int64, int64]
	hook   func(ctx *runtime.Context, completed int64) error
	// completed is the newest checkpoint this subtask was told is complete.
	completed int64
}

func (o *countOp) Open(ctx *runtime.Context) error {
	o.ctx = ctx
	var err error
	o.counts, err = state.NewValueState(ctx.State, "count", state.Int64Codec{}, state.Int64Codec{})
	return err
}

func (o *countOp) ProcessBatch(_ int, r runtime.Records) error {
	if o.hook != nil {
		if err := o.hook(o.ctx, o.completed); err != nil {
			return err
		}
	}
	in := r.(runtime.Batch[datagen.Event])
	out := make(runtime.Batch[keyCount], 0, len(in))
	for _, rec := range in {
		c, _ := o.counts.Get(rec.Value.Key)
		c++
		o.counts.Update(rec.Value.Key, c)
		out = append(out, runtime.Record[keyCount]{Value: keyCount{ID: rec.Value.ID, Key: rec.Value.Key, Count: c}, Time: rec.Time})
	}
	// A key outside this subtask's key groups means the hash partitioner
	// routed it wrong.
	if err := o.ctx.State.Err(); err != nil {
		return err
	}
	return o.ctx.Output.Emit(out)
}

func (o *countOp) ProcessWatermark(int64) error             { return nil }
func (o *countOp) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (o *countOp) NotifyComplete(id int64) error            { o.completed = max(o.completed, id); return nil }
func (o *countOp) Close() error                             { return nil }
func countNode(hook func(*runtime.Context, int64) error) *runtime.Node {
	return &runtime.Node{ID: "count", Describe: "count per key", NewOperator: func() runtime.Operator { return &countOp{hook: hook} }}
}

// countPipeline is datagen events (srcP subtasks) → key by key → countOp
// (countP subtasks) → txSink (one subtask).
func countPipeline(t *testing.T, cfg datagen.Config, srcP, countP int, store *txStore[keyCount], hook func(*runtime.Context, int64) error) *stream.Pipeline {
	t.Helper()
	src, err := datagen.Events(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("counts")
	events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(srcP))
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	counts := stream.Add[datagen.Event, keyCount](keyed.Stream, countNode(hook), stream.Parallelism(countP))
	stream.To(counts, "sink", stream.Sink[keyCount](txSink[keyCount]{store}), stream.Parallelism(1))
	return p
}

// fastCheckpoints returns checkpoint options with a short interval.
func fastCheckpoints(interval time.Duration) checkpoint.Options {
	o := checkpoint.DefaultOptions()
	o.Interval = interval
	return o
}

// quickRestarts restarts almost at once.
func quickRestarts(n int) runtime.RestartOptions {
	return runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: n}
}

// newJob plans p on st.
func newJob(t *testing.T, p *stream.Pipeline, st storage.Storage, ck checkpoint.Options, rs runtime.RestartOptions) *runtime.Job {
	t.Helper()
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Restart: rs, LSM: testLSM})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// runBounded runs job to the end within runTimeout.
func runBounded(t *testing.T, job *runtime.Job) error {
	t.Helper()
	return runWithin(job, runTimeout)
}

// runWithin runs job to the end, cancelling it after d.
func runWithin(job *runtime.Job, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return job.Run(ctx)
}

// runUntilStopped runs job, calls Stop once until() holds (polled), and
// returns Run's result.
func runUntilStopped(t *testing.T, job *runtime.Job, until func() bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return fmt.Errorf("Run returned before Stop: %v", err)
		case <-tick.C:
			if until() {
				job.Stop()
				return <-done
			}
		}
	}
}

// latestMetadata reads the recovery point of st.
func latestMetadata(t *testing.T, st storage.Storage) *checkpoint.Metadata {
	t.Helper()
	id, _, _, err := storage.Latest(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return metadataOf(t, st, id)
}

// sourcePositions returns the datagen replay position (next id) of every
// subtask of node "events" in m.
func sourcePositions(t *testing.T, m *checkpoint.Metadata, p int) []int64 {
	t.Helper()
	pos := make([]int64, p)
	for s := range p {
		st, ok := m.Task(checkpoint.TaskID{Operator: "events", Subtask: s})
		if !ok {
			t.Fatalf("checkpoint %d has no state of events[%d]", m.ID, s)
		}
		var v struct{ Next int64 }
		if err := json.Unmarshal(st.Inline, &v); err != nil {
			t.Fatalf("checkpoint %d: events[%d] position %q: %v", m.ID, s, st.Inline, err)
		}
		pos[s] = v.Next
	}
	return pos
}

// verifyCounts checks published countOp output against the datagen contract
// (record i has key i % keys; subtask s of p emits i ≡ s mod p in order):
//   - every event id is published at most once (nothing is repeated);
//   - the ids of each source subtask form a prefix s, s+p, … up to ends[s]
//     (exclusive) when ends is given: nothing is lost;
//   - each key's counts, in publish order, are 1, 2, 3, …: keyed state is
//     neither lost nor applied twice.
func verifyCounts(t *testing.T, got []keyCount, keys int64, p int, ends []int64) {
	t.Helper()
	seen := map[int64]bool{}
	perSub := make([]int64, p)
	lastCount := map[int64]int64{}
	for _, v := range got {
		if seen[v.ID] {
			t.Fatalf("event %d published twice", v.ID)
		}
		seen[v.ID] = true
		if v.Key != v.ID%keys {
			t.Fatalf("event %d has key %d, want %d", v.ID, v.Key, v.ID%keys)
		}
		perSub[v.ID%int64(p)]++
		if want := lastCount[v.Key] + 1; v.Count != want {
			t.Fatalf("key %d: event %d published with count %d, want %d: keyed state lost or replayed", v.Key, v.ID, v.Count, want)
		}
		lastCount[v.Key] = v.Count
	}
	for s := range p {
		n := perSub[s]
		for k := range n {
			if id := int64(s) + k*int64(p); !seen[id] {
				t.Fatalf("source subtask %d: %d events published but event %d is missing", s, n, id)
			}
		}
		if ends != nil {
			if want := (ends[s] - int64(s)) / int64(p); n != want {
				t.Fatalf("source subtask %d: %d events published, want %d (its position is %d)", s, n, want, ends[s])
			}
		}
	}
}

// metadataOf reads and decodes checkpoint id's metadata from st.
func metadataOf(t *testing.T, st storage.Storage, id int64) *checkpoint.Metadata {
	t.Helper()
	data, err := st.ReadMetadata(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
