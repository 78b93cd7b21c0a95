package kafka_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// srcRunTimeout bounds every job run of the source tests.
const srcRunTimeout = 60 * time.Second

// srcBaseTime is the event time of event 0; event i is 10ms later per id.
var srcBaseTime = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// srcStep is the event time between consecutive event ids.
const srcStep = 10 * time.Millisecond

// srcEvent is the JSON record the tests produce: event i has key i % keys
// and event time srcBaseTime + i*srcStep, as epoch milliseconds in "ts".
type srcEvent struct {
	ID  int64 `json:"id"`
	Key int64 `json:"key"`
	TS  int64 `json:"ts"`
}

func srcEventTime(id int64) int64 { return srcBaseTime.UnixNano() + id*int64(srcStep) }

// srcKafka is a kfake cluster with one topic and a client to produce and
// administer it.
type srcKafka struct {
	cluster *kfake.Cluster
	brokers []string
	topic   string
	cl      *kgo.Client
	adm     *kadm.Client
}

// srcNewKafka starts a fake cluster with topic (a name unique to the test)
// of partitions partitions.
func srcNewKafka(t testing.TB, partitions int) *srcKafka {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &srcKafka{cluster: c, brokers: c.ListenAddrs(), topic: "src-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())}
	k.cl, err = kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<20), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.cl.Close)
	k.adm = kadm.NewClient(k.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := k.adm.CreateTopic(ctx, int32(partitions), 1, nil, k.topic); err != nil {
		t.Fatalf("creating topic %s: %v", k.topic, err)
	}
	return k
}

// config returns a source config for the topic.
func (k *srcKafka) config() kafka.SourceConfig {
	return kafka.SourceConfig{Brokers: k.brokers, Topic: k.topic}
}

// produceEvents produces events [from, to) with keys id % keys, event i to
// partition i % partitions, and waits until all are acknowledged.
func (k *srcKafka) produceEvents(t testing.TB, from, to, keys int64, partitions int) {
	t.Helper()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		v, _ := json.Marshal(srcEvent{ID: i, Key: i % keys, TS: srcEventTime(i) / int64(time.Millisecond)})
		recs = append(recs, &kgo.Record{Topic: k.topic, Partition: int32(i % int64(partitions)), Key: []byte(strconv.FormatInt(i%keys, 10)), Value: v})
	}
	k.produce(t, recs...)
}

// produce produces records synchronously.
func (k *srcKafka) produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range recs {
		if r.Topic == "" {
			r.Topic = k.topic
		}
	}
	for len(recs) > 0 {
		var failed []*kgo.Record
		for _, res := range k.cl.ProduceSync(ctx, recs...) {
			if res.Err == nil {
				continue
			}
			// After partitions were added, the producer learns of them
			// with its next metadata refresh: produce those again.
			if !strings.Contains(res.Err.Error(), "invalid record partitioning") || ctx.Err() != nil {
				t.Fatalf("producing to %s: %v", k.topic, res.Err)
			}
			failed = append(failed, res.Record)
		}
		if recs = failed; len(recs) > 0 {
			k.cl.ForceMetadataRefresh()
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// endOffsets returns the topic's high watermarks.
func (k *srcKafka) endOffsets(t testing.TB) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := k.adm.ListEndOffsets(ctx, k.topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range l[k.topic] {
		out[p] = o.Offset
	}
	return out
}

// srcDecode decodes srcEvent with the event time from "ts".
var srcDecode = kafka.DecodeJSON[srcEvent](kafka.JSONEventTime("ts"))

// srcNewSource builds a source of srcEvent or fails the test.
func srcNewSource(t testing.TB, cfg kafka.SourceConfig) *kafka.Source[srcEvent] {
	t.Helper()
	src, err := kafka.NewSource(cfg, srcDecode)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// --- A transactional test sink (the runtime's txSink pattern) ---

// srcTxStore is the destination of srcTxSink, outside any job so it survives
// restarts: staged output by key, and published output in publish order.
type srcTxStore[T any] struct {
	mu        sync.Mutex
	seq       int
	staged    map[string][]T
	published map[string]bool
	values    []T
	// failCommit, when set, runs before each Commit and may fail it.
	failCommit func(c checkpoint.Commit) error
}

func srcNewTxStore[T any]() *srcTxStore[T] {
	return &srcTxStore[T]{staged: map[string][]T{}, published: map[string]bool{}}
}

// all returns everything published, in publish order.
func (s *srcTxStore[T]) all() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values)
}

func (s *srcTxStore[T]) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values)
}

