package kafka

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/runtime"
)

// txnOwnerState is the owner topic as one claimer read it: the prefix's
// chain with every record of partition 0 below end applied.
type txnOwnerState struct {
	chain txnOwnerChain
	end   int64
}

// txnClaimed is what the last Claim of a sink read, for the Reclaim that may
// follow it: a takeover is written on the owner that Claim reported, and
// fails if another writer took the prefix in between.
type txnClaimed struct {
	mu sync.Mutex
	st *txnOwnerState
}

func (c *txnClaimed) set(st *txnOwnerState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st = st
}

func (c *txnClaimed) get() *txnOwnerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Claim makes the sink's transactional-id prefix the sink's
// (runtime.DestinationClaimer), before the recovery aborts anything: a start
// aborts every ongoing transaction of the prefix (Abandon, and each subtask
// fences its ids when it opens), which would abort the prepared transactions
// of another sink using the same prefix and lose that sink's output.
//
// It reads partition 0 of the owner topic (created when missing) and folds
// the prefix's records into its owner (txnOwnerChain). A prefix nobody owns
// is claimed: the claim is written (acks=all, no transaction) with the next
// generation, and the log is read again up to it, so that of two claimers
// that read at the same time the one whose claim is first in the log wins,
// and the other is refused naming it. A prefix of another pipeline or sink
// is refused with an error wrapping runtime.ErrUnrecoverable. A prefix of
// another job of the same sink returns that job: the runtime decides whether
// this job may take it over (Reclaim). Nothing is written when the job owns
// the prefix already, so a restart costs one read of the owner topic.
func (c *txnCommitter) Claim(ctx context.Context, pipeline, sink, jobID string) (string, error) {
	cfg := &c.sh.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.CommitTimeout)
	defer cancel()
	cl, err := kgo.NewClient(txnOwnerClientOpts(cfg)...)
	if err != nil {
		return "", c.claimError(ctx, err)
	}
	defer cl.Close()
	if err := txnEnsureOwnerTopic(ctx, cl, cfg); err != nil {
		return "", c.claimError(ctx, err)
	}
	// The marker topic exists before any owner record names this job: a
	// missing marker topic then means it was deleted, and LastCommitted of
	// an owner that was killed before its first transaction answers 0
	// instead of "cannot tell", which would refuse every later job.
	if err := txnEnsureTopics(ctx, cl, cfg); err != nil {
		return "", c.claimError(ctx, err)
	}
	st, err := txnReadOwners(ctx, cl, cfg)
	if err != nil {
		return "", c.claimError(ctx, err)
	}
	if st.chain.verdict(pipeline, sink, jobID) == txnUnowned {
		won := false
		if st, won, err = txnWriteOwner(ctx, cl, cfg, st, txnOwner{Pipeline: pipeline, Sink: sink, Job: jobID}); err != nil {
			return "", c.claimError(ctx, err)
		}
		if !won && st.chain.verdict(pipeline, sink, jobID) == txnOwnedBySink {
			return "", fmt.Errorf("kafka sink %s: transactional_id_prefix %q was claimed at the same moment by job %s of this pipeline (owner record in %s partition 0 offset %d), and this job is %s: "+
				"two jobs of pipeline %q are starting against this sink (with different checkpoint storages?): run one job of the pipeline at a time (%w)",
				cfg.Topic, cfg.TransactionalIDPrefix, st.chain.owner.Job, cfg.OwnerTopic, st.chain.offset, jobID, pipeline, runtime.ErrUnrecoverable)
		}
	}
	switch st.chain.verdict(pipeline, sink, jobID) {
	case txnOwnedByJob:
		c.sh.claimed.set(&st)
		return "", nil
	case txnOwnedBySink:
		c.sh.claimed.set(&st)
		return st.chain.owner.Job, nil
	}
	return "", txnClaimRefusal(cfg, &st.chain, pipeline, sink)
}

