package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConfigKafkaWindowKafka runs the YAML contract pipeline Kafka → window
// → Kafka on an in-process kfake cluster through the real client: fields
// inferred from the first record, event time from an epoch-millisecond
// field, bounded by stop_at: latest; a read-committed consumer sees exactly
// one record per (key, window) with exact counts and sums.
func TestConfigKafkaWindowKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events", "totals"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, keys = 3000, 4
	type agg struct{ count, sum int64 }
	want := map[string]agg{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := int64(0); i < n; i++ {
		ts := base + i*3
		key := i % keys
		rec := &kgo.Record{Key: []byte(fmt.Sprint(key)), Value: fmt.Appendf(nil, `{"key":%d,"value":%d,"ts":%d}`, key, i%50, ts)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		w := fmt.Sprintf("%d@%d", key, ts-ts%1000)
		a := want[w]
		a.count++
		a.sum += i % 50
		want[w] = a
	}
	runYAML(t, fmt.Sprintf(`pipeline: kafka-kafka
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  in:
    type: kafka
    brokers: [%s]
    topic: events
    event_time: {field: ts}
    parallelism: 2
    stop_at: latest
transforms:
  w:
    type: window
    input: in
    key: key
    size: 1s
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out:
    type: kafka
    input: w
    brokers: [%s]
    topic: totals
    transactional_id_prefix: cfg-test
    key: [key]
`, brokers[0], brokers[0]))
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("totals"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := map[string]agg{}
	for len(got) < len(want) && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			var v struct {
				Key         int64  `json:"key"`
				WindowStart string `json:"window_start"`
				Count, Sum  int64
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Errorf("record %q: %v", r.Value, err)
				return
			}
			st, err := time.Parse(time.RFC3339Nano, v.WindowStart)
			if err != nil {
				t.Errorf("window_start %q: %v", v.WindowStart, err)
				return
			}
			w := fmt.Sprintf("%d@%d", v.Key, st.UnixMilli())
			if _, dup := got[w]; dup {
				t.Errorf("window %s twice", w)
			}
			got[w] = agg{v.Count, v.Sum}
		})
	}
	if len(got) != len(want) {
		t.Fatalf("%d windows read, want %d", len(got), len(want))
	}
	for w, a := range want {
		if got[w] != a {
			t.Fatalf("window %s: %+v, want %+v", w, got[w], a)
		}
	}
}
