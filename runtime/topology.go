package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/state"
)

// This file records the pipeline's topology in every checkpoint and compares
// a checkpoint's topology with the pipeline restoring it, before any state is
// used (DESIGN.md §4: restoring state whose operator or schema no longer
// matches fails with an error naming the operator). The checks here need
// only the metadata and the plan; the state schemas (each state's kind and
// codec names, which carry a window's size and aggregates) are known only
// once the operators registered their states, and are compared at the start
// gate, before any subtask processes a record (startgate.go).

// topology describes the plan as checkpoints record it.
func (p *Plan) topology() *checkpoint.Topology {
	t := &checkpoint.Topology{MaxParallelism: p.MaxParallelism}
	for _, n := range p.Nodes {
		t.Nodes = append(t.Nodes, checkpoint.NodeTopology{ID: n.ID, Type: n.Type, Parallelism: n.Parallelism, Key: n.KeyDesc})
	}
	slices.SortFunc(t.Nodes, func(a, b checkpoint.NodeTopology) int { return cmp.Compare(a.ID, b.ID) })
	return t
}

// restoredOperator is what a checkpoint holds of one node.
type restoredOperator struct {
	id string
	// subtasks is the number of subtasks that acknowledged.
	subtasks int
	// keyed is set when some subtask wrote a keyed state file; inline when
	// some subtask holds inline state (a source's position).
	keyed, inline bool
	// commits is set when the checkpoint holds unpublished sink output of it.
	commits bool
}

// stateful reports whether the checkpoint holds state of the operator.
func (o *restoredOperator) stateful() bool { return o.keyed || o.inline || o.commits }

// checkTopology compares the recovery point with the plan and fails, naming
// each operator and what changed, when the checkpoint holds state the
// pipeline cannot take:
//   - state of an operator the pipeline no longer has (removed or renamed):
//     refused, or dropped and logged with AllowNonRestoredState;
//   - keyed state of an operator whose key changed: it is partitioned and
//     looked up by the old key;
//   - keyed state under another max parallelism: it is split into key groups
//     that cannot be redistributed over another number.
//
// A change of parallelism is fine for keyed state (redistributed by key
// group); per-subtask state at a changed parallelism is refused by
// restoreState. Checkpoints without a topology (written by older versions)
// are checked for removed operators only; max parallelism is then still
// checked when the state is read.
func (j *Job) checkTopology(rec *recovery) error {
	m := rec.meta
	ops := map[string]*restoredOperator{}
	var order []string
	op := func(id string) *restoredOperator {
		o := ops[id]
		if o == nil {
			o = &restoredOperator{id: id}
			ops[id] = o
			order = append(order, id)
		}
		return o
	}
	for _, s := range m.Tasks {
		o := op(s.Task.Operator)
		o.subtasks++
		o.keyed = o.keyed || s.State != nil
		o.inline = o.inline || len(s.Inline) > 0
	}
	for _, c := range m.Commits {
		op(c.Sink).commits = true
	}
	nodes := map[string]*Node{}
	for _, n := range j.plan.Nodes {
		nodes[n.ID] = n
	}
	old := m.Topology
	if old == nil {
		j.log.Info("the checkpoint records no pipeline topology (written by an older version): only removed operators are checked before restoring", "checkpoint", m.ID)
	}
	var problems []string
	var removed []string
	mismatch := false // a problem of the keyed state itself (state.ErrStateMismatch)
	for _, id := range order {
		o := ops[id]
		n := nodes[id]
		if n == nil {
			if !o.stateful() {
				continue
			}
			if j.opts.AllowNonRestoredState {
				if rec.dropped == nil {
					rec.dropped = map[string]bool{}
				}
				rec.dropped[id] = true
				j.log.Warn("dropping the state of an operator the pipeline no longer has (--allow-non-restored-state)",
					"operator", id, "checkpoint", m.ID, "state", o.describe(old))
				continue
			}
			removed = append(removed, id)
			problems = append(problems, fmt.Sprintf("operator %q was removed (or renamed): the checkpoint holds its %s", id, o.describe(old)))
			continue
		}
		if old == nil || !o.keyed {
			continue
		}
		if on, ok := old.Node(id); ok && on.Key != "" && n.KeyDesc != "" && on.Key != n.KeyDesc {
			problems = append(problems, fmt.Sprintf("operator %q: key changed from %q to %q: its keyed state is partitioned and looked up by the old key", id, on.Key, n.KeyDesc))
			mismatch = true
		}
		if old.MaxParallelism != j.plan.MaxParallelism {
			problems = append(problems, fmt.Sprintf("operator %q: max parallelism changed from %d to %d: its keyed state is split into %d key groups, which cannot be redistributed over %d",
				id, old.MaxParallelism, j.plan.MaxParallelism, old.MaxParallelism, j.plan.MaxParallelism))
			mismatch = true
		}
	}
	if len(problems) == 0 {
		return nil
	}
	hint := "Restore it with the pipeline that wrote it, or start from an empty checkpoint directory"
	if len(removed) > 0 {
		hint += fmt.Sprintf("; to drop the state of %q and go on, run with --allow-non-restored-state (Options.AllowNonRestoredState)", removed)
	}
	return &topologyError{
		msg:      fmt.Sprintf("checkpoint %d in %s does not fit the pipeline: %s. %s", m.ID, j.storage.Location(), strings.Join(problems, "; "), hint),
		mismatch: mismatch,
	}
}

// topologyError is a recovery point that does not fit the pipeline. It wraps
// ErrIncompatible (a restart cannot cure it), and state.ErrStateMismatch when
// keyed state no longer fits (key or max parallelism changed), as the state
// backend reports such a mismatch when it finds it itself.
type topologyError struct {
	msg      string
	mismatch bool
}

func (e *topologyError) Error() string { return e.msg }

func (e *topologyError) Unwrap() []error {
	if e.mismatch {
		return []error{ErrIncompatible, state.ErrStateMismatch}
	}
	return []error{ErrIncompatible}
}

// describe says what the checkpoint holds of an operator, for messages.
func (o *restoredOperator) describe(t *checkpoint.Topology) string {
	var what []string
	if o.keyed {
		what = append(what, "keyed state")
	}
	if o.inline {
		what = append(what, "per-subtask state (e.g. source positions)")
	}
	if o.commits {
		what = append(what, "unpublished sink output")
	}
	s := strings.Join(what, " and ") + fmt.Sprintf(" of %d subtasks", o.subtasks)
	if t != nil {
		if n, ok := t.Node(o.id); ok && n.Type != "" {
			s += fmt.Sprintf(" (a %s node)", n.Type)
		}
	}
	return s
}