// srcTxSink stages at Snapshot and publishes idempotently at Commit.
type srcTxSink[T any] struct{ store *srcTxStore[T] }

func (s srcTxSink[T]) NewSubtask() runtime.SinkSubtask[T] { return &srcTxWriter[T]{store: s.store} }
func (s srcTxSink[T]) Committer() runtime.Committer       { return srcTxCommitter[T](s) }
func (srcTxSink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (srcTxSink[T]) Describe() string { return "test transactional sink" }

type srcTxWriter[T any] struct {
	store   *srcTxStore[T]
	buf     []T
	pending []checkpoint.Committable
}

func (w *srcTxWriter[T]) Open(*runtime.Context) error { return nil }
func (w *srcTxWriter[T]) Write(batch runtime.Batch[T]) error {
	for _, rec := range batch {
		w.buf = append(w.buf, rec.Value)
	}
	return nil
}
func (w *srcTxWriter[T]) ProcessWatermark(int64) error { return nil }
func (w *srcTxWriter[T]) Snapshot(id int64) (runtime.Snapshot, error) {
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
func (w *srcTxWriter[T]) NotifyComplete(id int64) error {
	w.pending = slices.DeleteFunc(w.pending, func(c checkpoint.Committable) bool { return c.PreparedAt <= id })
	return nil
}
func (w *srcTxWriter[T]) Close() error { return nil }

type srcTxCommitter[T any] struct{ store *srcTxStore[T] }

func (c srcTxCommitter[T]) Commit(_ context.Context, _ string, cm checkpoint.Commit) error {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCommit != nil {
		if err := s.failCommit(cm); err != nil {
			return err
		}
	}
	for _, data := range cm.Committables {
		key := string(data)
		if s.published[key] {
			continue
		}
		v, ok := s.staged[key]
		if !ok {
			return fmt.Errorf("committable %s of checkpoint %d is neither staged nor published: output lost", key, cm.Checkpoint)
		}
		s.published[key] = true
		delete(s.staged, key)
		s.values = append(s.values, v...)
	}
	return nil
}

func (c srcTxCommitter[T]) Abandon(context.Context, string) (int, error) {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.staged)
	clear(s.staged)
	return n, nil
}

// --- A keyed counting operator with failure injection ---

// srcKeyCount is an event with its key's running count.
type srcKeyCount struct {
	ID, Key, Count int64
}

// srcCountOp counts events per key in keyed state. fail, when set, runs
// before each batch with the subtask's attempt and the newest checkpoint it
// was told is complete, and may fail the batch.
type srcCountOp struct {
	ctx       *runtime.Context
	counts    *state.ValueState[int64, int64]
	fail      func(attempt int, completed int64) error
	completed int64
}

func (o *srcCountOp) Open(ctx *runtime.Context) error {
	o.ctx = ctx
	var err error
	o.counts, err = state.NewValueState(ctx.State, "count", state.Int64Codec{}, state.Int64Codec{})
	return err
}

func (o *srcCountOp) ProcessBatch(_ int, r runtime.Records) error {
	if o.fail != nil {
		if err := o.fail(o.ctx.Attempt, o.completed); err != nil {
			return err
		}
	}
	in := r.(runtime.Batch[srcEvent])
	out := make(runtime.Batch[srcKeyCount], 0, len(in))
	for _, rec := range in {
		c, _ := o.counts.Get(rec.Value.Key)
		c++
		o.counts.Update(rec.Value.Key, c)
		out = append(out, runtime.Record[srcKeyCount]{Value: srcKeyCount{ID: rec.Value.ID, Key: rec.Value.Key, Count: c}, Time: rec.Time})
	}
	if err := o.ctx.State.Err(); err != nil {
		return err
	}
	return o.ctx.Output.Emit(out)
}

func (o *srcCountOp) ProcessWatermark(int64) error             { return nil }
func (o *srcCountOp) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (o *srcCountOp) NotifyComplete(id int64) error            { o.completed = max(o.completed, id); return nil }
func (o *srcCountOp) Close() error                             { return nil }

// srcFailures injects one operator failure and one commit failure per job:
// the operator fails in attempt 0 at its first batch after checkpoint after
// completed (and is slowed until then, so the failure comes before the input
// ends), and the first commit after that failure fails too, so a restarted
// job's recovery publishes it again.
type srcFailures struct {
	after                        int64
	operatorFailed, commitFailed atomic.Bool
}

func srcNewFailures(after int64) *srcFailures { return &srcFailures{after: after} }

// operator is a srcCountOp / srcPassOp failure hook.
func (f *srcFailures) operator(attempt int, completed int64) error {
	if attempt != 0 || f.operatorFailed.Load() {
		return nil
	}
	if completed >= f.after {
		f.operatorFailed.Store(true)
		return errors.New("injected failure after a completed checkpoint")
	}
	time.Sleep(3 * time.Millisecond)
	return nil
}

// commit is a srcTxStore.failCommit hook.
func (f *srcFailures) commit(checkpoint.Commit) error {
	if f.operatorFailed.Load() && f.commitFailed.CompareAndSwap(false, true) {
		return errors.New("injected failure in the middle of a commit")
	}
	return nil
}

// check fails the test when an injected failure did not happen.
func (f *srcFailures) check(t testing.TB, commits bool) {
	t.Helper()
	if !f.operatorFailed.Load() {
		t.Error("the injected operator failure did not happen")
	}
	if commits && !f.commitFailed.Load() {
		t.Error("the injected commit failure did not happen")
	}
}

// srcCountPipeline is kafka (srcP subtasks) → key by key → srcCountOp
// (countP subtasks) → srcTxSink (one subtask).
func srcCountPipeline(name string, src *kafka.Source[srcEvent], srcP, countP int, store *srcTxStore[srcKeyCount], fail func(int, int64) error) *stream.Pipeline {
	p := stream.New(name)
	events := stream.From[srcEvent](p, "events", src, stream.Parallelism(srcP))
	keyed := stream.KeyBy(events, func(e srcEvent) int64 { return e.Key })
	n := &runtime.Node{ID: "count", Describe: "count per key", NewOperator: func() runtime.Operator { return &srcCountOp{fail: fail} }}
	counts := stream.Add[srcEvent, srcKeyCount](keyed.Stream, n, stream.Parallelism(countP))
	stream.To(counts, "sink", stream.Sink[srcKeyCount](srcTxSink[srcKeyCount]{store}), stream.Parallelism(1))
	return p
}

// srcJob plans p with checkpoints every interval into dir and quick restarts.
func srcJob(t testing.TB, p *stream.Pipeline, dir string, interval time.Duration, restarts int) *runtime.Job {
	t.Helper()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = interval
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: restarts}})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// srcRun runs job to its end within srcRunTimeout.
func srcRun(job *runtime.Job) error {
	ctx, cancel := context.WithTimeout(context.Background(), srcRunTimeout)
	defer cancel()
	return job.Run(ctx)
}

