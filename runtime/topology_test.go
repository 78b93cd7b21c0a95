package runtime_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// indexSource emits batches whose values are its own subtask index, then
// ends.
type indexSource struct {
	out     runtime.Output
	sub     int
	batches int
}

func (s *indexSource) Open(ctx *runtime.Context) error {
	s.out, s.sub = ctx.Output, ctx.Task.Subtask
	return nil
}
func (s *indexSource) Read() (runtime.ReadResult, error) {
	b := make(runtime.Batch[int], 10)
	for i := range b {
		b[i].Value = s.sub
	}
	s.batches--
	return runtime.ReadResult{Watermark: runtime.MinWatermark, Exhausted: s.batches == 0}, s.out.Emit(b)
}
func (s *indexSource) Position() ([]byte, error) { return nil, nil }
func (s *indexSource) Close() error              { return nil }

// matrix counts records by (producer subtask, consumer subtask).
type matrix struct {
	mu sync.Mutex
	m  map[[2]int]int
}

func (m *matrix) add(from, to, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[[2]int{from, to}] += n
}

// recordOp counts the records it receives by the producer subtask their value
// names.
type recordOp struct {
	stream.Stateless
	sub int
	m   *matrix
}

func (o *recordOp) Open(ctx *runtime.Context) error {
	o.sub = ctx.Task.Subtask
	return o.Stateless.Open(ctx)
}
func (o *recordOp) ProcessBatch(_ int, r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[int]) {
		o.m.add(rec.Value, o.sub, 1)
	}
	return nil
}

// DESIGN.md §6 (forward partitioner; one channel per producer/consumer
// pair): producer subtask i feeds only consumer subtask i — whether the
// consumer is chained into the producer's goroutine (a single forward
// output) or reads channels: the producer has several outputs (a stream
// consumed twice), or the consumer has several inputs. The job, bounded,
// must also finish: its final checkpoint needs every consumer to align.
func TestForwardKeepsSubtaskIndex(t *testing.T) {
	const p, batches = 3, 5
	source := func(id string) *runtime.Node {
		return &runtime.Node{ID: id, Parallelism: p, NewSource: func() runtime.Source { return &indexSource{batches: batches} }}
	}
	consumer := func(id string, m *matrix, from ...*runtime.Node) *runtime.Node {
		n := &runtime.Node{ID: id, Parallelism: p, NewOperator: func() runtime.Operator { return &recordOp{m: m} }}
		for i, f := range from {
			n.Inputs = append(n.Inputs, runtime.Edge{From: f, Input: i, Partitioner: runtime.Forward()})
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		chained bool
		// build returns the plan's nodes; consumer x records into got[x].
		build func(got map[string]*matrix) []*runtime.Node
	}{
		{"chained", true, func(got map[string]*matrix) []*runtime.Node {
			src := source("src")
			return []*runtime.Node{src, consumer("a", got["a"], src)}
		}},
		{"producer with two outputs", false, func(got map[string]*matrix) []*runtime.Node {
			src := source("src")
			return []*runtime.Node{src, consumer("a", got["a"], src), consumer("b", got["b"], src)}
		}},
		{"consumer with two inputs", false, func(got map[string]*matrix) []*runtime.Node {
			s1, s2 := source("src1"), source("src2")
			return []*runtime.Node{s1, s2, consumer("a", got["a"], s1, s2)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := map[string]*matrix{"a": {m: map[[2]int]int{}}, "b": {m: map[[2]int]int{}}}
			plan := &runtime.Plan{Name: "forward", Nodes: tc.build(got)}
			job, err := runtime.NewJob(plan, runtime.Options{Checkpoint: fastCheckpoints(0), Storage: newLocal(t)})
			if err != nil {
				t.Fatal(err)
			}
			if chained := strings.Contains(plan.Describe(), "↳ chained a"); chained != tc.chained {
				t.Fatalf("plan:\n%s\nconsumer a chained = %v, want %v", plan.Describe(), chained, tc.chained)
			}
			// The job takes milliseconds; a hang is a failure, found fast.
			if err := runWithin(job, 5*time.Second); err != nil {
				t.Fatalf("Run = %v: a bounded pipeline with forward edges did not finish", err)
			}
			for _, n := range plan.Nodes {
				if n.NewOperator == nil {
					continue
				}
				m := got[n.ID]
				for from := range p {
					for to := range p {
						want := 0
						if from == to {
							want = len(n.Inputs) * batches * 10
						}
						if k := m.m[[2]int{from, to}]; k != want {
							t.Errorf("%s: %d records from producer subtask %d reached consumer subtask %d, want %d", n.ID, k, from, to, want)
						}
					}
				}
			}
		})
	}
}

// watermarkCheckOp fails when a record arrives at or before the watermark it
// was last given.
type watermarkCheckOp struct {
	stream.Stateless
	wm     int64
	sub    int
	report func(sub int, wm int64, records int)
	n      int
}

func (o *watermarkCheckOp) Open(ctx *runtime.Context) error {
	o.wm, o.sub = runtime.MinWatermark, ctx.Task.Subtask
	return o.Stateless.Open(ctx)
}
func (o *watermarkCheckOp) ProcessBatch(_ int, r runtime.Records) error {
	for _, rec := range r.(runtime.Batch[datagen.Event]) {
		if rec.Time <= o.wm {
			return fmt.Errorf("event %d at time %d arrived after watermark %d: a watermark overtook records", rec.Value.ID, rec.Time, o.wm)
		}
		o.n++
	}
	return nil
}
func (o *watermarkCheckOp) ProcessWatermark(wm int64) error {
	if wm <= o.wm {
		return fmt.Errorf("watermark went from %d to %d", o.wm, wm)
	}
	o.wm = wm
	return nil
}
func (o *watermarkCheckOp) Close() error { o.report(o.sub, o.wm, o.n); return nil }

// message.go ("Control events never overtake records") and DESIGN.md §6
// (watermark = min across inputs): behind a hash edge, whose writer buffers
// records, a consumer never sees a record at or before a watermark it was
// already given — datagen's watermark is the time of the last record each
// subtask emitted, so an overtaking watermark would show here — and the
// watermark only grows, ending at MaxWatermark.
func TestWatermarksNeverOvertakeRecords(t *testing.T) {
	const count = 30_000
	src, err := datagen.Events(datagen.Config{Count: count, Keys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	final := map[int]int64{}
	total := 0
	p := stream.New("watermarks")
	keyed := stream.KeyBy(stream.From[datagen.Event](p, "events", src, stream.Parallelism(3)), func(e datagen.Event) int64 { return e.Key })
	stream.Connect(keyed.Stream, &runtime.Node{ID: "check", NewOperator: func() runtime.Operator {
		return &watermarkCheckOp{report: func(sub int, wm int64, n int) {
			mu.Lock()
			defer mu.Unlock()
			final[sub] = wm
			total += n
		}}
	}}, 0, stream.Parallelism(2))
	job := newJob(t, p, newLocal(t), fastCheckpoints(0), quickRestarts(0))
	if err := runBounded(t, job); err != nil {
		t.Fatal(err)
	}
	if total != count {
		t.Errorf("%d records checked, want %d", total, count)
	}
	for sub := range 2 {
		if final[sub] != runtime.MaxWatermark {
			t.Errorf("subtask %d ended at watermark %d, want MaxWatermark", sub, final[sub])
		}
	}
}
