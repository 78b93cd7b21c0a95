package runtime

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/state"
)

// This file holds an attempt's start gate: no subtask reads or processes a
// record before every subtask of the attempt has opened, and before the
// states the operators registered in Open have been compared with the state
// schemas the recovery point records (the stable processing contract,
// DESIGN.md §4). A pipeline that cannot take its checkpoint's state is thus
// refused before anything reaches a sink, transactional or not.

// startGate holds every task of an attempt after Open until all have opened.
type startGate struct {
	mu      sync.Mutex
	pending int // tasks that have not opened yet
	// registered[operator][state] is the schema each arrived task's links
	// registered (each task reports its own, from its goroutine, so no
	// goroutine reads another's state backend).
	registered map[string]map[string]checkpoint.StateSchema
	// opened is closed when the last task opened; err is then the outcome
	// of the schema check. INVARIANT: err is written once, before opened is
	// closed, and only read after.
	opened chan struct{}
	err    error
	// check runs once, on the goroutine of the last task to open, with
	// every task's registered schemas.
	check func(registered map[string]map[string]checkpoint.StateSchema) error
}

func newStartGate(tasks int, check func(map[string]map[string]checkpoint.StateSchema) error) *startGate {
	return &startGate{pending: tasks, registered: map[string]map[string]checkpoint.StateSchema{}, opened: make(chan struct{}), check: check}
}

// arrive records that the calling task has opened its chain, with the
// states its links registered, and waits until every task has, or the
// attempt ends. It returns the schema check's error (the same for every
// task) or the attempt's cause.
func (g *startGate) arrive(ctx context.Context, links []*link) error {
	g.mu.Lock()
	for _, l := range links {
		states := g.registered[l.id.Operator]
		if states == nil {
			states = map[string]checkpoint.StateSchema{}
			g.registered[l.id.Operator] = states
		}
		for _, s := range stateSchemas(l.ctx.State.Schemas()) {
			states[s.Name] = s
		}
		// A state the operator read and moved elsewhere in Open (a new
		// layout of its state) is handled, not forgotten.
		for _, s := range stateSchemas(l.ctx.State.Dropped()) {
			if _, ok := states[s.Name]; !ok {
				states[s.Name] = s
			}
		}
	}
	g.pending--
	last := g.pending == 0
	g.mu.Unlock()
	if last {
		// Every other task has arrived: registered is complete and no
		// longer written.
		g.err = g.check(g.registered)
		close(g.opened)
	}
	select {
	case <-g.opened:
		return g.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// stateSchemas converts a state snapshot's schemas for the metadata.
func stateSchemas(in []state.Schema) []checkpoint.StateSchema {
	if len(in) == 0 {
		return nil
	}
	out := make([]checkpoint.StateSchema, len(in))
	for i, s := range in {
		out[i] = checkpoint.StateSchema{Name: s.Name, Kind: s.Kind.String(), Codecs: s.Codecs}
	}
	return out
}

// checkStateSchemas compares, for every operator, the state schemas the
// recovery point records with the states its subtasks registered in Open,
// and fails, naming each operator, state and difference, when
//   - a recorded state is no longer registered (its entries would be
//     carried along unused, or dropped), or
//   - a recorded state is registered under another kind or codecs (its
//     entries would be read with another encoding or meaning: a changed
//     window size or aggregate).
//
// A registration that meets restored entries under another schema already
// failed in Open (state.ErrStateMismatch); this check also covers states
// that were empty at the checkpoint, so whether a restore is refused does
// not depend on when the checkpoint was taken. States registered now but not
// recorded start empty. Checkpoints written before schemas were recorded are
// not checked, nor the state of operators the pipeline no longer has
// (refused or dropped before, see checkTopology).
//
// It runs at the start gate, with registered[operator][state] the schemas
// every subtask registered.
func (a *attempt) checkStateSchemas(registered map[string]map[string]checkpoint.StateSchema) error {
	m := a.rec.meta
	if m == nil {
		return nil
	}
	var problems []string
	for _, op := range slices.Sorted(maps.Keys(registered)) {
		for _, old := range m.OperatorStates(op) {
			now, ok := registered[op][old.Name]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("operator %q no longer registers state %s", op, old))
			case !now.Equal(old):
				problems = append(problems, fmt.Sprintf("operator %q state %q: the checkpoint holds a %s state with codecs %q, the operator now registers a %s state with codecs %q",
					op, old.Name, old.Kind, old.Codecs, now.Kind, now.Codecs))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, cmp.Compare)
	problems = slices.Compact(problems)
	return &topologyError{
		msg: fmt.Sprintf("checkpoint %d in %s does not fit the pipeline: %s. The state schema (kind and codecs, which carry parameters such as a window's size and aggregate) must stay the same; to start an operator with another schema, give it a new id and run with --allow-non-restored-state, or start from an empty checkpoint directory",
			m.ID, a.job.storage.Location(), strings.Join(problems, "; ")),
		mismatch: true,
	}
}