// srcRunUntil runs job, calls Stop once until() holds and returns Run's
// result.
func srcRunUntil(t testing.TB, job *runtime.Job, until func() bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), srcRunTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	tick := time.NewTicker(2 * time.Millisecond)
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

// srcVerifyCounts checks published counts: every id in want exactly once,
// nothing else, and each key's counts 1, 2, 3, … in publish order (keyed
// state neither lost nor applied twice).
func srcVerifyCounts(t testing.TB, got []srcKeyCount, want []int64, keys int64) {
	t.Helper()
	seen := map[int64]bool{}
	last := map[int64]int64{}
	for _, v := range got {
		if seen[v.ID] {
			t.Fatalf("event %d published twice", v.ID)
		}
		seen[v.ID] = true
		if v.Key != v.ID%keys {
			t.Fatalf("event %d has key %d, want %d", v.ID, v.Key, v.ID%keys)
		}
		if w := last[v.Key] + 1; v.Count != w {
			t.Fatalf("key %d: event %d published with count %d, want %d: keyed state lost or replayed", v.Key, v.ID, v.Count, w)
		}
		last[v.Key] = v.Count
	}
	missing := 0
	for _, id := range want {
		if !seen[id] {
			missing++
		}
		delete(seen, id)
	}
	if missing > 0 || len(seen) > 0 {
		t.Fatalf("published %d events: %d of the %d expected are missing, %d are unexpected", len(got), missing, len(want), len(seen))
	}
}

