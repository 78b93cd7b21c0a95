package kafka_test

// The pipeline tests inject failures in their own operators and sink
// (srcFailures) rather than with internal/failpoint: failpoints are global to
// the process and these tests run in parallel with each other.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// Source → keyed count → transactional sink, bounded, with a failure after a
// completed checkpoint and a failed commit: every event is published exactly
// once with its key's exact running count.
func TestSourcePipelineExactlyOnceCount(t *testing.T) {
	t.Parallel()
	const parts, keys, n = 3, 7, 3000
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, n, keys, parts)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	cfg.MaxBatch = 16 // many reads, so checkpoints fall between them
	store := srcNewTxStore[srcKeyCount]()
	fail := srcNewFailures(2)
	store.failCommit = fail.commit
	p := srcCountPipeline("kafka-count", srcNewSource(t, cfg), 2, 2, store, fail.operator)
	job := srcJob(t, p, t.TempDir(), 10*time.Millisecond, 5)
	start := time.Now()
	if err := srcRun(job); err != nil {
		t.Fatal(err)
	}
	st := job.Stats()
	t.Logf("%d events in %v, %d restarts, %d checkpoints", n, time.Since(start), st.Restarts, st.Completed)
	fail.check(t, true)
	srcVerifyCounts(t, store.all(), srcIDs(0, n), keys)
}

// Source → key by → tumbling event-time window → transactional sink, with
// failures: every window is published once with its exact count and sum.
func TestSourcePipelineExactlyOnceWindow(t *testing.T) {
	t.Parallel()
	const parts, keys, n = 4, 5, 4000 // 40 s of event time, 1 s windows
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, n, keys, parts)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	cfg.MaxBatch = 16
	store := srcNewTxStore[srcWindowOut]()
	fail := srcNewFailures(3)
	store.failCommit = fail.commit

	p := stream.New("kafka-window")
	events := stream.From[srcEvent](p, "events", srcNewSource(t, cfg), stream.Parallelism(2))
	n1 := &runtime.Node{ID: "fail", Describe: "fails once", NewOperator: func() runtime.Operator {
		return &srcPassOp{fail: fail.operator}
	}}
	checked := stream.Add[srcEvent, srcEvent](events, n1, stream.Parallelism(2))
	keyed := stream.KeyBy(checked, func(e srcEvent) int64 { return e.Key })
	agg := window.Aggregate[srcEvent, srcAgg]{
		Init:  func() srcAgg { return srcAgg{} },
		Add:   func(a srcAgg, e srcEvent) srcAgg { return srcAgg{Count: a.Count + 1, Sum: a.Sum + e.ID} },
		Codec: srcAggCodec{},
	}
	wins := window.Tumbling(keyed, "per_key", time.Second, agg, func(key int64, w window.Window, a srcAgg) srcWindowOut {
		return srcWindowOut{Key: key, Start: w.Start, Agg: a}
	}, stream.Parallelism(2))
	stream.To(wins, "sink", stream.Sink[srcWindowOut](srcTxSink[srcWindowOut]{store}), stream.Parallelism(1))

	job := srcJob(t, p, t.TempDir(), 15*time.Millisecond, 5)
	if err := srcRun(job); err != nil {
		t.Fatal(err)
	}
	fail.check(t, true)
	srcCheckWindows(t, store.all(), srcExpectedWindows(srcIDs(0, n), keys, time.Second))
}

// srcPassOp passes events on; fail may fail a batch.
type srcPassOp struct {
	stream.Stateless
	ctx       *runtime.Context
	fail      func(int, int64) error
	completed int64
}

func (o *srcPassOp) Open(ctx *runtime.Context) error { o.ctx = ctx; return o.Stateless.Open(ctx) }
func (o *srcPassOp) ProcessBatch(_ int, r runtime.Records) error {
	if err := o.fail(o.ctx.Attempt, o.completed); err != nil {
		return err
	}
	return o.Out.Emit(r.(runtime.Batch[srcEvent]))
}
func (o *srcPassOp) NotifyComplete(id int64) error { o.completed = max(o.completed, id); return nil }

