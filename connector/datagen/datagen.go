// Package datagen is a deterministic, replayable source for quickstarts,
// tests and benchmarks.
//
// Record i (i = 0, 1, 2, … over all subtasks) is
// {"id": i, "key": i % keys, "value": i % 1000} with event time
// start_time + i * event_interval. With Config.StartNow, start_time is the
// wall-clock time of the job's first start, kept in the checkpoints.
//
// The ids are striped into lanes: lane r of stride S holds the ids i with
// i % S == r. S is the parallelism of the job's first run, whose subtask s
// owns lane s (so, until a rescale, subtask s of P emits exactly the i with
// i % P == s), and the lanes never change afterwards. A subtask emits the ids of its lanes in
// increasing order, merged across its lanes; its replay position is the next
// id of each lane. Restored at another parallelism P', the source is
// rescaled like Kafka partitions (Descriptor.RescalablePositions): subtask s' takes the
// lanes r with r % P' == s' from every old subtask's position, so each id is
// still emitted exactly once. With P' > S some subtasks own no lane: bounded,
// they are exhausted at once; unbounded, they stay idle and do not hold the
// watermark back. A subtask's share of Rate is Rate × its lanes / S.
//
// A subtask's watermark follows Config.Watermark; by default it is the event
// time of the last record it emitted minus 1ns.
package datagen

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/connector"
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
	// StartNow makes the event time of record 0 the wall-clock time
	// (runtime.Context.Now) at the job's first start instead of StartTime,
	// so event time tracks the wall clock (watermark lag means something).
	// It is chosen once, by the first subtask that opens without a start in
	// its restored position, and written into every subtask's position: a
	// restore, in this process or another, replays the same event times. A
	// position written without StartNow has no start; restored with it, the
	// start is chosen then, so that the restored subtask's next record is at
	// the wall clock. Without StartNow a restored start is ignored and
	// StartTime applies, as a changed EventInterval does. The start belongs
	// to the Source: every job of one Source shares it. StartTime must be
	// zero with it.
	StartNow bool
	// EventInterval is the event time between consecutive records; it must be
	// positive. The default value is 1ms.
	EventInterval time.Duration
	// Watermark is the watermark strategy. Records are in event-time order
	// per subtask, so the zero value (watermark = last event time - 1ns)
	// loses nothing. IdleTimeout lets a rate-limited subtask that emitted
	// nothing for that long, and whose rate allowed no record when it last
	// looked, stop holding the watermark back; its next record lies between
	// the other subtasks' in event time, so it may then be late. Without a
	// rate a subtask always has records and is never idle; a subtask
	// without lanes is always idle.
	Watermark watermark.Strategy
}

// withDefaults fills unset fields and validates.
func (c Config) withDefaults() (Config, error) {
	if c.Keys == 0 {
		c.Keys = 100
	}
	var errs []error
	if c.StartNow && !c.StartTime.IsZero() {
		errs = append(errs, fmt.Errorf("start_time is both now and %v", c.StartTime))
	}
	if c.StartTime.IsZero() {
		c.StartTime = DefaultStartTime
	}
	if c.EventInterval == 0 {
		c.EventInterval = time.Millisecond
	}
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
	if c.StartNow {
		// Checked when the start is chosen (Open).
	} else if c.StartTime.Before(minTime) || c.StartTime.After(maxTime) {
		errs = append(errs, fmt.Errorf("start_time %v is outside the event times this engine represents (%v to %v)", c.StartTime, minTime.UTC(), maxTime.UTC()))
	} else if c.Count > 0 && c.EventInterval > 0 && c.Count-1 > maxRecordID(c.StartTime.UnixNano(), int64(c.EventInterval)) {
		errs = append(errs, fmt.Errorf("start_time + count x event_interval is after %v, the last event time this engine represents", maxTime.UTC()))
	}
	return c, errors.Join(errs...)
}

