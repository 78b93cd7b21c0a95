package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/storage"
)

// countingSource emits one single-record batch per Read, as fast as it is
// let, and reports when it is closed.
type countingSource struct {
	out    Output
	reads  *atomic.Int64
	closed chan struct{}
}

func (s *countingSource) Open(ctx *Context) error { s.out = ctx.Output; return nil }
func (s *countingSource) Read() (ReadResult, error) {
	n := s.reads.Add(1)
	return ReadResult{Watermark: MinWatermark}, s.out.Emit(Batch[int64]{{Value: n}})
}
func (s *countingSource) Position() ([]byte, error) { return nil, nil }
func (s *countingSource) Close() error              { close(s.closed); return nil }

// stuckOp takes its first batch and then does not return until released: a
// consumer that stops reading its channel.
type stuckOp struct {
	entered func()
	release chan struct{}
}

func (o *stuckOp) Open(*Context) error { return nil }
func (o *stuckOp) ProcessBatch(int, Records) error {
	o.entered()
	<-o.release
	return nil
}
func (o *stuckOp) ProcessWatermark(int64) error     { return nil }
func (o *stuckOp) Snapshot(int64) (Snapshot, error) { return Snapshot{}, nil }
func (o *stuckOp) NotifyComplete(int64) error       { return nil }
func (o *stuckOp) Close() error                     { return nil }

// DESIGN.md §6 ("bounded channels; a full channel is backpressure"): when
// the consumer stops reading, the producer fills the channel (channelCapacity
// messages) and then blocks: it reads no more input. Cancelling the job's
// context releases the blocked producer with an error although the consumer
// is still stuck, Run returns the cancellation, and no goroutine is left.
func TestBackpressureBlocksProducerUntilCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	var reads atomic.Int64
	srcClosed := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})

	src := &Node{ID: "src", Parallelism: 1, NewSource: func() Source {
		return &countingSource{reads: &reads, closed: srcClosed}
	}}
	sink := &Node{ID: "sink", Parallelism: 1,
		NewOperator: func() Operator {
			return &stuckOp{entered: func() { once.Do(func() { close(entered) }) }, release: release}
		},
		// Rebalance, not forward: a forward edge would chain the sink into
		// the source's goroutine, with no channel between them.
		Inputs: []Edge{{From: src, Partitioner: Rebalance()}},
	}
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := checkpoint.DefaultOptions()
	opts.Interval = 0
	job, err := NewJob(&Plan{Name: "backpressure", Nodes: []*Node{src, sink}}, Options{Checkpoint: opts, Storage: st, Restart: RestartOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- job.Run(ctx) }()

	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the sink never received a batch")
	}
	// One batch in the sink, channelCapacity in the channel, one in a send
	// that cannot complete.
	const full = channelCapacity + 2
	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < full && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := reads.Load(); n != full {
		t.Fatalf("source read %d batches, want %d (1 processing + %d queued + 1 blocked)", n, full, channelCapacity)
	}
	time.Sleep(50 * time.Millisecond) // the source must stay blocked
	if n := reads.Load(); n != full {
		t.Fatalf("source read %d batches while the channel was full, want it blocked at %d", n, full)
	}

	cancel()
	select {
	case <-srcClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked producer was not released by the cancellation")
	}
	select {
	case err := <-runErr:
		t.Fatalf("Run returned (%v) while the sink was still processing", err)
	default:
	}
	close(release)
	select {
	case err := <-runErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
}
