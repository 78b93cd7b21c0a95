package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// recovery is what an attempt starts from.
type recovery struct {
	jobID string
	// meta is the recovery point, nil on a fresh start. Every subtask restores
	// from it and only from it.
	meta     *checkpoint.Metadata
	nextID   int64
	retained []int64
	// references are the files each retained checkpoint references
	// (checkpoint.Config.References), nil when none references another.
	references map[int64][]storage.FileRef
	// held are the checkpoints in storage without metadata that retention
	// trimmed to the files retained ones reference (checkpoint.Config.Held).
	held []int64
	// topology is the pipeline's, recorded in every checkpoint the attempt
	// writes.
	topology *checkpoint.Topology
	// files are the recovery point's state files as the verification pass
	// read them, until restoreState takes them; filesMu guards it (subtasks
	// are restored in parallel).
	files   map[storage.Handle]*verifiedFile
	filesMu sync.Mutex
	// dropped are the operators whose state the recovery point holds and the
	// pipeline no longer has, dropped with Options.AllowNonRestoredState.
	dropped map[string]bool
	// checked is set once the recovery point was checked against the plan.
	checked bool
	// ledger is the checkpoint ledger as the recovery left it (durable):
	// the attempt's coordinator reserves ids above its reservation.
	ledger checkpoint.Ledger
}

// recover finds the latest complete checkpoint whose every file verifies,
// decides whether skipping damaged newer ones is safe (checkFallback), checks
// that it fits the pipeline, publishes its commits (idempotently: output
// already published is recognised), abandons staged output no checkpoint
// will publish and deletes checkpoints that never completed. It runs before
// any subtask starts; nothing of a checkpoint is used before all of it was
// verified and checked.
func (j *Job) recover(ctx context.Context) (*recovery, error) {
	rec := &recovery{topology: j.plan.topology()}
	ledger, err := j.readLedger(ctx)
	if err != nil {
		return nil, err
	}
	c, err := j.chooseRecoveryPoint(ctx, &ledger)
	if err != nil {
		return nil, err
	}
	if c.meta == nil && c.jobID == "" && ledger.JobID != "" {
		// No checkpoint is left, but the ledger names the job that wrote
		// them: its sinks' published output is looked up under that id.
		c.jobID = ledger.JobID
	}
	// Every recovery, not only one that skips damage: a newest checkpoint
	// that was deleted or lost its metadata leaves no trace but the sinks'
	// published output.
	if err := j.checkFallback(ctx, c); err != nil {
		return nil, err
	}
	switch {
	case c.meta != nil:
		rec.meta, rec.files = c.meta, c.files
		j.jobID = c.meta.JobID
		j.latest.Store(c.meta.ID)
	case c.jobID != "":
		// Every checkpoint is damaged and nothing of them is restored: the job
		// keeps its id, so its sinks' output stays attributed to it.
		j.jobID = c.jobID
	case j.jobID == "":
		j.jobID = newJobID()
	}
	rec.jobID = j.jobID
	if err := j.checkPlanMatches(rec); err != nil {
		return nil, err
	}
	if err := j.claimDestinations(ctx, rec); err != nil {
		return nil, err
	}
	if err := j.publishRecoveryPoint(ctx, rec); err != nil {
		return nil, err
	}
	if err := j.cleanStorage(ctx, rec, ledger); err != nil {
		return nil, err
	}
	if rec.meta != nil {
		j.restored.Store(rec.meta.ID)
		j.log.Info("restored from checkpoint", "checkpoint", rec.meta.ID, "job", rec.jobID)
	}
	return rec, nil
}

// publishRecoveryPoint re-commits the recovery point's commits, in order, then
// lets every transactional sink abandon what else it staged.
func (j *Job) publishRecoveryPoint(ctx context.Context, rec *recovery) error {
	committers := map[string]Committer{}
	for _, n := range j.plan.Nodes {
		if n.Committer != nil {
			committers[n.ID] = n.Committer
		}
	}
	if rec.meta != nil {
		for _, c := range rec.meta.Commits {
			cm := committers[c.Sink]
			if cm == nil && rec.dropped[c.Sink] {
				continue // a removed sink's output, dropped (AllowNonRestoredState)
			}
			if cm == nil {
				return incompatible(fmt.Errorf("checkpoint %d holds output of sink %q that the pipeline no longer has as a transactional sink", rec.meta.ID, c.Sink))
			}
			if err := cm.Commit(withPublishNow(j.commitContext(ctx)), rec.jobID, c); err != nil {
				return fmt.Errorf("re-committing output of checkpoint %d, sink %s, at recovery: %w", c.Checkpoint, c.Sink, err)
			}
		}
	}
	for _, n := range j.plan.Nodes {
		if n.Committer == nil {
			continue
		}
		k, err := n.Committer.Abandon(ctx, rec.jobID)
		if err != nil {
			return fmt.Errorf("sink %s: abandoning staged output at recovery: %w", n.ID, err)
		}
		if k > 0 {
			j.abandoned.Add(int64(k))
			j.log.Info("abandoned staged output of checkpoints that never completed", "sink", n.ID, "items", k)
		}
	}
	return nil
}

