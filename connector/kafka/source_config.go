package kafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ingest-engine/ingest/watermark"
)

// StartPosition is where a source starts reading a partition on a fresh start
// (no checkpoint to restore).
type StartPosition string

const (
	// StartEarliest reads every partition from its log start offset (Kafka's
	// auto.offset.reset=earliest). It is the default.
	StartEarliest StartPosition = "earliest"
	// StartLatest reads only what is produced after the source opened: each
	// partition starts at its end offset found at open (the last stable
	// offset when reading committed records).
	StartLatest StartPosition = "latest"
)

// StopPosition is where a source stops reading.
type StopPosition string

const (
	// StopNever reads until the job is stopped. It is the default.
	StopNever StopPosition = ""
	// StopAtLatest makes the source bounded: at its first start it reads the
	// end offset of every partition, reads up to it and then reports
	// Exhausted. The end offsets are part of the replay position, so a job
	// restored from a checkpoint stops at the same offsets however much was
	// produced since. Partitions created after the first start are not read.
	StopAtLatest StopPosition = "latest"
)

// Defaults of SourceConfig.
const (
	// DefaultDiscoveryInterval is how often an unbounded source looks for
	// partitions added to its topic.
	DefaultDiscoveryInterval = 10 * time.Second
	// DefaultPollInterval is how long a source subtask waits before polling
	// again when nothing was buffered.
	DefaultPollInterval = 5 * time.Millisecond
	// DefaultRequestTimeout bounds the admin requests of a source subtask
	// (metadata and offset listing at open, partition discovery, offset
	// commits).
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxBatch is the most records one Read emits.
	DefaultMaxBatch = 4096
)

// SourceConfig configures a Kafka source.
//
// The replay position (the next offset of every partition, and the end
// offsets when bounded) is kept in the engine's checkpoints. Kafka's consumer
// group offsets are never read: Group only receives copies for monitoring.
type SourceConfig struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Topic is the topic to read. Required. Partition p is read by source
	// subtask p % parallelism.
	Topic string
	// Group is a consumer group name to which each subtask commits its
	// partitions' next offsets after a checkpoint completes, so that
	// lag monitoring tools see the job's progress. The source never reads
	// these offsets: a restore uses the checkpoint alone, and a fresh start
	// uses Start. The group must not have active members (the commits are
	// made outside a group generation, as kadm.CommitOffsets does).
	// The default value "" commits nothing.
	Group string
	// Start is where a fresh start begins reading partitions known at open.
	// Partitions discovered later, or missing from a restored position,
	// are read from their log start. The default value is StartEarliest.
	Start StartPosition
	// StopAt makes the source bounded (StopAtLatest). The default value
	// StopNever reads until the job stops.
	StopAt StopPosition
	// Watermark is the watermark strategy, applied per partition: a
	// subtask's watermark is the minimum over its partitions that are not
	// idle. Records of one partition within MaxDelay of the newest event
	// time of that partition are on time. The zero value (in-order
	// partitions, never idle) loses nothing when each partition is in
	// event-time order, but a quiet partition then holds the watermark
	// back: set IdleTimeout for topics with quiet partitions. A partition
	// is idle only once a listing of end offsets shows it read to its end
	// after IdleTimeout without records (see the package doc).
	Watermark watermark.Strategy
	// ReadUncommitted reads records of open and aborted transactions too
	// (Kafka's isolation.level=read_uncommitted). The default false reads
	// only committed records (read_committed), which is what exactly-once
	// consumption of a transactional producer's output needs; the end
	// offsets of StopAtLatest are then the last stable offsets.
	ReadUncommitted bool
	// DiscoveryInterval is how often an unbounded source lists the topic's
	// partitions to pick up added ones (which are read from their log
	// start). Negative disables discovery; bounded sources never discover.
	// The default value is DefaultDiscoveryInterval (Flink:
	// partition.discovery.interval.ms).
	DiscoveryInterval time.Duration
	// PollInterval is how long Read asks the runtime to wait when no record
	// was buffered. Records are fetched in the background, so this bounds
	// the added latency. The default value is DefaultPollInterval.
	PollInterval time.Duration
	// RequestTimeout bounds each admin request (metadata and offsets at
	// open, discovery, group commits). The default value is
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxBatch is the most records one Read emits. The default value is
	// DefaultMaxBatch.
	MaxBatch int
	// ClientOptions are extra franz-go client options (TLS, SASL, client
	// id, fetch sizes…), applied after the source's own. Options that make
	// the client consume on its own (ConsumerGroup, ConsumeTopics,
	// ConsumePartitions) are refused: the source assigns partitions itself.
	ClientOptions []kgo.Opt
}

// withDefaults fills unset fields and validates the combination.
func (c SourceConfig) withDefaults() (SourceConfig, error) {
	if c.Start == "" {
		c.Start = StartEarliest
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one seed broker is required"))
	}
	for _, b := range c.Brokers {
		if b == "" {
			errs = append(errs, errors.New("brokers: an empty broker address"))
		}
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("topic is required"))
	}
	switch c.Start {
	case StartEarliest, StartLatest:
	default:
		errs = append(errs, fmt.Errorf("start %q: want %q or %q", c.Start, StartEarliest, StartLatest))
	}
	switch c.StopAt {
	case StopNever, StopAtLatest:
	default:
		errs = append(errs, fmt.Errorf("stop_at %q: want %q or nothing (unbounded)", c.StopAt, StopAtLatest))
	}
	if err := c.Watermark.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("watermark: %w", err))
	}
	if c.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("poll_interval %v must be positive", c.PollInterval))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("request_timeout %v must be positive", c.RequestTimeout))
	}
	if c.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("max_batch %d must be positive", c.MaxBatch))
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	// Refuse client options that would make franz-go consume by itself.
	probe, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOptions...)...)
	if err != nil {
		return c, scrubBrokers(fmt.Errorf("client options: %w", err), c.Brokers)
	}
	defer probe.Close()
	if g, _ := probe.OptValue(kgo.ConsumerGroup).(string); g != "" {
		return c, fmt.Errorf("client options: ConsumerGroup(%q) is not allowed: the source assigns partitions itself; set Group to commit offsets for monitoring", g)
	}
	if ts, _ := probe.OptValue(kgo.ConsumeTopics).([]string); len(ts) > 0 {
		return c, errors.New("client options: ConsumeTopics is not allowed: the source assigns partitions itself")
	}
	if ps := probe.OptValues(kgo.ConsumePartitions); len(ps) > 0 {
		if m, _ := ps[0].(map[string]map[int32]kgo.Offset); len(m) > 0 {
			return c, errors.New("client options: ConsumePartitions is not allowed: the source assigns partitions itself")
		}
	}
	return c, nil
}

// bounded reports whether the source stops at end offsets.
func (c *SourceConfig) bounded() bool { return c.StopAt == StopAtLatest }
