package nexmark

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// MaxRate is the highest rate a source can be limited to; above it, leave
// the rate unset (as fast as possible).
const MaxRate = 1e12

// batchSize is the most records one Read emits.
const batchSize = 1024

// SourceConfig configures a Source.
type SourceConfig struct {
	// Generator configures the events. The zero Config means DefaultConfig().
	Generator Config
	// Events is the total number of events over all subtasks: event numbers
	// 0..Events-1. 0 means unbounded: the source runs to the generator's
	// Limit (about a century of event time with the defaults) and then fails.
	Events int64
	// Rate limits the source to this many events per second of wall-clock
	// time over all subtasks; 0 means as fast as possible.
	Rate float64
	// MaxDelay bounds the out-of-orderness the watermark allows: after
	// emitting records up to event time T a subtask's watermark is
	// T - MaxDelay - 1ns, so a later record at T - MaxDelay is not late (as
	// Flink's BoundedOutOfOrdernessWatermarks). Events are in event-time
	// order unless Generator.OutOfOrderGroupSize > 1, so 0 is right then; with
	// groups, the event time OutOfOrderGroupSize events span is enough. It
	// must not be negative. The default value is 0.
	MaxDelay time.Duration
}

// Source is a replayable Nexmark source of Event records; it implements
// stream.Source[Event].
//
// Subtask s of P emits the event numbers n with n % P == s in increasing
// order, each as a record with Time = the event's date_time in Unix
// nanoseconds; the union over the subtasks is events 0..Events-1. A
// subtask's replay position is the next event number it emits, so replay
// from a checkpoint is exact.
type Source struct {
	cfg SourceConfig
	gen *Generator
}

// NewSource validates cfg and returns the source.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Generator == (Config{}) {
		cfg.Generator = DefaultConfig()
	}
	gen, err := NewGenerator(cfg.Generator)
	if err != nil {
		return nil, err
	}
	var errs []error
	if cfg.Events < 0 {
		errs = append(errs, fmt.Errorf("events %d is negative (0: unbounded)", cfg.Events))
	} else if cfg.Events > gen.Limit() {
		errs = append(errs, fmt.Errorf("events %d is more than this configuration's %d events with an event time the engine represents", cfg.Events, gen.Limit()))
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) || cfg.Rate > MaxRate {
		errs = append(errs, fmt.Errorf("rate %v must be between 0 and %g events per second (0: as fast as possible)", cfg.Rate, float64(MaxRate)))
	}
	if cfg.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("max_delay %v is negative", cfg.MaxDelay))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nexmark: %w", err)
	}
	return &Source{cfg: cfg, gen: gen}, nil
}

// Config returns the effective configuration (defaults filled in).
func (s *Source) Config() SourceConfig { return s.cfg }

// Generator returns the source's event generator.
func (s *Source) Generator() *Generator { return s.gen }

// Describe summarises the configuration.
func (s *Source) Describe() string {
	count := "unbounded"
	if s.cfg.Events > 0 {
		count = fmt.Sprintf("events=%d", s.cfg.Events)
	}
	rate := "as fast as possible"
	if s.cfg.Rate > 0 {
		rate = fmt.Sprintf("rate=%g/s", s.cfg.Rate)
	}
	g := s.cfg.Generator
	timeline := fmt.Sprintf("events_per_second=%d", g.EventsPerSecond)
	if g.EventsPerSecond == 0 {
		timeline = fmt.Sprintf("first_event_rate=%d next_event_rate=%d %v num_event_generators=%d", g.FirstEventRate, g.NextEventRate, g.RateUnit, g.NumEventGenerators)
	}
	return fmt.Sprintf("nexmark %s, %s, %s, max_delay=%v", count, rate, timeline, s.cfg.MaxDelay)
}

// NewSubtask creates one source subtask.
func (s *Source) NewSubtask() runtime.SourceSubtask[Event] {
	return &subtask[Event]{src: s, fill: fillEvents}
}

// fillEvents fills batch with the n events of the lane from t.next, each as
// it is, and returns it with the largest event time, at least maxTime.
func fillEvents(t *subtask[Event], batch runtime.Batch[Event], n, maxTime int64) (runtime.Batch[Event], int64) {
	batch = batch[:n]
	id := t.next
	for i := range batch {
		rec := &batch[i]
		rec.Value = t.gen.Event(id)
		rec.Time = rec.Value.EventTimeNanos()
		maxTime = max(maxTime, rec.Time)
		id += t.p
	}
	return batch, maxTime
}

// position is a subtask's replay position as stored in checkpoints.
type position struct {
	Next int64 `json:"next"`
}

// subtask emits the events of its lane as T records: every event (Event
// records), or those of one type as rows (TableSource).
type subtask[T any] struct {
	src *Source
	gen *Generator
	// fill appends the records of the lane's next n events (from next) to
	// a batch and returns it with the largest event time passed, at least
	// maxTime; skipped events count too (they are part of the sequence).
	// One call per batch: the loop inside is specialised (fillEvents,
	// TableSource's).
	fill func(t *subtask[T], batch runtime.Batch[T], n, maxTime int64) (runtime.Batch[T], int64)
	// batches hands out the batches Read emits (runtime.BatchBuffer).
	batches runtime.BatchBuffer[T]
	// next is the event number this subtask emits next.
	// INVARIANT: next % p == index.
	next, p, index int64
	// maxTime is the largest event time passed (emitted or skipped), in
	// Unix ns; valid when next > index.
	maxTime int64
	// emitted counts the events passed since Open, for the rate limit.
	emitted int64
	opened  time.Time
	// rt is the subtask's runtime context: its clock paces the rate.
	rt *runtime.Context
}

