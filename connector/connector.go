// Package connector is the contract between the engine and its connectors:
// everything a source or sink may declare, in this one file. A connector
// implements Source or Sink; what it can do toward delivery guarantees, how
// far it can be parallelised and whether its positions can be redistributed
// it declares in its Descriptor, not through methods the engine would look
// for. The optional interfaces below are the only other ones the engine asks
// for, each by name, with its contract.
//
// The subpackages are the built-in connectors (datagen, file, kafka, nats,
// postgres, stdout); docs/connectors.md walks through writing one.
package connector

import (
	"fmt"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// Descriptor is what a connector declares about itself.
type Descriptor struct {
	// Type is the connector's type name, as in YAML's `type:` ("kafka",
	// "file"); plans, metrics and errors show it.
	Type string
	// Capabilities decide the connector's delivery guarantee: a source is
	// exactly-once when Replayable, a sink when Transactional (see
	// runtime.Capabilities). The pipeline's guarantee is the weakest of its
	// connectors'.
	Capabilities runtime.Capabilities
	// MaxParallelism caps the node's subtasks (not the number of key
	// groups, runtime.Context.MaxParallelism); 0 means no cap. A NATS
	// JetStream stream is one ordered sequence, read by one subtask. A node
	// without a parallelism of its own (Go API: no stream.Parallelism
	// option; YAML: no parallelism field) gets the cap when the pipeline's
	// default is larger; a larger explicit parallelism is a plan error that
	// gives MaxParallelismReason.
	MaxParallelism int
	// MaxParallelismReason says why MaxParallelism is what it is, and what
	// to do instead.
	MaxParallelismReason string
	// RescalablePositions says a source's positions can be redistributed
	// when the pipeline restarts at another parallelism: each subtask then
	// gets every old subtask's position (runtime.Context.RestoredUnion) and
	// takes its share (runtime.Node.RescalableInline).
	RescalablePositions bool
}

// Validate checks that the descriptor makes sense for a source (sink false)
// or a sink.
func (d Descriptor) Validate(sink bool) error {
	switch {
	case d.MaxParallelism < 0:
		return fmt.Errorf("max parallelism %d is negative", d.MaxParallelism)
	case sink && d.Capabilities.Replayable:
		return fmt.Errorf("a sink is not replayable")
	case !sink && (d.Capabilities.Transactional || d.Capabilities.Idempotent || d.Capabilities.CommitScope != runtime.ScopeNone):
		return fmt.Errorf("a source is neither transactional nor idempotent and has no commit scope")
	case sink && d.RescalablePositions:
		return fmt.Errorf("a sink has no positions to rescale")
	case d.Capabilities.CommitScope != runtime.ScopeNone && !d.Capabilities.Transactional:
		return fmt.Errorf("a commit scope needs a transactional sink")
	}
	return nil
}

// Source is a replayable (or not) input of records of type T: the node
// stream.From adds. Its subtasks emit Batch[T] to a runtime.Emitter[T].
type Source[T any] interface {
	// Descriptor declares the source's type, capabilities and limits.
	Descriptor() Descriptor
	// Describe is a one-line description of the configuration for plans;
	// it must not show secrets.
	Describe() string
	// NewSubtask creates one source subtask. It does no I/O: Open does.
	NewSubtask() runtime.SourceSubtask[T]
}

// Sink is an output of records of type T: the node stream.To adds. Its
// subtasks get Batch[T] in Write.
type Sink[T any] interface {
	// Descriptor declares the sink's type, capabilities and limits.
	Descriptor() Descriptor
	// Describe is a one-line description of the configuration for plans.
	Describe() string
	// NewSubtask creates one sink subtask. It does no I/O: Open does.
	NewSubtask() runtime.SinkSubtask[T]
	// Committer returns the committer that publishes what the subtasks
	// staged, for a transactional sink; nil for a sink that writes at once.
	Committer() runtime.Committer
}

// The optional interfaces. Each is asked for by name, where the engine
// needs it.

// CheckpointConfigured is a Sink whose correctness depends on the
// checkpoint timing: a Kafka transaction must outlive the checkpoint
// interval. ConfigureCheckpointing is called before the job runs, with the
// job's checkpoint options; an error stops the job before anything runs.
type CheckpointConfigured interface {
	ConfigureCheckpointing(checkpoint.Options) error
}

// PositionedAt is a source subtask that wants to know which checkpoint a
// position belongs to: PositionAt(id) replaces Position at barrier id.
type PositionedAt = runtime.PositionedAt

// CompletionNotified is a source subtask told when a checkpoint is complete
// (to commit offsets to a broker for monitoring, or advance a replication
// slot): NotifyComplete runs on the subtask's goroutine.
type CompletionNotified = runtime.CompletionNotified

// BorrowingSink is a sink subtask whose Write is done with its batch when
// it returns (it keeps copies, never the batch), so that the emitter may
// reuse one buffer.
type BorrowingSink = runtime.BorrowingSink

// BadRecordReader, a source subtask applying a bad-record policy, is
// stream.BadRecordReader: the policy's types live with the Go API.

// StagingSweeper is a Committer that can delete abandoned staged output
// while the job runs (staged longer than checkpoint.Options.StagingMaxAge
// before a complete checkpoint's trigger), not only at recoveries.
type StagingSweeper = runtime.StagingSweeper

// DestinationClaimer is a Committer whose destination must belong to one
// sink of one pipeline: Claim marks it at job start, and a destination of
// another pipeline or sink stops the job naming its owner.
type DestinationClaimer = runtime.DestinationClaimer

// CommitTracker is a Committer that can tell the newest checkpoint its
// destination published, so that recovery falls back past a damaged
// checkpoint only when that repeats nothing.
type CommitTracker = runtime.CommitTracker