// srcIDs returns [from, to).
func srcIDs(from, to int64) []int64 {
	ids := make([]int64, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, i)
	}
	return ids
}

// --- A window aggregate of count and id sum ---

// srcAgg is the accumulator of a window: count and sum of event ids.
type srcAgg struct{ Count, Sum int64 }

type srcAggCodec struct{}

func (srcAggCodec) Name() string { return "kafka-test.srcAgg/v1" }
func (srcAggCodec) Append(dst []byte, a srcAgg) []byte {
	dst = binary.AppendVarint(dst, a.Count)
	return binary.AppendVarint(dst, a.Sum)
}
func (srcAggCodec) Decode(src []byte) (srcAgg, int, error) {
	c, n1 := binary.Varint(src)
	if n1 <= 0 {
		return srcAgg{}, 0, errors.New("srcAgg: bad count")
	}
	s, n2 := binary.Varint(src[n1:])
	if n2 <= 0 {
		return srcAgg{}, 0, errors.New("srcAgg: bad sum")
	}
	return srcAgg{Count: c, Sum: s}, n1 + n2, nil
}

// srcWindowOut is one window result.
type srcWindowOut struct {
	Key   int64
	Start int64
	Agg   srcAgg
}

// srcExpectedWindows returns the tumbling windows of size over events ids.
func srcExpectedWindows(ids []int64, keys int64, size time.Duration) map[[2]int64]srcAgg {
	want := map[[2]int64]srcAgg{}
	for _, id := range ids {
		ts := srcEventTime(id)
		k := [2]int64{id % keys, ts - ts%int64(size)}
		a := want[k]
		a.Count++
		a.Sum += id
		want[k] = a
	}
	return want
}

// srcCheckWindows compares published windows with want: each exactly once
// with the exact aggregate.
func srcCheckWindows(t testing.TB, got []srcWindowOut, want map[[2]int64]srcAgg) {
	t.Helper()
	seen := map[[2]int64]bool{}
	var bad []string
	for _, w := range got {
		k := [2]int64{w.Key, w.Start}
		if seen[k] {
			bad = append(bad, fmt.Sprintf("window key %d start %d published twice", w.Key, w.Start))
			continue
		}
		seen[k] = true
		exp, ok := want[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("unexpected window key %d start %d", w.Key, w.Start))
		case exp != w.Agg:
			bad = append(bad, fmt.Sprintf("window key %d start %d: %+v, want %+v", w.Key, w.Start, w.Agg, exp))
		}
	}
	for k := range want {
		if !seen[k] {
			bad = append(bad, fmt.Sprintf("missing window key %d start %d", k[0], k[1]))
		}
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("… %d more", len(bad)-10))
		}
		t.Fatalf("published %d windows, want %d:\n%s", len(got), len(want), strings.Join(bad, "\n"))
	}
}
