package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/checkpoint"
)

// Defaults of SinkConfig (see each field).
const (
	// DefaultTransactionTimeout is the default SinkConfig.TransactionTimeout:
	// the largest timeout a broker accepts by default
	// (transaction.max.timeout.ms = 15 minutes).
	DefaultTransactionTimeout = 15 * time.Minute
	// DefaultSinkPoolSize is the default SinkConfig.PoolSize:
	// checkpoint.DefaultOptions' tolerable failures (3) + max concurrent (1) + 1.
	DefaultSinkPoolSize = 5
	// DefaultSinkDeliveryTimeout is the default SinkConfig.DeliveryTimeout (the
	// Java producer's delivery.timeout.ms default).
	DefaultSinkDeliveryTimeout = 2 * time.Minute
	// DefaultSinkCommitTimeout is the default SinkConfig.CommitTimeout.
	DefaultSinkCommitTimeout = time.Minute
	// DefaultSinkRecoveryMargin is the default SinkConfig.RecoveryMargin.
	DefaultSinkRecoveryMargin = time.Minute
	// sinkMarkerSuffix names the default marker topic: <topic><suffix>.
	sinkMarkerSuffix = ".ingest-txn-markers"
	// DefaultOwnerTopic is the default SinkConfig.OwnerTopic.
	DefaultOwnerTopic = "ingest-txn-owners"
)

// SinkConfig configures the transactional Kafka sink. Start from the zero
// value, set Brokers, Topic and TransactionalIDPrefix; NewSink fills in the
// defaults and validates.
type SinkConfig struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string

	// Topic is the topic records are written to. It must exist: the sink
	// never creates its data topic. Required.
	Topic string

	// TransactionalIDPrefix names the sink's transactional ids:
	// <prefix>-<subtask>-<slot>. Required. It must be unique to this sink
	// among every job that runs against the cluster, and stable across
	// restarts of the job: a start fences and aborts the open transactions of
	// every id with this prefix (they can only be leftovers of an earlier run
	// of the same sink), and a recovery resumes transactions by these ids.
	// It is checked: the first start records the prefix as this sink's in
	// OwnerTopic, and a start of another pipeline, or of another sink, with
	// the same prefix is refused before it aborts anything.
	// Flink: transactional-id-prefix.
	TransactionalIDPrefix string

	// OwnerTopic records which sink of which pipeline owns each
	// transactional-id prefix (see the package documentation). Every sink
	// writing to the cluster must use the same one: the check compares
	// prefixes only within it. It is created with one partition and infinite
	// retention (retention.ms=-1) when it does not exist; one created by hand
	// must be configured so too (cleanup.policy=delete, never compacted), or
	// a start refuses it. It holds one small record per prefix claimed or
	// taken over.
	// The default value is ingest-txn-owners.
	OwnerTopic string

	// TransactionTimeout is the timeout the broker enforces on each of the
	// sink's transactions, from its first record: a transaction still open
	// after it is aborted by the broker. A transaction stays open from the
	// first record after one barrier until the checkpoint of the next barrier
	// is committed, and after a crash until the restarted job re-commits it,
	// so it must comfortably exceed checkpoint interval + checkpoint timeout
	// + restart time (see ValidateAgainst). It cannot exceed the brokers'
	// transaction.max.timeout.ms (15 minutes by default).
	// The default value is 15m. Java producer: transaction.timeout.ms.
	TransactionTimeout time.Duration

	// PoolSize is how many transactional ids each sink subtask rotates over.
	// One id carries at most one transaction at a time; a subtask needs one for
	// the transaction it is writing and one for each prepared transaction not
	// yet known committed. With max_concurrent checkpoints M and up to F
	// checkpoint failures in a row (a failed checkpoint's transaction is
	// carried into the next one), that is at most F + M + 1. A subtask that
	// finds every id busy fails (the job restarts from the last complete
	// checkpoint: no output is lost or repeated, but the restart costs time).
	// Transactions whose checkpoint completed are committed by the subtask
	// itself before their id is reused, so a slow committer never exhausts
	// the pool. At least 2.
	// The default value is 5 (checkpoint defaults: 3 tolerable failures,
	// max_concurrent 1).
	PoolSize int

	// MarkerTopic is where each transaction writes one marker record, inside
	// the transaction, so that a committer can later tell a committed
	// transaction from an aborted one. It is created with one partition when
	// it does not exist. Markers are small (one per transaction) and must be
	// retained longer than a recovery can take: the topic's retention should
	// be at least days.
	// The default value is <Topic>.ingest-txn-markers.
	MarkerTopic string

	// DeliveryTimeout bounds how long a record may wait for the broker's
	// acknowledgement; a record not acknowledged in time fails the subtask
	// (the job restarts from the last complete checkpoint). A barrier waits
	// for every record written before it to be acknowledged.
	// The default value is 2m. Java producer: delivery.timeout.ms.
	DeliveryTimeout time.Duration

	// CommitTimeout bounds the committing of one transaction, including
	// retries of retriable errors (CONCURRENT_TRANSACTIONS, coordinator moves)
	// and waiting for the outcome of an interrupted commit; past it the
	// commit fails and the job restarts, and its recovery commits again.
	// The default value is 1m.
	CommitTimeout time.Duration

	// RecoveryMargin is the time allowed, on top of checkpoint interval and
	// checkpoint timeout, between a transaction's prepare and its commit: the
	// commit itself, and after a crash the restart delay and the recovery that
	// re-commits it. ValidateAgainst requires TransactionTimeout to cover it,
	// and a subtask refuses to carry a prepared transaction so old that it
	// could expire before it is committed.
	// The default value is 1m.
	RecoveryMargin time.Duration

	// ClientOptions are extra franz-go options (TLS, SASL, ...) applied to
	// every client the sink creates, after the sink's own.
	ClientOptions []kgo.Opt
}

