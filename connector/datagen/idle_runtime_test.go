package datagen_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// idleCounting wraps the generator and counts Read results with Idle set.
type idleCounting struct {
	*datagen.Source[datagen.Event]
	idle, reads *atomic.Int64
}

func (s idleCounting) NewSubtask() runtime.SourceSubtask[datagen.Event] {
	return idleSub{s.Source.NewSubtask(), s.idle, s.reads}
}

type idleSub struct {
	runtime.SourceSubtask[datagen.Event]
	idle, reads *atomic.Int64
}

func (s idleSub) Read() (runtime.ReadResult, error) {
	res, err := s.SourceSubtask.Read()
	s.reads.Add(1)
	if res.Idle {
		s.idle.Add(1)
	}
	return res, err
}

// TestIdleTimeoutInRuntime: each subtask emits a record every 400ms and
// IdleTimeout is 20ms, so each goes idle between records. The runtime only
// calls Read again after ReadResult.Wait; the generator caps its Wait at the
// idle timeout so Read runs, and reports Idle, in between. (Regression: the
// Wait used to be exactly until the next record, so no Read was ever idle.)
func TestIdleTimeoutInRuntime(t *testing.T) {
	src, err := datagen.Events(datagen.Config{Count: 8, Rate: 5, Watermark: watermark.Strategy{IdleTimeout: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var idle, reads atomic.Int64
	p := stream.New("idle-datagen")
	ev := stream.From[datagen.Event](p, "events", stream.Source[datagen.Event](idleCounting{src, &idle, &reads}), stream.Parallelism(2))
	stream.To(ev, "sink", stream.Discard[datagen.Event]())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Run(ctx, stream.RunOptions{CheckpointDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if idle.Load() == 0 {
		t.Fatalf("%d reads over ~1.6s with 400ms between a subtask's records and a 20ms idle timeout: none reported Idle", reads.Load())
	}
}
