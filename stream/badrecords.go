package stream

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/runtime"
)

// This file is the bad-input policy of sources: what a source does with a
// record it cannot turn into a value (malformed, wrong types, no event
// time), one longer than its size limit, or one whose event time is too
// far ahead of the wall clock (MaxFuture). OnBadRecords sets it on a
// source's stream; the connectors apply it per subtask with BadRecords.

// OnError is what a source does with a bad record.
type OnError string

const (
	// OnErrorFail fails the source subtask with an error naming the source,
	// the record's partition (or split, or file), its offset (or sequence,
	// or line) and the cause. The job restarts from its last checkpoint,
	// meets the record again and fails again, so a bad record stops the job
	// until it is dealt with. It is the default.
	OnErrorFail OnError = "fail"
	// OnErrorSkip drops the bad record, counts it (BadRecordCounts) and logs
	// a rate-limited warning naming its position and the cause. The record
	// is consumed: the replay position moves past it.
	OnErrorSkip OnError = "skip"
	// OnErrorDeadLetter writes the bad record, as a DeadLetter, to the
	// source's side output DeadLetterOutput, which must be connected. The
	// dead letters travel with the source's other output through the same
	// checkpoints, so an exactly-once sink on the side output receives each
	// bad record exactly once.
	OnErrorDeadLetter OnError = "dead_letter"
)

// ParseOnError reads the spelling of a policy: fail, skip or dead_letter
// ("" is fail).
func ParseOnError(s string) (OnError, error) {
	switch o := OnError(s); o {
	case "":
		return OnErrorFail, nil
	case OnErrorFail, OnErrorSkip, OnErrorDeadLetter:
		return o, nil
	}
	return "", fmt.Errorf("on_error %q: want fail, skip or dead_letter", s)
}

// DeadLetterOutput is the name of a source's dead-letter side output
// (YAML: input: <source>.dead_letter).
const DeadLetterOutput = "dead_letter"

// DefaultMaxRecordBytes is the default size limit of a record.
const DefaultMaxRecordBytes = 1 << 20

// DefaultMaxFuture is how far ahead of the wall clock an event time may be
// by default (BadRecordPolicy.MaxFuture).
const DefaultMaxFuture = time.Hour

// NoMaxFuture, as BadRecordPolicy.MaxFuture, accepts event times however far
// ahead of the wall clock they are (YAML: max_future: 0).
const NoMaxFuture time.Duration = -1

// ErrFutureEventTime marks the cause of a bad record whose event time is
// more than BadRecordPolicy.MaxFuture ahead of the wall clock.
var ErrFutureEventTime = errors.New("event time too far in the future")

// BadRecordPolicy says what a source does with bad records.
type BadRecordPolicy struct {
	// OnError is the policy. The default value "" is OnErrorFail.
	OnError OnError
	// MaxRecordBytes bounds a record's size (a Kafka record's value, a NATS
	// message's payload, a file's line or CSV record): a longer record is
	// a bad record. The file source never buffers more than about this
	// much of a record. The default value is DefaultMaxRecordBytes (1 MiB);
	// for the file source the default is its SourceConfig.MaxLineBytes.
	MaxRecordBytes int
	// MaxFuture bounds how far ahead of the wall clock a record's event time
	// may be: a record dated later is a bad record (ErrFutureEventTime).
	// Without the bound, one record dated years ahead (a typo, a clock
	// reset, epoch microseconds read as milliseconds) moves the watermark
	// there, and every later record is dropped as late by the event-time
	// operators downstream. The check never lets such a record move the
	// watermark. The default value 0 is DefaultMaxFuture (1 h); a negative
	// value (NoMaxFuture) disables the check, for input whose event times
	// are meant to be ahead of the clock (replayed or simulated data).
	MaxFuture time.Duration
	// DeadLetterBatch turns dead letters into the batch the dead-letter side
	// output carries, for consumers of another type than DeadLetter (the
	// YAML layer's rows). The slice is only valid during the call. The
	// default nil emits a Batch[DeadLetter].
	DeadLetterBatch func(dl []DeadLetter) runtime.Records
}

