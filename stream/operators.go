package stream

import (
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Stateless is the base of operators that keep no state: every method but
// ProcessBatch does nothing. Embed it and set Out in Open.
type Stateless struct {
	// Out is where the operator emits; set by Open.
	Out runtime.Output
}

// Open keeps the output.
func (s *Stateless) Open(ctx *runtime.Context) error { s.Out = ctx.Output; return nil }

// ProcessWatermark does nothing; the runtime forwards watermarks.
func (s *Stateless) ProcessWatermark(int64) error { return nil }

// Snapshot has nothing to capture.
func (s *Stateless) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }

// NotifyComplete does nothing.
func (s *Stateless) NotifyComplete(int64) error { return nil }

// Close does nothing.
func (s *Stateless) Close() error { return nil }

// mapOp applies f to every record.
type mapOp[T, U any] struct {
	Stateless
	f   func(T) U
	buf runtime.BatchBuffer[U]
}

// Open keeps the output and decides whether to reuse one output batch.
func (m *mapOp[T, U]) Open(ctx *runtime.Context) error {
	m.buf.Open(ctx.Output)
	return m.Stateless.Open(ctx)
}

// BorrowsBatches implements runtime.BatchBorrower: the input is read, not
// kept.
func (*mapOp[T, U]) BorrowsBatches() {}

func (m *mapOp[T, U]) ProcessBatch(_ int, r runtime.Records) error {
	in, err := runtime.BatchOf[T](r)
	if err != nil {
		return err
	}
	out := m.buf.Get(len(in))[:len(in)]
	for i, rec := range in {
		out[i] = Record[U]{Value: m.f(rec.Value), Time: rec.Time}
	}
	return m.buf.Emit(out)
}

// Map returns the stream of f applied to every record of s; event times are
// kept.
func Map[T, U any](s Stream[T], id string, f func(T) U, opts ...NodeOption) Stream[U] {
	n := &runtime.Node{ID: id, NewOperator: func() runtime.Operator { return &mapOp[T, U]{f: f} }, Describe: "map"}
	return Add[T, U](s, n, opts...)
}

// filterOp keeps the records f accepts.
type filterOp[T any] struct {
	Stateless
	f   func(T) bool
	buf runtime.BatchBuffer[T]
}

// Open keeps the output and decides whether to reuse one output batch.
func (o *filterOp[T]) Open(ctx *runtime.Context) error {
	o.buf.Open(ctx.Output)
	return o.Stateless.Open(ctx)
}

// BorrowsBatches implements runtime.BatchBorrower: kept records are copied.
func (*filterOp[T]) BorrowsBatches() {}

func (o *filterOp[T]) ProcessBatch(_ int, r runtime.Records) error {
	in, err := runtime.BatchOf[T](r)
	if err != nil {
		return err
	}
	out := o.buf.Get(len(in))
	for _, rec := range in {
		if o.f(rec.Value) {
			out = append(out, rec)
		}
	}
	return o.buf.Emit(out)
}

// Filter returns the records of s for which f is true.
func Filter[T any](s Stream[T], id string, f func(T) bool, opts ...NodeOption) Stream[T] {
	n := &runtime.Node{ID: id, NewOperator: func() runtime.Operator { return &filterOp[T]{f: f} }, Describe: "filter"}
	return Add[T, T](s, n, opts...)
}

// discard is a sink that drops everything: for benchmarks and tests.
type discard[T any] struct{}

func (discard[T]) NewSubtask() runtime.SinkSubtask[T] {
	return &discardOp[T]{}
}
func (discard[T]) Committer() runtime.Committer { return nil }
func (discard[T]) Describe() string             { return "discard" }

// Descriptor: nothing is ever visible, so no output is ever repeated:
// trivially exactly-once (declared transactional, with nothing to commit).
func (discard[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "discard", Capabilities: runtime.Capabilities{Transactional: true}}
}

type discardOp[T any] struct{ Stateless }

// BorrowsBatches implements runtime.BorrowingSink.
func (*discardOp[T]) BorrowsBatches() {}

func (*discardOp[T]) Write(Batch[T]) error { return nil }

// Discard is a sink that drops every record (benchmarks, tests). It is
// trivially exactly-once: nothing is visible.
func Discard[T any]() Sink[T] { return discard[T]{} }

// BlackholeSpec is the YAML specification of `type: blackhole`: a Discard
// sink (RisingWave's and Flink's blackhole connector), for benchmarks.
var BlackholeSpec = connector.Spec{
	Role:    connector.RoleSink,
	Type:    "blackhole",
	Summary: "Drops every record (benchmarks: what the pipeline costs without writing anything). Nothing is visible, so it is trivially exactly-once.",
	Example: "type: blackhole\ninput: events\n",
}

func init() { connector.Register(BlackholeSpec) }
