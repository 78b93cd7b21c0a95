// Package kafkatest reads a Kafka topic the way the exactly-once tests check
// it: below the last stable offsets of one atomic snapshot, record by record
// with the producer id and epoch of the transaction that wrote it, so a test
// can tell which transaction a visible record belongs to and whether all of
// it is visible. It speaks the Kafka protocol through franz-go; the tests run
// it against kfake, whose single broker answers each request on one
// goroutine (an offset listing of several partitions is a snapshot).
package kafkatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record read back, with the transaction it was written in.
type Record struct {
	Partition  int32
	Offset     int64
	Key        []byte
	Value      []byte
	ProducerID int64
	Epoch      int16
}

// Txn identifies a transaction: a producer id and epoch write one
// transaction at a time, and the sink starts every transaction on a new
// epoch.
type Txn struct {
	ProducerID int64
	Epoch      int16
}

// Txn returns the transaction r was written in.
func (r Record) Txn() Txn { return Txn{r.ProducerID, r.Epoch} }

// Marker is the value of the Kafka sink's marker record: one per
// transaction, written inside it (connector/kafka, txnMarker).
type Marker struct {
	Job        string `json:"job"`
	Sink       string `json:"sink"`
	Subtask    int    `json:"subtask"`
	Checkpoint int64  `json:"checkpoint"`
	TxnID      string `json:"txn_id"`
	Records    int64  `json:"records"`
}

// EndOffsets lists, in one request, the last stable offsets (committed: what
// a read-committed consumer can read up to) or the high watermarks of every
// partition of topics.
func EndOffsets(ctx context.Context, cl *kgo.Client, committed bool, topics ...string) (map[string]map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	var lo kadm.ListedOffsets
	var err error
	if committed {
		lo, err = adm.ListCommittedOffsets(ctx, topics...)
	} else {
		lo, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing offsets of %v: %w", topics, err)
	}
	out := map[string]map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, nil
}

// Fetch reads topic/partition from offset from up to offset to (exclusive):
// read-committed (records of aborted transactions skipped) or not; control
// records never.
func Fetch(ctx context.Context, cl *kgo.Client, topic string, partition int32, from, to int64, committed bool) ([]Record, error) {
	leader, topicID, err := leaderOf(ctx, cl, topic, partition)
	if err != nil {
		return nil, err
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	var out []Record
	for off := from; off < to; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 8<<20
		if committed {
			req.IsolationLevel = 1
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, off, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).RetriableRequest(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("fetching %s/%d at %d: %w", topic, partition, off, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("fetching %s/%d at %d: the response holds %d topics", topic, partition, off, len(resp.Topics))
		}
		part := &resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			return nil, fmt.Errorf("fetching %s/%d at %d: %w", topic, partition, off, err)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, IsolationLevel: iso, Topic: topic, Partition: partition}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return nil, fmt.Errorf("fetching %s/%d at %d: %w", topic, partition, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset < to {
				out = append(out, Record{Partition: partition, Offset: r.Offset, Key: r.Key, Value: r.Value, ProducerID: r.ProducerID, Epoch: r.ProducerEpoch})
			}
		}
		if next <= off {
			return nil, fmt.Errorf("fetching %s/%d at %d made no progress (high watermark %d, last stable %d)", topic, partition, off, part.HighWatermark, part.LastStableOffset)
		}
		off = next
	}
	return out, nil
}

// ReadTopic reads every partition of topic up to its end: the last stable
// offset when committed, the high watermark otherwise.
func ReadTopic(ctx context.Context, cl *kgo.Client, topic string, committed bool) ([]Record, error) {
	ends, err := EndOffsets(ctx, cl, committed, topic)
	if err != nil {
		return nil, err
	}
	var out []Record
	for p, end := range ends[topic] {
		rs, err := Fetch(ctx, cl, topic, p, 0, end, committed)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Markers reads the committed markers of a Kafka sink's marker topic, by the
// transaction that wrote them.
func Markers(ctx context.Context, cl *kgo.Client, markerTopic string) (map[Txn]Marker, error) {
	rs, err := ReadTopic(ctx, cl, markerTopic, true)
	if err != nil {
		return nil, err
	}
	out := make(map[Txn]Marker, len(rs))
	for _, r := range rs {
		var m Marker
		if err := json.Unmarshal(r.Value, &m); err != nil {
			return nil, fmt.Errorf("marker %s/%d at %d (%q): %w", markerTopic, r.Partition, r.Offset, r.Value, err)
		}
		out[r.Txn()] = m
	}
	return out, nil
}

// leaderOf returns the leader and topic id of topic/partition.
func leaderOf(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, [16]byte, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if td.Err != nil {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, td.Err)
	}
	pd, ok := td.Partitions[partition]
	if !ok {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: no partition %d", topic, partition)
	}
	if pd.Err != nil && !errors.Is(pd.Err, kerr.ReplicaNotAvailable) {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s/%d: %w", topic, partition, pd.Err)
	}
	if pd.Leader < 0 {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s/%d: no leader: %w", topic, partition, kerr.LeaderNotAvailable)
	}
	return pd.Leader, td.ID, nil
}
