// Package datagen is a deterministic, replayable source for quickstarts,
// tests and benchmarks.
//
// Record i (i = 0, 1, 2, … over all subtasks) is
// {"id": i, "key": i % keys, "value": i % 1000} with event time
// start_time + i * event_interval. Subtask s of P emits exactly the i with
// i % P == s, in increasing order; its replay position is the next i. Its
// watermark follows Config.Watermark; by default it is the event time of the
// last record it emitted minus 1ns.
package datagen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// DefaultStartTime is the event time of record 0 unless configured.
var DefaultStartTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxRate is the highest rate a generator can be limited to; above it, leave
// the rate unset (as fast as possible).
const MaxRate = 1e12

// batchSize is the most records one Read emits.
const batchSize = 1024

// Config configures the generator.
type Config struct {
	// Count is the total number of records over all subtasks; 0 means unbounded.
	Count int64
	// Rate is records per second over all subtasks; 0 means as fast as possible.
	Rate float64
	// Keys is the number of distinct keys. The default value is 100.
	Keys int64
	// StartTime is the event time of record 0. The default value is
	// 2026-01-01T00:00:00Z.
	StartTime time.Time
	// EventInterval is the event time between consecutive records; it must be
	// positive. The default value is 1ms.
	EventInterval time.Duration
	// Watermark is the watermark strategy. Records are in event-time order
	// per subtask, so the zero value (watermark = last event time - 1ns)
	// loses nothing; IdleTimeout lets a rate-limited subtask that emits
	// nothing for that long stop holding the watermark back.
	Watermark watermark.Strategy
}

// withDefaults fills unset fields and validates.
func (c Config) withDefaults() (Config, error) {
	if c.Keys == 0 {
		c.Keys = 100
	}
	if c.StartTime.IsZero() {
		c.StartTime = DefaultStartTime
	}
	if c.EventInterval == 0 {
		c.EventInterval = time.Millisecond
	}
	var errs []error
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d is negative", c.Count))
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate > MaxRate {
		errs = append(errs, fmt.Errorf("rate %v must be between 0 and %g records per second (0: as fast as possible)", c.Rate, float64(MaxRate)))
	}
	if c.Keys < 1 {
		errs = append(errs, fmt.Errorf("keys %d must be at least 1", c.Keys))
	}
	if err := c.Watermark.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.EventInterval < 0 {
		errs = append(errs, fmt.Errorf("event_interval %v must be positive", c.EventInterval))
	}
	minTime, maxTime := time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
	if c.StartTime.Before(minTime) || c.StartTime.After(maxTime) {
		errs = append(errs, fmt.Errorf("start_time %v is outside the event times this engine represents (%v to %v)", c.StartTime, minTime.UTC(), maxTime.UTC()))
	} else if c.Count > 0 && c.EventInterval > 0 && (c.Count-1) > (math.MaxInt64-c.StartTime.UnixNano())/int64(c.EventInterval) {
		errs = append(errs, fmt.Errorf("start_time + count x event_interval is after %v, the last event time this engine represents", maxTime.UTC()))
	}
	return c, errors.Join(errs...)
}

// Event is a generated record.
type Event struct {
	ID    int64 `json:"id"`
	Key   int64 `json:"key"`
	Value int64 `json:"value"`
}

// Source generates records of type T through a constructor.
type Source[T any] struct {
	cfg  Config
	make func(id, key, value int64) T
}

// New returns a generator that builds each record with make(id, key, value).
func New[T any](cfg Config, make func(id, key, value int64) T) (*Source[T], error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("datagen: %w", err)
	}
	return &Source[T]{cfg: cfg, make: make}, nil
}

// Events returns a generator of Event records.
func Events(cfg Config) (*Source[Event], error) {
	return New(cfg, func(id, key, value int64) Event { return Event{ID: id, Key: key, Value: value} })
}

// Config returns the effective configuration (defaults filled in).
func (s *Source[T]) Config() Config { return s.cfg }

// Guarantee: the generator replays exactly from any position.
// Type is the connector type name.
func (s *Source[T]) Type() string { return "datagen" }

func (s *Source[T]) Guarantee() runtime.Guarantee { return runtime.ExactlyOnce }

// Capabilities: replayable from the next record number.
func (s *Source[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Replayable: true}
}

