package kafka

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// Hostile cases of the Kafka source. Each names the sentence of
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
	if err := sub.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "in"}, Parallelism: 1, MaxParallelism: 128, Output: out}); err != nil {
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
	// (partitions 0-2) left it.
	waitFor("every partition idle", func() bool { return last.Idle })
	if int64(len(out.recs)) != next {
		t.Fatalf("idle with %d of %d records read", len(out.recs), next)
	}
	if want := hostileEventTime(next-3) - 1; last.Watermark != want {
		t.Fatalf("idle subtask's watermark %d, want partition 0's newest %d", last.Watermark, want)
	}
	if late > 0 {
		t.Fatalf("%d records late", late)
	}
}
