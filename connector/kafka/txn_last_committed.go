package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ingest-engine/ingest/runtime"
)

// LastCommitted returns the newest checkpoint at which a transaction of job
// jobID's sink (node id sink) was prepared and then committed, 0 if none
// (runtime.CommitTracker: a transaction prepared at P is published by the
// first complete checkpoint >= P, so this answers whether output after a
// checkpoint M was published exactly when the committing checkpoint would).
//
// Every transaction writes one marker record naming its job, sink and
// checkpoint into the marker topic; whether it committed is the control
// record that ends it. LastCommitted reads the marker topic from its start
// to its high watermark, uncommitted and control records included (like
// txnStatus, and unlike a read-committed read, which stops at the first
// still-open transaction: a lingering transaction of the crashed run would
// hide the commits after it). The whole topic is read, so it costs time in
// proportion to the markers retained; recovery asks only when it must
// decide about falling back past a damaged checkpoint.
//
// It returns runtime.ErrCommitUnknown when the marker topic is gone, or when
// retention deleted the start of the topic and no marker of the job remains
// (its output may have been published long ago).
func (c *txnCommitter) LastCommitted(ctx context.Context, jobID, sink string) (int64, error) {
	cfg := &c.sh.cfg
	topic := cfg.MarkerTopic
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("kafka sink %s: reading the markers in %s for the newest committed checkpoint of job %s: %w", cfg.Topic, topic, jobID, err)
	}
	cl, err := kgo.NewClient(sinkClientOpts(cfg, nil)...)
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, ends, err := topicBounds(ctx, adm, topic)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition) || (err == nil && len(ends[topic]) == 0):
		return fail(fmt.Errorf("the marker topic does not exist (deleted?): %w", runtime.ErrCommitUnknown))
	case err != nil:
		return fail(err)
	}
	var last int64
	found, trimmed := false, false
	for p, end := range ends[topic] {
		start, _ := starts.Lookup(topic, p)
		trimmed = trimmed || start.Offset > 0
		// open holds, per producer id, the newest checkpoint among the
		// markers of ours in its current transaction.
		open := map[int64]int64{}
		err := scanMarkerPartition(ctx, cl, topic, p, start.Offset, end.Offset, func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				var m txnMarker
				if json.Unmarshal(r.Value, &m) == nil && m.Job == jobID && m.Sink == sink {
					open[r.ProducerID] = max(open[r.ProducerID], m.Checkpoint)
				}
				return
			}
			var key kmsg.ControlRecordKey
			if key.ReadFrom(r.Key) != nil {
				return
			}
			id, ours := open[r.ProducerID]
			delete(open, r.ProducerID)
			if ours && key.Type == kmsg.ControlRecordKeyTypeCommit {
				last, found = max(last, id), true
			}
		})
		if err != nil {
			return fail(err)
		}
	}
	if !found && trimmed {
		return fail(fmt.Errorf("retention deleted the oldest markers and none of the job is left: %w", runtime.ErrCommitUnknown))
	}
	return last, nil
}

// scanMarkerPartition passes every record of topic/partition in [from, to),
// control records and records of open or aborted transactions included, to
// visit, in offset order.
func scanMarkerPartition(ctx context.Context, cl *kgo.Client, topic string, partition int32, from, to int64, visit func(*kgo.Record)) error {
	if from >= to {
		return nil
	}
	leader, topicID, err := txnPartitionLeader(ctx, cl, topic, partition)
	if err != nil {
		return err
	}
	for off := from; off < to; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 0
		req.MinBytes = 1
		req.MaxBytes = txnFetchBytes
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, off, txnFetchBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).RetriableRequest(ctx, req)
		if err != nil {
			return fmt.Errorf("fetching %s/%d at offset %d: %w", topic, partition, off, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetching %s/%d at offset %d: %w", topic, partition, off, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("fetching %s/%d: the broker answered for %d topics", topic, partition, len(resp.Topics))
		}
		part := &resp.Topics[0].Partitions[0]
		switch err := kerr.ErrorForCode(part.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange):
			return fmt.Errorf("fetching %s/%d at offset %d: retention deleted records while they were read: %w (%w)", topic, partition, off, err, runtime.ErrCommitUnknown)
		case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.LeaderNotAvailable):
			if leader, topicID, err = txnPartitionLeader(ctx, cl, topic, partition); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("fetching %s/%d at offset %d: %w", topic, partition, off, err)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true, Offset: off, Topic: topic, Partition: partition,
		}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return fmt.Errorf("fetching %s/%d at offset %d: %w", topic, partition, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= off && r.Offset < to {
				visit(r)
			}
		}
		if next <= off {
			return fmt.Errorf("fetching %s/%d: no record at offset %d below the high watermark %d", topic, partition, off, to)
		}
		off = next
	}
	return nil
}

// topicBounds lists the start and end offsets of every partition of topic.
func topicBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends kadm.ListedOffsets, err error) {
	starts, err = adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
	}
	return starts, ends, err
}
