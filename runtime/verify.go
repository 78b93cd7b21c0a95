package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/inorder"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// This file is the verification pass of a recovery: before any state of a
// checkpoint is used (no commit re-published, no subtask restored), every
// file the checkpoint consists of is read and checked, so damage anywhere in
// it is found up front, with the file and the reason, and the choice between
// falling back and refusing is made once, for the whole checkpoint.

// candidate is the outcome of choosing a recovery point.
type candidate struct {
	// meta is the newest complete checkpoint whose every file verified; nil
	// when none did.
	meta *checkpoint.Metadata
	// files are meta's verified state files (see verifiedFile).
	files map[storage.Handle]*verifiedFile
	// damaged are the newer complete checkpoints that failed verification,
	// newest first.
	damaged []damagedCheckpoint
	// jobID is the job id of the newest checkpoint whose metadata could be
	// read (a damaged one's, if only its state is damaged); "" when none.
	jobID string
}

// damagedCheckpoint is a complete checkpoint that cannot be restored.
type damagedCheckpoint struct {
	id int64
	// err names the file and says why (checksum mismatch, truncated,
	// missing); it wraps storage.ErrCorrupt, storage.ErrNotFound or
	// state.ErrCorrupt.
	err error
}

// verifiedFile is a state file's payload, read and verified by the
// verification pass and kept for restoreState, which would otherwise read it
// a second time. uses counts the restoreState calls still to take it.
type verifiedFile struct {
	data []byte
	uses int
}

// isDamage reports whether err says a checkpoint file is corrupt, truncated
// or missing: a checkpoint that is gone for good, not a passing failure.
func isDamage(err error) bool {
	return storage.IsCorrupt(err) || errors.Is(err, storage.ErrNotFound) || state.IsCorrupt(err)
}

// chooseRecoveryPoint walks the complete checkpoints newest first (but those
// the ledger records as failed) and returns
// the first one whose metadata and every state file verify, with the newer
// ones that did not. Any error other than damage (I/O, a cancelled context,
// metadata of another pipeline or format) stops the walk and is returned:
// falling back because of a passing failure would restore older state than
// the sinks have published.
func (j *Job) chooseRecoveryPoint(ctx context.Context, ledger *checkpoint.Ledger) (*candidate, error) {
	entries, err := j.storage.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints in %s: %w", j.storage.Location(), err)
	}
	c := &candidate{}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !e.Complete {
			continue
		}
		if ledger.IsFailed(e.ID) {
			// Reported failed, though its metadata is stored: the job went
			// on as if it never completed (cleanStorage deletes it).
			j.log.Warn("skipping a checkpoint that was reported failed although its metadata is stored", "checkpoint", e.ID, "storage", j.storage.Location())
			continue
		}
		m, files, err := j.verifyCheckpoint(ctx, e.ID, c)
		switch {
		case err == nil:
			c.meta, c.files = m, files
			return c, nil
		case isDamage(err):
			c.damaged = append(c.damaged, damagedCheckpoint{id: e.ID, err: err})
		default:
			return nil, err
		}
	}
	return c, nil
}

