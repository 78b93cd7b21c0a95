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
// It resolves the start to a stream sequence (pos.Next). The server silently
// moves a start below the stream's first sequence up to it: when resume is
// set (start is the position of a restore or of a recreation) pos.Next is
// then past start, and resume judges the sequences in between.
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
	if !resume && start.Policy == StartSequence && delivered+1 != start.Sequence {
		r.log.Warn("nats source: the start sequence is no longer in the stream; starting at its first message", "stream", r.cfg.Stream, "start", start.Sequence, "first", delivered+1)
	}
	r.pos.Next = delivered + 1
	r.cons, r.wantCons = cons, 1
	return nil
}

// resume creates a consumer at the position. Messages removed from the
// position on are a gap (ErrGap and ErrPositionLost, or skipped under
// on_gap skip, and the source goes on from the stream's first sequence).
func (r *reader[T]) resume() error {
	next := r.pos.Next
	if err := r.createConsumer(startAt(next), true); err != nil {
		return err
	}
	if r.pos.Next < next {
		// The server moved a start past the stream's end back to it.
		at := r.pos.Next
		r.pos.Next = next
		r.dropConsumer()
		return fmt.Errorf("%s: %w (%w): a consumer asked to start at sequence %d starts at %d: the stream's last sequence is below the position: was the stream deleted and recreated?",
			r.where, ErrPositionLost, runtime.ErrIncompatible, next, at)
	}
	if r.pos.Next != next {
		if err := r.missing(next, r.pos.Next-1, true); err != nil {
			r.dropConsumer()
			return err
		}
		if r.pos.HasEnd && r.pos.Next > r.pos.End {
			r.pos.Next = r.pos.End + 1
			r.exhausted = true
			r.dropConsumer()
		}
	}
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
	if errors.Is(cause, ErrPositionLost) || errors.Is(cause, ErrGap) {
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

// advanceQuiet, after a pull that began at began found nothing, moves the
// position past the sequences up to the stream's last at the last look that
// hold no message of the filter now (the first such message is looked up):
// a quiet filtered source so keeps up with other subjects' messages (and the
// stream's retention does not overtake its position), and a source whose
// remaining messages up to its stop_at end were removed, or do not match,
// ends. The sequences it moves past are judged like any others (passed).
func (r *reader[T]) advanceQuiet(began time.Time) error {
	c := &r.cont
	hi := c.last
	if r.pos.HasEnd {
		hi = min(hi, r.pos.End)
	}
	lo := r.pos.Next
	if !c.lookedAt.Before(began) || hi < lo {
		return nil
	}
	// Unbounded, this is only to keep up: once per refreshEvery. Bounded,
	// the end may be reached: at every quiet pull, as before the end.
	now := time.Now()
	if !r.pos.HasEnd && now.Sub(c.quietAt) < refreshEvery {
		return nil
	}
	c.quietAt = now
	subject := r.cfg.Subject
	if subject == "" {
		subject = ">"
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	m, err := r.str.GetMsg(ctx, lo, jetstream.WithGetMsgSubject(subject))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("%s: looking for a message from sequence %d to %d: %w", r.where, lo, hi, err)
	case m.Sequence <= hi:
		// The consumer has not delivered it yet: stop before it.
		hi = m.Sequence - 1
	}
	if hi < lo {
		return nil
	}
	r.pos.Next = hi + 1
	if err := r.passed(lo, hi); err != nil {
		return err
	}
	if err := r.proveCrossed(); err != nil {
		return err
	}
	if r.pos.HasEnd && r.pos.Next > r.pos.End {
		r.exhausted = true
	}
	return nil
}
