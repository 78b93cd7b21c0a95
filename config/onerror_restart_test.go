package config_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Dead letters are exactly-once across failures, for the file, Kafka and
// NATS sources: with checkpoints every 5 ms, sink subtasks failing while
// processing batches and while preparing at a barrier, and a failure
// between a checkpoint's completion and its commit (see injectFailures), the
// job restores from its checkpoints at least twice, and the committed
// output holds every good record once and every bad record's dead letter
// once. The skip policy's count survives the same failures without counting
// re-read records twice: the count is part of the source's checkpointed
// position.
func TestConfigOnErrorExactlyOnceAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		var recs []inputRecord
		// Many small files: the source reads one file per Read, so the
		// input comes in many batches with checkpoints between them.
		for f := range 100 {
			rs := jsonRecords(400, fmt.Sprintf("f%d", f))
			writeLines(t, filepath.Join(dir, "in", fmt.Sprintf("f%d.jsonl", f)), nil, rs)
			recs = append(recs, rs...)
		}
		source := fmt.Sprintf("    type: file\n    path: %s\n    stop_at: latest\n    parallelism: 2\n", filepath.Join(dir, "in", "*.jsonl"))
		checkAcrossRestarts(t, source, recs)
	})
	t.Run("kafka", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "events"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		broker := c.ListenAddrs()[0]
		recs := jsonRecords(40000, "k")
		produceAll(t, broker, recs)
		source := fmt.Sprintf("    type: kafka\n    brokers: [%s]\n    topic: events\n    stop_at: latest\n    parallelism: 2\n", broker)
		checkAcrossRestarts(t, source, recs)
	})
	t.Run("nats", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		js, name := newNATSStream(ctx, t, "ONERR_RESTART")
		recs := jsonRecords(8000, "n")
		acks := make([]jetstream.PubAckFuture, len(recs))
		for i := range recs {
			recs[i].partition = fmt.Sprintf("%s.%c", name, 'a'+i%3)
			var err error
			if acks[i], err = js.PublishAsync(recs[i].partition, []byte(recs[i].text)); err != nil {
				t.Fatal(err)
			}
		}
		for i, a := range acks {
			select {
			case ack := <-a.Ok():
				recs[i].offset = int64(ack.Sequence)
			case err := <-a.Err():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		source := fmt.Sprintf("    type: nats\n    stream: %s\n    subject: %s.>\n    stop_at: latest\n", name, name)
		checkAcrossRestarts(t, source, recs)
	})
}

// produceAll writes recs to the four partitions of topic events in turn
// and fills in their partitions and offsets.
func produceAll(t *testing.T, broker string, recs []inputRecord) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range recs {
		r := &recs[i]
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % 4), Value: []byte(r.text)}, func(res *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			r.partition, r.offset = strconv.Itoa(int(res.Partition)), res.Offset
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// checkAcrossRestarts runs source (YAML fields after "  in:\n") on recs
// under dead_letter and skip with injected failures and checks that the
// good records, the dead letters and the counts are exact.
func checkAcrossRestarts(t *testing.T, source string, recs []inputRecord) {
	bad := 0
	var good []row.Row
	for _, r := range recs {
		if r.good == nil {
			bad++
		} else {
			good = append(good, r.good)
		}
	}
	for _, policy := range []string{"dead_letter", "skip"} {
		t.Run(policy, func(t *testing.T) {
			run := t.TempDir()
			y := fmt.Sprintf(`pipeline: bad-input-restarts
checkpoint: {interval: 5ms, dir: ckpts}
restart: {delay: 5ms, max_attempts: 20}
sources:
  in:
%s%s    on_error: %s
sinks:
  out: {type: file, input: in, path: out, parallelism: 3}
`, source, badInputFields, policy)
			if policy == "dead_letter" {
				y += "  dlq: {type: file, input: in.dead_letter, path: dlq, parallelism: 3}\n"
			}
			p, err := config.Parse(filepath.Join(run, "p.yaml"), []byte(y))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			job, err := p.Stream.NewJob(p.RunOptions())
			if err != nil {
				t.Fatal(err)
			}
			failed := injectFailures(t, job)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := job.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
			st := job.Stats()
			t.Logf("restarts %d, checkpoints completed %d, sink failures %d", st.Restarts, st.Completed, failed.Load())
			if failed.Load() < 2 {
				t.Fatalf("%d restarts, %d of them by a sink failure: want at least 2 of those, or the test proves nothing", st.Restarts, failed.Load())
			}
			gotGood := committedLines(t, run, "out")
			sameLines(t, "good records", gotGood, jsonLines(badInputSchema, good))
			counts := p.Stream.BadRecordCounts()["in"]
			if policy == "skip" {
				if counts != (stream.BadRecordTally{Skipped: int64(bad)}) {
					t.Errorf("counts %+v after restarts, want exactly %d skipped", counts, bad)
				}
				return
			}
			dl := committedLines(t, run, "dlq")
			checkDeadLetters(t, dl, recs)
			if counts != (stream.BadRecordTally{DeadLettered: int64(bad)}) {
				t.Errorf("counts %+v after restarts, want exactly %d dead-lettered", counts, bad)
			}
			if len(gotGood)+len(dl) != len(recs) {
				t.Errorf("%d good + %d dead letters != %d records", len(gotGood), len(dl), len(recs))
			}
		})
	}
}

// injectFailures makes sink subtasks fail up to three times while
// processing a batch, each time once a checkpoint is complete (so every
// restart restores one) and at least three batches after the previous
// failure; makes a file sink's prepare fail once at a barrier after a
// checkpoint completed (whatever the batches, a later checkpoint comes: the
// final one at least); and makes the second publication of a complete
// checkpoint fail once before its commit (the job restarts and publishes it
// again). It returns how many sink failures it injected.
func injectFailures(t *testing.T, job *runtime.Job) *atomic.Int64 {
	var batches, last, commits, failed, prepared atomic.Int64
	t.Cleanup(failpoint.Enable("task/process-batch", func() error {
		if failed.Load() >= 3 {
			return nil
		}
		// Slow the sinks down until the failures are done, so checkpoints
		// complete while the input is read.
		time.Sleep(10 * time.Millisecond)
		n := batches.Add(1)
		if n-last.Load() < 3 || job.Stats().Completed == 0 {
			return nil
		}
		last.Store(n)
		failed.Add(1)
		return failpoint.ErrInjected
	}))
	t.Cleanup(failpoint.Enable("sink/file/prepare", func() error {
		if job.Stats().Completed == 0 || !prepared.CompareAndSwap(0, 1) {
			return nil
		}
		failed.Add(1)
		return failpoint.ErrInjected
	}))
	t.Cleanup(failpoint.Enable("job/after-metadata-before-commit", func() error {
		if commits.Add(1) == 2 {
			return failpoint.ErrInjected
		}
		return nil
	}))
	return &failed
}
