package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/state"
)

// Output receives the records a source or operator produces. The runtime
// routes them to the next operator of the chain or partitions them onto the
// channels of the outgoing edges. Watermarks and barriers are forwarded by the
// runtime, not through Output.
type Output interface {
	// Emit passes on a batch (a Batch[T], T being the node's output type).
	// The batch belongs to the receiver from then on: the emitter must not
	// read or change it again, and the runtime may hand its memory back to
	// the emitter's BatchBuffer once every receiver is done with it.
	// Unless ReusesBatches(o) is true: the receiver is then done with the
	// batch when Emit returns, and the emitter may overwrite it.
	Emit(records Records) error
}

// BatchBorrower is implemented by operators whose ProcessBatch is done with
// its batch when it returns: it keeps no reference to the batch's memory
// (it may keep copies of records, and their values) and never passes the
// batch itself on to an Output. An emitter whose receiver borrows may reuse
// one buffer for every batch (see ReusesBatches), which spares the garbage
// collector a batch per call.
type BatchBorrower interface {
	Operator
	// BorrowsBatches does nothing: implementing it is the promise above.
	BorrowsBatches()
}

// ReusesBatches reports whether the emitter may overwrite a batch it passed
// to o.Emit once Emit returns: true when every receiver is done with the
// batch by then, that is, when o is the runtime's output of a subtask (from
// Context.Output or Context.SideOutput) whose next operator in the chain is
// a BatchBorrower, or, at the end of a chain, whose out edges all copy
// records into batches of their own (hash partitioning). Forward, rebalance
// and broadcast edges hand the batch itself to other tasks, so it is false
// for them, and for any other Output. The answer is fixed once the job is
// built: ask it in Open.
func ReusesBatches(o Output) bool {
	r, ok := o.(interface{ reusesBatches() bool })
	return ok && r.reusesBatches()
}

// Context is what a source or operator subtask is opened with.
type Context struct {
	// Task names the subtask; Task.Operator is the node id.
	Task checkpoint.TaskID
	// Parallelism is the node's number of subtasks.
	Parallelism int
	// MaxParallelism is the number of key groups.
	MaxParallelism int
	// KeyGroups are the key groups this subtask owns.
	KeyGroups state.KeyGroupRange
	// State is the subtask's keyed state, restored before Open when the job
	// recovers. Register states in Open.
	State *state.Backend
	// Output is where records go.
	Output Output
	// Restored is this subtask's part of the checkpoint the job restored from;
	// nil on a fresh start.
	Restored *checkpoint.SubtaskState
	// RestoredUnion holds the inline state of every subtask of this node in
	// the restored checkpoint, when the node's parallelism changed since and
	// it declares Node.RescalableInline; Restored.Inline is then empty. Each
	// subtask takes its share of the union (a Kafka source: the partitions it
	// now owns). Nil otherwise.
	RestoredUnion [][]byte
	// JobID is stable across restarts of the same job.
	JobID string
	// Attempt counts the job's starts within this process, from 0.
	Attempt int
	// Log is the subtask's logger.
	Log *slog.Logger
	// Clock reads the wall clock for the subtask (Now); nil is time.Now.
	// Tests set it to move time without sleeping.
	Clock func() time.Time
	// CheckpointMode is the job's. Under checkpoint.AtLeastOnce barriers
	// are not aligned, so a restore may replay records whose effects the
	// restored state already holds.
	CheckpointMode checkpoint.Mode

	// sides are the connected side outputs, by name.
	sides map[string]Output
	// late counts the node's dropped late records (DroppedLate): shared by
	// the node's subtasks and kept across attempts; nil until the first
	// drop when the runtime did not build the context.
	late *lateRecords
}

// SideOutput returns the output for the node's side output name (declared in
// Node.SideOutputs), or nil when no edge consumes it: the operator then
// counts what it would have written there as dropped.
func (c *Context) SideOutput(name string) Output {
	if o, ok := c.sides[name]; ok {
		return o
	}
	return nil
}

