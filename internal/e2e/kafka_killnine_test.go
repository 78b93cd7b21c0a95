package e2e

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/internal/testkit/kafkatest"
)

var kafkaKillSeed = flag.Uint64("kafkakillseed", 0, "replay TestKafkaKillNine and TestKafkaPostgresKillNine with this seed (0: random)")

// The input of the Kafka kill tests: kkMessages JSON records on kkPartitions
// partitions, one every kkStep of event time, keyed by key so each key's
// records are in order on one partition.
const (
	kkMessages   = 1_200_000
	kkPartitions = 4
	kkKeys       = 20
	kkStep       = time.Millisecond
	kkKills      = 12
	kkAimedKills = 3
	kkPause      = 300 * time.Millisecond
	kkBudget     = 40 * time.Second
	kkThrottle   = "task/process-batch=sleep(20ms)"
	// A run takes about 250 ms to connect, sample its first record and
	// restore, and under the throttle a checkpoint takes 300 to 700 ms (its
	// barrier waits behind the batches queued before it): the kills land
	// later than in the file-source tests, after one to four checkpoints.
	kkMinDelay = 600 * time.Millisecond
	kkMaxDelay = 2000 * time.Millisecond
)

// kkCluster is an in-process kfake cluster the `ingest run` processes reach
// over TCP on 127.0.0.1: it outlives every SIGKILL of the pipeline.
type kkCluster struct {
	broker string
	cl     *kgo.Client
}

// kkStart starts the cluster with the input topic "events" filled, and
// returns the windows the input implies.
func kkStart(t *testing.T) (*kkCluster, map[testkit.WindowKey]testkit.WindowAgg) {
	t.Helper()
	began := time.Now()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kkPartitions, "events"), kfake.SeedTopics(2, "totals"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("events"), kgo.DisableClientMetrics(),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[testkit.WindowKey]testkit.WindowAgg{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		mu       sync.Mutex
		firstErr error
	)
	for i := int64(0); i < kkMessages; i++ {
		ts := base.Add(time.Duration(i) * kkStep)
		key, value := i%kkKeys, i%1000
		rec := &kgo.Record{Key: strconv.AppendInt(nil, key, 10), Value: fmt.Appendf(nil, `{"key":%d,"value":%d,"ts":%d}`, key, value, ts.UnixMilli())}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
			}
		})
		k := testkit.WindowKey{Key: key, Start: ts.Truncate(time.Second)}
		a := want[k]
		a.Count++
		a.Sum += value
		want[k] = a
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if firstErr != nil {
		t.Fatalf("producing the input: %v", firstErr)
	}
	ends, err := kafkatest.EndOffsets(ctx, cl, true, "events")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ends["events"] {
		n += e
	}
	t.Logf("partition ends: %v", ends["events"])
	if n != kkMessages {
		t.Fatalf("topic events holds %d records, want %d", n, kkMessages)
	}
	t.Logf("produced %d records in %v: %d windows expected", kkMessages, time.Since(began).Round(time.Millisecond), len(want))
	return &kkCluster{broker: broker, cl: cl}, want
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// kkSourceYAML is the pipeline's Kafka source and window; the sink follows.
// The source has one subtask per partition: a subtask reading several
// partitions of kfake reads one far ahead of the other (kfake answers a
// fetch with as much of the first partition as fits), which holds the
// watermark back until the end of a throttled run.
func kkSourceYAML(name, broker string) string {
	return fmt.Sprintf(`pipeline: %s
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  in:
    type: kafka
    brokers: [%s]
    topic: events
    event_time: {field: ts}
    watermark: {max_delay: 0s, idle_timeout: 5s}
    parallelism: %d
    stop_at: latest
transforms:
  w:
    type: window
    input: in
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value)}
sinks:
`, name, broker, kkPartitions)
}

