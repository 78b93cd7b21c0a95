// Package stream is the Go API of Ingest Engine: typed, generic builders for
// a pipeline graph that the runtime executes with coordinated checkpoints.
//
//	p := stream.New("clicks")
//	src, err := datagen.Events(datagen.Config{Count: 3000, Keys: 10})
//	events := stream.From(p, "events", src, stream.Parallelism(2)) // a Stream[datagen.Event]
//	byKey := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
//	perKey := window.Tumbling(byKey, "per_key", time.Second, count, toPerKey)
//	stream.To(perKey, "out", file.JSONLines[PerKey]("out"))
//	err = p.Run(ctx, stream.RunOptions{CheckpointDir: "checkpoints"})
//
// (the whole program is the package's Example, which the tests run).
// A Stream[T] carries records of type T with event times. Operators on a
// keyed stream see every record of a key in the same subtask, next to that
// key's state.
package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// Record is one element of a stream: a value and its event time in Unix
// nanoseconds.
type Record[T any] = runtime.Record[T]

// Batch is a slice of records handed from one operator to the next.
type Batch[T any] = runtime.Batch[T]

// Pipeline collects the nodes of a graph. Builder errors are collected and
// reported by Plan and Run, so a pipeline is written without error checks
// between the steps.
type Pipeline struct {
	plan        runtime.Plan
	parallelism int
	errs        []error
	// checks are the sinks' checks of the checkpoint options, run by NewJob.
	checks []func(checkpoint.Options) error
	// badRecords are the bad-record counts of the sources with a policy, by
	// node id (OnBadRecords).
	badRecords map[string]*BadRecordCounts
}

// Option configures a Pipeline.
type Option func(*Pipeline)

// DefaultParallelism sets the parallelism of nodes that do not set their own.
// The default value is 1.
func DefaultParallelism(n int) Option { return func(p *Pipeline) { p.parallelism = n } }

// MaxParallelism sets the number of key groups keyed state is split into, the
// upper bound of any node's parallelism and of later rescaling.
// The default value is 128.
func MaxParallelism(n int) Option { return func(p *Pipeline) { p.plan.MaxParallelism = n } }

