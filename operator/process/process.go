// Package process is the keyed process function: user code that sees one
// record at a time with its key, reads and writes keyed state, and sets
// event-time and processing-time timers per key — the equivalent of Flink's
// KeyedProcessFunction.
//
// State and timers are keyed state of the operator: they are captured in
// every checkpoint and restored (and redistributed on rescaling) with it, so
// a timer set before a failure fires after the recovery. Event-time timers
// fire when the watermark reaches them, in time order, and all fire when the
// input ends. Processing-time timers fire when the wall clock reaches them;
// after a restore, those whose time passed during the outage fire at once.
// Processing-time timers still pending when the input ends do not fire.
//
// Output produced from processing time depends on when things ran, so it is
// not equal between a failure-free run and a recovered one; output produced
// from records and event-time timers is.
package process

import (
	"fmt"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Domain says which clock a timer follows.
type Domain uint8

const (
	// EventTime timers fire when the watermark reaches them.
	EventTime Domain = iota
	// ProcessingTime timers fire when the wall clock reaches them.
	ProcessingTime
)

// String names the domain.
func (d Domain) String() string {
	if d == ProcessingTime {
		return "processing time"
	}
	return "event time"
}

// Setup is what a function's Open gets: the subtask's keyed state backend,
// on which it registers its states with the key codec.
type Setup[K comparable] struct {
	// State is the subtask's keyed state; register states on it in Open.
	State *state.Backend
	// KeyCodec encodes keys in state.
	KeyCodec state.Codec[K]
	// Runtime is the subtask's runtime context (task id, parallelism, log).
	Runtime *runtime.Context
}

// Function is a keyed process function. Its methods are called from one
// goroutine per subtask; keyed state is read and written with c.Key().
type Function[T any, K comparable, O any] interface {
	// Open registers the function's keyed state.
	Open(s Setup[K]) error
	// ProcessRecord handles one record of key c.Key() with event time
	// c.Time().
	ProcessRecord(c *Context[K, O], v T) error
	// OnTimer handles a timer of key c.Key() that fired at c.Time() in
	// domain d.
	OnTimer(c *Context[K, O], d Domain) error
}

// Context is the view of the current record or timer: its key and time, the
// watermark, timers and output.
type Context[K comparable, O any] struct {
	op  *operator[K, O]
	key K
	// time is the record's event time, or the timer's time.
	time int64
	// emitTime is the event time Emit gives output: time, except in a
	// processing-time firing (see Emit).
	emitTime int64
}

// Key returns the key of the current record or timer.
func (c *Context[K, O]) Key() K { return c.key }

// Time returns the current record's event time (Unix ns), or the firing
// timer's time.
func (c *Context[K, O]) Time() int64 { return c.time }

// Watermark returns the operator's current event-time watermark.
func (c *Context[K, O]) Watermark() int64 { return c.op.wm }

// Now returns the current processing time in Unix ns, read once per batch
// or timer firing (so it costs nothing per record).
func (c *Context[K, O]) Now() int64 { return c.op.now }

// DropLate reports that the function drops the current record as late (its
// event time is behind the watermark, so the state it belongs to may be
// gone): the runtime counts it for the operator and warns about it
// (runtime.Context.DroppedLate). A function that drops late records calls
// it for each, so that no record is dropped silently.
func (c *Context[K, O]) DropLate() { c.op.rt.DroppedLate(c.time, c.op.wm) }

// Emit outputs v with the current record's or event-time timer's time as its
// event time. Output of a processing-time timer gets the first instant after
// the operator's watermark instead, so it is on time for event-time
// operators downstream (a wall-clock time would be far ahead of or behind
// event time).
func (c *Context[K, O]) Emit(v O) { c.EmitAt(v, c.emitTime) }

// EmitAt outputs v with event time t.
func (c *Context[K, O]) EmitAt(v O, t int64) {
	c.op.out = append(c.op.out, runtime.Record[O]{Value: v, Time: t})
}

// SetTimer registers a timer for the current key at t in domain d. A timer
// already set for the key at t does nothing more: each (key, domain, t)
// fires once. A processing-time timer set while processing-time timers fire,
// for a time already due, fires in a later turn of the task loop (so a timer
// that sets itself again at Now() does not stall checkpoints).
func (c *Context[K, O]) SetTimer(d Domain, t int64) {
	if d == ProcessingTime && c.op.firingProc && t <= c.op.now {
		c.op.deferred = append(c.op.deferred, deferredTimer[K]{key: c.key, at: t})
		return
	}
	c.op.timers(d).Register(c.key, 0, t)
}

// DeleteTimer removes the current key's timer at t in domain d, if set.
func (c *Context[K, O]) DeleteTimer(d Domain, t int64) {
	c.op.timers(d).Delete(c.key, 0, t)
}

// Keyed applies fn to the keyed stream ks and returns its output.
func Keyed[T any, K comparable, O any](ks stream.KeyedStream[T, K], id string, fn func() Function[T, K, O], opts ...stream.NodeOption) stream.Stream[O] {
	// Its function may drop late records (Context.DropLate).
	n := &runtime.Node{ID: id, Describe: "keyed process function", Type: "process", DropsLate: true}
	n.NewOperator = func() runtime.Operator {
		return &operator[K, O]{process: func(op *operator[K, O], r runtime.Records) error {
			f := op.fn.(Function[T, K, O])
			in, err := runtime.BatchOf[T](r)
			if err != nil {
				return err
			}
			for _, rec := range in {
				op.ctx.key, op.ctx.time, op.ctx.emitTime = ks.Key(rec.Value), rec.Time, rec.Time
				if err := f.ProcessRecord(&op.ctx, rec.Value); err != nil {
					return err
				}
			}
			return nil
		}, fire: func(op *operator[K, O], d Domain) error {
			return op.fn.(Function[T, K, O]).OnTimer(&op.ctx, d)
		}, open: func(op *operator[K, O], s Setup[K]) error {
			f := fn()
			op.fn = f
			return f.Open(s)
		}, keyCodec: ks.KeyCodec}
	}
	return stream.Add[T, O](ks.Stream, n, opts...)
}

// operator runs a Function; the record type is erased into the closures so
// the timer paths are shared.
type operator[K comparable, O any] struct {
	fn       any
	process  func(op *operator[K, O], r runtime.Records) error
	fire     func(op *operator[K, O], d Domain) error
	open     func(op *operator[K, O], s Setup[K]) error
	keyCodec state.Codec[K]

	ctx         Context[K, O]
	rt          *runtime.Context
	output      runtime.Output
	eventTimers *state.Timers[K]
	procTimers  *state.Timers[K]
	wm          int64
	now         int64 // processing time of the current batch or firing
	out         runtime.Batch[O]
	inputEnded  bool
	// firingProc is set while processing-time timers fire; deferred holds
	// the already-due processing-time timers set meanwhile.
	firingProc bool
	deferred   []deferredTimer[K]
}

// deferredTimer is a processing-time timer to register after a firing.
type deferredTimer[K comparable] struct {
	key K
	at  int64
}

func (op *operator[K, O]) timers(d Domain) *state.Timers[K] {
	if d == ProcessingTime {
		return op.procTimers
	}
	return op.eventTimers
}

// Open implements runtime.Operator.
func (op *operator[K, O]) Open(ctx *runtime.Context) error {
	op.ctx.op = op
	op.rt = ctx
	op.output = ctx.Output
	op.wm = ctx.Watermark()
	// A checkpoint taken after the input ended restores an ended input: the
	// runtime will not deliver the maximum watermark again.
	op.inputEnded = op.wm == runtime.MaxWatermark
	var err error
	if op.eventTimers, err = state.NewTimers[K](ctx.State, "event-timers", op.keyCodec); err != nil {
		return err
	}
	if op.procTimers, err = state.NewTimers[K](ctx.State, "processing-timers", op.keyCodec); err != nil {
		return err
	}
	if err := op.open(op, Setup[K]{State: ctx.State, KeyCodec: op.keyCodec, Runtime: ctx}); err != nil {
		return fmt.Errorf("process function: open: %w", err)
	}
	return nil
}

// flush emits the output collected so far.
func (op *operator[K, O]) flush() error {
	if len(op.out) == 0 {
		return nil
	}
	out := op.out
	op.out = nil
	return op.output.Emit(out)
}

// BorrowsBatches implements runtime.BatchBorrower: the function is given
// each record's value, not the batch.
func (op *operator[K, O]) BorrowsBatches() {}

// ProcessBatch implements runtime.Operator.
func (op *operator[K, O]) ProcessBatch(_ int, r runtime.Records) error {
	op.now = op.rt.Now().UnixNano()
	if err := op.process(op, r); err != nil {
		return err
	}
	return op.flush()
}

// ProcessWatermark fires the event-time timers the watermark reached.
func (op *operator[K, O]) ProcessWatermark(wm int64) error {
	op.wm = wm
	op.now = op.rt.Now().UnixNano()
	err := op.eventTimers.Advance(wm, func(key K, _ int64, ts int64) error {
		op.ctx.key, op.ctx.time, op.ctx.emitTime = key, ts, ts
		return op.fire(op, EventTime)
	})
	if err != nil {
		return err
	}
	if wm == runtime.MaxWatermark {
		op.inputEnded = true
	}
	return op.flush()
}

// NextProcessingTime implements runtime.ProcessingTimer.
func (op *operator[K, O]) NextProcessingTime() (int64, bool) {
	if op.inputEnded {
		return 0, false
	}
	return op.procTimers.Next()
}

// OnProcessingTime fires the processing-time timers due at now.
func (op *operator[K, O]) OnProcessingTime(now int64) error {
	op.now = now
	emitTime := op.wm + 1
	if op.wm == runtime.MaxWatermark {
		emitTime = op.wm
	}
	op.firingProc = true
	err := op.procTimers.Advance(now, func(key K, _ int64, ts int64) error {
		op.ctx.key, op.ctx.time, op.ctx.emitTime = key, ts, emitTime
		return op.fire(op, ProcessingTime)
	})
	op.firingProc = false
	for _, d := range op.deferred {
		op.procTimers.Register(d.key, 0, d.at)
	}
	op.deferred = op.deferred[:0]
	if err != nil {
		return err
	}
	return op.flush()
}

// Snapshotter is implemented by a Function that must know when its keyed
// state is captured, e.g. to change stored values in place until then:
// Snapshotting is called on the task goroutine right before each checkpoint
// captures the keyed state, after which a value the state holds may belong
// to the checkpoint being written and must not be changed in place.
type Snapshotter interface {
	Snapshotting(checkpoint int64)
}

// Snapshot implements runtime.Operator: everything is keyed state, which
// the runtime captures right after.
func (op *operator[K, O]) Snapshot(id int64) (runtime.Snapshot, error) {
	if s, ok := op.fn.(Snapshotter); ok {
		s.Snapshotting(id)
	}
	return runtime.Snapshot{}, nil
}

// NotifyComplete implements runtime.Operator.
func (op *operator[K, O]) NotifyComplete(int64) error { return nil }

// Close implements runtime.Operator.
func (op *operator[K, O]) Close() error { return nil }
