package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// sentinel marks the end of what a test reads of a partition: a
// read-committed consumer that reaches it has read every record committed
// before it.
const sentinel = "sentinel"

// The two commands of the Kafka quickstart: `ingest dev kafka` serves a
// broker that receives sample records, examples/kafka.yaml (with
// KAFKA_BROKERS pointing at it) windows them into the topic totals through
// the transactional sink, and the broker prints what a read-committed
// consumer sees of totals. Every committed window holds exactly the count
// and sum of its events, each key's windows are consecutive from its first
// event on (none lost, none twice), and the broker printed exactly those
// records.
func TestDevKafkaRunsTheExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker and a pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	devCtx, stopDev := context.WithCancel(ctx)
	var printed, info testkit.SyncBuffer
	d := devKafka{port: 0, partitions: 4, topics: []string{"events", "totals"}, produce: "events", rate: 200, watch: "totals"}
	devDone := make(chan error, 1)
	go func() { devDone <- d.run(devCtx, &printed, &info) }()
	defer func() {
		stopDev()
		if err := <-devDone; err != nil {
			t.Errorf("dev kafka: %v", err)
		}
	}()
	addr := waitFor(ctx, t, func() string {
		m := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)\n`).FindStringSubmatch(info.String())
		if m == nil {
			return ""
		}
		return m[1]
	}, "the broker's address")

	// The example as a user runs it, with its checkpoints in a directory of
	// the test.
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "kafka.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kafka.yaml")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA_BROKERS", addr)
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	waitFor(ctx, t, func() string {
		if strings.Count(printed.String(), "\n") >= 30 {
			return "ok"
		}
		return ""
	}, "30 committed windows printed by the broker")
	job.Stop()
	if err := <-ran; err != nil {
		t.Fatalf("pipeline: %v", err)
	}

	events := readAll(ctx, t, addr, "events")
	totals := readAll(ctx, t, addr, "totals")
	type window struct {
		key   int64
		start time.Time
	}
	type agg struct{ count, sum int64 }
	got := map[window]agg{}
	ends := map[int64]time.Time{} // per key, the end of its last window
	for _, r := range totals {
		var v struct {
			Key         int64     `json:"key"`
			WindowStart time.Time `json:"window_start"`
			Count, Sum  int64
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil {
			t.Fatalf("totals record %s: %v", r, err)
		}
		w := window{v.Key, v.WindowStart}
		if _, dup := got[w]; dup {
			t.Errorf("window %v committed twice", w)
		}
		got[w] = agg{v.Count, v.Sum}
		ends[v.Key] = v.WindowStart.Add(time.Second)
	}
	want := map[window]agg{}
	for _, r := range events {
		var e struct{ Key, Value, TS int64 }
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			t.Fatalf("event %s: %v", r, err)
		}
		ts := time.UnixMilli(e.TS).UTC()
		if end, ok := ends[e.Key]; !ok || !ts.Before(end) {
			continue // in a window that had not fired when the pipeline stopped
		}
		w := window{e.Key, ts.Truncate(time.Second)}
		a := want[w]
		a.count++
		a.sum += e.Value
		want[w] = a
	}
	for w, a := range want {
		if got[w] != a {
			t.Errorf("window %v: committed %+v, want %+v", w, got[w], a)
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			t.Errorf("window %v committed without events", w)
		}
	}
	if len(got) < 30 || len(ends) != 10 {
		t.Errorf("%d windows of %d keys committed, want 30 or more of 10", len(got), len(ends))
	}

	// The broker printed exactly the committed records, sentinels aside.
	lines := waitFor(ctx, t, func() string {
		if s := printed.String(); strings.Count(s, sentinel) == d.partitions {
			return s
		}
		return ""
	}, "the broker printing the sentinels")
	var shown []string
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		if l != sentinel {
			shown = append(shown, l)
		}
	}
	slices.Sort(shown)
	slices.Sort(totals)
	if !slices.Equal(shown, totals) {
		t.Errorf("the broker printed %d records, %d are committed", len(shown), len(totals))
	}
}

// waitFor polls f until it returns something, and returns it; the test
// fails when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, f func() string, what string) string {
	t.Helper()
	for {
		if s := f(); s != "" {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readAll returns the values of every record committed to topic so far:
// it writes a sentinel to each partition and reads, read committed, up to
// the sentinels.
func readAll(ctx context.Context, t *testing.T, addr, topic string) []string {
	t.Helper()
	w, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const partitions = 4
	for p := range int32(partitions) {
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(sentinel)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for seen := map[int32]bool{}; len(seen) < partitions; {
		fs := r.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("reading %s: %v", topic, e.Err)
			}
		}
		fs.EachRecord(func(rec *kgo.Record) {
			switch {
			case string(rec.Value) == sentinel:
				seen[rec.Partition] = true
			case !seen[rec.Partition]:
				out = append(out, string(rec.Value))
			}
		})
	}
	return out
}

// Bad flags are configuration errors.
func TestDevKafkaFlags(t *testing.T) {
	for _, c := range []struct {
		d    devKafka
		want string
	}{
		{devKafka{port: -1, partitions: 1}, "--port -1"},
		{devKafka{port: 70000, partitions: 1}, "--port 70000"},
		{devKafka{partitions: 0}, "--partitions 0"},
		{devKafka{partitions: 1, produce: "events", rate: 0}, "--rate 0"},
	} {
		err := c.d.run(context.Background(), &testkit.SyncBuffer{}, &testkit.SyncBuffer{})
		var ee *exitError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ee) || ee.code != exitConfig {
			t.Errorf("%+v: %v, want a configuration error naming %s", c.d, err, c.want)
		}
	}
	// By default the broker is where the example looks for it.
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "kafka.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	port := devKafkaCmd().Flags().Lookup("port").DefValue
	if "127.0.0.1:"+port != defaultDevKafka || strings.Count(string(example), "brokers: ${KAFKA_BROKERS:-"+defaultDevKafka+"}") != 2 {
		t.Errorf("dev kafka listens on port %s by default; examples/kafka.yaml must use ${KAFKA_BROKERS:-%s} for both brokers", port, defaultDevKafka)
	}
}