// Describe summarises the configuration.
func (s *Source[T]) Describe() string {
	count := "unbounded"
	if s.cfg.Count > 0 {
		count = fmt.Sprintf("count=%d", s.cfg.Count)
	}
	rate := "as fast as possible"
	if s.cfg.Rate > 0 {
		rate = fmt.Sprintf("rate=%g/s", s.cfg.Rate)
	}
	return fmt.Sprintf("datagen %s, %s, keys=%d", count, rate, s.cfg.Keys)
}

// NewSubtask creates one generator subtask.
func (s *Source[T]) NewSubtask() runtime.Source { return &subtask[T]{src: s} }

// position is a subtask's replay position as stored in checkpoints.
type position struct {
	Next int64 `json:"next"`
}

type subtask[T any] struct {
	src *Source[T]
	out runtime.Output
	// next is the id of the next record this subtask emits.
	// INVARIANT: next % p == subtask index.
	next, p int64
	// emitted counts records since Open, for the rate limit.
	emitted int64
	opened  time.Time
	start   int64 // StartTime in Unix ns
	step    int64 // EventInterval in ns
	wm      *watermark.Tracker
}

func (t *subtask[T]) Open(ctx *runtime.Context) error {
	t.out = ctx.Output
	t.p = int64(ctx.Parallelism)
	t.next = int64(ctx.Task.Subtask)
	t.start = t.src.cfg.StartTime.UnixNano()
	t.step = int64(t.src.cfg.EventInterval)
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		var pos position
		if err := json.Unmarshal(ctx.Restored.Inline, &pos); err != nil {
			return fmt.Errorf("datagen: restoring position %q: %w", ctx.Restored.Inline, err)
		}
		if pos.Next%t.p != int64(ctx.Task.Subtask) || pos.Next < 0 {
			return fmt.Errorf("datagen: restored position %d does not belong to subtask %d of %d", pos.Next, ctx.Task.Subtask, t.p)
		}
		t.next = pos.Next
	}
	t.opened = time.Now()
	t.wm = watermark.NewTracker(t.src.cfg.Watermark)
	t.wm.AddSplit(t.opened.UnixNano())
	if last := t.next - t.p; last >= 0 {
		t.wm.Observe(0, t.start+last*t.step)
	}
	return nil
}

func (t *subtask[T]) Read() (runtime.ReadResult, error) {
	cfg := &t.src.cfg
	n := int64(batchSize)
	if cfg.Count > 0 {
		left := (cfg.Count - t.next + t.p - 1) / t.p
		n = min(n, max(left, 0))
	}
	var wait time.Duration
	if cfg.Rate > 0 {
		perSubtask := cfg.Rate / float64(t.p)
		due := int64(time.Since(t.opened).Seconds()*perSubtask) + 1 - t.emitted
		if due <= 0 {
			wait = time.Duration(float64(time.Second) * float64(1-due) / perSubtask)
		}
		n = min(n, max(due, 0))
	}
	if n > 0 && t.next+(n-1)*t.p > (math.MaxInt64-t.start)/t.step {
		return runtime.ReadResult{}, fmt.Errorf("datagen: the event time of record %d is after %v, the last event time this engine represents", t.next+(n-1)*t.p, time.Unix(0, math.MaxInt64).UTC())
	}
	if n > 0 {
		batch := make(runtime.Batch[T], n)
		id := t.next
		for i := range batch {
			batch[i] = runtime.Record[T]{Value: t.src.make(id, id%cfg.Keys, id%1000), Time: t.start + id*t.step}
			id += t.p
		}
		t.next = id
		t.emitted += n
		t.wm.Observe(0, batch[n-1].Time)
		if err := t.out.Emit(batch); err != nil {
			return runtime.ReadResult{}, err
		}
	}
	// Come back by the idle timeout at the latest, so a rate that leaves the
	// subtask quiet that long is reported idle.
	if it := cfg.Watermark.IdleTimeout; it > 0 && wait > it {
		wait = it
	}
	res := runtime.ReadResult{Wait: wait}
	res.Watermark, res.Idle = t.wm.Current(time.Now().UnixNano())
	if cfg.Count > 0 && t.next >= cfg.Count {
		res.Exhausted = true
	}
	return res, nil
}

func (t *subtask[T]) Position() ([]byte, error) { return json.Marshal(position{Next: t.next}) }

func (t *subtask[T]) Close() error { return nil }
