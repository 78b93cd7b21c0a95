package runtime

import (
	"math"
	"sync/atomic"
)

// Record is one element of a stream: a value and its event time in Unix
// nanoseconds.
type Record[T any] struct {
	Value T
	Time  int64
}

// Batch is how records travel: a batch handed to Output.Emit belongs to the
// receiver and must not be changed by anyone after, unless the Output
// reuses batches (ReusesBatches; BatchBuffer does the bookkeeping).
type Batch[T any] []Record[T]

// Len returns the number of records.
func (b Batch[T]) Len() int { return len(b) }

// BatchBuffer gives an emitter the batches it fills and passes them on:
// one buffer used again for every batch when its Output lets it
// (ReusesBatches), else batches every receiver is done with (taken back
// over forward, rebalance and broadcast edges), else new ones. Open it on
// the emitter's Output before use.
type BatchBuffer[T any] struct {
	out   Output
	reuse bool
	buf   Batch[T]
	// pool, when not reusing, gives back batches that every consumer in
	// other tasks is done with.
	pool *batchPool
}

// Open makes b emit on o. Call it in Open, once the Output is known.
func (b *BatchBuffer[T]) Open(o Output) {
	b.out, b.reuse, b.buf, b.pool = o, ReusesBatches(o), nil, nil
	if !b.reuse {
		b.pool = poolOf(o)
	}
}

// Get returns an empty batch with room for n records (appending grows it):
// with reuse, the memory of the last batch Emit passed on; else a batch
// nobody references any more, or a new one.
func (b *BatchBuffer[T]) Get(n int) Batch[T] {
	if !b.reuse {
		return takeBatch[T](b.pool, n)
	}
	if cap(b.buf) < n {
		b.buf = make(Batch[T], 0, n)
	}
	return b.buf[:0]
}

// Emit passes batch on to the Output of Open. With reuse, its memory, as
// far as appends grew it, is what Get returns next.
func (b *BatchBuffer[T]) Emit(batch Batch[T]) error {
	if b.reuse {
		b.buf = batch[:0]
	}
	return b.out.Emit(batch)
}

// takeBatch returns an empty batch with room for n records from p (nil:
// none), or a new one.
func takeBatch[T any](p *batchPool, n int) Batch[T] {
	if p != nil {
		if r, ok := p.get().(Batch[T]); ok && cap(r) >= n {
			return r[:0]
		}
	}
	return make(Batch[T], 0, n)
}

// Records is a type-erased Batch[T]; operators assert it back to the Batch of
// their input type.
type Records interface{ Len() int }

// Watermark bounds. A watermark W asserts that no record with Time <= W
// follows on that input.
const (
	// MinWatermark is the watermark of an input that has said nothing yet.
	MinWatermark int64 = math.MinInt64
	// MaxWatermark is emitted by a source whose input is exhausted: every
	// event-time timer fires.
	MaxWatermark int64 = math.MaxInt64
)

// kind says what a message on a channel carries.
type kind uint8

const (
	kindRecords kind = iota
	kindWatermark
	kindBarrier
	kindEnd
	// kindStatus says whether the producer is idle: an idle input does not
	// hold back its consumers' watermark until it sends records or an active
	// status again.
	kindStatus
)

// message is what flows on a channel between two subtasks: a batch of records
// or one in-band control event. Control events never overtake records: a
// channel is FIFO and a writer flushes its buffered records before sending
// one.
type message struct {
	kind    kind
	records Records // a Batch[T] when kind == kindRecords
	// from takes records back once the consumer is done with them, when
	// the writer that sent them reuses batches (nil otherwise).
	from      recycler
	watermark int64
	barrier   Barrier
	idle      bool // kindStatus
}

// recycler is an edge writer that reuses the batches its consumers are
// done with. A consumer calls recycle once its head operator's ProcessBatch
// returned, only if that operator is a BatchBorrower, and then touches the
// batch no more.
type recycler interface{ recycle(Records) }

// batchPool holds batches nobody references any more, for an emitter to
// fill again (takeBatch). It never blocks: a batch that does not fit is
// left to the garbage collector.
type batchPool struct{ free chan Records }

// newBatchPool returns a pool with room for n batches.
func newBatchPool(n int) *batchPool { return &batchPool{free: make(chan Records, n)} }

// recycle implements recycler for a batch one consumer alone received (a
// hash edge's).
func (p *batchPool) recycle(r Records) { p.put(r) }

func (p *batchPool) put(r Records) {
	select {
	case p.free <- r:
	default:
	}
}

// get returns a free batch, or nil.
func (p *batchPool) get() Records {
	select {
	case r := <-p.free:
		return r
	default:
		return nil
	}
}

// sharedBatch is one batch handed itself to refs consumers (forward,
// rebalance and broadcast edges): the last to be done with it puts it in
// the pool. A consumer that is not a BatchBorrower never recycles, so such
// a batch never comes back.
type sharedBatch struct {
	pool *batchPool
	refs atomic.Int32
}

// recycle implements recycler.
func (s *sharedBatch) recycle(r Records) {
	if s.refs.Add(-1) == 0 {
		s.pool.put(r)
	}
}

// poolOf returns the pool of o, the runtime's output of a subtask at the
// end of its chain whose out edges share batches; else nil.
func poolOf(o Output) *batchPool {
	if p, ok := o.(interface{ batchPool() *batchPool }); ok {
		return p.batchPool()
	}
	return nil
}

// Barrier is a checkpoint barrier: it separates the records that belong to
// checkpoint ID (before it) from those after.
type Barrier struct {
	ID int64
	// Timestamp is the trigger time in Unix nanoseconds.
	Timestamp int64
	// Final marks the job's last checkpoint.
	Final bool
}