// maxRecordID is the largest record id whose event time, start + id*step
// (step > 0), is at most math.MaxInt64 ns, itself at most math.MaxInt64. The
// span is computed unsigned: for a start before 1970 it exceeds MaxInt64.
func maxRecordID(start, step int64) int64 {
	span := uint64(math.MaxInt64) - uint64(start) // MaxInt64 - start, which fits in a uint64
	return int64(min(span/uint64(step), math.MaxInt64))
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

	// mu guards start.
	mu sync.Mutex
	// start is the start chosen for StartNow (Unix ns), nil until a
	// subtask chose or restored it. Every subtask of every attempt of the
	// job uses it. INVARIANT: set once.
	start *int64
}

// startOf returns the event time of record 0 (Unix ns) for a subtask whose
// restored position holds restored (nil: none) and whose next record is
// next. Without StartNow it is StartTime. With it, the restored start is the
// job's; otherwise the one chosen already, or one chosen now so that the
// subtask's next record is at the wall clock: now for a first start, earlier
// for a position written without StartNow (its records are not put in the
// future).
func (s *Source[T]) startOf(restored *int64, next int64, now func() time.Time) (int64, error) {
	if !s.cfg.StartNow {
		return s.cfg.StartTime.UnixNano(), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case restored != nil && s.start != nil && *restored != *s.start:
		return 0, fmt.Errorf("datagen: the restored start time %v differs from %v, the one the other subtasks use",
			time.Unix(0, *restored).UTC(), time.Unix(0, *s.start).UTC())
	case restored != nil:
		s.start = restored
	case s.start == nil:
		t := now().UnixNano()
		// t - next*interval, when it is an event time (at least MinInt64).
		if step := int64(s.cfg.EventInterval); next > 0 && step > 0 && next <= math.MaxInt64/step && uint64(next*step) <= uint64(t)+1<<63 {
			t -= next * step
		}
		s.start = &t
	}
	if s.cfg.Count > 0 && s.cfg.Count-1 > maxRecordID(*s.start, int64(s.cfg.EventInterval)) {
		return 0, fmt.Errorf("datagen: start_time now (%v) + count x event_interval is after %v, the last event time this engine represents",
			time.Unix(0, *s.start).UTC(), time.Unix(0, math.MaxInt64).UTC())
	}
	return *s.start, nil
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
	start := ""
	if s.cfg.StartNow {
		start = ", event time from the first start's wall clock"
	}
	return fmt.Sprintf("datagen %s, %s, keys=%d%s", count, rate, s.cfg.Keys, start)
}

// NewSubtask creates one generator subtask.
func (s *Source[T]) NewSubtask() runtime.SourceSubtask[T] { return &subtask[T]{src: s} }

// lane is a residue class of the record ids: the ids Next, Next+Stride,
// Next+2·Stride, … (below Count when bounded). Lane r of stride S is the
// ids i with i % S == r.
type lane struct {
	Stride int64 `json:"stride"`
	Next   int64 `json:"next"`
}

// residue is the lane's residue: every id in it is residue modulo Stride.
func (l lane) residue() int64 { return l.Next % l.Stride }

// byResidue orders lanes by residue, the order positions list them in.
func byResidue(a, b lane) int { return cmp.Compare(a.residue(), b.residue()) }

// singlePosition is the position of a subtask that owns exactly one lane
// whose stride is the current parallelism (every subtask of a job that never
// rescaled): {"next": n}, the format of checkpoints before lanes.
type singlePosition struct {
	Next int64 `json:"next"`
	// Start is the start time of StartNow; absent otherwise.
	Start *startTime `json:"start,omitempty"`
}

// lanesPosition is the position of any other subtask: its lanes, sorted by
// residue; {"lanes":[]} for a subtask that owns none (still a non-empty
// inline, so that it is part of the union a rescale restores).
type lanesPosition struct {
	Lanes []lane     `json:"lanes"`
	Start *startTime `json:"start,omitempty"`
}