// withDefaults fills unset fields and validates the policy.
func (p BadRecordPolicy) withDefaults() (BadRecordPolicy, error) {
	o, err := ParseOnError(string(p.OnError))
	if err != nil {
		return p, err
	}
	p.OnError = o
	if p.MaxRecordBytes < 0 {
		return p, fmt.Errorf("max_record_bytes %d must be positive", p.MaxRecordBytes)
	}
	if p.MaxRecordBytes == 0 {
		p.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if p.MaxFuture == 0 {
		p.MaxFuture = DefaultMaxFuture
	}
	return p, nil
}

// DeadLetter is a bad record on a source's dead-letter side output. Dead
// letters carry no event time: their record time is 0, so an event-time
// window downstream sees them as late.
type DeadLetter struct {
	// Source is the source's node id.
	Source string `json:"source"`
	// Partition is where the record was read: a Kafka partition number, a
	// NATS subject, a file's path.
	Partition string `json:"partition"`
	// Offset is the record's position in Partition: a Kafka offset, a NATS
	// stream sequence, a file's byte offset of the record's first byte.
	Offset int64 `json:"offset"`
	// Line is the file line the record starts on (1-based); 0 for sources
	// without lines.
	Line int64 `json:"line"`
	// Error is why the record is bad (the decoder's error, or the size
	// limit it exceeds), without the position, which the fields above
	// hold.
	Error string `json:"error"`
	// Raw is the record's bytes, at most MaxRecordBytes of them (an
	// oversized record is truncated).
	Raw []byte `json:"raw"`
}

// BadRecordError is the failure of a source subtask at a bad record under
// OnErrorFail (Reject returns it). Its message is the connector's; it marks
// the failure as one that a restart meets again, so the caller that reports
// it can name the remedy: OnErrorSkip or OnErrorDeadLetter on Source.
type BadRecordError struct {
	// Source is the source node; "" from a source without a policy.
	Source string
	// Err is the connector's failure: the record's position and the cause.
	Err error
}

// Error returns the connector's message.
func (e *BadRecordError) Error() string { return e.Err.Error() }

// Unwrap returns the connector's failure.
func (e *BadRecordError) Unwrap() error { return e.Err }

// BadRecord is what a connector hands BadRecords.Reject: where the record
// is, its bytes and why it is bad.
type BadRecord struct {
	// Partition, Offset and Line are as in DeadLetter.
	Partition string
	Offset    int64
	Line      int64
	// Raw is the record's bytes; Reject copies what it keeps.
	Raw []byte
	// Err is the cause, without the position.
	Err error
}

// BadRecordTally counts one source subtask's bad records since the job
// first started. Connectors store it in their replay position, so a
// restore resumes the counts of the checkpoint: records read again after a
// recovery are not counted twice.
type BadRecordTally struct {
	// Skipped counts records dropped under OnErrorSkip.
	Skipped int64 `json:"skipped,omitempty"`
	// DeadLettered counts records sent to the dead-letter output.
	DeadLettered int64 `json:"dead_lettered,omitempty"`
}

// BadRecordCounts are the bad-record counts of one source node, per
// subtask, for metrics (Pipeline.BadRecordCounts). Each subtask sets its
// tally when it opens (the restored one) and after every bad record, so
// the counts follow the replay position: right after a recovery they drop
// back to the checkpoint's and then count the re-read records again.
type BadRecordCounts struct {
	mu       sync.Mutex
	subtasks map[int]BadRecordTally
}

// set records subtask sub's tally.
func (c *BadRecordCounts) set(sub int, t BadRecordTally) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subtasks == nil {
		c.subtasks = map[int]BadRecordTally{}
	}
	c.subtasks[sub] = t
}

// Total sums the subtasks' tallies.
func (c *BadRecordCounts) Total() BadRecordTally {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t BadRecordTally
	for _, s := range c.subtasks {
		t.Skipped += s.Skipped
		t.DeadLettered += s.DeadLettered
	}
	return t
}

// BadRecordSetup is what OnBadRecords hands every subtask of a source:
// the policy and the node's counts. The zero value is the default policy
// (OnErrorFail, DefaultMaxRecordBytes) without counts.
type BadRecordSetup struct {
	Policy BadRecordPolicy
	// Counts receives the subtask's tally; nil counts nowhere.
	Counts *BadRecordCounts
}

