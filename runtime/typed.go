package runtime

import (
	"fmt"
	"reflect"
)

// This file is where the runtime erases record types. Connectors are written
// against the typed interfaces below (SourceSubtask[T], SinkSubtask[T]);
// EraseSource and EraseSink turn them into the untyped Source and Operator
// that tasks run. Between two subtasks a batch travels as Records, and the
// receiver asserts it back with BatchOf, which turns a mismatch into a
// TypeMismatchError instead of a panic.

// Emitter is a source subtask's typed output: every batch it passes on is a
// Batch[T], T being the source's record type. Ownership of the batch is as for
// Output.Emit.
type Emitter[T any] struct{ out Output }

// EmitTo returns an Emitter writing to o. The runtime makes the emitters of
// the sources it runs; tests of a source subtask use EmitTo to collect what
// it emits.
func EmitTo[T any](o Output) Emitter[T] { return Emitter[T]{out: o} }

// Emit passes batch on.
func (e Emitter[T]) Emit(batch Batch[T]) error { return e.out.Emit(batch) }

// OpenOn makes b emit on e (BatchBuffer.Open for a typed emitter).
func (b *BatchBuffer[T]) OpenOn(e Emitter[T]) { b.Open(e.out) }

// SourceSubtask is one subtask of a source of T records: what a source
// connector implements. Its methods are called from one goroutine. It may
// also implement PositionedAt and CompletionNotified.
type SourceSubtask[T any] interface {
	// Open prepares the subtask. ctx.Restored.Inline holds the replay
	// position saved at the restored checkpoint; start from it, or from the
	// beginning when ctx.Restored is nil. Records go to out: ctx.Output is
	// nil for a typed source (side outputs stay on ctx.SideOutput).
	Open(ctx *Context, out Emitter[T]) error
	// Read emits the next records to out. It should return promptly (a batch
	// at a time) so barriers are not delayed.
	Read() (ReadResult, error)
	// Position returns the replay position after the last record emitted; it
	// is called at a barrier and stored with the checkpoint.
	Position() ([]byte, error)
	// Close releases resources.
	Close() error
}

// EraseSource returns s as the untyped Source the runtime runs.
func EraseSource[T any](s SourceSubtask[T]) Source { return &erasedSource[T]{s: s} }

// erasedSource runs a SourceSubtask[T] as a Source. It implements the
// optional source interfaces by forwarding to s when s has them.
type erasedSource[T any] struct{ s SourceSubtask[T] }

func (e *erasedSource[T]) Open(ctx *Context) error {
	out := EmitTo[T](ctx.Output)
	typed := *ctx
	typed.Output = nil
	return e.s.Open(&typed, out)
}

func (e *erasedSource[T]) Read() (ReadResult, error) { return e.s.Read() }
func (e *erasedSource[T]) Position() ([]byte, error) { return e.s.Position() }
func (e *erasedSource[T]) Close() error              { return e.s.Close() }
func (e *erasedSource[T]) PositionAt(id int64) ([]byte, error) {
	if pa, ok := e.s.(PositionedAt); ok {
		return pa.PositionAt(id)
	}
	return e.s.Position()
}
func (e *erasedSource[T]) NotifyComplete(id int64) error {
	if n, ok := e.s.(CompletionNotified); ok {
		return n.NotifyComplete(id)
	}
	return nil
}

// Unerase returns the connector's subtask behind s: the SourceSubtask that
// EraseSource wrapped, or s itself. It is how a builder reaches a typed
// subtask's optional interfaces (stream.BadRecordReader) on a plan's node.
func Unerase(s Source) any {
	if u, ok := s.(interface{ unerase() any }); ok {
		return u.unerase()
	}
	return s
}

func (e *erasedSource[T]) unerase() any { return e.s }

