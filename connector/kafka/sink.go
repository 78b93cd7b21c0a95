package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// Sink writes records of type T to a Kafka topic with transactions committed
// per checkpoint (exactly-once; see the package documentation). It implements
// stream.Sink[T].
type Sink[T any] struct {
	encode func(T) (key, value []byte, err error)
	sh     *txnShared
}

// txnShared is what a sink's subtasks and its committer share in one process.
type txnShared struct {
	// cfg has its defaults filled in and is never changed.
	cfg SinkConfig
	// ledger holds the transactions known committed.
	ledger txnLedger
	// claimed is the owner topic as the last Claim read it, for Reclaim.
	claimed txnClaimed
	// horizon is the checkpoint timeout the subtasks assume in the guard
	// against carrying a transaction that could expire before its commit
	// (nanoseconds; 0 until ConfigureCheckpointing).
	horizon atomic.Int64
}

// NewSink returns a sink writing to cfg.Topic; encode turns a record into the
// key and value of a Kafka record (a nil key lets the default partitioner
// spread records). An encode error fails the sink subtask: a record is never
// dropped. It fails when cfg is incomplete or invalid.
func NewSink[T any](cfg SinkConfig, encode func(T) (key, value []byte, err error)) (*Sink[T], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if encode == nil {
		return nil, errors.New("kafka sink: an encode function is required")
	}
	return &Sink[T]{encode: encode, sh: &txnShared{cfg: cfg}}, nil
}

// Config returns the effective configuration, defaults filled in.
func (s *Sink[T]) Config() SinkConfig { return s.sh.cfg }

// Describe names the topic and the commit scope.
func (s *Sink[T]) Describe() string {
	return fmt.Sprintf("kafka topic %s (transactions %s-<subtask>-<0..%d>, committed per checkpoint; each sink subtask's share of a checkpoint becomes visible atomically)",
		s.sh.cfg.Topic, s.sh.cfg.TransactionalIDPrefix, s.sh.cfg.PoolSize-1)
}

// Committer returns the sink's committer.
func (s *Sink[T]) Committer() runtime.Committer { return &txnCommitter{sh: s.sh} }

// NewSubtask creates one sink subtask.
func (s *Sink[T]) NewSubtask() runtime.SinkSubtask[T] { return &sinkWriter[T]{sink: s, cfg: &s.sh.cfg} }

// ConfigureCheckpointing checks the sink's transaction timeout against the
// job's checkpoint options (SinkConfig.ValidateAgainst) and, when it fits,
// makes the subtasks' run-time guard exact: at a barrier a subtask refuses to
// carry a prepared transaction older than TransactionTimeout - o.Timeout -
// RecoveryMargin, which could expire before its checkpoint commits (the
// subtask fails and the job writes those records again from the last
// complete checkpoint instead of losing them). Without this call the guard
// assumes a checkpoint timeout of 0 and only catches transactions about to
// expire. Call it before the job runs.
func (s *Sink[T]) ConfigureCheckpointing(o checkpoint.Options) error {
	if err := s.sh.cfg.ValidateAgainst(o); err != nil {
		return err
	}
	s.sh.horizon.Store(int64(o.Timeout))
	return nil
}

// txnEnsureTopics checks that the data topic exists and creates the marker
// topic (one partition, the brokers' default replication) when it does not.
func txnEnsureTopics(ctx context.Context, cl *kgo.Client, cfg *SinkConfig) error {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, cfg.Topic, cfg.MarkerTopic)
	if err != nil {
		return fmt.Errorf("kafka sink: metadata of topics %s and %s: %w", cfg.Topic, cfg.MarkerTopic, err)
	}
	if d, ok := details[cfg.Topic]; !ok || d.Err != nil {
		var cause error = kerr.UnknownTopicOrPartition
		if ok {
			cause = d.Err
		}
		return fmt.Errorf("kafka sink: topic %s is not usable (create it first: the sink never creates its output topic): %w", cfg.Topic, cause)
	}
	if d, ok := details[cfg.MarkerTopic]; ok && d.Err == nil {
		return nil
	}
	resp, err := adm.CreateTopic(ctx, 1, -1, nil, cfg.MarkerTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka sink: creating marker topic %s (or create it yourself, one partition is enough): %w", cfg.MarkerTopic, err)
	}
	return nil
}