// Reclaim records jobID as the prefix's owner in place of the job the
// preceding Claim reported, once the runtime decided this job may take the
// sink over. It writes the next generation on the owner Claim read and reads
// the log up to it: if another writer took the prefix in between (another
// job of the pipeline taking over at the same moment), it fails with an
// error wrapping runtime.ErrUnrecoverable naming that writer.
func (c *txnCommitter) Reclaim(ctx context.Context, pipeline, sink, jobID string) error {
	cfg := &c.sh.cfg
	st := c.sh.claimed.get()
	if st == nil || st.chain.verdict(pipeline, sink, jobID) != txnOwnedBySink {
		if st != nil && st.chain.verdict(pipeline, sink, jobID) == txnOwnedByJob {
			return nil
		}
		return fmt.Errorf("kafka sink %s: taking transactional_id_prefix %q over for job %s: no Claim of sink %q of pipeline %q found another job of it owning the prefix", cfg.Topic, cfg.TransactionalIDPrefix, jobID, sink, pipeline)
	}
	previous := st.chain.owner.Job
	ctx, cancel := context.WithTimeout(ctx, cfg.CommitTimeout)
	defer cancel()
	cl, err := kgo.NewClient(txnOwnerClientOpts(cfg)...)
	if err != nil {
		return c.claimError(ctx, err)
	}
	defer cl.Close()
	next, won, err := txnWriteOwner(ctx, cl, cfg, *st, txnOwner{Pipeline: pipeline, Sink: sink, Job: jobID})
	if err != nil {
		return c.claimError(ctx, err)
	}
	if !won {
		var who string
		switch {
		case next.chain.err != nil:
			who = fmt.Sprintf("a record that is no owner record (%v)", next.chain.err)
		case next.chain.owner != nil:
			who = next.chain.owner.String()
		default:
			who = "a release (a record with a null value)"
		}
		return fmt.Errorf("kafka sink %s: while job %s took transactional_id_prefix %q over from job %s, %s took it (%s partition 0 offset %d): "+
			"two jobs of pipeline %q are starting against this sink (with different checkpoint storages?): run one job of the pipeline at a time (%w)",
			cfg.Topic, jobID, cfg.TransactionalIDPrefix, previous, who, cfg.OwnerTopic, next.chain.offset, pipeline, runtime.ErrUnrecoverable)
	}
	c.sh.claimed.set(&next)
	return nil
}

// claimError wraps a failure to read or write the owner topic (a restart may
// cure it), and ctx's error when ctx ended: the job was cancelled, or the
// cluster did not answer within CommitTimeout.
func (c *txnCommitter) claimError(ctx context.Context, err error) error {
	cfg := &c.sh.cfg
	err = fmt.Errorf("kafka sink %s: checking that transactional_id_prefix %q is this sink's in %s (the sink's principal needs READ and WRITE on it, and CREATE unless it exists): %w",
		cfg.Topic, cfg.TransactionalIDPrefix, cfg.OwnerTopic, err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// txnClaimRefusal is the error of a prefix owned by another pipeline or
// sink, or by nobody knows whom: it names the owner and the ways out.
func txnClaimRefusal(cfg *SinkConfig, ch *txnOwnerChain, pipeline, sink string) error {
	release := fmt.Sprintf("release the prefix by producing a record with key %q and a null value to partition 0 of %s (echo '%s:' | kcat -b <brokers> -P -t %s -p 0 -K: -Z)",
		cfg.TransactionalIDPrefix, cfg.OwnerTopic, cfg.TransactionalIDPrefix, cfg.OwnerTopic)
	if ch.err != nil {
		return fmt.Errorf("kafka sink %s: %w. If no other sink uses the prefix, %s (%w)", cfg.Topic, ch.err, release, runtime.ErrUnrecoverable)
	}
	return fmt.Errorf("kafka sink %s: transactional_id_prefix %q belongs to %s, not to sink %q of pipeline %q (owner record in %s partition 0 offset %d): "+
		"starting would abort that sink's ongoing transactions, prepared ones of complete checkpoints included, and lose its output, and two sinks on the same transactional ids fence each other. "+
		"Give each sink its own transactional_id_prefix; if that sink is gone for good (or was renamed: the owner is named by pipeline and sink) and none of its transactions may still be committed, %s (%w)",
		cfg.Topic, cfg.TransactionalIDPrefix, ch.owner, sink, pipeline, cfg.OwnerTopic, ch.offset, release, runtime.ErrUnrecoverable)
}

// txnOwnerClientOpts are the options of the client that reads and writes the
// owner topic: records go to the partition they name (0), acknowledged by
// every in-sync replica. Writes are not idempotent (no extra permission): a
// retry that writes a claim twice is recognised by its claim id.
func txnOwnerClientOpts(cfg *SinkConfig) []kgo.Opt {
	return sinkClientOpts(cfg, nil,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(cfg.CommitTimeout),
	)
}

// txnReadOwners reads partition 0 of the owner topic from its start to its
// high watermark into the prefix's chain. Retriable errors (a topic just
// created is not known to every broker at once) are retried until ctx ends.
func txnReadOwners(ctx context.Context, cl *kgo.Client, cfg *SinkConfig) (txnOwnerState, error) {
	var st txnOwnerState
	err := txnRetry(ctx, "reading "+cfg.OwnerTopic, func() error {
		var err error
		st, err = txnReadOwnersOnce(ctx, cl, cfg)
		return err
	})
	return st, err
}

// txnReadOwnersOnce is one try of txnReadOwners.
func txnReadOwnersOnce(ctx context.Context, cl *kgo.Client, cfg *SinkConfig) (txnOwnerState, error) {
	topic := cfg.OwnerTopic
	st := txnOwnerState{chain: newTxnOwnerChain(cfg.TransactionalIDPrefix)}
	adm := kadm.NewClient(cl)
	starts, ends, err := topicBounds(ctx, adm, topic)
	if err != nil {
		return st, fmt.Errorf("listing the offsets of %s: %w", topic, err)
	}
	start, ok1 := starts.Lookup(topic, 0)
	end, ok2 := ends.Lookup(topic, 0)
	if !ok1 || !ok2 {
		return st, fmt.Errorf("listing the offsets of %s: no partition 0: %w", topic, kerr.UnknownTopicOrPartition)
	}
	st.end = end.Offset
	err = scanMarkerPartition(ctx, cl, topic, 0, start.Offset, end.Offset, func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			st.chain.apply(topic, r.Offset, r.Key, r.Value, r.Attrs.IsTransactional())
		}
	})
	if err != nil {
		return st, fmt.Errorf("reading %s: %w", topic, err)
	}
	return st, nil
}

