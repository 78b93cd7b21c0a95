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

// idleSource: subtask 0 emits times 1..busyUntil, then waits for release and
// ends; subtask 1 reports Idle until release, then emits one record at
// lateTime and ends. Neither replays (the test does not fail them).
type idleSource struct {
	busyUntil, lateTime int64
	released            *atomic.Bool
}

func (s idleSource) NewSubtask() runtime.SourceSubtask[int64] { return &idleSubtask{src: s} }
func (idleSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (idleSource) Describe() string { return "idle test source" }
func (s idleSource) Stream(p *stream.Pipeline) stream.Stream[int64] {
	return stream.From[int64](p, "src", s, stream.Parallelism(2))
}

type idleSubtask struct {
	src  idleSource
	ctx  *runtime.Context
	out  runtime.Emitter[int64]
	next int64
}

func (s *idleSubtask) Open(ctx *runtime.Context, out runtime.Emitter[int64]) error {
	s.ctx, s.out, s.next = ctx, out, 1
	return nil
}
func (s *idleSubtask) Position() ([]byte, error) { return json.Marshal(s.next) }
func (s *idleSubtask) Close() error              { return nil }

func (s *idleSubtask) Read() (runtime.ReadResult, error) {
	released := s.src.released.Load()
	if s.ctx.Task.Subtask == 1 {
		if !released {
			return runtime.ReadResult{Watermark: runtime.MinWatermark, Idle: true, Wait: time.Millisecond}, nil
		}
		if err := s.out.Emit(runtime.Batch[int64]{{Value: s.src.lateTime, Time: s.src.lateTime}}); err != nil {
			return runtime.ReadResult{}, err
		}
		return runtime.ReadResult{Watermark: s.src.lateTime, Exhausted: true}, nil
	}
	if s.next <= s.src.busyUntil {
		t := s.next
		s.next++
		err := s.out.Emit(runtime.Batch[int64]{{Value: t, Time: t}})
		return runtime.ReadResult{Watermark: t}, err
	}
	if !released {
		return runtime.ReadResult{Watermark: s.src.busyUntil, Wait: time.Millisecond}, nil
	}
	return runtime.ReadResult{Watermark: s.src.busyUntil, Exhausted: true}, nil
}

// wmRecorder records the watermarks and records it sees and releases the
// source once the watermark reached releaseAt.
type wmRecorder struct {
	stream.Stateless
	releaseAt int64
	released  *atomic.Bool
	mu        *sync.Mutex
	wms       *[]int64
	late      *int
}

func (o *wmRecorder) ProcessBatch(_ int, r runtime.Records) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rec := range r.(runtime.Batch[int64]) {
		if n := len(*o.wms); n > 0 && rec.Time <= (*o.wms)[n-1] {
			*o.late++
		}
	}
	return nil
}

func (o *wmRecorder) ProcessWatermark(wm int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	*o.wms = append(*o.wms, wm)
	if wm >= o.releaseAt {
		o.released.Store(true)
	}
	return nil
}

// TestIdleInputDoesNotHoldBackWatermark: an idle source subtask stops holding
// the downstream watermark back (else this test would hang: the source is
// released only once the watermark passed the busy subtask's last record),
// and when it rejoins with a record behind the watermark, the watermark does
// not go back and the record is seen as late.
func TestIdleInputDoesNotHoldBackWatermark(t *testing.T) {
	var released atomic.Bool
	var mu sync.Mutex
	var wms []int64
	late := 0
	src := idleSource{busyUntil: 500, lateTime: 100, released: &released}
	p := stream.New("idle")
	s := src.Stream(p)
	rec := &runtime.Node{ID: "rec", Parallelism: 1, NewOperator: func() runtime.Operator {
		return &wmRecorder{releaseAt: 500, released: &released, mu: &mu, wms: &wms, late: &late}
	}}
	stream.Connect(s.Rebalance(), rec, 0)
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(0))
	if err := runWithin(job, 10*time.Second); err != nil {
		t.Fatalf("run: %v (watermarks seen: %d, released %v)", err, len(wms), released.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(wms); i++ {
		if wms[i] <= wms[i-1] {
			t.Fatalf("watermark went from %d to %d", wms[i-1], wms[i])
		}
	}
	if late != 1 {
		t.Fatalf("late records: %d, want the rejoining subtask's one record", late)
	}
}

// ptOp registers a processing-time timer 20ms after its first record and
// emits the number of records seen when it fires.
type ptOp struct {
	stream.Stateless
	seen  int64
	at    int64
	fired bool
}

func (o *ptOp) ProcessBatch(_ int, r runtime.Records) error {
	o.seen += int64(r.Len())
	if o.at == 0 && !o.fired {
		o.at = time.Now().Add(20 * time.Millisecond).UnixNano()
	}
	return nil
}

func (o *ptOp) NextProcessingTime() (int64, bool) { return o.at, o.at != 0 }

func (o *ptOp) OnProcessingTime(now int64) error {
	if now < o.at {
		return nil
	}
	o.at, o.fired = 0, true
	return o.Out.Emit(runtime.Batch[int64]{{Value: o.seen, Time: now}})
}

// TestProcessingTimer: a processing-time timer fires while the input is quiet
// (the source waits for it), and its output is committed.
func TestProcessingTimer(t *testing.T) {
	var released atomic.Bool
	src := idleSource{busyUntil: 50, lateTime: 1000, released: &released}
	p := stream.New("pt")
	s := src.Stream(p)
	node := &runtime.Node{ID: "pt", Parallelism: 1, NewOperator: func() runtime.Operator { return &ptOp{} }}
	out := stream.Add[int64, int64](s.Rebalance(), node)
	store := newTxStore[int64]()
	stream.To(stream.Map(out, "release", func(v int64) int64 { released.Store(true); return v }), "sink", stream.Sink[int64](txSink[int64]{store}), stream.Parallelism(1))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job := newJob(t, p, st, fastCheckpoints(10*time.Millisecond), quickRestarts(0))
	if err := runWithin(job, 10*time.Second); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := store.values(); len(got) != 1 || got[0] < 1 || got[0] > 50 {
		t.Fatalf("timer output %v, want one count of the records before it fired", got)
	}
}