// stop_at latest ends at the end offsets found at the first start: records
// produced during the run are not read, and a job that crashed and is
// started again (a new process on the same checkpoints) ends at the same
// offsets.
func TestSourcePipelineStopAtLatestFixedEnd(t *testing.T) {
	t.Parallel()
	const parts, keys, n = 3, 4, 2000
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, n, keys, parts)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	cfg.MaxBatch = 8

	// Run 1 produces more once it has started, then crashes (no restarts
	// allowed) after a checkpoint completed.
	store := srcNewTxStore[srcKeyCount]()
	var once sync.Once
	more := make(chan struct{})
	crash := func(attempt int, completed int64) error {
		if completed < 2 {
			// Slow until checkpoint 2 completed, so the crash comes
			// before the end.
			time.Sleep(5 * time.Millisecond)
		}
		if completed >= 1 {
			// Every subtask opened (and fixed its end offsets) before
			// checkpoint 1 could complete.
			once.Do(func() {
				k.produceEvents(t, n, n+500, keys, parts)
				close(more)
			})
		}
		if completed >= 2 {
			return errors.New("injected crash")
		}
		return nil
	}
	dir := t.TempDir()
	err := srcRun(srcJob(t, srcCountPipeline("kafka-bounded", srcNewSource(t, cfg), 2, 2, store, crash), dir, 10*time.Millisecond, 0))
	if err == nil || !strings.Contains(err.Error(), "injected crash") {
		t.Fatalf("run 1 ended with %v, want the injected crash", err)
	}
	<-more
	published := store.count()
	if published >= n {
		t.Fatalf("run 1 published %d of %d events before it crashed: the test needs it to crash earlier", published, n)
	}
	k.produceEvents(t, n+500, n+800, keys, parts)

	// Run 2 on the same checkpoints ends at the offsets of run 1's start.
	job := srcJob(t, srcCountPipeline("kafka-bounded", srcNewSource(t, cfg), 2, 2, store, nil), dir, 10*time.Millisecond, 0)
	if err := srcRun(job); err != nil {
		t.Fatal(err)
	}
	if job.Stats().RestoredFrom == 0 {
		t.Error("run 2 did not restore run 1's checkpoint")
	}
	t.Logf("run 1 published %d events before its crash, run 2 the rest", published)
	srcVerifyCounts(t, store.all(), srcIDs(0, n), keys)
}