// validTopicName reports whether Kafka accepts name as a topic name: 1 to
// 249 of a-z A-Z 0-9 . _ -. (A loop, not a regular expression: the compiled
// form of {1,249} held 230 KB of heap from program start, which every
// garbage collection of every pipeline then had to scan.)
func validTopicName(name string) bool {
	if len(name) == 0 || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// withDefaults fills unset fields and validates the configuration on its own.
func (c SinkConfig) withDefaults() (SinkConfig, error) {
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultSinkPoolSize
	}
	if c.MarkerTopic == "" && c.Topic != "" {
		c.MarkerTopic = c.Topic + sinkMarkerSuffix
		if len(c.MarkerTopic) > 249 {
			c.MarkerTopic = c.MarkerTopic[:249]
		}
	}
	if c.OwnerTopic == "" {
		c.OwnerTopic = DefaultOwnerTopic
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = DefaultSinkDeliveryTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultSinkCommitTimeout
	}
	if c.RecoveryMargin == 0 {
		c.RecoveryMargin = DefaultSinkRecoveryMargin
	}
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one seed broker is required"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("topic is required"))
	} else if !validTopicName(c.Topic) {
		errs = append(errs, fmt.Errorf("topic %q is not a valid Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)", c.Topic))
	}
	if c.MarkerTopic != "" && !validTopicName(c.MarkerTopic) {
		errs = append(errs, fmt.Errorf("marker_topic %q is not a valid Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)", c.MarkerTopic))
	}
	if c.MarkerTopic == c.Topic && c.Topic != "" {
		errs = append(errs, fmt.Errorf("marker_topic must differ from topic %q: markers would be mixed into the output", c.Topic))
	}
	if !validTopicName(c.OwnerTopic) {
		errs = append(errs, fmt.Errorf("owner_topic %q is not a valid Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)", c.OwnerTopic))
	}
	if c.OwnerTopic == c.Topic || c.OwnerTopic == c.MarkerTopic {
		errs = append(errs, fmt.Errorf("owner_topic %q must differ from topic %q and marker_topic %q", c.OwnerTopic, c.Topic, c.MarkerTopic))
	}
	if c.TransactionalIDPrefix == "" {
		errs = append(errs, errors.New("transactional_id_prefix is required: it names the sink's transactions so a restarted job can resume and fence them"))
	}
	if c.TransactionTimeout < 0 || c.TransactionTimeout%time.Millisecond != 0 || c.TransactionTimeout > time.Duration(1<<31-1)*time.Millisecond {
		errs = append(errs, fmt.Errorf("transaction_timeout %v must be a positive whole number of milliseconds", c.TransactionTimeout))
	}
	if c.PoolSize < 2 {
		errs = append(errs, fmt.Errorf("pool_size %d must be at least 2: one id for the transaction being written, one for the prepared one", c.PoolSize))
	}
	for name, d := range map[string]time.Duration{"delivery_timeout": c.DeliveryTimeout, "commit_timeout": c.CommitTimeout, "recovery_margin": c.RecoveryMargin} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", name, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("kafka sink: %w", err)
	}
	return c, nil
}

