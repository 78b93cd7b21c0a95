package stream

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ingest-engine/ingest/runtime"
)

// badRecordLogEvery is the least time between two warnings of one subtask
// about bad records: a stream of them must not flood the log. A burst's
// unlogged records are summed up at the first read after it (Flush).
const badRecordLogEvery = 10 * time.Second

// sideOutputOf looks a side output up; tests replace it to connect one
// without a job.
var sideOutputOf = (*runtime.Context).SideOutput

// BadRecords applies a source's bad-record policy in one source subtask.
// A connector opens it in Open (BadRecordSetup.Open), hands every bad
// record to Reject, calls Flush before Read returns, stores Tally in its
// replay position and calls Close from its own Close. Its methods are
// called from the subtask's goroutine.
//
// Under skip and dead_letter it logs warnings: the first bad record at
// once, the next at most every badRecordLogEvery, a summary of those left
// unlogged at the first Flush after that, and the totals at Close. Each
// carries the source's totals (skipped, dead_lettered: the values of the
// metric ingest_source_bad_records_total, the sum over subtasks) and the
// subtask's own (subtask_skipped, subtask_dead_lettered).
//
// A nil *BadRecords applies the default policy: Reject returns the failure.
//
// INVARIANT: the dead letters of the records a Read consumed are emitted
// by the same Read (Flush), before any barrier: they belong to the same
// checkpoint as the position that moved past their records.
type BadRecords struct {
	policy  BadRecordPolicy
	source  string
	subtask int
	// out is the dead-letter side output (OnErrorDeadLetter only).
	out     runtime.Output
	pending []DeadLetter
	counts  *BadRecordCounts
	tally   BadRecordTally

	log *slog.Logger
	// now reads the wall clock (runtime.Context.Now): for CheckEventTime and
	// the warnings' rate limit; tests replace it.
	now func() time.Time
	// futureLimit is the latest event time (Unix ns) CheckEventTime accepts
	// without reading the clock: now + MaxFuture as of the last reading.
	// Only a later event time reads the clock again, so the check costs one
	// comparison per record. Unused when MaxFuture is negative.
	futureLimit int64
	// logged is when the last warning was written; unlogged counts the bad
	// records since then that had none, last is the newest of them.
	logged   time.Time
	unlogged int64
	last     error
	// seen counts the bad records since Open: Close logs the totals only
	// when there were some.
	seen int64
}

// Open prepares the handler of the subtask ctx describes, resuming the
// restored tally (the zero value on a fresh start). A dead_letter policy
// whose side output nothing consumes is an error: its records would be
// lost.
func (s BadRecordSetup) Open(ctx *runtime.Context, restored BadRecordTally) (*BadRecords, error) {
	p, err := s.Policy.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &BadRecords{policy: p, source: ctx.Task.Operator, subtask: ctx.Task.Subtask, counts: s.Counts, tally: restored, log: ctx.Log, now: ctx.Now}
	b.readClock()
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if p.OnError == OnErrorDeadLetter {
		if b.out = sideOutputOf(ctx, DeadLetterOutput); b.out == nil {
			return nil, fmt.Errorf("on_error is dead_letter but nothing consumes the %s output of source %s: its bad records would be lost", DeadLetterOutput, b.source)
		}
	}
	if b.counts != nil {
		b.counts.set(b.subtask, restored)
	}
	return b, nil
}

// MaxRecordBytes is the size limit of a record.
func (b *BadRecords) MaxRecordBytes() int {
	if b == nil {
		return DefaultMaxRecordBytes
	}
	return b.policy.MaxRecordBytes
}

// KeepsRaw says whether Reject keeps a record's bytes (dead_letter), so a
// connector can spare copying them otherwise.
func (b *BadRecords) KeepsRaw() bool { return b != nil && b.policy.OnError == OnErrorDeadLetter }

// Tally returns the counts to store in the replay position.
func (b *BadRecords) Tally() BadRecordTally {
	if b == nil {
		return BadRecordTally{}
	}
	return b.tally
}

// Reject handles bad record rec. failure is the error that fails the task
// under OnErrorFail: it names the record's partition, offset or line and
// the cause (the runtime adds the source's name); Reject returns it then,
// marked as a *BadRecordError. Otherwise the record is counted and skipped,
// or queued as a dead letter for Flush, and Reject returns nil: the
// connector moves its position past the record.
func (b *BadRecords) Reject(rec BadRecord, failure error) error {
	if b == nil {
		return markBad("", failure)
	}
	var msg string
	switch b.policy.OnError {
	case OnErrorSkip:
		b.tally.Skipped++
		msg = "skipped a bad record (on_error: skip)"
	case OnErrorDeadLetter:
		raw := rec.Raw
		if len(raw) > b.policy.MaxRecordBytes {
			raw = raw[:b.policy.MaxRecordBytes]
		}
		cause := ""
		if rec.Err != nil {
			cause = rec.Err.Error()
		}
		b.pending = append(b.pending, DeadLetter{Source: b.source, Partition: rec.Partition, Offset: rec.Offset, Line: rec.Line,
			Error: cause, Raw: append([]byte(nil), raw...)})
		b.tally.DeadLettered++
		msg = "sent a bad record to the dead-letter output (on_error: dead_letter)"
	default:
		return markBad(b.source, failure)
	}
	b.seen++
	if b.counts != nil {
		b.counts.set(b.subtask, b.tally)
	}
	b.warn(msg, failure)
	return nil
}

