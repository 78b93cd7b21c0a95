package kafka

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// srcIdleMinInterval is the least time between two listings of end offsets
// for idleness, whatever the idle timeout.
const srcIdleMinInterval = 10 * time.Millisecond

// srcIdleLooks lists the topic's end offsets (last stable offsets under
// read_committed) for a subtask whose partitions went quiet, on a goroutine
// of its own so that Read never waits for a round trip. A quiet partition is
// idle only once a listing sent after its idle timeout shows its position at
// its end (watermark.Tracker.CaughtUp): franz-go does not report partitions
// whose fetches came back empty, and time alone cannot tell a partition with
// nothing to read from one the subtask did not read (a stall of the engine).
//
// A listing counts for the idle timeout, so listings repeat every quarter of
// it while a partition is quiet. A listing that fails proves nothing: the
// quiet partitions hold the watermark until one succeeds.
type srcIdleLooks struct {
	adm     *kadm.Client
	topic   string
	kind    srcOffsetKind
	timeout time.Duration
	// every is the least processing time between two listings.
	every time.Duration
	log   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// answers receives the answer of the listing in flight.
	// INVARIANT: at most one listing is in flight (busy), so a send on
	// answers (capacity 1) never blocks.
	answers chan srcLook

	// The fields below belong to the task goroutine.
	busy bool
	// sent is when the last listing was sent; valid once one was.
	sent     time.Time
	hasSent  bool
	failures int
}

// srcLook is the answer of one listing.
type srcLook struct {
	// at is the processing time the listing was sent: no later than the
	// broker's look at the offsets.
	at   time.Time
	ends map[int32]int64
	err  error
}

// newIdleLooks returns the lister of a subtask with idle timeout idle > 0.
func newIdleLooks(adm *kadm.Client, cfg *SourceConfig, idle time.Duration, log *slog.Logger) *srcIdleLooks {
	ctx, cancel := context.WithCancel(context.Background())
	return &srcIdleLooks{adm: adm, topic: cfg.Topic, kind: srcEndKind(cfg), timeout: cfg.RequestTimeout,
		every: max(idle/4, srcIdleMinInterval), log: log, ctx: ctx, cancel: cancel, answers: make(chan srcLook, 1)}
}

// start sends a listing at processing time now, unless one is in flight or
// the last was sent less than every ago.
func (l *srcIdleLooks) start(now time.Time) {
	if l == nil || l.busy || (l.hasSent && now.Sub(l.sent) < l.every) {
		return
	}
	l.busy, l.sent, l.hasSent = true, now, true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
		defer cancel()
		ends, err := srcListOffsets(ctx, l.adm, l.topic, l.kind)
		l.answers <- srcLook{at: now, ends: ends, err: err}
	}()
}

// take returns the answer of the listing in flight once it came, without
// waiting. A failed listing is logged (the first of a series, then every
// tenth) and returned as no answer.
func (l *srcIdleLooks) take() (srcLook, bool) {
	if l == nil || !l.busy {
		return srcLook{}, false
	}
	select {
	case look := <-l.answers:
		l.busy = false
		if look.err != nil {
			l.failures++
			if l.failures%10 == 1 {
				l.log.Warn("kafka source: listing end offsets to tell idle partitions failed; quiet partitions hold the watermark back until a listing succeeds",
					"topic", l.topic, "failures_in_a_row", l.failures, "err", look.err)
			}
			return srcLook{}, false
		}
		if l.failures > 0 {
			l.log.Info("kafka source: listing end offsets for idleness works again", "topic", l.topic, "failures", l.failures)
			l.failures = 0
		}
		return look, true
	default:
		return srcLook{}, false
	}
}

// stop ends the listing in flight and waits for it. It is safe on nil.
func (l *srcIdleLooks) stop() {
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}

// lookForIdle gives the watermark tracker the answer of the last listing,
// for the partitions whose position was at their end, and sends a new
// listing when a partition is quiet (see srcIdleLooks). It runs in Read,
// before the watermark is taken at processing time now.
func (t *srcSubtask[T]) lookForIdle(now time.Time) {
	if t.looks == nil {
		return
	}
	if look, ok := t.looks.take(); ok {
		for _, part := range t.parts {
			if end, listed := look.ends[part.id]; listed && !part.done && part.next >= end {
				t.wm.CaughtUp(part.split, look.at.UnixNano())
			}
		}
	}
	n := now.UnixNano()
	for _, part := range t.parts {
		if !part.done && t.wm.Quiet(part.split, n) {
			t.looks.start(now)
			return
		}
	}
}
