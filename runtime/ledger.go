package runtime

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/storage"
)

// This file keeps the checkpoint ledger (checkpoint.Ledger) of the job's
// storage: read by every recovery, written by the recovery when it changes
// what the ledger must say, and by the attempt when the coordinator asks
// (checkpoint.WriteLedger: more ids, or a failed checkpoint to record).

// readLedger returns the ledger of the job's storage, or a new one naming the
// pipeline when there is none. A damaged ledger, or one of another pipeline,
// stops the job: without it a recovery cannot know which ids were used or
// which checkpoints failed.
func (j *Job) readLedger(ctx context.Context) (checkpoint.Ledger, error) {
	where := path.Join(j.storage.Location(), storage.LedgerName)
	data, err := j.storage.ReadLedger(ctx)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return checkpoint.Ledger{Pipeline: j.plan.Name}, nil
	case storage.IsCorrupt(err):
		return checkpoint.Ledger{}, incompatible(fmt.Errorf("the checkpoint ledger %s is damaged: %w. It records which checkpoint ids were used and which checkpoints failed; "+
			"restore it from a backup, or delete it to go on (ids then continue above the checkpoints present, and a checkpoint reported failed whose metadata is left may be restored)", where, err))
	case err != nil:
		return checkpoint.Ledger{}, fmt.Errorf("reading the checkpoint ledger %s: %w", where, err)
	}
	l, err := checkpoint.DecodeLedger(data)
	if err != nil {
		return checkpoint.Ledger{}, incompatible(fmt.Errorf("the checkpoint ledger %s: %w", where, err))
	}
	if l.Pipeline != j.plan.Name {
		return checkpoint.Ledger{}, incompatible(fmt.Errorf("the checkpoint ledger %s belongs to pipeline %q, not %q: use another checkpoint directory", where, l.Pipeline, j.plan.Name))
	}
	return *l, nil
}

// writeLedger stores l.
func (j *Job) writeLedger(ctx context.Context, l checkpoint.Ledger) error {
	data, err := l.Encode()
	if err != nil {
		return err
	}
	if err := j.storage.WriteLedger(ctx, data); err != nil {
		return fmt.Errorf("writing the checkpoint ledger in %s: %w", j.storage.Location(), err)
	}
	return nil
}

// settleLedger is the recovery's last storage step: the ledger names the job,
// forgets failed checkpoints that are gone, reserves the attempt's first ids,
// and is written when that changed anything (or when there was none),
// before any subtask may stage output under the job's id.
func (j *Job) settleLedger(ctx context.Context, rec *recovery, read checkpoint.Ledger, present map[int64]bool) error {
	l := read
	l.Pipeline, l.JobID = j.plan.Name, rec.jobID
	l.Failed = slices.DeleteFunc(slices.Clone(l.Failed), func(id int64) bool { return !present[id] })
	if l.Reserved < rec.nextID {
		// Reserved now, so that the attempt's first checkpoint does not
		// wait for a ledger write.
		l.Reserved = rec.nextID + checkpoint.IDReservation - 1
	}
	rec.ledger = l
	if l.Version != 0 && l.JobID == read.JobID && l.Reserved == read.Reserved && slices.Equal(l.Failed, read.Failed) {
		return nil
	}
	if err := j.writeLedger(ctx, l); err != nil {
		return err
	}
	rec.ledger.Version = checkpoint.LedgerVersion
	return nil
}