// markBad marks failure, the failure at a bad record of source, as a
// *BadRecordError; nil stays nil.
func markBad(source string, failure error) error {
	if failure == nil {
		return nil
	}
	return &BadRecordError{Source: source, Err: failure}
}

// warn logs a bad record: the first at once, then at most one warning every
// badRecordLogEvery, saying how many came without one.
func (b *BadRecords) warn(msg string, failure error) {
	now := b.now()
	if !b.logged.IsZero() && now.Sub(b.logged) < badRecordLogEvery {
		b.unlogged++
		b.last = failure
		return
	}
	b.log.Warn(msg, b.totals("err", failure)...)
	b.logged, b.unlogged, b.last = now, 0, nil
}

// totals returns the attributes of a warning: the subtask, the given ones,
// the records unlogged since the last warning, and the source's and the
// subtask's totals.
func (b *BadRecords) totals(attrs ...any) []any {
	source := b.tally
	if b.counts != nil {
		source = b.counts.Total()
	}
	return append(append([]any{"source", b.source, "subtask", b.subtask}, attrs...),
		"unlogged_since_last_warning", b.unlogged,
		"skipped", source.Skipped, "dead_lettered", source.DeadLettered,
		"subtask_skipped", b.tally.Skipped, "subtask_dead_lettered", b.tally.DeadLettered)
}

// summarize logs the records left unlogged by the rate limit once
// badRecordLogEvery has passed since the last warning, so a burst's count
// reaches the log even when no bad record follows it.
func (b *BadRecords) summarize() {
	if b.unlogged == 0 {
		return
	}
	if now := b.now(); now.Sub(b.logged) >= badRecordLogEvery {
		b.log.Warn("more bad records since the last warning (on_error: "+string(b.policy.OnError)+")", b.totals("last_err", b.last)...)
		b.logged, b.unlogged, b.last = now, 0, nil
	}
}

// Close logs the subtask's totals when it had bad records since Open: the
// last word on them, with those the rate limit left unlogged.
func (b *BadRecords) Close() {
	if b == nil || b.seen == 0 {
		return
	}
	b.log.Warn("source subtask closing after bad records (on_error: "+string(b.policy.OnError)+")", b.totals("last_err", b.last)...)
	b.unlogged, b.last, b.seen = 0, nil, 0
}

// CheckEventTime returns the cause of a bad record when event time t (Unix
// ns) is more than the policy's MaxFuture ahead of the wall clock, nil
// otherwise. A connector calls it with every decoded record's event time
// before it lets the time move its watermark, and hands a record it fails
// to Reject like any other bad record. A nil *BadRecords applies
// DefaultMaxFuture.
func (b *BadRecords) CheckEventTime(t int64) error {
	if b == nil {
		if now := time.Now(); t > now.UnixNano()+int64(DefaultMaxFuture) {
			return futureError(t, now, DefaultMaxFuture)
		}
		return nil
	}
	if b.policy.MaxFuture < 0 || t <= b.futureLimit {
		return nil
	}
	now := b.readClock()
	if t <= b.futureLimit {
		return nil
	}
	return futureError(t, now, b.policy.MaxFuture)
}

// futureError is the cause of a bad record with event time t, more than
// maxFuture ahead of the wall clock's now.
func futureError(t int64, now time.Time, maxFuture time.Duration) error {
	return fmt.Errorf("%w: %s is more than max_future %v ahead of the wall clock (%s)", ErrFutureEventTime,
		time.Unix(0, t).UTC().Format(time.RFC3339Nano), maxFuture, now.UTC().Format(time.RFC3339))
}

// readClock reads the wall clock and moves futureLimit to now + MaxFuture
// (saturated), returning now.
func (b *BadRecords) readClock() time.Time {
	now := b.now()
	if f := b.policy.MaxFuture; f >= 0 {
		b.futureLimit = now.UnixNano() + int64(f)
		if b.futureLimit < now.UnixNano() {
			b.futureLimit = math.MaxInt64
		}
	}
	return now
}

// Flush emits the queued dead letters to the dead-letter output, and logs
// the records a rate-limited warning left out once its period has passed.
// It also reads the wall clock for CheckEventTime (once per Read), so a
// clock set back is followed within a Read.
func (b *BadRecords) Flush() error {
	if b == nil {
		return nil
	}
	b.readClock()
	b.summarize()
	if len(b.pending) == 0 {
		return nil
	}
	dl := b.pending
	b.pending = nil
	var recs runtime.Records
	if b.policy.DeadLetterBatch != nil {
		recs = b.policy.DeadLetterBatch(dl)
	} else {
		batch := make(runtime.Batch[DeadLetter], len(dl))
		for i, d := range dl {
			batch[i] = runtime.Record[DeadLetter]{Value: d}
		}
		recs = batch
	}
	if err := b.out.Emit(recs); err != nil {
		return fmt.Errorf("source %s: emitting %d dead letters: %w", b.source, len(dl), err)
	}
	return nil
}
