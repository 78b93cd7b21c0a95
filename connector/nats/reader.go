package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// reconnectPoll is how often a source whose connection is reconnecting
// looks again.
const reconnectPoll = 50 * time.Millisecond

// noAnswer is how long a no-wait pull request may take before the source
// takes it as unanswered. The server answers one at once (messages, then a
// status); a request to a consumer that no longer exists (deleted, or lost
// with a server restart) gets no answer at all, and nats.go ends it after
// 1s without an error.
const noAnswer = 750 * time.Millisecond

// reader is the source subtask. Its methods are called from one goroutine;
// only the connection's handlers run elsewhere, and they only log.
type reader[T any] struct {
	src   *Source[T]
	cfg   *SourceConfig
	out   runtime.Emitter[T]
	log   *slog.Logger
	where string // "nats source: stream S subject F", the prefix of errors

	nc  *natsgo.Conn
	js  jetstream.JetStream
	str jetstream.Stream

	// pos is the replay position; pos.MaxTime, Bad, Horizon, Holes and
	// Gaps are filled in by Position.
	// INVARIANT: pos.Next is one past the last message emitted (or skipped
	// as bad), or past sequences proven (or being proven, cont.crossed) to
	// hold no message of the filter, or the resolved start before the
	// first.
	pos       position
	maxTime   int64
	seenTime  bool
	exhausted bool

	// cons is the current consumer; nil when it must be (re)created.
	cons jetstream.Consumer
	// wantCons is the consumer sequence the next message of cons must have.
	// INVARIANT: cons delivered consumer sequences 1 … wantCons-1 and every
	// one of those messages was handled (emitted, skipped, or beyond End).
	wantCons uint64
	// failures counts consumer failures in a row; retryAt is when the next
	// recreation may be tried.
	failures int
	retryAt  time.Time

	// reconnected is set by the connection's reconnect handler: the pull
	// requests in flight are lost and after a server restart the consumer
	// is gone too, so the next Read recreates it at once instead of waiting
	// for a pull to go unanswered.
	reconnected atomic.Bool

	wm *watermark.Tracker
	// clock is the reader's processing time (watermark idleness, retry
	// backoff): time.Now, or a test's clock set before Open.
	clock func() time.Time

	// filtered says that the consumer's filter leaves out some of the
	// stream's messages: a sequence it goes past may hold another
	// subject's message. Without it, such a sequence is missing.
	filtered bool
	// cont is what the reader knows of the stream's missing sequences, to
	// prove that it skips none it should have read (gap.go).
	cont continuity
	// gapTally counts the gaps skipped under OnGapSkip; gapLogAt,
	// gapLogged and gapUnlogged rate-limit their warnings.
	gapTally    GapTally
	gapLogAt    time.Time
	gapLogged   int
	gapUnlogged int

	// setup is the bad-record policy (SetBadRecords; hasSetup says it was
	// called); bad applies it.
	setup    stream.BadRecordSetup
	hasSetup bool
	bad      *stream.BadRecords
}

// SetBadRecords sets the subtask's bad-record policy (see
// stream.OnBadRecords). It replaces SourceConfig.SkipDecodeErrors.
func (r *reader[T]) SetBadRecords(s stream.BadRecordSetup) { r.setup, r.hasSetup = s, true }

