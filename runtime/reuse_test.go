package runtime_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// reuseReport collects what the probes of TestBatchReuse saw, by node.
type reuseReport struct {
	mu sync.Mutex
	// reuses is runtime.ReusesBatches of each node's output, per subtask.
	reuses map[string][]bool
	// records counts the records each node received; ids sums their
	// ids, squared: a batch overwritten while a borrower read it shows.
	records map[string]int
	ids     map[string]uint64
	// arrays counts the distinct batch memories each node received, and
	// batches the batches.
	arrays, batches map[string]int
	// damaged lists batches a retaining probe kept that changed after it
	// received them.
	damaged []string
}

// probe passes every record on. A retaining probe (the runtime's default
// assumption about an operator) keeps every batch it is given and checks,
// when it closes, that none changed since: an emitter that reused a batch
// it handed to it would show. A borrowing probe (borrowingProbe) promises
// to keep nothing.
type probe struct {
	id     string
	rep    *reuseReport
	ctx    *runtime.Context
	out    runtime.BatchBuffer[datagen.Event]
	kept   []runtime.Batch[datagen.Event]
	copies []runtime.Batch[datagen.Event]
	seen   map[*runtime.Record[datagen.Event]]bool
	// n counts batches, records records, ids sums id².
	n, records int
	ids        uint64
	retain     bool
}

// borrowingProbe is a probe that implements runtime.BatchBorrower.
type borrowingProbe struct{ probe }

func (*borrowingProbe) BorrowsBatches() {}

func (p *probe) Open(ctx *runtime.Context) error {
	p.ctx = ctx
	p.out.Open(ctx.Output)
	p.seen = map[*runtime.Record[datagen.Event]]bool{}
	p.rep.mu.Lock()
	defer p.rep.mu.Unlock()
	p.rep.reuses[p.id] = append(p.rep.reuses[p.id], runtime.ReusesBatches(ctx.Output))
	return nil
}

func (p *probe) ProcessBatch(_ int, r runtime.Records) error {
	in := r.(runtime.Batch[datagen.Event])
	p.n++
	p.records += len(in)
	for _, r := range in {
		p.ids += uint64(r.Value.ID * r.Value.ID)
	}
	// The map keeps every array it saw reachable, so a repeated address
	// is memory handed over again, not a new allocation at an old address.
	p.seen[unsafe.SliceData(in)] = true
	if p.retain {
		p.kept = append(p.kept, in)
		p.copies = append(p.copies, slices.Clone(in))
	}
	out := p.out.Get(len(in))
	out = append(out, in...)
	return p.out.Emit(out)
}

func (p *probe) ProcessWatermark(int64) error             { return nil }
func (p *probe) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (p *probe) NotifyComplete(int64) error               { return nil }
func (p *probe) Close() error {
	p.rep.mu.Lock()
	defer p.rep.mu.Unlock()
	for i := range p.kept {
		if !slices.Equal(p.kept[i], p.copies[i]) {
			p.rep.damaged = append(p.rep.damaged, fmt.Sprintf("%s %v: batch %d of %d", p.id, p.ctx.Task, i, len(p.kept)))
		}
	}
	p.rep.records[p.id] += p.records
	p.rep.ids[p.id] += p.ids
	p.rep.arrays[p.id] += len(p.seen)
	p.rep.batches[p.id] += p.n
	return nil
}

// probeNode returns a node running a retaining or a borrowing probe.
func probeNode(rep *reuseReport, id string, borrow bool) *runtime.Node {
	return &runtime.Node{ID: id, Describe: "probe", NewOperator: func() runtime.Operator {
		if borrow {
			return &borrowingProbe{probe{id: id, rep: rep}}
		}
		return &probe{id: id, rep: rep, retain: true}
	}}
}