// Watermark returns the restored watermark, MinWatermark on a fresh start.
func (c *Context) Watermark() int64 {
	if c.Restored == nil {
		return MinWatermark
	}
	return c.Restored.Watermark
}

// Snapshot is an operator's non-keyed state at a barrier, captured
// synchronously. Keyed state is captured by the runtime from Context.State.
type Snapshot struct {
	// Inline is small operator state stored in the checkpoint metadata
	// (a source's replay position).
	Inline []byte
	// Committables is the staged, not yet committed output of a sink.
	Committables []checkpoint.Committable
}

// Operator transforms records. A subtask's methods are called from one
// goroutine.
type Operator interface {
	// Open prepares the subtask; it registers keyed state and timers.
	Open(ctx *Context) error
	// ProcessBatch handles a batch (a Batch[T]) from logical input input.
	// The batch is read-only.
	ProcessBatch(input int, records Records) error
	// ProcessWatermark is called when the minimum watermark over all inputs
	// advances to wm; the operator fires timers and emits their output. The
	// runtime forwards wm downstream after it returns.
	ProcessWatermark(wm int64) error
	// Snapshot captures non-keyed state at barrier id, on the task goroutine.
	// A transactional sink stages (prepares) everything written since its
	// previous barrier here and returns the committables: every one not yet
	// known committed (see checkpoint.Committable).
	//
	// INVARIANT: the runtime captures the subtask's keyed state
	// (Context.State.Snapshot) right after Snapshot returns, on the same
	// goroutine, with no record, watermark or timer in between. Operators
	// that mutate values in place rely on this order to know which values a
	// checkpoint can still see (operator/window's mutable accumulators).
	Snapshot(id int64) (Snapshot, error)
	// NotifyComplete tells the subtask checkpoint id is complete.
	NotifyComplete(id int64) error
	// Close releases resources. It is called when the subtask ends, also after
	// a failure.
	Close() error
}

// ReadResult is what a Source reports after a Read.
type ReadResult struct {
	// Watermark is the source subtask's watermark after this read;
	// MinWatermark when it has none yet.
	Watermark int64
	// Wait asks the runtime to call Read again no earlier than after Wait
	// (rate limits, or nothing available yet). Control events are still
	// served while waiting.
	Wait time.Duration
	// Exhausted is set when the input has ended: the runtime emits
	// MaxWatermark and then only waits for the final checkpoint.
	Exhausted bool
	// Idle says the subtask has no data for now (every split it reads is
	// idle, or it has no split): downstream watermarks advance without it
	// until it reports records or Idle false again. Records it emits later
	// may then be late.
	Idle bool
}

// InputLeader is implemented by an operator of several inputs that keeps
// less state when one of them runs ahead of the others in event time: a
// join whose left records are unique by key keeps no right record that
// finds its left one, and keeps every right record that comes first. While
// records wait on channels of both kinds, the task reads those of input
// Lead first as long as its watermark is at most By ahead of the others',
// and the others' first beyond that. It orders reads of records that are
// already waiting only, and reads another input's waiting message at least
// once every 16 reads: it never holds an input back, nor stalls one whose
// records are the only ones there.
type InputLeader interface {
	Operator
	InputLead() (input int, by time.Duration)
}

// ProcessingTimer is implemented by operators with processing-time timers.
// The runtime calls OnProcessingTime on the task goroutine, between batches,
// once the wall clock reaches NextProcessingTime.
type ProcessingTimer interface {
	// NextProcessingTime returns the earliest pending processing-time timer
	// in Unix nanoseconds; ok is false when none is pending. It is asked
	// after every call into the operator, so it must be cheap.
	NextProcessingTime() (t int64, ok bool)
	// OnProcessingTime fires the timers due at now (Unix nanoseconds), in
	// time order, and emits their output.
	OnProcessingTime(now int64) error
}