// SinkSubtask is one subtask of a sink of T records: what a sink connector
// implements. Its methods are called from one goroutine, in the order of
// Operator's. It may also be a BorrowingSink.
type SinkSubtask[T any] interface {
	// Open prepares the subtask.
	Open(ctx *Context) error
	// Write handles a batch. The batch is read-only.
	Write(batch Batch[T]) error
	// ProcessWatermark is called when the watermark advances to wm.
	ProcessWatermark(wm int64) error
	// Snapshot stages (prepares) everything written since the previous
	// barrier and returns the committables, as Operator.Snapshot.
	Snapshot(id int64) (Snapshot, error)
	// NotifyComplete tells the subtask checkpoint id is complete.
	NotifyComplete(id int64) error
	// Close releases resources; it is also called after a failure.
	Close() error
}

// BorrowingSink is a SinkSubtask that keeps BatchBorrower's promise: Write
// is done with its batch when it returns.
type BorrowingSink interface {
	// BorrowsBatches does nothing: implementing it is the promise.
	BorrowsBatches()
}

// EraseSink returns s as the untyped Operator the runtime runs. A batch of
// another type than Batch[T] is a TypeMismatchError.
func EraseSink[T any](s SinkSubtask[T]) Operator {
	if _, ok := s.(BorrowingSink); ok {
		return &borrowingSink[T]{erasedSink[T]{s: s}}
	}
	return &erasedSink[T]{s: s}
}

// erasedSink runs a SinkSubtask[T] as an Operator.
type erasedSink[T any] struct{ s SinkSubtask[T] }

// borrowingSink is an erasedSink whose subtask borrows batches.
type borrowingSink[T any] struct{ erasedSink[T] }

// BorrowsBatches implements BatchBorrower: the subtask promised it.
func (*borrowingSink[T]) BorrowsBatches() {}

func (e *erasedSink[T]) Open(ctx *Context) error { return e.s.Open(ctx) }
func (e *erasedSink[T]) ProcessBatch(_ int, r Records) error {
	b, err := BatchOf[T](r)
	if err != nil {
		return err
	}
	return e.s.Write(b)
}
func (e *erasedSink[T]) ProcessWatermark(wm int64) error     { return e.s.ProcessWatermark(wm) }
func (e *erasedSink[T]) Snapshot(id int64) (Snapshot, error) { return e.s.Snapshot(id) }
func (e *erasedSink[T]) NotifyComplete(id int64) error       { return e.s.NotifyComplete(id) }
func (e *erasedSink[T]) Close() error                        { return e.s.Close() }

// BatchOf asserts a batch handed to an operator back to Batch[T], T being the
// operator's input type. A batch of another type means the graph connected a
// stream to an operator that reads another type (a wrong type argument to
// stream.Add or stream.SideOutput): a TypeMismatchError.
func BatchOf[T any](r Records) (Batch[T], error) {
	if b, ok := r.(Batch[T]); ok {
		return b, nil
	}
	return nil, &TypeMismatchError{Want: reflect.TypeFor[Batch[T]]().String(), Got: typeName(r)}
}

func typeName(r Records) string {
	if r == nil {
		return "nil"
	}
	return reflect.TypeOf(r).String()
}

// TypeMismatchError says a subtask received batches of another record type
// than it reads. It wraps ErrUnrecoverable: a restart replays the same
// graph, so Run returns it at once instead of restarting.
type TypeMismatchError struct {
	// Want is the batch type the subtask reads; Got the one it received.
	Want, Got string
	// Subtask names the receiving subtask when the error passed up a chain
	// of operators (the chain's head names itself); else "".
	Subtask string
}

// Error names both types.
func (e *TypeMismatchError) Error() string {
	who := "the subtask"
	if e.Subtask != "" {
		who = "subtask " + e.Subtask
	}
	return fmt.Sprintf("record types do not match: %s reads %s but its input carries %s "+
		"(a stream was connected to an operator of another record type: check the type arguments of stream.Add and stream.SideOutput)", who, e.Want, e.Got)
}

// Unwrap returns ErrUnrecoverable.
func (e *TypeMismatchError) Unwrap() error { return ErrUnrecoverable }