// ValidateAgainst checks the transaction timeout against checkpointing
// settings o. A transaction opens with the first record after barrier N-1 and
// must still be open when checkpoint N is committed: up to a checkpoint
// interval (or the min pause, when larger) until barrier N, up to a checkpoint
// timeout until N completes, and RecoveryMargin for the commit (or, after a
// crash, the restart and the recovery that re-commits it). A broker aborts a
// transaction older than its timeout, and an aborted transaction of a
// complete checkpoint is output lost, so the timeout must be at least
// max(o.Interval, o.MinPause) + o.Timeout + RecoveryMargin.
//
// A checkpoint that itself takes almost its whole timeout delays the next
// trigger (with max_concurrent 1), so even a valid configuration can leave a
// transaction open longer; the sink's subtasks guard that case at run time
// (a prepared transaction too old to outlive its commit fails the subtask, so
// the job restarts and writes its records again, instead of losing them).
//
// PoolSize is checked separately (PoolAdvice): a small pool costs restarts,
// never output.
//
// The receiver needs no defaults filled in; zero fields mean their defaults.
func (c SinkConfig) ValidateAgainst(o checkpoint.Options) error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	spacing, what := o.Interval, "checkpoint interval"
	if o.MinPause > o.Interval {
		spacing, what = o.MinPause, "checkpoint min pause"
	}
	need := spacing + o.Timeout + c.RecoveryMargin
	if c.TransactionTimeout < need {
		return fmt.Errorf("kafka sink %s: transaction timeout %v is not comfortably larger than %s %v + checkpoint timeout %v + recovery margin %v = %v: "+
			"the broker would abort a transaction of a complete checkpoint before it is committed, and its records would be lost; "+
			"raise transaction_timeout to at least %v (the brokers' transaction.max.timeout.ms, 15m by default, caps it) or shorten the checkpoint interval or timeout",
			c.Topic, c.TransactionTimeout, what, spacing, o.Timeout, c.RecoveryMargin, need, need)
	}
	return nil
}

// PoolAdvice returns a sentence when PoolSize is below what checkpoint
// settings o can need (TolerableFailures + MaxConcurrent + 1), "" otherwise.
// It is advice, not an error: see PoolSize.
func (c SinkConfig) PoolAdvice(o checkpoint.Options) string {
	c, _ = c.withDefaults()
	need := o.TolerableFailures + o.MaxConcurrent + 1
	if c.PoolSize >= need {
		return ""
	}
	return fmt.Sprintf("kafka sink %s: pool_size %d is below tolerable_failures %d + max_concurrent %d + 1 = %d: after %d checkpoint failures in a row a sink subtask runs out of transactional ids and the job restarts",
		c.Topic, c.PoolSize, o.TolerableFailures, o.MaxConcurrent, need, c.PoolSize-o.MaxConcurrent)
}

// sinkClientOpts are the options of every client the sink creates: bounded
// request retries, no client metrics pushes, the job's logger, then the
// user's extra options.
func sinkClientOpts(cfg *SinkConfig, log *slog.Logger, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DisableClientMetrics(),
		kgo.RetryTimeout(cfg.CommitTimeout),
	}
	if log != nil {
		opts = append(opts, kgo.WithLogger(sinkKgoLogger{log}))
	}
	opts = append(opts, extra...)
	return append(opts, cfg.ClientOptions...)
}

// sinkKgoLogger passes franz-go's warnings and errors to the job's log.
type sinkKgoLogger struct{ l *slog.Logger }

// Level makes franz-go log warnings and errors only.
func (sinkKgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log writes one franz-go message.
func (g sinkKgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	g.l.Log(context.Background(), lvl, "kafka sink client: "+msg, keyvals...)
}