// cleanStorage deletes checkpoints newer than the recovery point (they never
// completed, or could not be read) and those the ledger records as failed,
// applies retention (which trims a checkpoint kept only for files retained
// ones reference), finds what the coordinator retains and holds, picks the
// next id (above every id stored or reserved) and settles the ledger.
func (j *Job) cleanStorage(ctx context.Context, rec *recovery, ledger checkpoint.Ledger) error {
	var latest int64
	if rec.meta != nil {
		latest = rec.meta.ID
	}
	entries, err := j.storage.List(ctx)
	if err != nil {
		return fmt.Errorf("listing checkpoints in %s: %w", j.storage.Location(), err)
	}
	// Ids keep increasing across in-process restarts: a checkpoint that
	// failed before the restart was discarded and left nothing in storage,
	// but its id was used (logs, metrics, sinks' staging).
	rec.nextID = max(latest, j.triggered.Load(), ledger.Reserved) + 1
	newer, err := j.referencedByNewer(ctx, entries, latest)
	if err != nil {
		return err
	}
	for _, e := range entries {
		rec.nextID = max(rec.nextID, e.ID+1)
		switch {
		case ledger.IsFailed(e.ID):
			if err := j.storage.Discard(ctx, e.ID); err != nil {
				return fmt.Errorf("discarding checkpoint %d, which failed: %w", e.ID, err)
			}
		case e.ID > latest && !e.Complete && !newer[e.ID]:
			if err := j.storage.Discard(ctx, e.ID); err != nil {
				return fmt.Errorf("discarding incomplete checkpoint %d: %w", e.ID, err)
			}
		}
	}
	// Incremental snapshots build on files of earlier checkpoints: those
	// stay while a kept checkpoint references them, and a checkpoint kept
	// only for some of its files is trimmed to them.
	gone, err := storage.Retain(ctx, j.storage, j.opts.Checkpoint.Retain, latest, metadataReferences)
	j.obs.retained(len(gone))
	if err != nil {
		return fmt.Errorf("applying checkpoint retention: %w", err)
	}
	entries, err = j.storage.List(ctx)
	if err != nil {
		return fmt.Errorf("listing checkpoints in %s: %w", j.storage.Location(), err)
	}
	present := map[int64]bool{}
	for _, e := range entries {
		present[e.ID] = true
		switch {
		case e.Complete && e.ID <= latest:
			rec.retained = append(rec.retained, e.ID)
		case !e.Complete && e.ID < latest:
			// Older than the recovery point and without metadata: Retain
			// left it because a kept checkpoint references some of its
			// files, and trimmed it to them. It is no recovery point, and
			// the coordinator keeps it while those files are referenced.
			rec.held = append(rec.held, e.ID)
		}
	}
	if err := j.readReferences(ctx, rec); err != nil {
		return err
	}
	return j.settleLedger(ctx, rec, ledger, present)
}

// metadataReferences is storage.Retain's refs: the files of earlier
// checkpoints the checkpoint of metadata builds on (Metadata.SharedFiles).
func metadataReferences(metadata []byte) ([]storage.FileRef, error) {
	m, err := checkpoint.DecodeMetadata(metadata)
	if err != nil {
		return nil, err
	}
	return m.SharedFiles(), nil
}

// referencedByNewer returns the checkpoints that complete checkpoints newer
// than the recovery point latest reference files of (a recovery fell back
// past them: their state is damaged, their metadata may not be). A trimmed
// checkpoint among those has no metadata, like a checkpoint that never
// completed, but is not deleted as one: Retain decides about it with the
// others. A newer checkpoint whose metadata does not read references
// nothing.
func (j *Job) referencedByNewer(ctx context.Context, entries []storage.Entry, latest int64) (map[int64]bool, error) {
	newer := map[int64]bool{}
	for _, e := range entries {
		if !e.Complete || e.ID <= latest {
			continue
		}
		data, err := j.storage.ReadMetadata(ctx, e.ID)
		if storage.IsCorrupt(err) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the metadata of checkpoint %d: %w", e.ID, err)
		}
		refs, err := metadataReferences(data)
		if err != nil {
			continue // undecodable: damaged like a corrupt one
		}
		for _, r := range refs {
			newer[r.Checkpoint] = true
		}
	}
	return newer, nil
}

// readReferences reads the files each retained checkpoint references, for
// the coordinator (checkpoint.Config.References): a checkpoint the retained
// ones build on stays held, with those files. A retained checkpoint whose
// metadata does not read (damaged since it was listed) references nothing:
// it is no recovery point.
func (j *Job) readReferences(ctx context.Context, rec *recovery) error {
	for _, id := range rec.retained {
		var refs []storage.FileRef
		if rec.meta != nil && id == rec.meta.ID {
			refs = rec.meta.SharedFiles()
		} else {
			data, err := j.storage.ReadMetadata(ctx, id)
			if storage.IsCorrupt(err) || errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading the metadata of retained checkpoint %d: %w", id, err)
			}
			if refs, err = metadataReferences(data); err != nil {
				return fmt.Errorf("retained checkpoint %d: %w", id, err)
			}
		}
		if len(refs) > 0 {
			if rec.references == nil {
				rec.references = map[int64][]storage.FileRef{}
			}
			rec.references[id] = refs
		}
	}
	return nil
}