func (r *reader[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	r.cfg = &r.src.cfg
	if r.clock == nil {
		r.clock = time.Now
	}
	r.out = out
	r.log = ctx.Log
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.where = "nats source: stream " + r.cfg.Stream
	if r.cfg.Subject != "" {
		r.where += " subject " + r.cfg.Subject
	}
	if ctx.Parallelism > 1 {
		return fmt.Errorf("%s: parallelism %d: %w: %s", r.where, ctx.Parallelism, runtime.ErrIncompatible, parallelismReason)
	}
	var restored *position
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		p, err := decodePosition(ctx.Restored.Inline, r.cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", r.where, err)
		}
		restored = &p
	}
	setup := r.setup
	if !r.hasSetup && r.cfg.SkipDecodeErrors {
		setup.Policy.OnError = stream.OnErrorSkip
	}
	var tally stream.BadRecordTally
	if restored != nil && restored.Bad != nil {
		tally = *restored.Bad
	}
	bad, err := setup.Open(ctx, tally)
	if err != nil {
		return fmt.Errorf("%s: %w", r.where, err)
	}
	r.bad = bad
	if err := r.connect(ctx); err != nil {
		return err
	}
	info, err := r.streamInfo()
	if err != nil {
		return err
	}
	st := info.State
	if err := r.initContinuity(info, time.Now()); err != nil {
		return err
	}
	r.wm = watermark.NewTracker(r.cfg.Watermark)
	r.wm.AddSplit(r.clock().UnixNano())

	if restored != nil {
		r.pos = *restored
		if restored.Gaps != nil {
			r.gapTally = *restored.Gaps
		}
		r.src.gaps.set(r.gapTally)
		if err := r.checkReachable(st); err != nil {
			return err
		}
		if t := r.pos.MaxTime; t != nil {
			r.maxTime, r.seenTime = *t, true
			r.wm.Observe(0, *t)
		}
		switch {
		case r.cfg.StopAt == StopAtLatest && !r.pos.HasEnd:
			r.pos.End, r.pos.HasEnd = st.LastSeq, true
			r.log.Info("nats source: stop_at latest was set after the checkpoint; reading to the stream's current last sequence", "stream", r.cfg.Stream, "end", st.LastSeq)
		case r.cfg.StopAt != StopAtLatest && r.pos.HasEnd:
			r.pos.End, r.pos.HasEnd = 0, false
			r.log.Info("nats source: stop_at latest was unset after the checkpoint; reading without end", "stream", r.cfg.Stream)
		}
		if err := r.checkHorizon(*restored, st); err != nil {
			return err
		}
		if r.pos.HasEnd && r.pos.Next > r.pos.End {
			r.exhausted = true
			return nil
		}
		return r.resume()
	}

	r.src.gaps.set(GapTally{})
	r.pos = position{Stream: r.cfg.Stream, Subject: r.cfg.Subject}
	if r.cfg.StopAt == StopAtLatest {
		r.pos.End, r.pos.HasEnd = st.LastSeq, true
	}
	if err := r.createConsumer(r.cfg.Start, false); err != nil {
		return err
	}
	if r.pos.HasEnd && r.pos.Next > r.pos.End {
		r.exhausted = true
		r.dropConsumer()
	}
	return nil
}

// connect opens the connection with bounded reconnects; its handlers log.
func (r *reader[T]) connect(ctx *runtime.Context) error {
	log := r.log
	opts := []natsgo.Option{
		natsgo.Name("ingest " + ctx.Task.String()),
		natsgo.MaxReconnects(r.cfg.MaxReconnects),
		natsgo.ReconnectWait(r.cfg.ReconnectWait),
		natsgo.DisconnectErrHandler(func(c *natsgo.Conn, err error) {
			if c.IsClosed() {
				return // Close: the source is done with the connection
			}
			log.Warn("nats source: disconnected; reconnecting", "stream", r.cfg.Stream, "err", r.cfg.scrub(err))
		}),
		natsgo.ReconnectHandler(func(c *natsgo.Conn) {
			r.reconnected.Store(true)
			log.Info("nats source: reconnected", "stream", r.cfg.Stream, "url", redact.DSN(c.ConnectedUrl()))
		}),
		// nats.go's default writes asynchronous errors to stderr.
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			log.Warn("nats source: asynchronous connection error", "stream", r.cfg.Stream, "err", r.cfg.scrub(err))
		}),
	}
	nc, err := natsgo.Connect(r.cfg.URL, append(opts, r.cfg.Options...)...)
	if err != nil {
		return r.cfg.scrub(fmt.Errorf("%s: connecting to %s: %w", r.where, r.cfg.shownURL(), err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("%s: %w", r.where, err)
	}
	r.nc, r.js = nc, js
	return nil
}

// streamInfo looks the stream up (and keeps its handle).
func (r *reader[T]) streamInfo() (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	str, err := r.js.Stream(ctx, r.cfg.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%s: the stream does not exist on %s: %w", r.where, r.cfg.shownURL(), err)
		}
		return nil, fmt.Errorf("%s: looking up the stream: %w", r.where, err)
	}
	r.str = str
	return str.CachedInfo(), nil
}

// checkReachable refuses a restored position the stream cannot serve: a
// stream that ends before it (recreated), or one that now begins after it
// (a gap, which on_gap skip reads on past).
func (r *reader[T]) checkReachable(st jetstream.StreamState) error {
	next := r.pos.Next
	if st.LastSeq+1 < next {
		return fmt.Errorf("%s: %w (%w): the checkpoint continues at sequence %d but the stream's last sequence is %d: was the stream deleted and recreated?",
			r.where, ErrPositionLost, runtime.ErrIncompatible, next, st.LastSeq)
	}
	if st.FirstSeq > next {
		if err := r.missing(next, st.FirstSeq-1, true); err != nil {
			return err
		}
		r.pos.Next = st.FirstSeq
	}
	return nil
}

