package nats

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/ingest-engine/ingest/watermark"
)

// StopAt says when a source ends.
type StopAt string

const (
	// StopNever reads until the job is stopped: the stream is unbounded.
	StopNever StopAt = ""
	// StopAtLatest reads up to the stream's last sequence at the first start
	// (stored in the position, so restores end at the same message), then
	// reports Exhausted.
	StopAtLatest StopAt = "latest"
)

// OnGap says what the source does with messages removed from the stream
// (a purge, a retention limit, a deletion) before it read them: the stream
// sequences it would have to skip.
type OnGap string

const (
	// OnGapFail stops the job with an error wrapping ErrGap that names the
	// stream, the subject and the removed sequences. It is the default: a
	// restart cannot bring removed messages back.
	OnGapFail OnGap = "fail"
	// OnGapSkip reads on past the removed messages: each range is logged at
	// WARN and counted (Source.SkippedGaps, stored with the position).
	OnGapSkip OnGap = "skip"
)

// ParseOnGap reads the spelling of an OnGap: fail or skip ("" is fail).
func ParseOnGap(s string) (OnGap, error) {
	switch g := OnGap(s); g {
	case "":
		return OnGapFail, nil
	case OnGapFail, OnGapSkip:
		return g, nil
	}
	return "", fmt.Errorf("on_gap %q: want fail or skip", s)
}

// StartPolicy names where a fresh start begins.
type StartPolicy int

const (
	// StartFirst begins at the stream's first message.
	StartFirst StartPolicy = iota
	// StartNew begins after the stream's last message at the first start:
	// only messages published later are read.
	StartNew
	// StartSequence begins at Start.Sequence.
	StartSequence
	// StartTime begins at the first message stored at or after Start.Time.
	StartTime
)

// Start is where a fresh start (no checkpoint) begins. A restore always
// continues from the checkpoint's position instead. The zero value is
// StartFirst.
type Start struct {
	Policy StartPolicy
	// Sequence is the first stream sequence to read, for StartSequence.
	Sequence uint64
	// Time is the earliest store time to read, for StartTime.
	Time time.Time
}

// ParseStart parses the YAML spelling of a start: "first" (or ""), "new", a
// stream sequence (a positive integer), or an RFC 3339 time.
func ParseStart(s string) (Start, error) {
	switch s = strings.TrimSpace(s); s {
	case "", "first":
		return Start{Policy: StartFirst}, nil
	case "new":
		return Start{Policy: StartNew}, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return Start{}, errors.New(`start sequence 0: stream sequences begin at 1 (use "first")`)
		}
		return Start{Policy: StartSequence, Sequence: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Start{Policy: StartTime, Time: t}, nil
	}
	return Start{}, fmt.Errorf("start %q: want first, new, a stream sequence or an RFC 3339 time", s)
}

// String is the YAML spelling ParseStart reads.
func (s Start) String() string {
	switch s.Policy {
	case StartNew:
		return "new"
	case StartSequence:
		return strconv.FormatUint(s.Sequence, 10)
	case StartTime:
		return s.Time.Format(time.RFC3339Nano)
	}
	return "first"
}

// SourceConfig configures a JetStream source. Zero values take the defaults
// documented per field.
type SourceConfig struct {
	// URL is the server (or a comma-separated list of servers) to connect
	// to. The default value is nats://127.0.0.1:4222.
	URL string
	// Stream is the JetStream stream to read. Required; it must exist.
	Stream string
	// Subject filters the stream's messages (wildcards allowed, e.g.
	// "events.>"). The default value "" reads every message.
	Subject string
	// Start is where a fresh start begins. The default value is the first
	// message.
	Start Start
	// StopAt says when the source ends. The default value StopNever reads
	// until the job stops.
	StopAt StopAt
	// Watermark is the watermark strategy; the stream is one split.
	Watermark watermark.Strategy
	// BatchSize is the most messages one Read requests and emits. Larger
	// batches cost fewer round trips; smaller ones bound how long a Read
	// holds a barrier. The default value is 1000.
	BatchSize int
	// PollInterval is how long the source waits before asking again after a
	// read found no message: the extra latency of the first message after a
	// quiet period, against one request per interval while quiet. The
	// default value is 5ms.
	PollInterval time.Duration
	// RequestTimeout bounds each JetStream API request (stream info, consumer
	// creation, message lookup). The default value is 5s.
	RequestTimeout time.Duration
	// MaxRetries is how many times in a row the source recreates a failed
	// consumer (pull error, gap, deleted consumer) before the Read fails the
	// task. The default value is 10.
	MaxRetries int
	// RetryBackoff is the wait before the first recreation; it doubles per
	// attempt up to 5s. The default value is 100ms.
	RetryBackoff time.Duration
	// MaxReconnects is how many times the connection tries to reconnect
	// after losing the server before it closes, failing the task. The
	// default value is 60.
	MaxReconnects int
	// ReconnectWait is the pause between reconnect attempts. The default
	// value is 1s, so by default the source rides out an outage of about a
	// minute.
	ReconnectWait time.Duration
	// SkipDecodeErrors drops a message the decode function rejects, logging
	// and counting it, instead of failing the task. The default value false
	// fails the task: a message is never dropped unless asked (replays drop
	// the same messages as long as decode is deterministic).
	//
	// Deprecated: set a bad-record policy with stream.OnBadRecords
	// (OnErrorSkip, or OnErrorDeadLetter to keep the messages), which
	// overrides this field.
	SkipDecodeErrors bool
	// OnGap is what the source does with messages removed from the stream
	// before it read them (see doc.go, "Continuity"). The default value
	// OnGapFail stops the job.
	OnGap OnGap
	// Options are extra connection options (credentials, TLS, a name); they
	// are applied after the source's own.
	Options []natsgo.Option
}

