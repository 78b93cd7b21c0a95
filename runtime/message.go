package runtime

import "math"

// Record is one element of a stream: a value and its event time in Unix
// nanoseconds.
type Record[T any] struct {
	Value T
	Time  int64
}

// Batch is how records travel: a batch handed to Output.Emit belongs to the
// receiver and must not be changed by anyone after.
type Batch[T any] []Record[T]

// Len returns the number of records.
func (b Batch[T]) Len() int { return len(b) }

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
	kind      kind
	records   Records // a Batch[T] when kind == kindRecords
	watermark int64
	barrier   Barrier
	idle      bool // kindStatus
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