func (r *reader[T]) Read() (runtime.ReadResult, error) {
	now := r.clock()
	if r.exhausted {
		return r.result(now, 0), nil
	}
	if r.reconnected.Swap(false) && r.cons != nil {
		r.dropConsumer()
	}
	if r.cons == nil {
		if wait := r.retryAt.Sub(now); wait > 0 {
			return r.result(now, wait), nil
		}
		if r.nc.IsClosed() {
			return runtime.ReadResult{}, fmt.Errorf("%s: the connection to %s is closed (reconnects exhausted)", r.where, r.cfg.shownURL())
		}
		if !r.nc.IsConnected() {
			return r.result(now, reconnectPoll), nil
		}
		if err := r.resume(); err != nil {
			if ferr := r.failed(err); ferr != nil {
				return runtime.ReadResult{}, ferr
			}
			return r.result(now, r.retryAt.Sub(now)), nil
		}
		if r.exhausted {
			return r.result(now, 0), nil
		}
	}
	if !r.nc.IsConnected() {
		// A pull sent now would wait in the reconnect buffer until its
		// client-side timeout; wait for the connection instead.
		if r.nc.IsClosed() {
			return runtime.ReadResult{}, fmt.Errorf("%s: the connection to %s is closed (reconnects exhausted)", r.where, r.cfg.shownURL())
		}
		return r.result(now, reconnectPoll), nil
	}
	asked, began := now, time.Now()
	n, failure, err := r.fetch()
	if err != nil {
		return runtime.ReadResult{}, err
	}
	if n == 0 && failure == nil {
		// The server answered the no-wait pull sent after asked with no
		// message pending: the one look that may make the source idle
		// (an outage or a stall, where it could not look, never does).
		r.wm.CaughtUp(0, asked.UnixNano())
	}
	now = r.clock()
	switch {
	case failure != nil:
		r.dropConsumer()
		if ferr := r.failed(failure); ferr != nil {
			return runtime.ReadResult{}, ferr
		}
	case n == 0 && !r.exhausted:
		// Only a successful look-up ends a series of failures: one that
		// keeps failing must not be forgiven by the empty pulls around it.
		if err := r.advanceQuiet(began); err != nil {
			if ferr := r.failed(err); ferr != nil {
				return runtime.ReadResult{}, ferr
			}
		} else {
			r.failures = 0
		}
	default:
		r.failures = 0
	}
	if r.proveDue(now) {
		if len(r.cont.crossed) > 0 {
			if err := r.proveCrossed(); err != nil {
				return runtime.ReadResult{}, err
			}
		} else if err := r.prove(); err != nil {
			if errors.Is(err, ErrGap) || errors.Is(err, ErrPositionLost) {
				return runtime.ReadResult{}, err
			}
			r.log.Warn("nats source: looking at the stream's state failed; trying again", "stream", r.cfg.Stream, "err", err)
		}
		now = r.clock()
	}
	if n > 0 || r.exhausted {
		return r.result(now, 0), nil
	}
	return r.result(now, r.cfg.PollInterval), nil
}

