package nats

import (
	"errors"
	"fmt"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/runtime"
)

// ErrBadMessage marks a message the decode function rejected; the error
// names the stream, subject and sequence.
var ErrBadMessage = errors.New("bad message")

// Source reads a JetStream stream into records of type T. It implements
// stream.Source[T].
type Source[T any] struct {
	cfg    SourceConfig
	decode func(Message) (T, int64, error)
	// gaps is the subtask's tally of skipped gaps (SkippedGaps).
	gaps gapCounter
}

// NewSource returns a source reading cfg's stream with decode, which turns a
// message into a value and its event time in Unix nanoseconds (see JSON,
// JSONWithTime and Timestamp). A message decode rejects, or whose payload
// is longer than the policy's MaxRecordBytes (1 MiB by default), is a bad
// record: it fails the task with an error naming the stream, subject and
// sequence, unless stream.OnBadRecords sets another policy (skip, or the
// dead-letter output with partition = the subject and offset = the stream
// sequence).
func NewSource[T any](cfg SourceConfig, decode func(Message) (T, int64, error)) (*Source[T], error) {
	cfg, err := cfg.withDefaults()
	if decode == nil {
		err = errors.Join(err, errors.New("decode function is nil"))
	}
	if err != nil {
		return nil, fmt.Errorf("nats source: %w", err)
	}
	return &Source[T]{cfg: cfg, decode: decode}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Source[T]) Config() SourceConfig { return s.cfg }

// Descriptor: the source replays exactly from a checkpointed stream
// sequence (as long as the stream still holds it, see ErrPositionLost). A
// stream is one ordered sequence, read by one subtask.
func (s *Source[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "nats", Capabilities: runtime.Capabilities{Replayable: true},
		MaxParallelism: 1, MaxParallelismReason: parallelismReason}
}

// Describe summarises the configuration.
func (s *Source[T]) Describe() string {
	d := fmt.Sprintf("nats stream %s", s.cfg.Stream)
	if s.cfg.Subject != "" {
		d += " subject " + s.cfg.Subject
	}
	d += " from " + s.cfg.Start.String()
	if s.cfg.StopAt == StopAtLatest {
		d += " until the last message at start"
	}
	if s.cfg.OnGap == OnGapSkip {
		d += ", on_gap skip"
	}
	return d + " (" + s.cfg.shownURL() + ")"
}

// shownURL is the URL for plans, logs and errors: its passwords and tokens
// masked (nats://u:xxxxx@host, nats://xxxxx@host).
func (c *SourceConfig) shownURL() string { return redact.DSN(c.URL) }

// scrub returns err with the URL's passwords and tokens masked in its
// message, wherever the client library or server put them.
func (c *SourceConfig) scrub(err error) error { return redact.NewScrubber(c.URL).Error(err) }

// NewSubtask creates the source subtask. There is one (Descriptor).
func (s *Source[T]) NewSubtask() runtime.SourceSubtask[T] { return &reader[T]{src: s} }

// parallelismReason explains the parallelism limit in errors.
const parallelismReason = "a JetStream stream is one ordered sequence, read by one subtask; set parallelism 1 (add one source per subject filter to read subjects in parallel)"
