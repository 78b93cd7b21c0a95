package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit/kafkatest"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/watermark"
)

// Hostile cases of the Kafka source and sink. Each names the sentence of
// checkpointing.txt it defends and the issue item.

// hostileClock is a processing-time clock a test moves by hand.
type hostileClock struct{ now time.Time }

func (c *hostileClock) read() time.Time     { return c.now }
func (c *hostileClock) add(d time.Duration) { c.now = c.now.Add(d) }

// hostileEventTime is the event time of record seq: one millisecond apart.
func hostileEventTime(seq int64) int64 {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano() + seq*int64(time.Millisecond)
}

// hostileBatches collects what a source subtask emits.
type hostileBatches struct{ recs []runtime.Record[int64] }

func (c *hostileBatches) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[int64])
	if !ok {
		return errors.New("unexpected batch type")
	}
	c.recs = append(c.recs, b...)
	return nil
}

// A 3s stall of the engine itself with idle_timeout 2s, while a producer
// keeps writing to every partition: the partitions whose records are not in
// the first batch after the stall are not idle, so no record is late; then a
// partition that is really drained does become idle while the others go on,
// and the subtask becomes idle once all are drained. Processing time is the
// test's clock: the stall is 3s of it, during which the producer writes
// hundreds of records to every partition in real time.
//
// checkpointing.txt: "A restart must not lose accepted data" — nor may a
// run without any failure; #12 item 4c.
func TestStallDoesNotMakePartitionsIdle(t *testing.T) {
	const partitions, total = 4, 4000
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	topic := "hostile-stall"
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	record := func(seq int64, p int32) *kgo.Record {
		return &kgo.Record{Partition: p, Value: strconv.AppendInt(nil, seq, 10)}
	}

	// The producer writes records 0..total-1 round-robin to every
	// partition, a few at a time, until the test stops it.
	var produced atomic.Int64
	var prodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := int64(0); seq < total && ctx.Err() == nil; seq += partitions {
			recs := make([]*kgo.Record, 0, partitions)
			for p := range int64(partitions) {
				recs = append(recs, record(seq+p, int32(p)))
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				prodErr = err
				return
			}
			produced.Store(seq + partitions)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	cfg := SourceConfig{Brokers: c.ListenAddrs(), Topic: topic, MaxBatch: 8, DiscoveryInterval: -1,
		Watermark: watermark.Strategy{IdleTimeout: 2 * time.Second}}
	src, err := NewSource(cfg, func(m Message) (int64, int64, error) {
		seq, err := strconv.ParseInt(string(m.Value), 10, 64)
		return seq, hostileEventTime(seq), err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := &hostileClock{now: time.Now()}
	sub := src.NewSubtask().(*srcSubtask[int64])
	sub.clock = clock.read
	out := &hostileBatches{}
	if err := sub.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "in"}, Parallelism: 1, MaxParallelism: 128}, runtime.EmitTo[int64](out)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })

	// read reads once, 10ms of processing time after the last read, and
	// fails on a record behind the watermark an earlier read reported.
	wm := runtime.MinWatermark
	var last runtime.ReadResult
	seen := map[int64]bool{}
	late := 0
	read := func() {
		t.Helper()
		clock.add(10 * time.Millisecond)
		from := len(out.recs)
		res, err := sub.Read()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.recs[from:] {
			if seen[r.Value] {
				t.Fatalf("record %d emitted twice", r.Value)
			}
			seen[r.Value] = true
			if r.Time <= wm {
				late++
				if late == 1 {
					t.Errorf("record %d (event time %v) is late: an earlier read reported watermark %v",
						r.Value, time.Duration(r.Time-hostileEventTime(0)), time.Duration(wm-hostileEventTime(0)))
				}
			}
		}
		if res.Watermark < wm {
			t.Fatalf("watermark went back from %d to %d", wm, res.Watermark)
		}
		wm, last = res.Watermark, res
		if len(out.recs) == from {
			time.Sleep(time.Millisecond) // real time for the fetches
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached within 60s (%d records read, %d produced, watermark %d idle %v)",
					what, len(out.recs), produced.Load(), wm, last.Idle)
			}
			read()
		}
	}

	// Three stalls: no read for 3s of processing time, while the producer
	// writes at least 50 more records to every partition.
	for stall := range 3 {
		waitFor("reading while the producer writes", func() bool { return len(out.recs) >= 400*(stall+1) })
		lateBefore := late
		before := produced.Load()
		for produced.Load() < before+50*partitions && produced.Load() < total {
			if prodErr != nil {
				t.Fatal(prodErr)
			}
			time.Sleep(time.Millisecond)
		}
		clock.add(3 * time.Second)
		waitFor("reading after the stall", func() bool { return len(out.recs) >= 400*(stall+1)+200 })
		if late > lateBefore {
			t.Errorf("stall %d: %d records late after it", stall+1, late-lateBefore)
		}
	}
	waitFor("reading every record", func() bool { return len(out.recs) == total })
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	if late > 0 {
		t.Fatalf("%d of %d records late with idle_timeout 2s and three stalls of 3s", late, total)
	}

	// Partition 3 is drained and stays quiet; the others go on. After the
	// timeout and a look at partition 3's end offset, it no longer holds
	// the watermark, and the subtask is not idle.
	p3 := hostileEventTime(total - 1)
	next := int64(total)
	waitFor("partition 3 idle while 0-2 produce", func() bool {
		if last.Watermark > p3 && !last.Idle {
			return true
		}
		if len(out.recs) == int(next) {
			recs := make([]*kgo.Record, 0, 3)
			for p := range int32(3) {
				recs = append(recs, record(next, p))
				next++
			}
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		return false
	})
	// Everything drained: after the timeout the subtask is idle, with
	// every record read and the watermark where the last round of records
	// (partitions 0-2) left it. Which of the three partitions goes idle
	// last depends on which fetch and which end-offset listing saw it
	// last, so the watermark is the newest record of one of them (less
	// one): partition 0's when all three go idle at once, a later one's
	// when partition 0 goes idle first and no longer holds it back.
	waitFor("every partition idle", func() bool { return last.Idle })
	if int64(len(out.recs)) != next {
		t.Fatalf("idle with %d of %d records read", len(out.recs), next)
	}
	newest := []int64{hostileEventTime(next-3) - 1, hostileEventTime(next-2) - 1, hostileEventTime(next-1) - 1}
	if !slices.Contains(newest, last.Watermark) {
		t.Fatalf("idle subtask's watermark %d, want the newest record of partition 0, 1 or 2 (less one): %v", last.Watermark, newest)
	}
	if late > 0 {
		t.Fatalf("%d records late", late)
	}
}

