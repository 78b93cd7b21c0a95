package checkpoint

import "time"

// Event is an input to Coordinator.Step. Each event is something that
// happened outside the coordinator: time passed, a subtask answered, storage
// or a sink finished work the coordinator asked for.
type Event interface{ isEvent() }

// Tick tells the coordinator that time has passed. Every Step checks
// timeouts and triggers with the time it is given; Tick is the event that
// carries nothing else.
type Tick struct{}

// RequestFinal asks for a final checkpoint: every source has stopped (input
// exhausted, or a stop was requested), so the next checkpoint's commit is the
// last output of the job. It is triggered as soon as concurrency allows,
// ignoring the interval and min pause, and retried until it completes.
type RequestFinal struct{}

// Acked reports that a subtask finished its part of checkpoint ID: its
// snapshot is written and State describes it.
type Acked struct {
	ID    int64
	State SubtaskState
}

// Declined reports that a subtask could not take part in checkpoint ID (its
// snapshot failed, or a newer barrier overtook an alignment). The checkpoint
// fails; the job keeps running.
type Declined struct {
	ID     int64
	Task   TaskID
	Reason error
}

// TaskFailed reports that a subtask failed: the job is going down and will
// be restarted from the last complete checkpoint. The coordinator abandons
// every checkpoint still collecting acknowledgements and stops triggering.
type TaskFailed struct {
	Task TaskID
	Err  error
}

// MetadataWritten reports the result of a WriteMetadata action. Err nil means
// the metadata is durable under its final name: the checkpoint is complete.
type MetadataWritten struct {
	ID  int64
	Err error
}

// Committed reports the result of a Commit action.
type Committed struct {
	ID  int64
	Err error
}

// LedgerWritten reports the result of a WriteLedger action, with the
// action's fields. Err nil means the ledger durably records them.
type LedgerWritten struct {
	Reserved int64
	Failed   []int64
	Err      error
}

func (Tick) isEvent()            {}
func (LedgerWritten) isEvent()   {}
func (RequestFinal) isEvent()    {}
func (Acked) isEvent()           {}
func (Declined) isEvent()        {}
func (TaskFailed) isEvent()      {}
func (MetadataWritten) isEvent() {}
func (Committed) isEvent()       {}

// Action is an output of Coordinator.Step: work the caller must do. Each
// action's doc comment states the caller's obligations.
type Action interface{ isAction() }

// Trigger starts checkpoint ID. The caller must make every source subtask
// record its replay position and emit barrier ID after the records that
// belong to the checkpoint. Final marks the job's last checkpoint: sources
// have stopped and emit nothing after the barrier.
type Trigger struct {
	ID        int64
	Timestamp time.Time
	Final     bool
}

// WriteMetadata asks the caller to make Metadata.ID complete: write the
// metadata durably and atomically (temp file, fsync, rename, fsync directory,
// or a conditional put), then report MetadataWritten. Nothing may treat the
// checkpoint as complete before the write returned successfully. The caller
// bounds the write by the checkpoint's deadline (Metadata.TriggeredAt plus
// Options.Timeout) and reports a write the storage abandoned then as an
// error: the storage guarantees such a write never lands.
type WriteMetadata struct {
	Metadata *Metadata
}

// NotifyComplete tells subtasks that checkpoint ID is complete. Sink subtasks
// stop reporting committables prepared at or before ID. The caller must
// deliver it to a subtask before that subtask processes any barrier of a
// checkpoint triggered after this action.
type NotifyComplete struct {
	ID int64
}

// CommitOutput asks the caller to publish Commits in order through each sink's
// committer, then report Committed{ID}. The caller carries out CommitOutput
// actions one at a time in emission order. Every commit must be idempotent:
// one already published is recognised and not published again.
type CommitOutput struct {
	ID      int64
	Commits []Commit
	// TriggeredAt is when checkpoint ID was triggered: every subtask staged
	// what it wrote before then for ID or an earlier checkpoint, so once
	// Commits are published, output still staged from before then is
	// abandoned (see Options.StagingMaxAge).
	TriggeredAt time.Time
	// Final says ID is the job's final checkpoint: nothing is staged after
	// it, so a committer that holds output back for a later commit must
	// publish it now (runtime.PublishNow).
	Final bool
}

