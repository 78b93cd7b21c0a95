package nexmark_test

import (
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/runtime"
)

// benchmarkGenerate generates consecutive events of cfg and reports events/s.
func benchmarkGenerate(b *testing.B, cfg nexmark.Config) {
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var sink nexmark.Event
	n := int64(0)
	cpu := cpuTime()
	for b.Loop() {
		sink = g.Event(n)
		n++
	}
	if sink.Type == nexmark.NoEvent {
		b.Fatal("no event")
	}
	reportRates(b, n, cpuTime()-cpu)
}

// reportRates reports events per second of wall time and, where measured,
// per second of the process's CPU time (events/cpu-s: per core, whatever
// else runs on the machine).
func reportRates(b *testing.B, events int64, cpu time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	if cpu > 0 {
		b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
	}
}

// BenchmarkGenerate measures generating Event values (strings included), the
// cost the engine's Nexmark benchmark pays per event; the target is at least
// 3M events/s per core.
func BenchmarkGenerate(b *testing.B) {
	b.Run("default", func(b *testing.B) { benchmarkGenerate(b, nexmark.DefaultConfig()) })
	b.Run("events-per-second=10M", func(b *testing.B) {
		cfg := nexmark.DefaultConfig()
		cfg.EventsPerSecond = 10_000_000
		benchmarkGenerate(b, cfg)
	})
}

// BenchmarkAppendJSON measures encoding events as JSON Lines.
func BenchmarkAppendJSON(b *testing.B) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	events := make([]nexmark.Event, 5000)
	for i := range events {
		events[i] = g.Event(int64(i))
	}
	b.ReportAllocs()
	buf := make([]byte, 0, 4096)
	var bytes int64
	i := 0
	for b.Loop() {
		buf = nexmark.AppendJSON(buf[:0], events[i%len(events)])
		bytes += int64(len(buf))
		i++
	}
	b.SetBytes(bytes / int64(max(i, 1)))
}

// discard is a runtime.Output that drops batches.
type discard struct{}

func (discard) Emit(runtime.Records) error { return nil }

// BenchmarkSourceRead measures a source subtask's Read: generating batches
// of 1024 records at Flink's event-time density.
func BenchmarkSourceRead(b *testing.B) {
	gen := nexmark.DefaultConfig()
	gen.EventsPerSecond = 10_000_000
	src, err := nexmark.NewSource(nexmark.SourceConfig{Generator: gen})
	if err != nil {
		b.Fatal(err)
	}
	st := src.NewSubtask()
	if err := st.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "nexmark"}, Parallelism: 1}, runtime.EmitTo[nexmark.Event](discard{})); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := st.Read(); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, int64(b.N)*1024, cpuTime()-cpu)
}