// Hostile cases of the Kafka sink's transactional-id prefix: a start aborts
// every ongoing transaction the prefix makes, so the prefix must belong to
// one sink of one pipeline (#12 item 4e). The owner topic is named here as
// a literal, as an operator would see it.
const hostileOwnerTopic = "ingest-txn-owners"

// hostileKillAfterMetadata runs sp until the failpoint after the metadata of
// a complete checkpoint, the third or a later one, kills it before the tasks
// learn that the checkpoint is complete: no writer can commit that
// checkpoint's transactions when it reuses their ids, so they stay prepared,
// holding read-committed consumers back. It kills at the first such
// checkpoint whose transactions hold records (their markers, read
// uncommitted, say so): how many records an epoch carries depends on the
// machine, and an empty one prepares nothing that could be lost. It returns
// the newest complete checkpoint in storage, the one a recovery restores (a
// metadata write in flight at the kill may complete a later one).
func hostileKillAfterMetadata(t *testing.T, sp *sinkPipeline) int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := storage.NewLocal(sp.dir)
	if err != nil {
		t.Fatal(err)
	}
	var at atomic.Int64
	var checkErr error // written before cancel, read after the run
	disable := failpoint.Enable("job/after-metadata-before-notify", func() error {
		if at.Add(1) < 3 || ctx.Err() != nil {
			return nil
		}
		holds, err := hostilePreparedRecords(sp, st)
		if err != nil {
			checkErr = err
		} else if !holds {
			return nil
		}
		cancel()
		return fmt.Errorf("killed before the notification: %w", failpoint.ErrInjected)
	})
	_, err = sp.run(t, ctx)
	disable()
	if checkErr != nil {
		t.Fatal(checkErr)
	}
	if err == nil || ctx.Err() == nil {
		t.Fatalf("run = %v, want it killed (%d checkpoints reached the failpoint)", err, at.Load())
	}
	latest, _, _, err := storage.Latest(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !sp.k.stuck(t, sp.k.topic) {
		t.Fatalf("after the kill no prepared transaction of checkpoint %d holds back read-committed consumers: the test covers nothing", latest)
	}
	return latest
}