// The defaults of SourceConfig's fields (see each field).
const (
	// DefaultBatchSize is SourceConfig.BatchSize's default.
	DefaultBatchSize = 1000
	// DefaultPollInterval is SourceConfig.PollInterval's default.
	DefaultPollInterval = 5 * time.Millisecond
	// DefaultRequestTimeout is SourceConfig.RequestTimeout's default.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultMaxRetries is SourceConfig.MaxRetries's default.
	DefaultMaxRetries = 10
	// DefaultRetryBackoff is SourceConfig.RetryBackoff's default.
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultMaxReconnects is SourceConfig.MaxReconnects's default.
	DefaultMaxReconnects = 60
	// DefaultReconnectWait is SourceConfig.ReconnectWait's default.
	DefaultReconnectWait = time.Second
	// maxRetryBackoff caps the doubling of RetryBackoff.
	maxRetryBackoff = 5 * time.Second
)

// withDefaults fills unset fields and validates the combination.
func (c SourceConfig) withDefaults() (SourceConfig, error) {
	if c.URL == "" {
		c.URL = natsgo.DefaultURL
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxReconnects == 0 {
		c.MaxReconnects = DefaultMaxReconnects
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = DefaultReconnectWait
	}
	var errs []error
	if g, err := ParseOnGap(string(c.OnGap)); err != nil {
		errs = append(errs, err)
	} else {
		c.OnGap = g
	}
	if c.Stream == "" {
		errs = append(errs, errors.New("stream is required"))
	} else if strings.ContainsAny(c.Stream, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("stream %q: a stream name must not contain whitespace, '.', '*', '>', '/' or '\\'", c.Stream))
	}
	if strings.ContainsAny(c.Subject, " \t\r\n") || strings.HasPrefix(c.Subject, ".") || strings.HasSuffix(c.Subject, ".") || strings.Contains(c.Subject, "..") {
		errs = append(errs, fmt.Errorf("subject %q is not a valid subject filter", c.Subject))
	}
	switch c.StopAt {
	case StopNever, StopAtLatest:
	default:
		errs = append(errs, fmt.Errorf("stop_at %q: want %q or unset", c.StopAt, StopAtLatest))
	}
	switch c.Start.Policy {
	case StartFirst, StartNew:
	case StartSequence:
		if c.Start.Sequence == 0 {
			errs = append(errs, errors.New("start sequence 0: stream sequences begin at 1"))
		}
	case StartTime:
		if c.Start.Time.IsZero() {
			errs = append(errs, errors.New("start time is unset"))
		}
	default:
		errs = append(errs, fmt.Errorf("start policy %d is unknown", c.Start.Policy))
	}
	if err := c.Watermark.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("batch_size %d must be positive", c.BatchSize))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"poll_interval", c.PollInterval}, {"request_timeout", c.RequestTimeout}, {"retry_backoff", c.RetryBackoff}, {"reconnect_wait", c.ReconnectWait}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("max_retries %d must be positive", c.MaxRetries))
	}
	if c.MaxReconnects < 0 {
		errs = append(errs, fmt.Errorf("max_reconnects %d must be positive (nats.go's -1, reconnect forever, is refused: the task must fail eventually)", c.MaxReconnects))
	}
	return c, errors.Join(errs...)
}
