package config

import (
	"path/filepath"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// batchOut keeps the last batch emitted to it.
type batchOut struct{ last runtime.Batch[row.Row] }

func (o *batchOut) Emit(r runtime.Records) error {
	o.last = r.(runtime.Batch[row.Row])
	return nil
}

// A map field that only names an input field is copied as it is, the same
// value evaluating it gives; one whose declared type converts it, and the
// event time, are evaluated.
func TestMapCopiesFieldReferences(t *testing.T) {
	p, err := Parse(filepath.Join(t.TempDir(), "p.yaml"), []byte(`pipeline: m
sources:
  events: {type: datagen, count: 10}
transforms:
  m:
    type: map
    input: events
    select:
      v: value
      quoted: $env["key"]
      f: {expr: value, type: float}
      at: event_time
      twice: value * 2
sinks:
  out: {type: stdout, input: m}
`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var node *runtime.Node
	for _, n := range plan.Nodes {
		if n.ID == "m" {
			node = n
		}
	}
	op := node.NewOperator().(*mapOp)
	if want := []int{2, 1, -1, -1, -1}; len(op.copyFrom) != len(want) || op.copyFrom[0] != 2 || op.copyFrom[1] != 1 || op.copyFrom[2] != -1 || op.copyFrom[3] != -1 || op.copyFrom[4] != -1 {
		t.Fatalf("copyFrom %v, want %v", op.copyFrom, want)
	}
	out := &batchOut{}
	if err := op.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "m"}, Parallelism: 1, MaxParallelism: 1, Output: out}); err != nil {
		t.Fatal(err)
	}
	in := runtime.Batch[row.Row]{{Value: row.Row{row.IntValue(1), row.IntValue(2), row.IntValue(3)}, Time: 5_000_000}}
	if err := op.ProcessBatch(0, in); err != nil {
		t.Fatal(err)
	}
	got := out.last[0].Value
	want := row.Row{row.IntValue(3), row.IntValue(2), row.FloatValue(3), row.TimeValue(5_000_000), row.IntValue(6)}
	for i := range want {
		if got[i].Kind() != want[i].Kind() || got[i].String() != want[i].String() {
			t.Errorf("field %d: %v (%v), want %v (%v)", i, got[i], got[i].Kind(), want[i], want[i].Kind())
		}
	}
}
