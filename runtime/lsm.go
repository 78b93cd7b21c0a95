package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/inorder"
	"github.com/ingest-engine/ingest/state"
)

// This file connects the runtime to the LSM state backend (Options.LSM):
// one environment per job, one backend per stateful subtask, closed with
// its attempt; restores and uploads of their checkpoints.

// newBackend returns the keyed-state backend of operator's subtask owning
// kgs: an LSM backend when the job keeps state in Pebble (Options.LSM), else
// a memory one.
func (j *Job) newBackend(ctx context.Context, jobID, operator string, maxP int, kgs state.KeyGroupRange) (*state.Backend, error) {
	if j.opts.LSM == nil {
		return state.NewBackend(operator, maxP, kgs), nil
	}
	if j.lsm == nil {
		opts := *j.opts.LSM
		if opts.Log == nil {
			opts.Log = j.log
		}
		env, err := state.NewLSMEnv(opts, jobID)
		if err != nil {
			return nil, err
		}
		j.lsm = env
	}
	return state.NewLSMBackend(ctx, j.lsm, operator, maxP, kgs), nil
}

// closeLSM releases the job's LSM environment when Run returns.
func (j *Job) closeLSM() {
	if j.lsm != nil {
		j.lsm.Close()
		j.lsm = nil
	}
}

// closeBackends closes the state backends of an attempt's subtasks, once no
// task or snapshot writer uses them.
func (a *attempt) closeBackends() {
	for _, b := range a.backends {
		if err := b.Close(); err != nil {
			a.job.log.Warn("closing a state backend", "operator", b.Operator(), "err", err)
		}
	}
	a.backends = nil
}

// verifyLSM is the verification pass for a subtask's LSM state (see
// state.VerifyLSM): manifest is its verified state file.
func (j *Job) verifyLSM(ctx context.Context, m *checkpoint.Metadata, s checkpoint.SubtaskState, manifest []byte) error {
	if j.opts.LSM == nil {
		return incompatible(fmt.Errorf("checkpoint %d holds the state of %v in the pebble backend; this pipeline keeps state in memory: set state.backend: pebble (with its state.dir) to continue from it, or start from an empty checkpoint directory", m.ID, s.Task))
	}
	if _, err := state.VerifyLSM(ctx, *j.opts.LSM, m.JobID, j.storage, manifest); err != nil {
		return fmt.Errorf("checkpoint %d: state of %v: %w", m.ID, s.Task, err)
	}
	return nil
}

// uploadLSM stores the snapshot of an LSM backend for checkpoint id (see
// state.Snapshot.Upload) and fills st with what it stored.
func (t *task) uploadLSM(ctx context.Context, id int64, c capture, st *checkpoint.SubtaskState) error {
	up, err := c.keyed.Upload(ctx, t.att.job.storage, stateFileName(c.link.id))
	if err != nil {
		return err
	}
	h, err := t.att.job.storage.WriteFile(ctx, id, stateFileName(c.link.id), up.Manifest)
	if err != nil {
		return err
	}
	st.State = &h
	st.Shared = up.Files
	st.StateWritten = up.Written
	st.StateReused = up.Reused
	return nil
}

// isLSMState reports whether a verified state file is an LSM manifest.
func isLSMState(data []byte) bool { return state.IsLSMManifest(data) }

// subtaskRestore is one subtask's state backend, restored.
type subtaskRestore struct {
	backend  *state.Backend
	restored *checkpoint.SubtaskState
	union    [][]byte
}

// restoreWorkers bounds the subtasks restored at once: each reads its files
// (the pebble backend: downloads or links its SSTs) and parses them, so a
// job of many stateful subtasks is ready in about the time of its largest.
func restoreWorkers() int { return min(max(goruntime.GOMAXPROCS(0), 2), 8) }

// restoreAll creates every subtask's state backend and restores it from the
// recovery point, on up to restoreWorkers goroutines. The backends are the
// attempt's (closed by shutdown, or by build when it fails). It returns the
// error of the first subtask, in plan order, that failed.
func (a *attempt) restoreAll(ctx context.Context, chains []Chain) (map[checkpoint.TaskID]*subtaskRestore, error) {
	j := a.job
	maxP := j.plan.MaxParallelism
	type item struct {
		node *Node
		id   checkpoint.TaskID
		kgs  state.KeyGroupRange
	}
	var items []item
	for _, chain := range chains {
		for sub := 0; sub < chain.Parallelism(); sub++ {
			for _, node := range chain.Nodes {
				items = append(items, item{node, checkpoint.TaskID{Operator: node.ID, Subtask: sub}, state.KeyGroupRangeFor(maxP, node.Parallelism, sub)})
			}
		}
	}
	out := make(map[checkpoint.TaskID]*subtaskRestore, len(items))
	for _, it := range items {
		b, err := j.newBackend(a.ctx, a.rec.jobID, it.node.ID, maxP, it.kgs)
		if err != nil {
			return nil, err
		}
		a.backends = append(a.backends, b)
		out[it.id] = &subtaskRestore{backend: b}
	}
	err := inorder.Run(len(items), restoreWorkers(), func(i int) error {
		it := items[i]
		r := out[it.id]
		var err error
		r.restored, r.union, err = j.restoreState(ctx, a.rec, it.node, it.id, r.backend)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
