package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/testkit/kafkatest"
	"github.com/ingest-engine/ingest/runtime"
)

// sinkJob is the job id the operator-level tests open subtasks with.
const sinkJob = "job1"

// sinkTestCluster is an in-process fake Kafka with one broker and topic
// topic of partitions partitions.
type sinkTestCluster struct {
	c       *kfake.Cluster
	brokers []string
	topic   string
	cl      *kgo.Client
}

var sinkTopicSeq atomic.Int64

// newSinkCluster starts a kfake cluster (one broker: every request is
// answered by one goroutine, so a multi-partition offset listing is an atomic
// snapshot) with a data topic named after the test.
func newSinkCluster(t testing.TB, partitions int32, opts ...kfake.Opt) *sinkTestCluster {
	t.Helper()
	topic := fmt.Sprintf("out-%d", sinkTopicSeq.Add(1))
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &sinkTestCluster{c: c, brokers: c.ListenAddrs(), topic: topic, cl: cl}
}

// config is a sink configuration for the cluster's topic with short timeouts.
func (k *sinkTestCluster) config(prefix string) SinkConfig {
	return SinkConfig{
		Brokers: k.brokers, Topic: k.topic, TransactionalIDPrefix: prefix,
		TransactionTimeout: time.Minute, CommitTimeout: 5 * time.Second, RecoveryMargin: time.Second,
	}
}

// sinkText encodes a string record as its value with no key.
func sinkText(s string) ([]byte, []byte, error) { return nil, []byte(s), nil }

func newTextSink(t testing.TB, cfg SinkConfig) *Sink[string] {
	t.Helper()
	s, err := NewSink(cfg, sinkText)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openSinkWriter[T any](t testing.TB, s *Sink[T], subtask int) *sinkWriter[T] {
	t.Helper()
	w := s.NewSubtask().(*sinkWriter[T])
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "out", Subtask: subtask}, Parallelism: 2, JobID: sinkJob}
	if err := w.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func sinkWrite(t testing.TB, w runtime.SinkSubtask[string], values ...string) {
	t.Helper()
	b := make(runtime.Batch[string], len(values))
	for i, v := range values {
		b[i] = runtime.Record[string]{Value: v, Time: int64(i)}
	}
	if err := w.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// sinkFlushOpen waits until the records of w's open transaction reached the
// broker, so the transaction is ongoing there (a crash after this leaves it
// lingering).
func sinkFlushOpen[T any](t testing.TB, w *sinkWriter[T]) {
	t.Helper()
	if w.cur == nil {
		t.Fatal("no open transaction")
	}
	if err := w.cur.cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func sinkSnapshot(t testing.TB, w runtime.SinkSubtask[string], id int64) []checkpoint.Committable {
	t.Helper()
	s, err := w.Snapshot(id)
	if err != nil {
		t.Fatalf("Snapshot(%d): %v", id, err)
	}
	if s.Inline != nil {
		t.Errorf("Snapshot(%d): inline state %q, want none", id, s.Inline)
	}
	return s.Committables
}

// sinkCommitOf builds checkpoint id's commit from subtasks' committables.
func sinkCommitOf(id int64, cs ...[]checkpoint.Committable) checkpoint.Commit {
	c := checkpoint.Commit{Checkpoint: id, Sink: "out"}
	for _, l := range cs {
		for _, x := range l {
			c.Committables = append(c.Committables, x.Data)
		}
	}
	return c
}

// sinkRecord is one record read back, with the transaction it was written in.
type sinkRecord struct {
	Partition int32
	Offset    int64
	Value     string
	PID       int64
	Epoch     int16
}

// endOffsets lists the last stable (committed) or high watermark offsets of
// topics in one request.
func (k *sinkTestCluster) endOffsets(t testing.TB, committed bool, topics ...string) map[string]map[int32]int64 {
	t.Helper()
	out, err := k.endOffsetsE(committed, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (k *sinkTestCluster) endOffsetsE(committed bool, topics ...string) (map[string]map[int32]int64, error) {
	return kafkatest.EndOffsets(context.Background(), k.cl, committed, topics...)
}

// fetch reads topic/partition from offset from up to offset to (exclusive),
// read-committed (aborted records skipped) or not, control records never.
func (k *sinkTestCluster) fetch(t testing.TB, topic string, partition int32, from, to int64, committed bool) []sinkRecord {
	t.Helper()
	out, err := k.fetchE(topic, partition, from, to, committed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (k *sinkTestCluster) fetchE(topic string, partition int32, from, to int64, committed bool) ([]sinkRecord, error) {
	rs, err := kafkatest.Fetch(context.Background(), k.cl, topic, partition, from, to, committed)
	if err != nil {
		return nil, err
	}
	out := make([]sinkRecord, len(rs))
	for i, r := range rs {
		out[i] = sinkRecord{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), PID: r.ProducerID, Epoch: r.Epoch}
	}
	return out, nil
}

// readTopic reads every partition of topic up to its end: the last stable
// offset for a read-committed consumer, the high watermark otherwise.
func (k *sinkTestCluster) readTopic(t testing.TB, topic string, committed bool) []sinkRecord {
	t.Helper()
	var out []sinkRecord
	ends := k.endOffsets(t, committed, topic)[topic]
	for p, end := range ends {
		out = append(out, k.fetch(t, topic, p, 0, end, committed)...)
	}
	return out
}

// values returns the records' values, sorted.
func sinkValues(rs []sinkRecord) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Value)
	}
	slices.Sort(out)
	return out
}

// stuck reports whether a read-committed consumer of topic is held back by an
// open transaction: some partition's last stable offset is below its high
// watermark.
func (k *sinkTestCluster) stuck(t testing.TB, topic string) bool {
	t.Helper()
	lso := k.endOffsets(t, true, topic)[topic]
	hwm := k.endOffsets(t, false, topic)[topic]
	for p, h := range hwm {
		if lso[p] < h {
			return true
		}
	}
	return false
}

// markers reads the committed markers of the sink's marker topic, by producer
// id and epoch.
func (k *sinkTestCluster) markers(t testing.TB, markerTopic string) map[txnRef]txnMarker {
	t.Helper()
	out := map[txnRef]txnMarker{}
	for _, r := range k.readTopic(t, markerTopic, true) {
		var m txnMarker
		if err := json.Unmarshal([]byte(r.Value), &m); err != nil {
			t.Fatalf("marker %q: %v", r.Value, err)
		}
		out[txnRef{r.PID, r.Epoch}] = m
	}
	return out
}

// decodeAll decodes committables.
func decodeAll(t testing.TB, cs []checkpoint.Committable) []txnCommittable {
	t.Helper()
	var out []txnCommittable
	for _, c := range cs {
		x, err := decodeTxnCommittable(c.Data)
		if err != nil {
			t.Fatal(err)
		}
		if x.PreparedAt != c.PreparedAt {
			t.Errorf("committable data says prepared at %d, the committable %d", x.PreparedAt, c.PreparedAt)
		}
		out = append(out, x)
	}
	return out
}

// wantErrContains fails unless err is non-nil and mentions every part.
func wantErrContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}