// kkSchedule is the kill schedule of the Kafka kill tests on the pipeline
// file yaml: kkKills SIGKILLs, kkAimedKills of them paused at failpoint aim.
func kkSchedule(bin, yaml, ckpts string, seed uint64, aim string) killSchedule {
	return killSchedule{
		Bin: bin, YAML: yaml, Ckpts: ckpts, Seed: seed,
		Kills: kkKills, AimedKills: kkAimedKills, Aim: aim, Pause: kkPause,
		Throttle: kkThrottle, MinDelay: kkMinDelay, MaxDelay: kkMaxDelay, Budget: kkBudget, FinalWait: 60 * time.Second,
	}
}

// TestKafkaKillNine runs the YAML pipeline Kafka → tumbling window → Kafka
// (transactional sink) as a separate process against an in-process kfake
// cluster, kills it with SIGKILL at random moments and while it is paused
// between a checkpoint's completion and the commit of its prepared
// transaction, restarts it until it exits 0, and checks that a
// read-committed consumer sees exactly the windows the input implies. During
// the runs a sampler takes atomic snapshots of what a read-committed
// consumer can see and checks that every visible transaction carries a
// committed marker of a complete checkpoint and is visible whole.
func TestKafkaKillNine(t *testing.T) {
	serviceKillTest(t, "kafkakillseed", *kafkaKillSeed, kafkaScenario)
}

// kafkaScenario is one kill cycle of Kafka → window → Kafka on a new kfake
// cluster.
func kafkaScenario(t *testing.T, bin string, seed uint64) soakResult {
	began := time.Now()
	k, want := kkStart(t)
	// One sink subtask: each checkpoint's output is one transaction, which
	// must appear all at once.
	doc := kkSourceYAML("kafka-killnine", k.broker) + fmt.Sprintf(`  out:
    type: kafka
    input: w
    brokers: [%s]
    topic: totals
    transactional_id_prefix: killnine-totals
    key: [key]
`, k.broker)
	work, yaml := scenarioDir(t, doc)
	ckpts := filepath.Join(work, "ckpts")
	smp := kafkatest.StartSampler(k.cl, "totals", 5*time.Millisecond, func() (int64, error) { return nkLatest(ckpts) })

	var res soakResult
	res.Kills, res.Aimed = kkSchedule(bin, yaml, ckpts, seed, "job/after-metadata-before-commit").run(t)

	samples, err := smp.Stop()
	if err != nil {
		t.Fatalf("sampler: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kkCheck(t, ctx, k.cl, samples, &res)
	rs, err := kafkatest.ReadTopic(ctx, k.cl, "totals", true)
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]testkit.Line, len(rs))
	for i, r := range rs {
		lines[i] = testkit.Line{File: fmt.Sprintf("totals/%d", r.Partition), Number: int(r.Offset), Text: r.Value}
	}
	res.addReport(testkit.CheckWindows(lines, want, time.Second))
	t.Logf("cycle %v", time.Since(began).Round(time.Millisecond))
	return res
}

// kkCheck judges the sampler's snapshots against the committed markers (one
// sink subtask: each visible transaction must be visible whole); each sample
// that is not so counts as partial in res.
func kkCheck(t *testing.T, ctx context.Context, cl *kgo.Client, samples []kafkatest.Sample, res *soakResult) {
	t.Helper()
	markers, err := kafkatest.Markers(ctx, cl, "totals.ingest-txn-markers")
	if err != nil {
		t.Fatal(err)
	}
	problems, _ := kafkatest.Check(samples, markers, true)
	for _, p := range problems {
		res.partial("%s", p)
	}
	res.Samples += len(samples)
	saw := 0
	for _, smp := range samples {
		if len(smp.Counts) > 0 {
			saw++
		}
	}
	var per []string
	for _, m := range markers {
		per = append(per, fmt.Sprintf("%d:%d", m.Checkpoint, m.Records))
	}
	slices.Sort(per)
	t.Logf("transactions (checkpoint:records): %s", strings.Join(per, " "))
	t.Logf("sampler: %d samples (%d saw output), %d transactions committed", len(samples), saw, len(markers))
	if saw < 5 {
		t.Errorf("only %d samples saw output: the sampler did not watch the runs", saw)
	}
}