// Open starts at the subtask's first event number, or at the restored one.
func (t *subtask[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	t.gen = t.src.gen
	t.batches.OpenOn(out)
	t.p = int64(ctx.Parallelism)
	t.index = int64(ctx.Task.Subtask)
	t.next = t.index
	if t.p < 1 || t.index < 0 || t.index >= t.p {
		return fmt.Errorf("nexmark: subtask %d of %d does not exist", t.index, t.p)
	}
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		var pos position
		if err := json.Unmarshal(ctx.Restored.Inline, &pos); err != nil {
			return fmt.Errorf("nexmark: restoring position %q: %w", ctx.Restored.Inline, err)
		}
		if pos.Next < 0 || pos.Next%t.p != t.index {
			return fmt.Errorf("nexmark: restored position %d does not belong to subtask %d of %d", pos.Next, t.index, t.p)
		}
		if pos.Next-t.p >= t.gen.Limit() {
			return fmt.Errorf("nexmark: restored position %d is beyond the %d events of this configuration", pos.Next, t.gen.Limit())
		}
		t.next = pos.Next
		if t.next > t.index {
			t.maxTime = t.maxTimeBefore(t.next)
		}
	}
	t.rt = ctx
	t.opened = ctx.Now()
	return nil
}

// maxTimeBefore returns the largest record time among this subtask's events
// below next (next > index, next-p < Limit()), recomputed on restore so that
// the watermark continues where it was. Event time never decreases with the
// adjusted event number, and an event's adjusted number lies within its
// out-of-order group, so the maximum is among the subtask's events in the
// last event's group (at most OutOfOrderGroupSize/P of them).
func (t *subtask[T]) maxTimeBefore(next int64) int64 {
	last := next - t.p
	size := t.gen.cfg.OutOfOrderGroupSize
	groupStart := ((t.gen.cfg.FirstEventNumber+last)/size)*size - t.gen.cfg.FirstEventNumber
	maxMs := t.gen.EventTime(last)
	for n := last - t.p; n >= groupStart && n >= 0; n -= t.p {
		maxMs = max(maxMs, t.gen.EventTime(n))
	}
	return maxMs * 1_000_000
}

// Read passes the next at most batchSize events of the lane, emitting
// those of type only (all when only is NoEvent).
func (t *subtask[T]) Read() (runtime.ReadResult, error) {
	cfg := &t.src.cfg
	end := cfg.Events
	if end == 0 {
		end = t.gen.Limit()
		if t.next >= end {
			return runtime.ReadResult{}, fmt.Errorf("nexmark: the unbounded source reached the last of the %d events of this configuration with an event time the engine represents", end)
		}
	}
	n := min(int64(batchSize), max((end-t.next+t.p-1)/t.p, 0))
	var wait time.Duration
	if cfg.Rate > 0 {
		perSubtask := cfg.Rate / float64(t.p)
		due := int64(t.rt.Now().Sub(t.opened).Seconds()*perSubtask) + 1 - t.emitted
		if due <= 0 {
			wait = time.Duration(float64(time.Second) * float64(1-due) / perSubtask)
		}
		n = min(n, max(due, 0))
	}
	if n > 0 {
		maxTime := t.maxTime
		if t.next == t.index {
			maxTime = math.MinInt64
		}
		batch, maxTime := t.fill(t, t.batches.Get(int(n)), n, maxTime)
		t.next += n * t.p
		t.maxTime = maxTime
		t.emitted += n
		if len(batch) > 0 {
			if err := t.batches.Emit(batch); err != nil {
				return runtime.ReadResult{}, err
			}
		}
	}
	res := runtime.ReadResult{Watermark: t.watermark(), Wait: wait}
	if cfg.Events > 0 && t.next >= cfg.Events {
		res.Exhausted = true
	}
	return res, nil
}

// watermark is the largest record time emitted minus MaxDelay minus 1ns:
// the engine's watermark W promises that no record with Time <= W follows,
// and the next event may share the last one's millisecond. It is
// MinWatermark before the first record and never decreases.
func (t *subtask[T]) watermark() int64 {
	if t.next == t.index {
		return runtime.MinWatermark
	}
	delay := int64(t.src.cfg.MaxDelay)
	// The distance from MinWatermark, in uint64 so that it cannot overflow.
	minWM := runtime.MinWatermark
	if uint64(t.maxTime)-uint64(minWM) <= uint64(delay) {
		return runtime.MinWatermark
	}
	return t.maxTime - delay - 1
}

// Position returns the next event number as JSON, {"next":N}.
func (t *subtask[T]) Position() ([]byte, error) { return json.Marshal(position{Next: t.next}) }

// Close releases nothing: the generator holds no resources.
func (t *subtask[T]) Close() error { return nil }

// Descriptor: the generator replays exactly from one event counter per
// split.
func (s *Source) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "nexmark", Capabilities: runtime.Capabilities{Replayable: true}}
}
