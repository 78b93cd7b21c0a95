package runtime_test

import (
	"testing"

	"github.com/ingest-engine/ingest/runtime"
)

// The physical plan is computed from the logical plan alone: forward edges
// between equal parallelisms chain (unless the producer has another
// consumer, or the edge reads a side output), every other edge is an
// exchange of channels, one per pair of subtasks it connects.
func TestPhysicalPlan(t *testing.T) {
	src := func() runtime.Source { return nil }
	op := func() runtime.Operator { return nil }
	a := &runtime.Node{ID: "a", Parallelism: 2, NewSource: src}
	b := &runtime.Node{ID: "b", Parallelism: 2, NewOperator: op, SideOutputs: []string{"late"},
		Inputs: []runtime.Edge{{From: a, Partitioner: runtime.Forward()}}}
	c := &runtime.Node{ID: "c", Parallelism: 3, NewOperator: op,
		Inputs: []runtime.Edge{{From: b, Partitioner: runtime.Rebalance()}}}
	d := &runtime.Node{ID: "d", Parallelism: 3, NewOperator: op,
		Inputs: []runtime.Edge{{From: c, Partitioner: runtime.Forward()}}}
	late := &runtime.Node{ID: "late", Parallelism: 2, NewOperator: op,
		Inputs: []runtime.Edge{{From: b, Output: "late", Partitioner: runtime.Forward()}}}
	e := &runtime.Node{ID: "e", Parallelism: 1, NewSource: src}
	j := &runtime.Node{ID: "j", Parallelism: 3, NewOperator: op, Inputs: []runtime.Edge{
		{From: d, Input: 0, Partitioner: runtime.Forward()},
		{From: e, Input: 1, Partitioner: runtime.Broadcast()}}}
	p := &runtime.Plan{Name: "shape", Nodes: []*runtime.Node{a, b, c, d, late, e, j}}
	ph := p.Physical()
	want := `11 tasks, 14 channels
  task a → b ×2
  task c → d ×3
  task late ×2
  task e ×1
  task j ×3
  channels b ×2 → c ×3 input 0: rebalance, 6 channels
  channels b.late ×2 → late ×2 input 0: forward, 2 channels
  channels d ×3 → j ×3 input 0: forward, 3 channels
  channels e ×1 → j ×3 input 1: broadcast, 3 channels
`
	// j has two inputs, so it reads channels and heads its own chain even
	// where an input is forward at equal parallelism (from d).
	if got := ph.String(); got != want {
		t.Fatalf("physical plan:\n%s\nwant:\n%s", got, want)
	}
	if ph.Tasks() != 11 {
		t.Errorf("Tasks() = %d, want 11", ph.Tasks())
	}
	x := ph.Exchanges[2] // d → j, forward: subtask i to subtask i only
	if !x.Connects(1, 1) || x.Connects(1, 2) {
		t.Errorf("forward exchange connects 1→1 %v, 1→2 %v; want true, false", x.Connects(1, 1), x.Connects(1, 2))
	}
	if y := ph.Exchanges[0]; !y.Connects(0, 2) {
		t.Error("rebalance exchange does not connect 0→2")
	}
}