// fetch pulls one batch and emits it. It returns how many messages it
// handled, a consumer failure to recover from (a pull error, a gap), or an
// error that fails the task (a bad message, an emit error).
func (r *reader[T]) fetch() (n int, failure, err error) {
	began := time.Now()
	res, err := r.cons.FetchNoWait(r.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("pull request: %w", err), nil
	}
	var batch runtime.Batch[T]
	for msg := range res.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			failure = fmt.Errorf("message metadata: %w", err)
			break
		}
		if md.Sequence.Consumer != r.wantCons || md.Sequence.Stream < r.pos.Next {
			failure = fmt.Errorf("consumer sequence %d (stream sequence %d) where %d (stream sequence >= %d) was due: messages were lost in transit",
				md.Sequence.Consumer, md.Sequence.Stream, r.wantCons, r.pos.Next)
			break
		}
		if seq := md.Sequence.Stream; seq > r.pos.Next {
			// The consumer went past sequences: other subjects' messages,
			// or removed ones.
			hi := seq - 1
			if r.pos.HasEnd {
				hi = min(hi, r.pos.End)
			}
			if err := r.passed(r.pos.Next, hi); err != nil {
				return n, nil, err
			}
		}
		r.wantCons++
		n++
		if r.pos.HasEnd && md.Sequence.Stream > r.pos.End {
			r.pos.Next = r.pos.End + 1
			r.exhausted = true
			break
		}
		m := Message{Stream: r.cfg.Stream, Subject: msg.Subject(), Sequence: md.Sequence.Stream, Timestamp: md.Timestamp, Header: msg.Headers(), Data: msg.Data()}
		var v T
		var ts int64
		var derr error
		if limit := r.bad.MaxRecordBytes(); len(m.Data) > limit {
			derr = fmt.Errorf("the payload is %d bytes, longer than max_record_bytes %d", len(m.Data), limit)
		} else {
			v, ts, derr = r.src.decode(m)
		}
		if derr == nil {
			derr = r.bad.CheckEventTime(ts) // before ts can move the watermark
		}
		if derr != nil {
			// A bad message: it fails the task, or is skipped or
			// dead-lettered and consumed like any other.
			failure := fmt.Errorf("%s: message at subject %s, sequence %d: %w: %w", r.where, m.Subject, m.Sequence, ErrBadMessage, derr)
			bad := stream.BadRecord{Partition: m.Subject, Offset: int64(m.Sequence), Raw: m.Data, Err: derr}
			if err := r.bad.Reject(bad, failure); err != nil {
				return n, nil, err
			}
		} else {
			if batch == nil {
				batch = make(runtime.Batch[T], 0, min(r.cfg.BatchSize, 64))
			}
			batch = append(batch, runtime.Record[T]{Value: v, Time: ts})
			r.wm.Observe(0, ts)
			if !r.seenTime || ts > r.maxTime {
				r.maxTime, r.seenTime = ts, true
			}
		}
		r.pos.Next = md.Sequence.Stream + 1
		if r.pos.HasEnd && r.pos.Next > r.pos.End {
			r.exhausted = true
			break
		}
	}
	if failure == nil && !r.exhausted {
		if perr := res.Error(); perr != nil {
			failure = fmt.Errorf("pull request: %w", perr)
		} else if took := time.Since(began); took >= noAnswer && n < r.cfg.BatchSize {
			failure = fmt.Errorf("pull request unanswered after %v (%d messages): the consumer is gone (deleted, or lost with a server restart)", took.Round(time.Millisecond), n)
		}
	}
	if err := r.proveCrossed(); err != nil {
		return n, nil, err
	}
	if len(batch) > 0 {
		if err := r.out.Emit(batch); err != nil {
			return n, nil, err
		}
	}
	if err := r.bad.Flush(); err != nil {
		return n, nil, err
	}
	return n, failure, nil
}

// result reports the watermark and idleness after a read, with wait.
func (r *reader[T]) result(now time.Time, wait time.Duration) runtime.ReadResult {
	// Come back by the idle timeout at the latest, so a quiet stream is
	// reported idle.
	if it := r.cfg.Watermark.IdleTimeout; it > 0 && wait > it {
		wait = it
	}
	res := runtime.ReadResult{Wait: wait, Exhausted: r.exhausted}
	res.Watermark, res.Idle = r.wm.Current(now.UnixNano())
	if r.exhausted {
		res.Wait = 0
	}
	return res
}

// Position proves the ranges crossed since the last look first: the
// checkpoint must not hold a position past a gap (an error here fails the
// task, and a gap stops the job).
func (r *reader[T]) Position() ([]byte, error) {
	if len(r.cont.crossed) > 0 {
		if err := r.prove(); err != nil {
			return nil, err
		}
	}
	p := r.pos
	p.Horizon, p.Holes, p.Gaps = 0, 0, nil
	if c := &r.cont; !c.untracked {
		h := c.last
		if p.HasEnd {
			h = min(h, p.End)
		}
		if h >= p.Next {
			p.Horizon, p.Holes = h, c.baseline.count(p.Next, h)
		}
	}
	if r.gapTally != (GapTally{}) {
		t := r.gapTally
		p.Gaps = &t
	}
	if r.seenTime {
		t := r.maxTime
		p.MaxTime = &t
	}
	if tally := r.bad.Tally(); tally != (stream.BadRecordTally{}) {
		p.Bad = &tally
	}
	return p.encode()
}

func (r *reader[T]) Close() error {
	r.bad.Close()
	r.dropConsumer()
	if r.nc != nil {
		r.nc.Close()
	}
	return nil
}
