package runtime_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// splitOp sends even ids to its main output and odd ids, as strings, to side
// output "odd"; it counts odd records it had nowhere to send.
type splitOp struct {
	stream.Stateless
	odd     runtime.Output
	dropped *int
	ctx     *runtime.Context
	batches int
}

func (o *splitOp) Open(ctx *runtime.Context) error {
	o.ctx = ctx
	o.Out = ctx.Output
	o.odd = ctx.SideOutput("odd")
	return nil
}

func (o *splitOp) ProcessBatch(_ int, r runtime.Records) error {
	o.batches++
	if o.ctx.Attempt == 0 && o.ctx.Task.Subtask == 0 && o.batches == 3 {
		return errors.New("injected failure")
	}
	var even runtime.Batch[int64]
	var odd runtime.Batch[string]
	for _, rec := range r.(runtime.Batch[datagen.Event]) {
		if rec.Value.ID%2 == 0 {
			even = append(even, runtime.Record[int64]{Value: rec.Value.ID, Time: rec.Time})
		} else {
			odd = append(odd, runtime.Record[string]{Value: "odd", Time: rec.Time})
		}
	}
	if o.odd == nil {
		*o.dropped += len(odd)
	} else if err := o.odd.Emit(odd); err != nil {
		return err
	}
	return o.Out.Emit(even)
}

// TestSideOutput routes a side output to its own transactional sink, with a
// failure in the middle: each output gets exactly its records, once.
func TestSideOutput(t *testing.T) {
	const n = 5000
	for _, connectSide := range []bool{true, false} {
		src, err := datagen.Events(datagen.Config{Count: n})
		if err != nil {
			t.Fatal(err)
		}
		dropped := 0
		p := stream.New("side")
		events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(2))
		node := &runtime.Node{ID: "split", SideOutputs: []string{"odd"}, NewOperator: func() runtime.Operator { return &splitOp{dropped: &dropped} }}
		even := stream.Add[datagen.Event, int64](events, node)
		evens, odds := newTxStore[int64](), newTxStore[string]()
		stream.To(even, "evens", stream.Sink[int64](txSink[int64]{evens}), stream.Parallelism(1))
		if connectSide {
			stream.To(stream.SideOutput[string](even, "odd"), "odds", stream.Sink[string](txSink[string]{odds}), stream.Parallelism(3))
		}
		plan, err := p.Plan()
		if err != nil {
			t.Fatal(err)
		}
		t.Log(plan.Describe())
		st, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		job := newJob(t, p, st, fastCheckpoints(5*time.Millisecond), quickRestarts(3))
		if err := runBounded(t, job); err != nil {
			t.Fatal(err)
		}
		got := evens.values()
		slices.Sort(got)
		if len(got) != n/2 || got[0] != 0 || got[len(got)-1] != n-2 {
			t.Fatalf("main output: %d records, want %d", len(got), n/2)
		}
		if connectSide {
			if c := odds.count(); c != n/2 {
				t.Fatalf("side output: %d records, want %d", c, n/2)
			}
		} else if dropped < n/2 {
			t.Fatalf("unconnected side output: dropped %d, want at least %d", dropped, n/2)
		}
	}
}

// TestSideOutputUndeclared: connecting a side output the node does not
// declare is a plan error.
func TestSideOutputUndeclared(t *testing.T) {
	src, _ := datagen.Events(datagen.Config{Count: 10})
	p := stream.New("side")
	events := stream.From[datagen.Event](p, "events", src)
	stream.To(stream.SideOutput[datagen.Event](events, "late"), "sink", stream.Discard[datagen.Event]())
	if _, err := p.Plan(); err == nil {
		t.Fatal("plan accepted an undeclared side output")
	} else {
		t.Log(err)
	}
}
