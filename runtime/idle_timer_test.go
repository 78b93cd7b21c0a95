package runtime_test

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// scriptSource: "quiet" emits one record at time 1, then reports Idle until
// released; "busy" emits times 1..upTo, one per ms, then waits until
// released. Both then end.
type scriptSource struct {
	quiet    bool
	upTo     int64
	released *atomic.Bool
}

func (s scriptSource) NewSubtask() runtime.SourceSubtask[int64] { return &scriptSubtask{src: s} }
func (scriptSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (scriptSource) Describe() string { return "script" }

type scriptSubtask struct {
	src  scriptSource
	ctx  *runtime.Context
	out  runtime.Emitter[int64]
	next int64
}

func (s *scriptSubtask) Open(ctx *runtime.Context, out runtime.Emitter[int64]) error {
	s.ctx, s.out, s.next = ctx, out, 1
	return nil
}
func (s *scriptSubtask) Position() ([]byte, error) { return json.Marshal(s.next) }
func (s *scriptSubtask) Close() error              { return nil }
func (s *scriptSubtask) Read() (runtime.ReadResult, error) {
	rel := s.src.released.Load()
	if s.src.quiet {
		if s.next == 1 {
			s.next++
			return runtime.ReadResult{Watermark: 1}, s.out.Emit(runtime.Batch[int64]{{Value: 1, Time: 1}})
		}
		return runtime.ReadResult{Watermark: 1, Idle: !rel, Exhausted: rel, Wait: time.Millisecond}, nil
	}
	if s.next <= s.src.upTo {
		t := s.next
		s.next++
		return runtime.ReadResult{Watermark: t, Wait: time.Millisecond}, s.out.Emit(runtime.Batch[int64]{{Value: t, Time: t}})
	}
	return runtime.ReadResult{Watermark: s.src.upTo, Exhausted: rel, Wait: time.Millisecond}, nil
}

// TestTimerOutputOfIdleTaskDoesNotStallConsumer: task T reads only an idle
// source, so it tells its consumer D it is idle and D's watermark follows its
// other input. When T's processing-time timer emits a record, D takes the
// channel as active again; T must then announce itself idle again, or D's
// watermark stays pinned at T's stale watermark (1) while T's input is quiet
// (the regression this test was written for).
func TestTimerOutputOfIdleTaskDoesNotStallConsumer(t *testing.T) {
	var released atomic.Bool
	var mu sync.Mutex
	var wms []int64
	late := 0
	p := stream.New("idle-timer")
	quiet := stream.From[int64](p, "quiet", scriptSource{quiet: true, released: &released}, stream.Parallelism(1))
	busy := stream.From[int64](p, "busy", scriptSource{upTo: 300, released: &released}, stream.Parallelism(1))
	tNode := &runtime.Node{ID: "t", Parallelism: 1, NewOperator: func() runtime.Operator { return &ptOp{} }}
	tOut := stream.Add[int64, int64](quiet.Rebalance(), tNode)
	d := &runtime.Node{ID: "d", Parallelism: 1, NewOperator: func() runtime.Operator {
		return &wmRecorder{releaseAt: 300, released: &released, mu: &mu, wms: &wms, late: &late}
	}}
	stream.Connect(tOut.Rebalance(), d, 0)
	stream.Connect(busy.Rebalance(), d, 1)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(0))
	err = runWithin(job, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	last := int64(0)
	if len(wms) > 0 {
		last = wms[len(wms)-1]
	}
	if err != nil {
		t.Fatalf("run: %v; D's watermark stuck at %d although its only other input is idle", err, last)
	}
}