// hostilePreparedRecords reports whether a transaction of the newest
// complete checkpoint in st wrote records: its marker, in the marker topic
// and not yet committed, counts them.
func hostilePreparedRecords(sp *sinkPipeline, st storage.Storage) (bool, error) {
	id, _, _, err := storage.Latest(context.Background(), st)
	if err != nil {
		return false, err
	}
	topic := sp.k.topic
	if sp.topic != "" {
		topic = sp.topic
	}
	markers := topic + sinkMarkerSuffix
	ends, err := sp.k.endOffsetsE(false, markers)
	if err != nil {
		return false, err
	}
	for p, end := range ends[markers] {
		recs, err := sp.k.fetchE(markers, p, 0, end, false)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			var m txnMarker
			if err := json.Unmarshal([]byte(r.Value), &m); err != nil {
				return false, fmt.Errorf("marker %q: %w", r.Value, err)
			}
			if m.Checkpoint == id && m.Records > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// hostileOngoing lists the ongoing transactions of prefix with their
// producer id and epoch.
func hostileOngoing(t *testing.T, k *sinkTestCluster, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(k.cl).ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tx := range listed.Sorted() {
		if txnOwnedBy(prefix, tx.TxnID) {
			ids = append(ids, tx.TxnID)
		}
	}
	described, err := kadm.NewClient(k.cl).DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range described.Sorted() {
		if d.State == "Ongoing" {
			out[d.TxnID] = fmt.Sprintf("producer id %d epoch %d", d.ProducerID, d.ProducerEpoch)
		}
	}
	return out
}

// A second pipeline configured with the first one's transactional_id_prefix
// — writing to the same topic, or to another topic (so another marker
// topic) — is refused before it aborts anything: the first pipeline's
// prepared transactions of a complete checkpoint stay prepared, and its
// recovery commits them, with exact output. Before, the second start's
// Abandon fenced them and the first pipeline's recovery lost that output
// (ErrTransactionAborted), or worse, depending on timing.
//
// checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output, or combine state from different points in the
// stream" — nor may another pipeline's start; #12 item 4e.
func TestHostileKafkaPrefixOfAnotherPipeline(t *testing.T) {
	for _, sameTopic := range []bool{true, false} {
		name := "another topic"
		if sameTopic {
			name = "same topic"
		}
		t.Run(name, func(t *testing.T) {
			a := newSinkPipeline(t, 2)
			a.prefix = "shared"
			completed := hostileKillAfterMetadata(t, a)
			prepared := hostileOngoing(t, a.k, "shared")
			if len(prepared) == 0 {
				t.Fatal("no ongoing transaction of the prefix after the kill")
			}

			b := &sinkPipeline{k: a.k, dir: t.TempDir(), prefix: "shared", name: "another-pipeline",
				count: 1000, keys: 3, rate: 20000, sinkPar: 2, interval: 15 * time.Millisecond}
			if !sameTopic {
				b.topic = "another-out"
				if _, err := kadm.NewClient(a.k.cl).CreateTopic(context.Background(), 2, 1, nil, b.topic); err != nil {
					t.Fatal(err)
				}
			}
			_, err := b.run(t, context.Background())
			if err == nil {
				t.Fatal("a second pipeline with the first one's transactional_id_prefix ran")
			}
			if !errors.Is(err, runtime.ErrUnrecoverable) {
				t.Errorf("refusal %v does not wrap runtime.ErrUnrecoverable", err)
			}
			wantErrContains(t, err, `"shared"`, `"kafka-sink-shared"`, `"another-pipeline"`, "transactional_id_prefix")
			if got := hostileOngoing(t, a.k, "shared"); !maps.Equal(got, prepared) {
				t.Fatalf("the refused pipeline touched the first one's transactions: ongoing before %v, after %v", prepared, got)
			}

			// The first pipeline's recovery commits what it prepared.
			job := a.job(t)
			if err := a.runJob(context.Background(), job); err != nil {
				t.Fatalf("the first pipeline's recovery: %v", err)
			}
			if st := job.Stats(); st.RestoredFrom != completed {
				t.Errorf("the recovery restored checkpoint %d, want %d", st.RestoredFrom, completed)
			}
			a.checkExact(t)
		})
	}
}

// A new job of the same pipeline — its checkpoints and ledger deleted, so it
// knows nothing of the first job — on a prefix whose output was published is
// refused: it would publish that output again. With AllowDuplicates it takes
// the prefix over and publishes everything a second time, as asked.
//
// checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output, …"; #12 items 2 and 4e.
func TestHostileKafkaFreshJobOnPublishedOutput(t *testing.T) {
	sp := newSinkPipeline(t, 2)
	sp.count = 2000
	if _, err := sp.run(t, context.Background()); err != nil {
		t.Fatal(err)
	}
	sp.checkExact(t)

	sp.dir = t.TempDir() // the first job's checkpoints and ledger are gone
	_, err := sp.run(t, context.Background())
	if err == nil {
		t.Fatal("a new job of the pipeline, knowing nothing of the first job's published output, ran")
	}
	if !errors.Is(err, runtime.ErrIncompatible) {
		t.Errorf("refusal %v does not wrap runtime.ErrIncompatible", err)
	}
	wantErrContains(t, err, "published output of job", "--allow-duplicates")
	sp.checkExact(t) // nothing was written again

	sp.allowDup = true
	if _, err := sp.run(t, context.Background()); err != nil {
		t.Fatalf("with AllowDuplicates: %v", err)
	}
	got := sinkValues(sp.k.readTopic(t, sp.k.topic, true))
	var want []string
	for _, v := range sp.expected() {
		want = append(want, v, v)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("with AllowDuplicates: %d records, want every one of the %d twice", len(got), len(sp.expected()))
	}
}

// The same job restarting — in process after failures, and as a new process
// on the same checkpoint directory after a kill — is the prefix's owner and
// is never refused; no restart writes another owner record (the check costs
// one read of the owner topic per start), and the output is exact.
//
// checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output, …"; #12 item 4e.
func TestHostileKafkaSameJobRestarts(t *testing.T) {
	// On the stepped clock the restarted run has about 80 batches.
	sp := newSinkPipeline(t, 2)
	hostileKillAfterMetadata(t, sp)
	calls, disable := sinkFailOn("task/process-batch", 20, 50)
	defer disable()
	stats, err := sp.run(t, context.Background())
	if err != nil {
		t.Fatalf("the restarted job: %v", err)
	}
	// Both failures may fall in one attempt (the second while it stops).
	if calls.Load() < 50 || stats.Restarts < 1 {
		t.Fatalf("%d batches, %d in-process restarts: the failures were not injected", calls.Load(), stats.Restarts)
	}
	sp.checkExact(t)

	recs, err := kafkatest.ReadTopic(context.Background(), sp.k.cl, hostileOwnerTopic, false)
	if err != nil {
		t.Fatalf("reading the owner topic: %v", err)
	}
	var owners []string
	for _, r := range recs {
		if string(r.Key) == sp.prefix {
			owners = append(owners, string(r.Value))
		}
	}
	if len(owners) != 1 {
		t.Fatalf("%d owner records of prefix %q after two starts and %d restarts, want the first start's only: %q", len(owners), sp.prefix, stats.Restarts, owners)
	}
	wantErrContains(t, errors.New(owners[0]), `"kafka-sink-pipe"`, `"out"`)
}

// Two claimers of one prefix at once, both having read the owner topic
// before either wrote (kfake holds the first claim's produce until the
// second's arrives): exactly one wins, the other is refused naming the
// winner, and every later claimer agrees. Two jobs of one pipeline taking a
// prefix over from the same previous job at once: the first wins, the
// second is refused.
//
// checkpointing.txt: "A restart must not lose accepted data, …"; #12 item 4e.
func TestHostileKafkaClaimRace(t *testing.T) {
	k := newSinkCluster(t, 1)
	cfg := k.config("race")
	claimer := func() runtime.DestinationClaimer {
		t.Helper()
		c, ok := newTextSink(t, cfg).Committer().(runtime.DestinationClaimer)
		if !ok {
			t.Fatal("the kafka committer does not implement runtime.DestinationClaimer")
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Nothing but claims is produced here (produce requests name topics by
	// id, which the owner topic has only once the first claimer created it).
	var produces atomic.Int64
	both := make(chan struct{})
	k.c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		switch produces.Add(1) {
		case 1:
			k.c.KeepControl()
			k.c.SleepControl(func() {
				select {
				case <-both:
				case <-ctx.Done():
				}
			})
		case 2:
			close(both)
		}
		return nil, nil, false
	})

	type result struct {
		pipeline, prev string
		err            error
	}
	results := make(chan result, 2)
	for _, p := range []string{"pipeline-a", "pipeline-b"} {
		c := claimer()
		go func() {
			prev, err := c.Claim(ctx, p, "out", "job-"+p)
			results <- result{p, prev, err}
		}()
	}
	var winner, loser result
	for range 2 {
		r := <-results
		switch {
		case r.err == nil && r.prev == "":
			if winner.pipeline != "" {
				t.Fatalf("both claims of prefix %q won", cfg.TransactionalIDPrefix)
			}
			winner = r
		case r.err != nil:
			loser = r
		default:
			t.Fatalf("claim of %s returned previous job %q", r.pipeline, r.prev)
		}
	}
	if winner.pipeline == "" || loser.pipeline == "" {
		t.Fatalf("winner %+v, loser %+v: want one of each", winner, loser)
	}
	if n := produces.Load(); n != 2 {
		t.Fatalf("%d claims were written: the claims did not race", n)
	}
	if !errors.Is(loser.err, runtime.ErrUnrecoverable) {
		t.Errorf("refusal %v does not wrap runtime.ErrUnrecoverable", loser.err)
	}
	wantErrContains(t, loser.err, `"`+winner.pipeline+`"`, `"race"`)
	// Later claimers agree on the winner.
	if _, err := claimer().Claim(ctx, loser.pipeline, "out", "job-"+loser.pipeline); !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("the loser claiming again: %v, want a refusal", err)
	}
	if prev, err := claimer().Claim(ctx, winner.pipeline, "out", "job-"+winner.pipeline); err != nil || prev != "" {
		t.Fatalf("the winner claiming again: previous %q, %v; want \"\", nil", prev, err)
	}

	// Two new jobs of the winner's pipeline both find the winner's job as
	// the previous owner, and both take over.
	c1, c2 := claimer(), claimer()
	for i, c := range []runtime.DestinationClaimer{c1, c2} {
		prev, err := c.Claim(ctx, winner.pipeline, "out", fmt.Sprintf("job-%d", i+1))
		if err != nil || prev != "job-"+winner.pipeline {
			t.Fatalf("claim of job-%d: previous %q, %v; want %q", i+1, prev, err, "job-"+winner.pipeline)
		}
	}
	if err := c1.Reclaim(ctx, winner.pipeline, "out", "job-1"); err != nil {
		t.Fatalf("the first takeover: %v", err)
	}
	err := c2.Reclaim(ctx, winner.pipeline, "out", "job-2")
	if !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("the second takeover: %v, want a refusal wrapping runtime.ErrUnrecoverable", err)
	}
	wantErrContains(t, err, "job-1")
	if prev, err := claimer().Claim(ctx, winner.pipeline, "out", "job-1"); err != nil || prev != "" {
		t.Fatalf("job-1 claiming again: previous %q, %v; want \"\", nil", prev, err)
	}
}
