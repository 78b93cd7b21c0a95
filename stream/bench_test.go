package stream_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Benchmarks of the targets. b.N is the number of records; run with
// a fixed count so checkpoints at a 1 s interval happen, e.g.
//
//	go test ./stream -run '^$' -bench . -benchtime 50000000x
//
// Each reports records/s (wall clock) and records per CPU-second
// ("per core"), from getrusage of the whole process.

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func checkpointing(interval time.Duration) checkpoint.Options {
	o := checkpoint.DefaultOptions()
	o.Interval = interval // 0: no periodic checkpoints, only the final one
	return o
}

func runBench(b *testing.B, p *stream.Pipeline, interval time.Duration) {
	b.Helper()
	job, err := p.NewJob(stream.RunOptions{Checkpoint: checkpointing(interval), CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	if err := job.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	b.StopTimer()
	st := job.Stats()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(st.Completed), "checkpoints")
}

// BenchmarkStateless: datagen → map → discard at parallelism 1.
func BenchmarkStateless(b *testing.B) {
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"checkpoints=off", 0}, {"checkpoints=1s", time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			p := stream.New("bench-stateless")
			src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: 1000})
			if err != nil {
				b.Fatal(err)
			}
			events := stream.From[datagen.Event](p, "events", src)
			doubled := stream.Map(events, "double", func(e datagen.Event) int64 { return e.Value * 2 })
			stream.To(doubled, "discard", stream.Discard[int64]())
			runBench(b, p, c.interval)
		})
	}
}

// sumAcc is the accumulator of the windowed benchmark.
type sumAcc struct{ Count, Sum int64 }

type sumCodec struct{}

func (sumCodec) Name() string { return "bench.sum" }
func (sumCodec) Append(dst []byte, a sumAcc) []byte {
	return state.Int64Codec{}.Append(state.Int64Codec{}.Append(dst, a.Count), a.Sum)
}
func (sumCodec) Decode(src []byte) (sumAcc, int, error) {
	c, n, err := state.Int64Codec{}.Decode(src)
	if err != nil {
		return sumAcc{}, 0, err
	}
	s, m, err := state.Int64Codec{}.Decode(src[n:])
	return sumAcc{Count: c, Sum: s}, n + m, err
}

// BenchmarkWindowed: datagen → key-by → tumbling window at parallelism 2.
func BenchmarkWindowed(b *testing.B) {
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"checkpoints=off", 0}, {"checkpoints=1s", time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			p := stream.New("bench-windowed", stream.DefaultParallelism(2))
			src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: 1000, EventInterval: time.Microsecond})
			if err != nil {
				b.Fatal(err)
			}
			events := stream.From[datagen.Event](p, "events", src)
			keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
			agg := window.Aggregate[datagen.Event, sumAcc]{
				Init:  func() sumAcc { return sumAcc{} },
				Add:   func(a sumAcc, e datagen.Event) sumAcc { return sumAcc{Count: a.Count + 1, Sum: a.Sum + e.Value} },
				Codec: sumCodec{},
			}
			sums := window.Tumbling(keyed, "per_key", 100*time.Millisecond, agg, window.ResultOf[int64, sumAcc])
			stream.To(sums, "discard", stream.Discard[window.Result[int64, sumAcc]]())
			runBench(b, p, c.interval)
		})
	}
}