// Source reads a replayable input. A subtask's methods are called from one
// goroutine.
type Source interface {
	// Open prepares the subtask. ctx.Restored.Inline holds the replay position
	// saved at the restored checkpoint; start from it, or from the beginning
	// when ctx.Restored is nil.
	Open(ctx *Context) error
	// Read emits the next records to ctx.Output. It should return promptly
	// (a batch at a time) so barriers are not delayed.
	Read() (ReadResult, error)
	// Position returns the replay position after the last record emitted; it
	// is called at a barrier and stored with the checkpoint.
	Position() ([]byte, error)
	// Close releases resources.
	Close() error
}

// PositionedAt is implemented by sources that want to know which checkpoint
// a position belongs to; the runtime then calls PositionAt(id) at barrier id
// instead of Position.
type PositionedAt interface {
	PositionAt(id int64) ([]byte, error)
}

// CompletionNotified is implemented by sources that act when a checkpoint
// completes (commit offsets to a broker for monitoring, for example);
// NotifyComplete is called on the source's goroutine as for operators.
type CompletionNotified interface {
	NotifyComplete(id int64) error
}

// Committer publishes a transactional sink's staged output. There is one per
// sink node; the job calls it from one goroutine, after the checkpoint whose
// commit it publishes is durable.
type Committer interface {
	// Commit publishes c atomically. It must be idempotent: output already
	// published is recognised and not published again.
	Commit(ctx context.Context, jobID string, c checkpoint.Commit) error
	// Abandon deletes staged output that no checkpoint will publish. It runs at
	// job start, after the recovery point's commits were published and before
	// any subtask runs, and returns how many staged items it deleted.
	Abandon(ctx context.Context, jobID string) (int, error)
}

// StagingSweeper is implemented by committers that can delete abandoned
// staged output while the job runs, not only at recoveries (Abandon).
type StagingSweeper interface {
	// Sweep deletes the sink's staged output that no checkpoint will publish
	// and that was last written before before, and returns how many staged
	// items it deleted. The job calls it on the committer's goroutine (never
	// concurrently with Commit or Abandon) after a complete checkpoint's
	// output was published, with before at or earlier than that
	// checkpoint's trigger time (checkpoint.Options.StagingMaxAge): every
	// running subtask has since passed that checkpoint's barrier, so all it
	// staged before the trigger was published with it. It runs while the
	// sink's subtasks stage new output, which it must not touch; an
	// implementation may keep more than it could delete.
	Sweep(ctx context.Context, jobID string, before time.Time) (int, error)
}

// CommitTracker is implemented by committers that can tell how far their
// sink's published output goes. Recovery asks it before it falls back from a
// damaged checkpoint N to an older complete checkpoint M: the fallback
// replays the records after M, so it is exactly-once only if no sink
// published output of a checkpoint after M (it would publish it again).
type CommitTracker interface {
	// LastCommitted returns the newest checkpoint whose output the sink
	// (node id sink) published for job jobID, 0 if none. A sink that knows
	// the checkpoint its published output was prepared at may return that
	// instead of the one that published it: a committable prepared at P is
	// published by the first complete checkpoint Q >= P, so P > M exactly
	// when Q > M. It returns an error wrapping ErrCommitUnknown when it
	// cannot tell (recovery then treats the sink as having published), and
	// other errors for failures a retry may cure.
	LastCommitted(ctx context.Context, jobID, sink string) (int64, error)
}

// ErrCommitUnknown marks a CommitTracker that cannot tell which checkpoint
// its sink published last.
var ErrCommitUnknown = errors.New("the last published checkpoint cannot be told")

// Guarantee is the delivery guarantee a connector offers on its own.
type Guarantee int

const (
	// ExactlyOnce: replayable source, or a sink with checkpoint-aligned atomic commits.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce: a sink that writes at once and may repeat output after a recovery.
	AtLeastOnce
	// NoGuarantee: a source that cannot replay; records in flight are lost on failure.
	NoGuarantee
)

// String names the guarantee.
func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return "none"
}