// restoreState returns the state of node subtask t from the recovery point and
// restores its keyed state into b. Keyed state is redistributed by key group
// when the node's parallelism changed; inline (per-subtask) state only when
// the node declares RescalableInline: union is then every old subtask's
// inline state, for the subtask to take its share.
func (j *Job) restoreState(ctx context.Context, rec *recovery, n *Node, t checkpoint.TaskID, b *state.Backend) (*checkpoint.SubtaskState, [][]byte, error) {
	if rec.meta == nil {
		return nil, nil, nil
	}
	var union [][]byte
	var mine []checkpoint.SubtaskState
	for _, s := range rec.meta.Tasks {
		if s.Task.Operator == n.ID {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		// A node added since the checkpoint starts empty.
		return nil, nil, nil
	}
	restored, ok := rec.meta.Task(t)
	rescaled := len(mine) != n.Parallelism
	if rescaled {
		// Keyed state is redistributed by key group; committables were
		// published by the recovery. Per-subtask inline state moves only as
		// a union every subtask takes its share of.
		for _, s := range mine {
			if len(s.Inline) == 0 {
				continue
			}
			if !n.RescalableInline {
				return nil, nil, incompatible(fmt.Errorf("node %s: checkpoint %d has it at parallelism %d, the pipeline at %d, and its per-subtask state cannot be redistributed", n.ID, rec.meta.ID, len(mine), n.Parallelism))
			}
			union = append(union, s.Inline)
		}
	}
	var files, manifests [][]byte
	for _, s := range mine {
		if !rescaled && s.Task != t {
			continue
		}
		if s.State != nil {
			// An LSM backend's state file is a manifest: the backend
			// fetches the data files it names itself.
			data, err := j.readState(ctx, rec, *s.State)
			if err != nil {
				return nil, nil, fmt.Errorf("reading state of %v from checkpoint %d: %w", s.Task, rec.meta.ID, err)
			}
			if isLSMState(data) {
				manifests = append(manifests, data)
				continue
			}
			files = append(files, data)
		}
		for _, h := range s.Shared {
			data, err := j.readState(ctx, rec, h)
			if err != nil {
				return nil, nil, fmt.Errorf("reading state of %v from checkpoint %d%s: %w", s.Task, rec.meta.ID, sharedFrom(rec.meta.ID, h), err)
			}
			files = append(files, data)
		}
	}
	if len(manifests) > 0 {
		if len(files) > 0 {
			return nil, nil, incompatible(fmt.Errorf("checkpoint %d holds the state of node %s partly in the pebble backend and partly in memory", rec.meta.ID, n.ID))
		}
		if err := b.RestoreLSM(ctx, j.storage, manifests...); err != nil {
			err = fmt.Errorf("restoring state of %v from checkpoint %d: %w", t, rec.meta.ID, err)
			if errors.Is(err, state.ErrStateMismatch) {
				err = incompatible(err)
			}
			return nil, nil, err
		}
	}
	if len(files) > 0 {
		if err := b.Restore(files...); err != nil {
			err = fmt.Errorf("restoring state of %v from checkpoint %d: %w", t, rec.meta.ID, err)
			if errors.Is(err, state.ErrStateMismatch) {
				err = incompatible(err)
			}
			return nil, nil, err
		}
	}
	if rescaled {
		// The subtask takes key groups of several old subtasks: its watermark
		// is the least of theirs, so no timer of theirs is skipped.
		restored = checkpoint.SubtaskState{Task: t, Watermark: MaxWatermark}
		for _, s := range mine {
			restored.Watermark = min(restored.Watermark, s.Watermark)
		}
	} else if !ok {
		return nil, nil, fmt.Errorf("checkpoint %d has no state of %v", rec.meta.ID, t)
	}
	restored.Committables = nil // published by the recovery; the subtask starts with none
	return &restored, union, nil
}

// checkPlanMatches fails when the recovery point does not fit the plan (see
// checkTopology). recover runs it before anything of the checkpoint is used;
// build asks again and gets the same answer.
func (j *Job) checkPlanMatches(rec *recovery) error {
	if rec.meta == nil || rec.checked {
		return nil
	}
	if err := j.checkTopology(rec); err != nil {
		return err
	}
	rec.checked = true
	return nil
}

// commitContext is the context of every Commit: it carries the job's log
// (LoggerFrom) and the permission to publish around lost staged output
// (Options.AcceptLostOutput).
func (j *Job) commitContext(ctx context.Context) context.Context {
	ctx = WithLogger(ctx, j.log)
	if j.opts.AcceptLostOutput {
		return WithLostOutputAccepted(ctx)
	}
	return ctx
}