// BadRecordReader is a source subtask that applies a bad-record policy.
// The Kafka, NATS and file sources implement it.
type BadRecordReader interface {
	// SetBadRecords is called before Open with the source's setup.
	SetBadRecords(BadRecordSetup)
}

// OnBadRecords sets the bad-record policy of the source producing s and
// returns s. With OnErrorDeadLetter the source gets the side output
// DeadLetterOutput, which must be connected (DeadLetters) or Plan fails:
// its records would be lost. The source's subtasks must implement
// BadRecordReader. It registers the node's counts with the pipeline
// (Pipeline.BadRecordCounts).
func OnBadRecords[T any](s Stream[T], policy BadRecordPolicy) Stream[T] {
	n := s.node
	if n.NewSource == nil || s.output != "" {
		s.p.Errorf("%s: a bad-record policy applies to a source's stream", n.ID)
		return s
	}
	// Validate now; the limit's default is the connector's (see
	// MaxRecordBytes), filled in when a subtask opens.
	checked, err := policy.withDefaults()
	if err != nil {
		s.p.Errorf("source %s: %v", n.ID, err)
		return s
	}
	policy.OnError = checked.OnError
	// Creating a subtask does no I/O before Open: the probe is cheap.
	if _, ok := runtime.Unerase(n.NewSource()).(BadRecordReader); !ok {
		s.p.Errorf("source %s: a %s source has no bad-record policy (it produces no bad records)", n.ID, orUnknown(n.Type))
		return s
	}
	if _, dup := s.p.badRecords[n.ID]; dup {
		s.p.Errorf("source %s: the bad-record policy is set twice", n.ID)
		return s
	}
	counts := &BadRecordCounts{}
	setup := BadRecordSetup{Policy: policy, Counts: counts}
	newSource := n.NewSource
	n.NewSource = func() runtime.Source {
		sub := newSource()
		runtime.Unerase(sub).(BadRecordReader).SetBadRecords(setup)
		return sub
	}
	if policy.OnError == OnErrorDeadLetter {
		n.SideOutputs = append(n.SideOutputs, DeadLetterOutput)
	}
	if policy.OnError != OnErrorFail {
		n.Describe += ", on_error " + string(policy.OnError)
	}
	switch f := checked.MaxFuture; {
	case f < 0:
		n.Describe += ", max_future off"
	case f != DefaultMaxFuture:
		n.Describe += ", max_future " + f.String()
	}
	if s.p.badRecords == nil {
		s.p.badRecords = map[string]*BadRecordCounts{}
	}
	s.p.badRecords[n.ID] = counts
	return s
}

func orUnknown(typ string) string {
	if typ == "" {
		return "custom"
	}
	return typ
}

// DeadLetters returns the dead-letter side output of the source producing
// s, whose policy is OnErrorDeadLetter (with the default DeadLetterBatch).
func DeadLetters[T any](s Stream[T]) Stream[DeadLetter] {
	return SideOutput[DeadLetter](s, DeadLetterOutput)
}

// BadRecordCounts returns the bad-record tally of every source with a
// policy (OnBadRecords), by node id: the sum over its subtasks, for
// metrics. The counts follow the sources' replay positions (see
// BadRecordCounts); they live in the process, and a process restored from
// a checkpoint resumes them from it.
func (p *Pipeline) BadRecordCounts() map[string]BadRecordTally {
	out := make(map[string]BadRecordTally, len(p.badRecords))
	for id, c := range p.badRecords {
		out[id] = c.Total()
	}
	return out
}

// checkDeadLetters refuses a source whose dead-letter output nothing reads:
// its bad records would be lost.
func (p *Pipeline) checkDeadLetters() error {
	var errs []error
	for _, n := range p.plan.Nodes {
		if n.NewSource == nil || !slices.Contains(n.SideOutputs, DeadLetterOutput) {
			continue
		}
		read := false
		for _, m := range p.plan.Nodes {
			for _, e := range m.Inputs {
				read = read || (e.From == n && e.Output == DeadLetterOutput)
			}
		}
		if !read {
			errs = append(errs, fmt.Errorf("source %s: on_error is dead_letter but nothing reads its dead-letter output, so its bad records would be lost: connect stream.DeadLetters of it to a sink (YAML: a sink with input: %s.%s)", n.ID, n.ID, DeadLetterOutput))
		}
	}
	return errors.Join(errs...)
}
