package config_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Kafka topic of two partitions with malformed values, wrong types,
// missing event times and oversized values among good ones, under each
// on_error policy (see checkPolicies); a dead letter's partition is the
// partition number and its offset the record's offset.
func TestConfigOnErrorKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	broker := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := jsonRecords(400, "k")
	for i := range recs {
		r := &recs[i]
		res, err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(r.text)}).First()
		if err != nil {
			t.Fatal(err)
		}
		r.partition, r.offset = strconv.Itoa(int(res.Partition)), res.Offset
	}
	source := fmt.Sprintf("    type: kafka\n    brokers: [%s]\n    topic: events\n    stop_at: latest\n    parallelism: 2\n", broker) + badInputFields
	checkPolicies(t, source, recs, func(r inputRecord) string {
		return fmt.Sprintf("topic events partition %s offset %d", r.partition, r.offset)
	})
}

// A NATS JetStream stream with malformed payloads, wrong types, missing
// event times and oversized payloads among good ones on two subjects,
// under each on_error policy; a dead letter's partition is the subject and
// its offset the stream sequence.
func TestConfigOnErrorNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, name := newNATSStream(ctx, t, "ONERR")
	recs := jsonRecords(400, "n")
	for i := range recs {
		r := &recs[i]
		r.partition = fmt.Sprintf("%s.%c", name, 'a'+i%2)
		ack, err := js.Publish(ctx, r.partition, []byte(r.text))
		if err != nil {
			t.Fatal(err)
		}
		r.offset = int64(ack.Sequence)
	}
	source := fmt.Sprintf("    type: nats\n    stream: %s\n    subject: %s.>\n    stop_at: latest\n", name, name) + badInputFields
	checkPolicies(t, source, recs, func(r inputRecord) string {
		return fmt.Sprintf("subject %s, sequence %d", r.partition, r.offset)
	})
}