// txnWriteOwner writes me as the prefix's owner of the generation after st's,
// then reads the log from st.end up to the written record, and returns the
// chain there: won when the record (or a copy a retry wrote before it) is
// the owner. Every record before it was read, so the outcome is final.
func txnWriteOwner(ctx context.Context, cl *kgo.Client, cfg *SinkConfig, st txnOwnerState, me txnOwner) (txnOwnerState, bool, error) {
	me.Version, me.Gen, me.Claim = txnOwnerVersion, st.chain.gen+1, rand.Text()
	me.Topic, me.At = cfg.Topic, time.Now().UTC()
	value, err := json.Marshal(&me)
	if err != nil {
		return st, false, fmt.Errorf("encoding the owner record: %w", err)
	}
	rec := &kgo.Record{Topic: cfg.OwnerTopic, Partition: 0, Key: []byte(cfg.TransactionalIDPrefix), Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return st, false, fmt.Errorf("writing the claim of job %s to %s partition 0: %w", me.Job, cfg.OwnerTopic, err)
	}
	if rec.Offset < st.end {
		return st, false, fmt.Errorf("the claim of job %s was written to %s partition 0 at offset %d, below the end %d read before: the topic was truncated or recreated", me.Job, cfg.OwnerTopic, rec.Offset, st.end)
	}
	err = scanMarkerPartition(ctx, cl, cfg.OwnerTopic, 0, st.end, rec.Offset+1, func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			st.chain.apply(cfg.OwnerTopic, r.Offset, r.Key, r.Value, r.Attrs.IsTransactional())
		}
	})
	if err != nil {
		return st, false, fmt.Errorf("reading %s back after writing the claim of job %s: %w", cfg.OwnerTopic, me.Job, err)
	}
	st.end = rec.Offset + 1
	return st, st.chain.err == nil && st.chain.owner != nil && st.chain.owner.Claim == me.Claim, nil
}

// txnOwnerTopicConfig is how the owner topic must be configured, and how it
// is created: a deleted or compacted-away owner record lets another sink
// claim a prefix in use.
var txnOwnerTopicConfig = map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}

// txnEnsureOwnerTopic creates the owner topic (one partition, infinite
// retention) when it does not exist, and refuses one configured to delete
// records. A principal not allowed to read topic configurations skips the
// check.
func txnEnsureOwnerTopic(ctx context.Context, cl *kgo.Client, cfg *SinkConfig) error {
	topic := cfg.OwnerTopic
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if d, ok := details[topic]; !ok || d.Err != nil {
		configs := map[string]*string{}
		for k, v := range txnOwnerTopicConfig {
			configs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, 1, -1, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s (or create it yourself: one partition, retention.ms=-1, cleanup.policy=delete): %w", topic, err)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	var rc kadm.ResourceConfig
	if err == nil {
		rc, err = rcs.On(topic, nil)
	}
	if err == nil {
		err = rc.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return nil
	case err != nil:
		return fmt.Errorf("describing the configuration of %s: %w", topic, err)
	}
	var wrong []string
	for _, c := range rc.Configs {
		want, checked := txnOwnerTopicConfig[c.Key]
		if !checked || c.Value == nil {
			continue
		}
		if got := *c.Value; got != want && (c.Key != "cleanup.policy" || strings.Contains(got, "compact")) {
			wrong = append(wrong, fmt.Sprintf("%s=%s", c.Key, got))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%s is configured with %s: its owner records would be deleted, and then another sink could claim a transactional_id_prefix in use and abort its transactions. "+
			"Set retention.ms=-1, retention.bytes=-1 and cleanup.policy=delete on it (kafka-configs --alter --entity-type topics --entity-name %s --add-config retention.ms=-1,retention.bytes=-1,cleanup.policy=delete) (%w)",
			topic, strings.Join(wrong, ", "), topic, runtime.ErrUnrecoverable)
	}
	return nil
}