// DESIGN.md §6 (runtime: records travel in batches): an emitter reuses a batch's
// memory only when every receiver is done with it when Emit returns. A
// source and borrowing operators reuse their output batch towards a
// borrowing operator chained after them and towards hash edges (which copy
// records into batches of their own), and a hash edge's batches come back
// for reuse from a borrowing consumer; towards a retaining operator, and
// over forward or rebalance edges (which hand the batch itself to another
// task), every batch is new. Retaining probes keep every batch they get and
// fail the test if one changes afterwards.
func TestBatchReuse(t *testing.T) {
	t.Parallel()
	const count = 300_000
	rep := &reuseReport{reuses: map[string][]bool{}, records: map[string]int{}, ids: map[string]uint64{}, arrays: map[string]int{}, batches: map[string]int{}}
	src, err := datagen.Events(datagen.Config{Count: count, Keys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("reuse")
	events := stream.From[datagen.Event](p, "src", src, stream.Parallelism(2))
	// src → a (chained, borrows) → b (chained, retains) → hash → c
	// (retains) → rebalance → d (borrows) → hash → e (borrows), f (retains);
	// b → rebalance → g (retains); e → broadcast → h (borrows); f →
	// broadcast → i (borrows) and f → rebalance → j (retains).
	a := stream.Add[datagen.Event, datagen.Event](events, probeNode(rep, "a", true), stream.Parallelism(2))
	b := stream.Add[datagen.Event, datagen.Event](a, probeNode(rep, "b", false), stream.Parallelism(2))
	key := func(e datagen.Event) int64 { return e.Key }
	c := stream.Add[datagen.Event, datagen.Event](stream.KeyBy(b, key).Stream, probeNode(rep, "c", false), stream.Parallelism(3))
	stream.Add[datagen.Event, datagen.Event](b.Rebalance(), probeNode(rep, "g", false), stream.Parallelism(3))
	d := stream.Add[datagen.Event, datagen.Event](c.Rebalance(), probeNode(rep, "d", true), stream.Parallelism(2))
	e := stream.Add[datagen.Event, datagen.Event](stream.KeyBy(d, key).Stream, probeNode(rep, "e", true), stream.Parallelism(1))
	f := stream.Add[datagen.Event, datagen.Event](stream.KeyBy(d, key).Stream, probeNode(rep, "f", false), stream.Parallelism(1))
	stream.Add[datagen.Event, datagen.Event](e.Broadcast(), probeNode(rep, "h", true), stream.Parallelism(2))
	stream.Add[datagen.Event, datagen.Event](f.Broadcast(), probeNode(rep, "i", true), stream.Parallelism(2))
	stream.Add[datagen.Event, datagen.Event](f.Rebalance(), probeNode(rep, "j", false), stream.Parallelism(2))
	job := newJob(t, p, newLocal(t), fastCheckpoints(0), quickRestarts(0))
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}

	if len(rep.damaged) > 0 {
		t.Fatalf("batches changed after a retaining operator received them (an emitter reused them): %v", rep.damaged)
	}
	want := map[string]bool{"a": false, "b": false, "c": false, "d": true, "e": false, "f": false, "g": true, "h": true, "i": true, "j": true}
	for id, w := range want {
		got := rep.reuses[id]
		if len(got) == 0 {
			t.Errorf("%s never opened", id)
		}
		for i, r := range got {
			if r != w {
				t.Errorf("ReusesBatches of %s's output (subtask %d) = %v, want %v", id, i, r, w)
			}
		}
	}
	for id := range want {
		n := count
		if id == "h" || id == "i" {
			n *= 2 // broadcast to two subtasks
		}
		var ids uint64
		for i := range int64(count) {
			ids += uint64(i * i)
		}
		ids *= uint64(n / count)
		if rep.records[id] != n || rep.ids[id] != ids {
			t.Errorf("%s got %d records with ids summing (squared) to %d, want %d, %d", id, rep.records[id], rep.ids[id], n, ids)
		}
	}
	// Retaining operators, and i, which shares each batch with j, which
	// retains it, must never see memory again.
	for _, id := range []string{"b", "c", "f", "g", "i", "j"} {
		if rep.arrays[id] != rep.batches[id] {
			t.Errorf("%s, which retains, was handed %d batches in %d memories: memory it kept was handed again", id, rep.batches[id], rep.arrays[id])
		}
	}
	// a is fed by the source, chained: one buffer per subtask. Edges
	// whose consumers all borrow get their batches back: fewer memories
	// than batches, by how much depending on how the tasks were scheduled
	// (a batch that comes back to a full pool is dropped, and an emitter
	// that finds the pool empty takes new memory): on a loaded machine d
	// was handed 882 batches in 257 memories. Without reuse each batch is
	// its own memory. e through a hash edge, d through rebalance, h (both
	// subtasks share each batch) through broadcast.
	if rep.arrays["a"] != 2 {
		t.Errorf("a was handed %d batches in %d memories, want the source's one buffer per subtask (2)", rep.batches["a"], rep.arrays["a"])
	}
	for _, id := range []string{"d", "e", "h"} {
		if n := rep.arrays[id]; n*2 > rep.batches[id] {
			t.Errorf("%s was handed %d batches in %d memories: its edge did not reuse the batches it was done with", id, rep.batches[id], n)
		}
	}
}