// Abort reports that checkpoint ID failed and will never complete. Subtasks
// that were aligning or snapshotting for it may drop that work.
type Abort struct {
	ID     int64
	Reason error
}

// Discard asks the caller to delete everything stored for checkpoint ID
// (storage.Storage.Discard): the partial state of a failed checkpoint, the
// late state of an expired one, or a complete checkpoint beyond the retention
// count of which nothing kept references any file any more (possibly trimmed
// before). It is never emitted for the recovery point, a retained or a held
// checkpoint (Coordinator.Held). The caller carries Discards and Trims out
// one at a time in emission order: a checkpoint's Discard or Trim comes before
// those of the checkpoints it references. One that fails may be left undone
// (the coordinator goes on as if it was done), but it may leave a complete
// checkpoint: the caller must then hold back the Discards and Trims of older
// checkpoints, whose files it may reference, until a retry of it succeeds;
// the next recovery's retention pass deletes what is left (storage.Retain).
type Discard struct {
	ID int64
}

// Trim asks the caller to reduce held checkpoint ID to the files named in Keep
// (storage.Storage.Trim): delete its metadata first, durably, so that it is
// no recovery point from then on whatever happens, then every other file of
// it. Keep lists, sorted and never empty, every file of ID that a retained
// checkpoint or a failed metadata write not yet recorded in the ledger
// references, or that a pending checkpoint may build on; nothing else of ID
// is needed (Coordinator).
//
// It is emitted when a checkpoint leaves the retained set and some of its
// files are still referenced (once no pending checkpoint may build on it
// whole), and again whenever what is referenced of it shrinks; Keep never
// names a file an earlier Trim of ID left out. The caller carries Trims and
// Discards out one at a time in emission order: a checkpoint's Trim or
// Discard comes before those of the checkpoints it references, so a crash
// between two never leaves a complete checkpoint whose files are gone. A Trim
// that fails may be left undone: the checkpoint keeps more than is needed
// until a retry succeeds or the next recovery's retention pass trims it
// (storage.Retain); the coordinator goes on as if it was done (an
// acknowledgement that references a file Keep left out fails its checkpoint
// either way). As for a Discard, the caller holds back the deletions of
// older checkpoints until then: the checkpoint may still be complete.
type Trim struct {
	ID   int64
	Keep []string
}

// FailJob reports that the job must fail and restart from the last complete
// checkpoint: too many consecutive checkpoint failures, or a commit failed.
// The coordinator emits nothing further.
type FailJob struct {
	Err error
}

// Finished reports that the final checkpoint ID is complete and its output
// committed: the job may end.
type Finished struct {
	ID int64
}

// WriteLedger asks the caller to record durably, in the checkpoint ledger
// (see Ledger), that checkpoint ids up to Reserved may be in use and that
// checkpoints Failed failed, in addition to what the ledger already holds,
// then report LedgerWritten with the same fields. The coordinator emits at
// most one at a time. Until the write is reported, it triggers no id above
// the previous reservation, and it starts no metadata write while a failed
// checkpoint is unrecorded: a checkpoint reported failed may be complete in
// storage after all, and only the ledger keeps a recovery from restoring it
// once a newer checkpoint completed.
type WriteLedger struct {
	Reserved int64
	Failed   []int64
}

func (Trigger) isAction()        {}
func (WriteLedger) isAction()    {}
func (WriteMetadata) isAction()  {}
func (NotifyComplete) isAction() {}
func (CommitOutput) isAction()   {}
func (Abort) isAction()          {}
func (Discard) isAction()        {}
func (Trim) isAction()           {}
func (FailJob) isAction()        {}
func (Finished) isAction()       {}