// startTime is a StartNow start in a position: Unix ns, written as an RFC
// 3339 UTC time with nanoseconds, so `ingest checkpoints inspect` shows it
// readably and it reads back exactly.
type startTime int64

// MarshalText writes the time.
func (t startTime) MarshalText() ([]byte, error) {
	return []byte(time.Unix(0, int64(t)).UTC().Format(time.RFC3339Nano)), nil
}

// UnmarshalText reads the time.
func (t *startTime) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if v.Before(time.Unix(0, math.MinInt64)) || v.After(time.Unix(0, math.MaxInt64)) {
		return fmt.Errorf("start %v is outside the event times this engine represents", v)
	}
	*t = startTime(v.UnixNano())
	return nil
}

// position is a decoded position: its lanes, whether it was a single
// {"next": n}, and its start (nil when it has none).
type position struct {
	lanes  []lane
	single bool
	start  *int64
}

// decodePosition parses a restored position into its lanes. A
// {"next": n} position (single) is one lane of stride oldP, the parallelism
// it was written at. It checks each lane (stride at least 1, next not
// negative), not how the lanes fit together.
func decodePosition(raw []byte, oldP int64) (position, error) {
	var p struct {
		Next  *int64     `json:"next"`
		Lanes *[]lane    `json:"lanes"`
		Start *startTime `json:"start"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return position{}, fmt.Errorf("restoring position %.200q: %w", raw, err)
	}
	var out position
	switch {
	case p.Next != nil && p.Lanes != nil:
		return position{}, fmt.Errorf("restoring position %.200q: it has both next and lanes", raw)
	case p.Next != nil:
		out.lanes, out.single = []lane{{Stride: oldP, Next: *p.Next}}, true
	case p.Lanes != nil:
		out.lanes = *p.Lanes
	default:
		return position{}, fmt.Errorf("restoring position %.200q: it has neither next nor lanes", raw)
	}
	for _, l := range out.lanes {
		if l.Stride < 1 || l.Next < 0 {
			return position{}, fmt.Errorf("restoring position %.200q: a lane with stride %d and next %d (want stride >= 1, next >= 0)", raw, l.Stride, l.Next)
		}
	}
	if p.Start != nil {
		start := int64(*p.Start)
		out.start = &start
	}
	return out, nil
}

// unionLanes gathers the lanes of every subtask's position, for a restore at
// another parallelism (runtime.Context.RestoredUnion), and checks that they
// are exactly the lanes of the job's first run: one stride S, and each
// residue 0 … S-1 once. The lanes come back sorted by residue, with the
// positions' start, which they must agree on.
func unionLanes(inlines [][]byte) ([]lane, *int64, error) {
	oldP := int64(len(inlines))
	var all []lane
	var start *int64
	for i, raw := range inlines {
		pos, err := decodePosition(raw, oldP)
		if err != nil {
			return nil, nil, fmt.Errorf("position %d of %d: %w", i+1, oldP, err)
		}
		if i > 0 && (pos.start == nil) != (start == nil) || pos.start != nil && start != nil && *pos.start != *start {
			return nil, nil, fmt.Errorf("restoring positions: position %d of %d has another start time than position 1", i+1, oldP)
		}
		all, start = append(all, pos.lanes...), pos.start
	}
	lanes, err := checkUnion(all, oldP)
	return lanes, start, err
}

// checkUnion checks the lanes of all oldP positions (unionLanes).
func checkUnion(all []lane, oldP int64) ([]lane, error) {
	if len(all) == 0 {
		return nil, fmt.Errorf("restoring positions: the %d positions hold no lane", oldP)
	}
	stride := all[0].Stride
	for _, l := range all[1:] {
		if l.Stride != stride {
			return nil, fmt.Errorf("restoring positions: lanes of two strides, %d and %d; the lanes of one job all have the stride of its first run", stride, l.Stride)
		}
	}
	seen := make(map[int64]bool, len(all))
	for _, l := range all {
		r := l.residue()
		if seen[r] {
			return nil, fmt.Errorf("restoring positions: lane %d of stride %d is in two positions", r, stride)
		}
		seen[r] = true
	}
	if int64(len(seen)) != stride {
		var missing []int64
		for r := int64(0); r < stride && len(missing) < 5; r++ {
			if !seen[r] {
				missing = append(missing, r)
			}
		}
		return nil, fmt.Errorf("restoring positions: %d lanes of stride %d, want %d; missing lanes %v", len(seen), stride, stride, missing)
	}
	slices.SortFunc(all, byResidue)
	return all, nil
}

// checkOwnLanes checks the lanes of subtask s of p restored at the
// parallelism they were written at: one stride, distinct residues, each lane
// one that subtask s takes (residue % p == s).
func checkOwnLanes(lanes []lane, s, p int64) error {
	seen := make(map[int64]bool, len(lanes))
	for _, l := range lanes {
		r := l.residue()
		switch {
		case l.Stride != lanes[0].Stride:
			return fmt.Errorf("lanes of two strides, %d and %d", lanes[0].Stride, l.Stride)
		case seen[r]:
			return fmt.Errorf("lane %d of stride %d twice", r, l.Stride)
		case r%p != s:
			return fmt.Errorf("lane %d of stride %d does not belong to subtask %d of %d", r, l.Stride, s, p)
		}
		seen[r] = true
	}
	return nil
}

type subtask[T any] struct {
	src *Source[T]
	// batches hands out the batches Read emits (runtime.BatchBuffer).
	batches runtime.BatchBuffer[T]
	// rt is the subtask's runtime context: its clock paces the rate.
	rt *runtime.Context
	// multi is set unless the subtask owns exactly one lane; Read then
	// merges lanes (readLanes) instead of its one-lane loop.
	multi bool
	// next and p are the one lane's next id and stride (!multi).
	// INVARIANT: next % p is the lane's residue.
	next, p int64
	// lanes are the subtask's lanes when multi (see least); stride is their
	// common stride.
	lanes  []lane
	stride int64
	// parallelism is the job's, which decides the position's format.
	parallelism int64
	// emitted counts records since Open, for the rate limit.
	emitted int64
	opened  time.Time
	start   int64 // event time of record 0, Unix ns (Source.startOf)
	step    int64 // EventInterval in ns
	// startNow says whether positions carry start (Config.StartNow).
	startNow bool
	wm       *watermark.Tracker
}

func (t *subtask[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	t.batches.OpenOn(out)
	p, s := int64(ctx.Parallelism), int64(ctx.Task.Subtask)
	t.parallelism = p
	t.step = int64(t.src.cfg.EventInterval)
	t.startNow = t.src.cfg.StartNow
	// A fresh subtask owns one lane: stride P, from its index.
	lanes := []lane{{Stride: p, Next: s}}
	var restoredStart *int64
	switch {
	case ctx.RestoredUnion != nil:
		// Restored at another parallelism: the lanes are those of the first
		// run; subtask s takes lane r when r % P == s.
		all, start, err := unionLanes(ctx.RestoredUnion)
		if err != nil {
			return fmt.Errorf("datagen: subtask %d of %d: %w", s, p, err)
		}
		lanes, restoredStart = lanes[:0], start
		for _, l := range all {
			if l.residue()%p == s {
				lanes = append(lanes, l)
			}
		}
	case ctx.Restored != nil && len(ctx.Restored.Inline) > 0:
		restored, err := decodePosition(ctx.Restored.Inline, p)
		if err != nil {
			return fmt.Errorf("datagen: %w", err)
		}
		if restored.single {
			if n := restored.lanes[0].Next; n%p != s {
				return fmt.Errorf("datagen: restored position %d does not belong to subtask %d of %d", n, s, p)
			}
		} else if err := checkOwnLanes(restored.lanes, s, p); err != nil {
			return fmt.Errorf("datagen: restored position %.200q: %w", ctx.Restored.Inline, err)
		}
		lanes, restoredStart = restored.lanes, restored.start
	}
	next := int64(math.MaxInt64)
	for _, l := range lanes {
		next = min(next, l.Next)
	}
	if len(lanes) == 0 {
		next = 0
	}
	start, err := t.src.startOf(restoredStart, next, ctx.Now)
	if err != nil {
		return err
	}
	t.start = start
	t.rt = ctx
	t.opened = ctx.Now()
	t.wm = watermark.NewTracker(t.src.cfg.Watermark)
	if len(lanes) == 0 {
		// No split: the tracker reports the subtask idle, so it does not
		// hold the watermark back. Its position is {"lanes":[]}.
		t.multi, t.lanes = true, []lane{}
		return nil
	}
	t.wm.AddSplit(t.opened.UnixNano())
	// The last id before the lanes' next ones, if any: no record to come is
	// older.
	last := int64(math.MaxInt64)
	for _, l := range lanes {
		last = min(last, l.Next-l.Stride)
	}
	if last >= 0 {
		t.wm.Observe(0, t.start+last*t.step)
	}
	if len(lanes) == 1 {
		t.next, t.p = lanes[0].Next, lanes[0].Stride
		return nil
	}
	slices.SortFunc(lanes, byResidue) // as positions list them
	t.multi, t.lanes, t.stride = true, lanes, lanes[0].Stride
	return nil
}

func (t *subtask[T]) Read() (runtime.ReadResult, error) {
	cfg := &t.src.cfg
	if t.multi && len(t.lanes) == 0 {
		// No lane (restored above the lanes' stride): nothing to emit, ever.
		res := runtime.ReadResult{Exhausted: cfg.Count > 0}
		if !res.Exhausted {
			res.Wait = noLaneWait
		}
		res.Watermark, res.Idle = t.wm.Current(t.rt.Now().UnixNano())
		return res, nil
	}
	// The subtask's lanes (one: next and p; several: lanes and stride).
	owned, stride := int64(1), t.p
	if t.multi {
		owned, stride = int64(len(t.lanes)), t.stride
	}
	n := int64(batchSize)
	if cfg.Count > 0 {
		var left int64
		if t.multi {
			for _, l := range t.lanes {
				left += max((cfg.Count-l.Next+stride-1)/stride, 0)
			}
		} else {
			left = (cfg.Count - t.next + t.p - 1) / t.p
		}
		n = min(n, max(left, 0))
	}
	var wait time.Duration
	looked := t.rt.Now()
	nothingDue := false
	if cfg.Rate > 0 {
		perSubtask := cfg.Rate * float64(owned) / float64(stride)
		due := int64(looked.Sub(t.opened).Seconds()*perSubtask) + 1 - t.emitted
		if due <= 0 {
			wait = time.Duration(float64(time.Second) * float64(1-due) / perSubtask)
			nothingDue = true
		}
		n = min(n, max(due, 0))
	}
	if n > 0 {
		batch := t.batches.Get(int(n))[:n]
		var err error
		if t.multi {
			err = t.fillLanes(batch)
		} else {
			err = t.fill(batch)
		}
		if err != nil {
			return runtime.ReadResult{}, err
		}
		t.emitted += n
		t.wm.Observe(0, batch[n-1].Time)
		if err := t.batches.Emit(batch); err != nil {
			return runtime.ReadResult{}, err
		}
	}
	if nothingDue {
		// The rate allowed no record at looked: the generator's look that
		// may make it idle. Without a rate it always has records to give.
		t.wm.CaughtUp(0, looked.UnixNano())
	}
	// Come back by the idle timeout at the latest, to look again: a look
	// counts for the idle timeout, and a rate that leaves the subtask quiet
	// that long is then reported idle.
	if it := cfg.Watermark.IdleTimeout; it > 0 && wait > it {
		wait = it
	}
	res := runtime.ReadResult{Wait: wait}
	res.Watermark, res.Idle = t.wm.Current(t.rt.Now().UnixNano())
	// When the least advanced lane reached Count, all did.
	lowest := t.next
	if t.multi {
		lowest = t.lanes[t.least()].Next
	}
	if cfg.Count > 0 && lowest >= cfg.Count {
		res.Exhausted = true
	}
	return res, nil
}

// noLaneWait is how long a subtask without lanes (unbounded, restored at a
// parallelism above the lanes' stride) waits between reads: it has nothing
// to emit, ever, and stays idle.
const noLaneWait = time.Minute

// fill fills batch from the subtask's one lane: the fast path of every
// subtask that never rescaled.
func (t *subtask[T]) fill(batch runtime.Batch[T]) error {
	cfg := &t.src.cfg
	if last := t.next + int64(len(batch)-1)*t.p; last > maxRecordID(t.start, t.step) {
		return errEventTimeOverflow(last)
	}
	id := t.next
	for i := range batch {
		batch[i] = runtime.Record[T]{Value: t.src.make(id, id%cfg.Keys, id%1000), Time: t.start + id*t.step}
		id += t.p
	}
	t.next = id
	return nil
}

// fillLanes fills batch from several lanes in increasing id order, each
// record from the lane with the smallest next id, so event times stay in
// order. With Count set, the caller counted only ids below it, and the lane
// with the smallest next id is never exhausted here.
func (t *subtask[T]) fillLanes(batch runtime.Batch[T]) error {
	cfg := &t.src.cfg
	maxID := maxRecordID(t.start, t.step)
	for i := range batch {
		l := &t.lanes[t.least()]
		id := l.Next
		if id > maxID {
			// The task fails on this error; the lanes advanced past records
			// not emitted, but they are not used again.
			return errEventTimeOverflow(id)
		}
		batch[i] = runtime.Record[T]{Value: t.src.make(id, id%cfg.Keys, id%1000), Time: t.start + id*t.step}
		l.Next = id + t.stride
	}
	return nil
}

// errEventTimeOverflow is the error for record id, whose event time is past
// the last one this engine represents.
func errEventTimeOverflow(id int64) error {
	return fmt.Errorf("datagen: the event time of record %d is after %v, the last event time this engine represents", id, time.Unix(0, math.MaxInt64).UTC())
}

// least returns the index of the lane with the smallest next id: the lane of
// the subtask's next record (a subtask has at most its first run's
// parallelism of lanes, so a scan is enough).
func (t *subtask[T]) least() int {
	i := 0
	for k, l := range t.lanes {
		if l.Next < t.lanes[i].Next {
			i = k
		}
	}
	return i
}

// Position is {"next": n} for a subtask whose one lane has the job's
// parallelism as stride, else its lanes sorted by residue.
func (t *subtask[T]) Position() ([]byte, error) {
	var start *startTime
	if t.startNow {
		st := startTime(t.start)
		start = &st
	}
	if !t.multi {
		if t.p == t.parallelism {
			return json.Marshal(singlePosition{Next: t.next, Start: start})
		}
		return json.Marshal(lanesPosition{Lanes: []lane{{Stride: t.p, Next: t.next}}, Start: start})
	}
	return json.Marshal(lanesPosition{Lanes: t.lanes, Start: start})
}

func (t *subtask[T]) Close() error { return nil }

// Descriptor: the generator replays exactly from the next record number of
// each lane, and positions can be merged and split again: restored at
// another parallelism, each subtask takes the lanes it owns now (residue %
// parallelism == its index) from every old subtask's position.
func (s *Source[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "datagen", Capabilities: runtime.Capabilities{Replayable: true}, RescalablePositions: true}
}
