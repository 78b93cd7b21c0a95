// Package kafka connects pipelines to Apache Kafka topics through franz-go.
//
// # Source
//
// Source reads one topic as a replayable source (NewSource, SourceConfig).
//
// Assignment. Partition p is read by source subtask p % parallelism,
// assigned to the client directly at an exact offset (no consumer group
// rebalancing). The assignment depends only on these numbers, so it is the
// same after every restart.
//
// Replay position. A subtask's position is the next offset of each of its
// partitions (and, when bounded, their end offsets; and each partition's
// newest event time, so its watermark resumes where it was), stored as the
// subtask's inline state at every barrier. A restored subtask assigns its
// partitions at exactly those offsets: records before the cut are in the
// checkpoint's state, records after it are read again. A partition the
// position does not hold (created, or not yet discovered, before the cut) is
// read from its log start. An offset that is no longer in the log (retention)
// fails the task instead of skipping records.
//
// Bounded reading. With StopAt = StopAtLatest a subtask lists the end
// offsets of its partitions when it first opens (the last stable offsets
// under read_committed), reads up to them and reports Exhausted. The ends are
// in every position, so a job restored from a checkpoint stops at the same
// offsets however much was produced since. (A crash before the first
// checkpoint completed restarts from scratch and lists the ends again.)
//
// Event time and watermarks. The decode function returns each record's event
// time (helpers: RecordTimestamp, JSONEventTime, DecodeJSON). The watermark
// strategy applies per partition through watermark.Tracker: a subtask's
// watermark is the minimum over its partitions that are neither finished nor
// idle; a subtask without partitions is idle. A partition is idle when it
// produced no record for IdleTimeout and a listing of end offsets sent after
// that (the last stable offsets under read_committed) found its position at
// its end; while any partition is quiet the subtask lists them every
// IdleTimeout/4 on a goroutine of its own, and a listing counts for
// IdleTimeout. A partition the subtask did not get to read (a stall of the
// engine, a fetch that favoured other partitions, a broker outage) is never
// idle, so its records are not made late by the others'.
//
// New partitions. An unbounded source lists the topic's partitions every
// DiscoveryInterval on a background goroutine; a new partition owned by the
// subtask is read from its log start. Its records may be late for windows
// that already fired.
//
// Bad records. A record the decode function rejects, or whose value is
// longer than the policy's MaxRecordBytes (1 MiB by default), is a bad
// record. By default it fails the task with a *DecodeError naming topic,
// partition, offset and cause. With stream.OnBadRecords it can instead be
// skipped (counted) or sent to the source's dead-letter output (partition:
// the partition number; offset: the record's offset; raw: the value); the
// position moves past it either way, and the subtask's counts are part of
// its position.
//
// Consumer group. Group only receives a copy of the offsets of completed
// checkpoints, for lag monitoring; it is never read. The copy needs the
// runtime to tell sources the id of the checkpoint a position belongs to and
// when it completed: a subtask implements PositionAt(id) and
// NotifyComplete(id) for that.
//
// Guarantee. Exactly-once (replayable) relies on: the records after a
// checkpoint's offsets still being in the log when the job restores it;
// a deterministic decode function; read_committed (the default) when the
// topic is written by transactional producers, so aborted and open
// transactions are never read.
//
// Rescaling. The source's parallelism may change across a restore: every
// entry of a position names its partition, so each subtask of the new
// parallelism is given the positions of all old subtasks
// (runtime.Context.RestoredUnion) and resumes exactly the partitions it now
// owns, at their offsets; subtask 0 carries the bad-record counts on.
package kafka

import (
	"fmt"
	"strings"

	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/runtime"
)

// Source is a replayable Kafka source of T: it implements stream.Source[T].
type Source[T any] struct {
	cfg    SourceConfig
	decode Decoder[T]
}

// NewSource returns a source reading cfg.Topic that turns every record into
// a T and its event time with decode (see DecodeJSON, JSONEventTime,
// RecordTimestamp).
func NewSource[T any](cfg SourceConfig, decode Decoder[T]) (*Source[T], error) {
	name := "kafka source"
	if cfg.Topic != "" {
		name += " " + cfg.Topic
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if decode == nil {
		return nil, fmt.Errorf("%s: a decode function is required", name)
	}
	return &Source[T]{cfg: cfg, decode: decode}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Source[T]) Config() SourceConfig { return s.cfg }

// Describe summarises the configuration.
func (s *Source[T]) Describe() string {
	c := &s.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "kafka topic %s from %s, start %s", c.Topic, shownBrokers(c.Brokers), c.Start)
	if c.bounded() {
		fmt.Fprintf(&b, ", stop at %s", c.StopAt)
	}
	if c.ReadUncommitted {
		b.WriteString(", read uncommitted")
	} else {
		b.WriteString(", read committed")
	}
	if c.Group != "" {
		fmt.Fprintf(&b, ", offsets copied to group %s", c.Group)
	}
	return b.String()
}

// shownBrokers lists seed brokers for plans and errors. A broker is
// host:port, but one written with credentials (user:password@host:port, or
// as a URL) has them masked.
func shownBrokers(brokers []string) string {
	shown := make([]string, len(brokers))
	for i, b := range brokers {
		shown[i] = redact.DSN(b)
	}
	return strings.Join(shown, ",")
}

// scrubBrokers returns err with the credentials of any broker address
// masked, as the client library may quote an address it cannot use.
func scrubBrokers(err error, brokers []string) error {
	return redact.NewScrubber(brokers...).Error(err)
}

// NewSubtask creates one source subtask.
func (s *Source[T]) NewSubtask() runtime.SourceSubtask[T] { return &srcSubtask[T]{src: s} }