// An unbounded source picks up partitions added while it runs, from their
// first offset, and everything is published exactly once.
func TestSourcePipelineNewPartitions(t *testing.T) {
	t.Parallel()
	const keys = 6
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 300, keys, 2)
	cfg := k.config()
	cfg.DiscoveryInterval = 20 * time.Millisecond
	store := srcNewTxStore[srcKeyCount]()
	fail := srcNewFailures(3)
	store.failCommit = fail.commit
	job := srcJob(t, srcCountPipeline("kafka-grow", srcNewSource(t, cfg), 2, 2, store, fail.operator), t.TempDir(), 10*time.Millisecond, 3)
	var phase atomic.Int32
	err := srcRunUntil(t, job, func() bool {
		switch phase.Load() {
		case 0:
			if store.count() < 300 {
				return false
			}
			// Three partitions more; the new ones 2 and 4 belong to subtask
			// 0, 3 to subtask 1.
			if _, err := k.adm.CreatePartitions(context.Background(), 3, k.topic); err != nil {
				t.Error(err)
				return true
			}
			k.produceEvents(t, 300, 1000, keys, 5)
			phase.Store(1)
		case 1:
			return store.count() >= 1000
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	fail.check(t, true)
	srcVerifyCounts(t, store.all(), srcIDs(0, 1000), keys)
}

// With idle_timeout a partition that goes quiet does not stall event-time
// windows: they fire on the busy partition's watermark while the job runs.
// Without it, the quiet partition holds them back.
func TestSourcePipelineIdlePartition(t *testing.T) {
	t.Parallel()
	for _, idle := range []time.Duration{250 * time.Millisecond, 0} {
		k := srcNewKafka(t, 2)
		ev := func(p int32, id int64) *kgo.Record {
			v, _ := json.Marshal(srcEvent{ID: id, Key: 0, TS: srcEventTime(id) / int64(time.Millisecond)})
			return &kgo.Record{Partition: p, Value: v}
		}
		// Partition 1: one event in the first window. Partition 0: events
		// over 5 s of event time.
		recs := []*kgo.Record{ev(1, 1)}
		for id := int64(0); id < 500; id += 2 {
			recs = append(recs, ev(0, id))
		}
		k.produce(t, recs...)
		cfg := k.config()
		cfg.Watermark = watermark.Strategy{IdleTimeout: idle}
		store := srcNewTxStore[srcWindowOut]()
		p := stream.New("kafka-idle")
		events := stream.From[srcEvent](p, "events", srcNewSource(t, cfg), stream.Parallelism(1))
		keyed := stream.KeyBy(events, func(e srcEvent) int64 { return e.Key })
		wins := window.Tumbling(keyed, "w", time.Second, window.CountOf[srcEvent](), func(key int64, w window.Window, c int64) srcWindowOut {
			return srcWindowOut{Key: key, Start: w.Start, Agg: srcAgg{Count: c}}
		})
		stream.To(wins, "sink", stream.Sink[srcWindowOut](srcTxSink[srcWindowOut]{store}))
		job := srcJob(t, p, t.TempDir(), 10*time.Millisecond, 0)
		started := time.Now()
		// Partition 0 keeps producing (event time goes on); partition 1
		// stays quiet.
		next, lastProduced := int64(500), time.Now()
		err := srcRunUntil(t, job, func() bool {
			if time.Since(lastProduced) > 10*time.Millisecond {
				k.produce(t, ev(0, next))
				next, lastProduced = next+2, time.Now()
			}
			// Without idle_timeout, a second shows nothing fires.
			wait := time.Second
			if idle > 0 {
				wait = 10 * time.Second
			}
			return store.count() > 0 || time.Since(started) > wait
		})
		if err != nil {
			t.Fatal(err)
		}
		got := store.all()
		if idle > 0 {
			// Windows up to the busy partition's watermark fired.
			if len(got) == 0 {
				t.Fatalf("idle_timeout %v: no window fired while partition 1 was quiet", idle)
			}
			var first *srcWindowOut
			for i := range got {
				if got[i].Start == srcBaseTime.UnixNano() {
					first = &got[i]
				}
			}
			// Ids 0, 2, …, 98 and partition 1's id 1 — unless partition 1
			// was declared idle before its one record was fetched, which
			// makes that record late (dropped): the documented price of
			// idleness.
			if first == nil || (first.Agg.Count != 51 && first.Agg.Count != 50) {
				t.Errorf("windows %+v: want the first second's with 51 (or 50) events", got)
			}
		} else if len(got) != 0 {
			t.Fatalf("without idle_timeout %d windows fired although partition 1 held the watermark", len(got))
		}
	}
}

// Consumer group offsets are written for monitoring only: a job ignores
// whatever the group holds, on a fresh start and on a restore.
func TestSourcePipelineIgnoresGroupOffsets(t *testing.T) {
	t.Parallel()
	const parts, keys, n = 2, 3, 1000
	k := srcNewKafka(t, parts)
	k.produceEvents(t, 0, n, keys, parts)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	cfg.MaxBatch = 8
	cfg.Group = "monitor-" + k.topic
	// Bogus offsets in the group: a source that resumed from them would
	// skip the first 100 events of each partition.
	bogus := kadm.Offsets{}
	for p := range int32(parts) {
		bogus.Add(kadm.Offset{Topic: k.topic, Partition: p, At: 100, LeaderEpoch: -1})
	}
	if err := k.adm.CommitAllOffsets(context.Background(), cfg.Group, bogus); err != nil {
		t.Fatal(err)
	}
	store := srcNewTxStore[srcKeyCount]()
	fail := srcNewFailures(1)
	job := srcJob(t, srcCountPipeline("kafka-group", srcNewSource(t, cfg), 1, 1, store, fail.operator), t.TempDir(), 10*time.Millisecond, 3)
	if err := srcRun(job); err != nil {
		t.Fatal(err)
	}
	fail.check(t, false)
	srcVerifyCounts(t, store.all(), srcIDs(0, n), keys)

	// The runtime notifies sources of completed checkpoints: the final
	// checkpoint's offsets reached the group.
	resp, err := k.adm.FetchOffsets(context.Background(), cfg.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatal(err)
	}
	ends := k.endOffsets(t)
	atEnd := true
	resp.Each(func(o kadm.OffsetResponse) { atEnd = atEnd && o.At == ends[o.Partition] })
	if !atEnd {
		t.Errorf("the group does not hold the final checkpoint's offsets %v", ends)
	}
}

// A record that cannot be decoded fails the job (after its restarts) with
// an error naming topic, partition and offset.
func TestSourcePipelineDecodeError(t *testing.T) {
	t.Parallel()
	k := srcNewKafka(t, 2)
	k.produceEvents(t, 0, 100, 3, 2)
	k.produce(t, &kgo.Record{Partition: 0, Value: []byte(`{"id": "x"}`)})
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	store := srcNewTxStore[srcKeyCount]()
	job := srcJob(t, srcCountPipeline("kafka-bad", srcNewSource(t, cfg), 1, 1, store, nil), t.TempDir(), 10*time.Millisecond, 1)
	err := srcRun(job)
	var de *kafka.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("Run returned %v, want a *kafka.DecodeError", err)
	}
	if de.Partition != 0 || de.Offset != 50 {
		t.Errorf("decode error at partition %d offset %d, want 0 and 50", de.Partition, de.Offset)
	}
	for _, want := range []string{k.topic, "partition 0", "offset 50"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// The source's parallelism may change across a restore: each run stops with
// a final checkpoint part-way through the topic, and the next restores it at
// another parallelism (2 → 3 → 1 → 4 over 5 partitions), each subtask
// resuming exactly the partitions it now owns at their checkpointed offsets.
// Every event is published once, with its key's exact running count (the
// keyed counts move with the checkpoint too), and the bad-record counts
// carried in the positions keep their sum.
func TestSourcePipelineRescale(t *testing.T) {
	t.Parallel()
	const parts, keys = 5, 7
	k := srcNewKafka(t, parts)
	cfg := k.config()
	cfg.MaxBatch = 8
	dir := t.TempDir()
	store := srcNewTxStore[srcKeyCount]()
	var produced int64
	for i, par := range []int{2, 3, 1, 4} {
		k.produceEvents(t, produced, produced+400, keys, parts)
		produced += 400
		job := srcJob(t, srcCountPipeline("kafka-rescale", srcNewSource(t, cfg), par, 2, store, nil), dir, 5*time.Millisecond, 0)
		if err := srcRunUntil(t, job, func() bool { return int64(store.count()) >= produced }); err != nil {
			t.Fatalf("run %d at parallelism %d: %v", i, par, err)
		}
		if i > 0 && job.Stats().RestoredFrom == 0 {
			t.Fatalf("run %d at parallelism %d did not restore the previous run's checkpoint", i, par)
		}
		srcVerifyCounts(t, store.all(), srcIDs(0, produced), keys)
	}
}