// verifyCheckpoint reads checkpoint id's metadata and every state file it
// references, verifying each against its checksum (and the handle's size and
// checksum), and each state file's own structure and checksums
// (state.Inspect). It records the job id in c once the metadata is read.
func (j *Job) verifyCheckpoint(ctx context.Context, id int64, c *candidate) (*checkpoint.Metadata, map[storage.Handle]*verifiedFile, error) {
	data, err := j.storage.ReadMetadata(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %d: metadata %s: %w", id, damageReason(err), err)
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %d in %s: %w", id, j.storage.Location(), err)
	}
	if m.Pipeline != j.plan.Name {
		return nil, nil, incompatible(fmt.Errorf("checkpoint %d in %s belongs to pipeline %q, not %q: use another checkpoint directory", id, j.storage.Location(), m.Pipeline, j.plan.Name))
	}
	if c.jobID == "" {
		c.jobID = m.JobID
	}
	// How many subtasks will restore each node's files (restoreState): one
	// per file, or, when the node's parallelism changed, every new subtask
	// reads every old file.
	count := map[string]int{}
	for _, s := range m.Tasks {
		count[s.Task.Operator]++
	}
	uses := map[string]int{}
	for _, n := range j.plan.Nodes {
		if k, ok := count[n.ID]; ok {
			uses[n.ID] = 1
			if k != n.Parallelism {
				uses[n.ID] = n.Parallelism
			}
		}
	}
	// The subtasks' files are read and checked in parallel (most of a large
	// recovery's time before any state is decoded); the error is the first
	// failing subtask's, as if they had been checked one by one.
	found := make([]map[storage.Handle]*verifiedFile, len(m.Tasks))
	err = inorder.Run(len(m.Tasks), restoreWorkers(), func(i int) error {
		var err error
		found[i], err = j.verifySubtask(ctx, m, m.Tasks[i], uses)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	files := map[storage.Handle]*verifiedFile{}
	for _, f := range found {
		maps.Copy(files, f)
	}
	return m, files, nil
}

// verifySubtask reads and checks the state files of subtask s of checkpoint
// m (see verifyCheckpoint) and returns those restoreState will take.
func (j *Job) verifySubtask(ctx context.Context, m *checkpoint.Metadata, s checkpoint.SubtaskState, uses map[string]int) (map[storage.Handle]*verifiedFile, error) {
	id := m.ID
	files := map[storage.Handle]*verifiedFile{}
	for k, h := range stateFiles(s) {
		if k > 0 && s.State != nil && files[*s.State] != nil && isLSMState(files[*s.State].data) {
			break // verified with the manifest (verifyLSM)
		}
		data, err := j.storage.ReadFile(ctx, h)
		if err != nil {
			// The storage error names the file's path and the reason.
			return nil, fmt.Errorf("checkpoint %d: state file %s of %v %s%s: %w", id, h.Name, s.Task, damageReason(err), sharedFrom(id, h), err)
		}
		if k == 0 && isLSMState(data) {
			if err := j.verifyLSM(ctx, m, s, data); err != nil {
				return nil, err
			}
			files[h] = &verifiedFile{data: data, uses: max(uses[s.Task.Operator], 1)}
			continue
		}
		if _, err := state.Inspect(data); err != nil {
			p := path.Join(j.storage.Location(), storage.CheckpointDirName(h.Checkpoint), h.Name)
			return nil, fmt.Errorf("checkpoint %d: state file %s of %v%s passes its storage checksum but not its own checks (it was written damaged): %w", id, p, s.Task, sharedFrom(id, h), err)
		}
		if u := uses[s.Task.Operator]; u > 0 {
			files[h] = &verifiedFile{data: data, uses: u}
		}
	}
	return files, nil
}

// damageReason says in a word or two what err means for a file.
func damageReason(err error) string {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "is missing"
	case storage.IsCorrupt(err):
		return "is damaged"
	}
	return "cannot be read"
}

// readState returns the payload of the state file h: the verified copy the
// recovery kept, or a fresh read.
func (j *Job) readState(ctx context.Context, rec *recovery, h storage.Handle) ([]byte, error) {
	rec.filesMu.Lock()
	if f, ok := rec.files[h]; ok {
		if f.uses--; f.uses <= 0 {
			delete(rec.files, h)
		}
		rec.filesMu.Unlock()
		return f.data, nil
	}
	rec.filesMu.Unlock()
	return j.storage.ReadFile(ctx, h)
}

// stateFiles returns the state files a subtask's keyed state is restored
// from: its own file, then the earlier checkpoints' files it builds on
// (incremental snapshots). None when it has no keyed state.
func stateFiles(s checkpoint.SubtaskState) []storage.Handle {
	if s.State == nil {
		return nil
	}
	return append([]storage.Handle{*s.State}, s.Shared...)
}

// sharedFrom says, for a message, that h is a file of an earlier checkpoint
// that checkpoint id's state builds on ("" for id's own file).
func sharedFrom(id int64, h storage.Handle) string {
	if h.Checkpoint == id {
		return ""
	}
	return fmt.Sprintf(" (written by checkpoint %d, which checkpoint %d's incremental state builds on)", h.Checkpoint, id)
}