// New starts a pipeline named name; the name is written into its checkpoints.
func New(name string, opts ...Option) *Pipeline {
	p := &Pipeline{plan: runtime.Plan{Name: name, MaxParallelism: state.DefaultMaxParallelism}, parallelism: 1}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name returns the pipeline's name.
func (p *Pipeline) Name() string { return p.plan.Name }

// Errorf records a builder error; Plan and Run report it.
func (p *Pipeline) Errorf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// Plan validates the graph and returns it.
func (p *Pipeline) Plan() (*runtime.Plan, error) {
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	if err := p.plan.Validate(); err != nil {
		return nil, err
	}
	if err := p.checkDeadLetters(); err != nil {
		return nil, err
	}
	return &p.plan, nil
}

// Delivery returns the effective delivery guarantee of the pipeline under
// checkpoint mode, with the reasons that weaken it (see runtime.Plan.Delivery).
func (p *Pipeline) Delivery(mode checkpoint.Mode) runtime.Delivery {
	return p.plan.Delivery(mode)
}

// Guarantee is Delivery in the terms of runtime.Guarantee, for callers that
// print one line: an at-most-once pipeline is NoGuarantee, and why joins the
// reasons that weaken it ("" at exactly-once).
func (p *Pipeline) Guarantee(mode checkpoint.Mode) (runtime.Guarantee, string) {
	d := p.Delivery(mode)
	g := runtime.NoGuarantee
	switch d.Level {
	case runtime.DeliveryExactlyOnce:
		g = runtime.ExactlyOnce
	case runtime.DeliveryAtLeastOnce:
		g = runtime.AtLeastOnce
	}
	var why []string
	for _, r := range d.Reasons {
		if !r.Caveat {
			why = append(why, r.Msg)
		}
	}
	return g, strings.Join(why, "; ")
}

// RunOptions configures Run.
type RunOptions struct {
	// Checkpoint configures checkpointing. The zero value means
	// checkpoint.DefaultOptions().
	Checkpoint checkpoint.Options
	// CheckpointDir is the directory of local checkpoint storage, used when
	// Storage is nil.
	CheckpointDir string
	// Storage keeps checkpoints; it overrides CheckpointDir.
	Storage storage.Storage
	// Restart is the restart strategy. The zero value means
	// runtime.DefaultRestartOptions().
	Restart runtime.RestartOptions
	// Log receives the job's log; nil discards it.
	Log *slog.Logger
	// AllowDuplicates, AllowNonRestoredState and AcceptLostOutput are the
	// recovery permissions of runtime.Options (ingest run --allow-duplicates,
	// --allow-non-restored-state, --accept-lost-output).
	AllowDuplicates, AllowNonRestoredState, AcceptLostOutput bool
	// Clock is the job's clock (runtime.Options.Clock); nil is the wall
	// clock.
	Clock clock.Clock
	// LSM keeps keyed state in Pebble stores on local disk, for state
	// larger than memory (runtime.Options.LSM); nil keeps it in memory.
	LSM *state.LSMOptions
}

// NewJob plans the pipeline and returns a job ready to Run.
func (p *Pipeline) NewJob(o RunOptions) (*runtime.Job, error) {
	plan, err := p.Plan()
	if err != nil {
		return nil, err
	}
	if o.Checkpoint == (checkpoint.Options{}) {
		o.Checkpoint = checkpoint.DefaultOptions()
	}
	if o.Restart == (runtime.RestartOptions{}) {
		o.Restart = runtime.DefaultRestartOptions()
	}
	// Sinks whose correctness depends on the checkpoint timing (a Kafka
	// transaction must outlive a checkpoint) check it before anything runs.
	var errs []error
	for _, check := range p.checks {
		errs = append(errs, check(o.Checkpoint))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	st := o.Storage
	if st == nil {
		if o.CheckpointDir == "" {
			return nil, errors.New("run options: set CheckpointDir or Storage")
		}
		if st, err = storage.NewLocal(o.CheckpointDir); err != nil {
			return nil, err
		}
	}
	return runtime.NewJob(plan, runtime.Options{Checkpoint: o.Checkpoint, Storage: st, Restart: o.Restart, Log: o.Log,
		AllowDuplicates: o.AllowDuplicates, AllowNonRestoredState: o.AllowNonRestoredState, AcceptLostOutput: o.AcceptLostOutput, Clock: o.Clock, LSM: o.LSM})
}

// Run plans and runs the pipeline until it finishes, ctx is cancelled or
// restarts are exhausted.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) error {
	job, err := p.NewJob(o)
	if err != nil {
		return err
	}
	return job.Run(ctx)
}

// NodeOption configures one node.
type NodeOption func(*runtime.Node)

// Parallelism sets a node's number of subtasks.
func Parallelism(n int) NodeOption { return func(nd *runtime.Node) { nd.Parallelism = n } }

// Stream is a typed stream of records produced by one node.
type Stream[T any] struct {
	p    *Pipeline
	node *runtime.Node
	// part is the partitioner of the next edge; nil chooses forward or rebalance.
	part runtime.Partitioner
	// output is the node's side output the stream is; "" for the main output.
	output string
}

// SideOutput returns side output name of the node producing s as a stream of
// T, to connect downstream like any stream. The operator must declare name in
// its node's SideOutputs and write Batch[T] to it.
func SideOutput[T, U any](s Stream[U], name string) Stream[T] {
	if !slices.Contains(s.node.SideOutputs, name) {
		s.p.Errorf("side output %q of %s: the node declares side outputs %q", name, s.node.ID, s.node.SideOutputs)
	}
	return Stream[T]{p: s.p, node: s.node, output: name}
}

// Pipeline returns the pipeline the stream belongs to.
func (s Stream[T]) Pipeline() *Pipeline { return s.p }

// Node returns the node producing the stream.
func (s Stream[T]) Node() *runtime.Node { return s.node }

// KeyedStream is a stream partitioned by a key: every record of one key goes
// to the same subtask of the next operator.
type KeyedStream[T any, K comparable] struct {
	Stream[T]
	// Key extracts the key of a record.
	Key func(T) K
	// KeyCodec encodes keys in state snapshots.
	KeyCodec state.Codec[K]
}

// Source is a typed source: its subtasks emit Batch[T], so that From infers
// T from it and a source of another type does not compile. The contract,
// with the Descriptor it declares, is connector.Source.
type Source[T any] = connector.Source[T]

// Sink is a typed sink: its subtasks write Batch[T], and To accepts only a
// stream of T. The contract is connector.Sink.
type Sink[T any] = connector.Sink[T]

// From adds a source node. T is inferred from src: stream.From(p, "events", src).
// The node's guarantee, type and rescaling follow src's Descriptor; its
// parallelism is the pipeline's default, capped at the descriptor's
// MaxParallelism, and an option setting more is a plan error.
func From[T any](p *Pipeline, id string, src Source[T], opts ...NodeOption) Stream[T] {
	d := src.Descriptor()
	newSubtask := func() runtime.Source { return runtime.EraseSource(src.NewSubtask()) }
	n := &runtime.Node{ID: id, Parallelism: p.parallelism, NewSource: newSubtask, Guarantee: d.Capabilities.SourceGuarantee(),
		Describe: src.Describe(), RescalableInline: d.RescalablePositions}
	p.declare("source", d, n, func() {
		for _, o := range opts {
			o(n)
		}
	})
	p.plan.Nodes = append(p.plan.Nodes, n)
	return Stream[T]{p: p, node: n}
}

// To adds a sink node consuming s. Its guarantee and type follow sink's
// Descriptor; a connector.CheckpointConfigured sink checks the checkpoint
// options when the job is made.
func To[T any](s Stream[T], id string, sink Sink[T], opts ...NodeOption) {
	d := sink.Descriptor()
	newSubtask := func() runtime.Operator { return runtime.EraseSink(sink.NewSubtask()) }
	n := &runtime.Node{ID: id, Parallelism: s.p.parallelism, NewOperator: newSubtask, Committer: sink.Committer(),
		Guarantee: d.Capabilities.SinkGuarantee(), Describe: sink.Describe()}
	if c, ok := sink.(connector.CheckpointConfigured); ok {
		s.p.checks = append(s.p.checks, func(o checkpoint.Options) error {
			if err := c.ConfigureCheckpointing(o); err != nil {
				return fmt.Errorf("sink %s: %w", id, err)
			}
			return nil
		})
	}
	s.p.declare("sink", d, n, func() { Connect(s, n, 0, opts...) })
}

// declare gives connector node n (kind "source" or "sink") what its
// descriptor d says: it validates d, sets the node's capabilities and type,
// caps its default parallelism at d's maximum, lets add apply the node's
// options, and refuses a larger explicit parallelism.
func (p *Pipeline) declare(kind string, d connector.Descriptor, n *runtime.Node, add func()) {
	if err := d.Validate(kind == "sink"); err != nil {
		p.Errorf("%s %s: the %s connector's descriptor: %w", kind, n.ID, orUnknown(d.Type), err)
	}
	caps := d.Capabilities
	n.Capabilities, n.Type = &caps, d.Type
	if d.MaxParallelism > 0 {
		n.Parallelism = min(n.Parallelism, d.MaxParallelism)
	}
	add()
	if d.MaxParallelism > 0 && n.Parallelism > d.MaxParallelism {
		p.Errorf("%s %s %s: parallelism %d, at most %d: %s", orUnknown(d.Type), kind, n.ID, n.Parallelism, d.MaxParallelism, d.MaxParallelismReason)
	}
}

// Connect adds node n (an operator) with s feeding its logical input input,
// applies opts and picks the edge's partitioner: the stream's (hash after
// KeyBy), else forward when parallelisms match, else rebalance. It is the
// building block for operator packages.
func Connect[T any](s Stream[T], n *runtime.Node, input int, opts ...NodeOption) {
	for _, o := range opts {
		o(n)
	}
	if n.Parallelism == 0 {
		n.Parallelism = s.p.parallelism
	}
	part := s.part
	if part == nil {
		part = runtime.Forward()
		if s.node.Parallelism != n.Parallelism {
			part = runtime.Rebalance()
		}
	}
	n.Inputs = append(n.Inputs, runtime.Edge{From: s.node, Input: input, Partitioner: part, Output: s.output})
	if len(n.Inputs) == 1 {
		s.p.plan.Nodes = append(s.p.plan.Nodes, n)
	}
}

// Add adds operator node n fed by s and returns its output stream of type U.
func Add[T, U any](s Stream[T], n *runtime.Node, opts ...NodeOption) Stream[U] {
	Connect(s, n, 0, opts...)
	return Stream[U]{p: s.p, node: n}
}

// Rebalance spreads the stream's batches round-robin over the next
// operator's subtasks.
func (s Stream[T]) Rebalance() Stream[T] { s.part = runtime.Rebalance(); return s }

// Broadcast sends every record to every subtask of the next operator.
func (s Stream[T]) Broadcast() Stream[T] { s.part = runtime.Broadcast(); return s }

// KeyBy partitions s by key. Supported key types are strings, integers,
// floats, bools and types with a `HashKey() uint64` method; keys are encoded
// in state with a built-in codec for the basic types and JSON otherwise.
func KeyBy[T any, K comparable](s Stream[T], key func(T) K) KeyedStream[T, K] {
	hash, err := state.Hasher[K]()
	if err != nil {
		s.p.Errorf("key by after %s: %w", s.node.ID, err)
		hash = func(K) uint64 { return 0 }
	}
	s.part = runtime.Hash(func(v T) uint64 { return hash(key(v)) })
	return KeyedStream[T, K]{Stream: s, Key: key, KeyCodec: CodecFor[K]()}
}

// CodecFor returns the built-in state codec for K: binary for strings,
// integers, floats and bools, JSON otherwise.
func CodecFor[K any]() state.Codec[K] {
	var zero K
	var c any
	switch any(zero).(type) {
	case string:
		c = state.StringCodec{}
	case int64:
		c = state.Int64Codec{}
	case float64:
		c = state.Float64Codec{}
	case bool:
		c = state.BoolCodec{}
	}
	if typed, ok := c.(state.Codec[K]); ok {
		return typed
	}
	return state.JSONCodec[K]()
}
