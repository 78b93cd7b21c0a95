package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/runtime"
)

// inactiveThreshold is how long the server keeps a consumer nobody pulls
// from: it cleans up after a source that could not delete its consumer.
const inactiveThreshold = time.Minute

// deleteTimeout bounds the best-effort deletion of a consumer.
const deleteTimeout = time.Second

// startAt is the start of a consumer that continues at stream sequence seq.
func startAt(seq uint64) Start { return Start{Policy: StartSequence, Sequence: seq} }

// createConsumer creates an ephemeral consumer at start and makes it current.
// It resolves the start to a stream sequence (pos.Next). When resume is set
// (start is the position of a restore or of a recreation) it checks that the
// stream still holds that sequence: the server silently moves a start below
// the stream's first sequence up to it.
func (r *reader[T]) createConsumer(start Start, resume bool) error {
	cc := jetstream.ConsumerConfig{
		Description:       "ingest source (ephemeral; the checkpoint holds its position)",
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     r.cfg.Subject,
		MemoryStorage:     true,
		InactiveThreshold: inactiveThreshold,
	}
	switch start.Policy {
	case StartFirst:
		cc.DeliverPolicy = jetstream.DeliverAllPolicy
	case StartNew:
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	case StartSequence:
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = start.Sequence
	case StartTime:
		cc.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		t := start.Time
		cc.OptStartTime = &t
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	cons, err := r.str.CreateConsumer(ctx, cc)
	if err != nil {
		return fmt.Errorf("%s: creating a consumer from %s: %w", r.where, start, err)
	}
	// A new consumer reports the sequence before its first message as
	// delivered: that resolves "first", "new" and a start time to a stream
	// sequence the checkpoint can hold.
	delivered := cons.CachedInfo().Delivered.Stream
	if resume && delivered+1 != start.Sequence {
		r.cons = cons
		r.dropConsumer()
		return fmt.Errorf("%s: %w (%w): a consumer asked to start at sequence %d starts at %d: messages were removed before they were read",
			r.where, ErrPositionLost, runtime.ErrIncompatible, start.Sequence, delivered+1)
	}
	if !resume && start.Policy == StartSequence && delivered+1 != start.Sequence {
		r.log.Warn("nats source: the start sequence is no longer in the stream; starting at its first message", "stream", r.cfg.Stream, "start", start.Sequence, "first", delivered+1)
	}
	r.pos.Next = delivered + 1
	r.cons, r.wantCons = cons, 1
	return nil
}

// dropConsumer deletes the current consumer, best effort: the server also
// deletes it once it is inactive for inactiveThreshold.
func (r *reader[T]) dropConsumer() {
	if r.cons == nil {
		return
	}
	name := r.cons.CachedInfo().Name
	r.cons = nil
	if r.nc == nil || !r.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := r.str.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.log.Debug("nats source: deleting the consumer failed; the server removes it when inactive", "stream", r.cfg.Stream, "consumer", name, "err", err)
	}
}

// failed counts a consumer failure and schedules the next attempt with
// exponential backoff. It returns the error that fails the task when the
// connection is closed or MaxRetries failures came in a row, nil otherwise.
func (r *reader[T]) failed(cause error) error {
	if errors.Is(cause, ErrPositionLost) {
		return cause
	}
	if r.nc.IsClosed() {
		return r.cfg.scrub(fmt.Errorf("%s: the connection to %s is closed: %w", r.where, r.cfg.shownURL(), cause))
	}
	r.failures++
	if r.failures > r.cfg.MaxRetries {
		return fmt.Errorf("%s: reading from sequence %d failed %d times in a row: %w", r.where, r.pos.Next, r.failures, cause)
	}
	backoff := r.cfg.RetryBackoff
	for i := 1; i < r.failures && backoff < maxRetryBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, maxRetryBackoff)
	r.retryAt = r.clock().Add(backoff)
	r.log.Warn("nats source: reading failed; retrying from the position", "stream", r.cfg.Stream, "sequence", r.pos.Next,
		"attempt", r.failures, "max_retries", r.cfg.MaxRetries, "backoff", backoff, "err", cause)
	return nil
}

// checkEnd, after a read found nothing, marks the source exhausted when no
// message matching the filter is left between the position and the end:
// the end message itself may not match the filter or may have been deleted.
func (r *reader[T]) checkEnd() error {
	subject := r.cfg.Subject
	if subject == "" {
		subject = ">"
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	m, err := r.str.GetMsg(ctx, r.pos.Next, jetstream.WithGetMsgSubject(subject))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		r.exhausted = true
	case err != nil:
		return fmt.Errorf("%s: looking for a message from sequence %d to the end %d: %w", r.where, r.pos.Next, r.pos.End, err)
	case m.Sequence > r.pos.End:
		r.exhausted = true
	}
	return nil
}
