package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrMarkerLost marks a commit whose transaction marker is no longer where its
// committable says (deleted by retention, or the marker topic was recreated):
// whether the transaction committed or aborted can no longer be told.
var ErrMarkerLost = errors.New("transaction marker lost")

// txnOutcome is what the marker partition's log says about a transaction.
type txnOutcome int

const (
	// txnUndecided: no commit or abort control record follows the marker
	// (yet): the transaction is open, or a real broker is still writing its
	// markers.
	txnUndecided txnOutcome = iota
	// txnCommitted: a COMMIT control record of the producer follows the marker.
	txnCommitted
	// txnAborted: an ABORT control record of the producer follows the marker.
	txnAborted
)

const (
	// txnFetchBytes is the most one status fetch asks for; the marker
	// partition holds only markers and control records, so one fetch usually
	// reaches its end.
	txnFetchBytes = 1 << 20
	// txnMaxScanRounds bounds the fetches of one status check.
	txnMaxScanRounds = 1000
)

// txnStatus tells whether transaction c committed or aborted, by reading the
// marker partition from c's marker on, uncommitted records and control
// records included: a transaction ends with one control record (COMMIT or
// ABORT) in every partition it wrote to, after its records, stamped with its
// producer id. Unlike a read-committed read, this does not depend on the
// last stable offset, which other open transactions can hold back.
func txnStatus(ctx context.Context, cl *kgo.Client, c *txnCommittable) (txnOutcome, error) {
	where := fmt.Sprintf("marker of %s at %s/%d offset %d", c.String(), c.MarkerTopic, c.MarkerPartition, c.MarkerOffset)
	leader, topicID, err := txnPartitionLeader(ctx, cl, c.MarkerTopic, c.MarkerPartition)
	if err != nil {
		return txnUndecided, fmt.Errorf("reading the %s: %w", where, err)
	}
	off, seen := c.MarkerOffset, false
	for range txnMaxScanRounds {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = txnFetchBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = c.MarkerTopic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = c.MarkerPartition, off, txnFetchBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).RetriableRequest(ctx, req)
		if err != nil {
			return txnUndecided, fmt.Errorf("reading the %s: %w", where, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return txnUndecided, fmt.Errorf("reading the %s: %w", where, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return txnUndecided, fmt.Errorf("reading the %s: the broker answered for %d topics", where, len(resp.Topics))
		}
		part := &resp.Topics[0].Partitions[0]
		switch err := kerr.ErrorForCode(part.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange):
			return txnUndecided, fmt.Errorf("reading the %s: the offset is outside the log (log start offset %d, high watermark %d): it was deleted by retention or the topic was recreated, so whether the transaction committed can no longer be told: %w",
				where, part.LogStartOffset, part.HighWatermark, ErrMarkerLost)
		case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.LeaderNotAvailable):
			if leader, topicID, err = txnPartitionLeader(ctx, cl, c.MarkerTopic, c.MarkerPartition); err != nil {
				return txnUndecided, fmt.Errorf("reading the %s: %w", where, err)
			}
			continue
		default:
			return txnUndecided, fmt.Errorf("reading the %s: %w", where, err)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true, Offset: off, Topic: c.MarkerTopic, Partition: c.MarkerPartition,
		}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return txnUndecided, fmt.Errorf("reading the %s: %w", where, fp.Err)
		}
		for _, r := range fp.Records {
			switch {
			case r.Offset < c.MarkerOffset:
				continue
			case r.Offset == c.MarkerOffset:
				if r.Attrs.IsControl() || r.ProducerID != c.ProducerID || r.ProducerEpoch != c.Epoch {
					return txnUndecided, fmt.Errorf("the %s: that offset holds a record of producer id %d epoch %d (control %v), not the marker: the marker topic was recreated: %w",
						where, r.ProducerID, r.ProducerEpoch, r.Attrs.IsControl(), ErrMarkerLost)
				}
				seen = true
				continue
			case !seen:
				return txnUndecided, fmt.Errorf("the %s: the log has no record at that offset (compacted?): %w", where, ErrMarkerLost)
			}
			if !r.Attrs.IsControl() || r.ProducerID != c.ProducerID {
				continue
			}
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(r.Key); err != nil {
				return txnUndecided, fmt.Errorf("the %s: control record at offset %d: %w", where, r.Offset, err)
			}
			switch key.Type {
			case kmsg.ControlRecordKeyTypeCommit:
				return txnCommitted, nil
			case kmsg.ControlRecordKeyTypeAbort:
				return txnAborted, nil
			}
		}
		// next is past every batch parsed, control and aborted ones too.
		off = max(off, next)
		if off >= part.HighWatermark {
			if !seen {
				// An acknowledged marker is below the high watermark
				// (acks=all): this log is not the one it was written to.
				return txnUndecided, fmt.Errorf("the %s: the log ends at offset %d, before the marker: the topic was recreated or truncated, so whether the transaction committed can no longer be told: %w",
					where, part.HighWatermark, ErrMarkerLost)
			}
			return txnUndecided, nil
		}
	}
	return txnUndecided, fmt.Errorf("reading the %s: no outcome after %d fetches", where, txnMaxScanRounds)
}

// txnPartitionLeader returns the leader of topic/partition and the topic's id
// (fetch v13+ names topics by id).
func txnPartitionLeader(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
				return -1, [16]byte{}, fmt.Errorf("metadata of %s/%d: %w", topic, partition, err)
			}
			if p.Leader < 0 {
				return -1, [16]byte{}, fmt.Errorf("metadata of %s/%d: no leader: %w", topic, partition, kerr.LeaderNotAvailable)
			}
			return p.Leader, t.TopicID, nil
		}
		return -1, [16]byte{}, fmt.Errorf("metadata of %s: no partition %d: %w", topic, partition, ErrMarkerLost)
	}
	return -1, [16]byte{}, fmt.Errorf("metadata of %s: %w", topic, kerr.UnknownTopicOrPartition)
}
