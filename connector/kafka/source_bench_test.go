package kafka_test

import (
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// srcBenchRecords is how many records the benchmarks read per iteration.
const srcBenchRecords = 200_000

// srcBenchKafka fills a 4-partition topic with srcBenchRecords JSON events.
func srcBenchKafka(b *testing.B) *srcKafka {
	b.Helper()
	k := srcNewKafka(b, 4)
	const chunk = 20_000
	for from := int64(0); from < srcBenchRecords; from += chunk {
		k.produceEvents(b, from, from+chunk, 100, 4)
	}
	return k
}

// srcCountingOutput counts emitted records.
type srcCountingOutput struct{ n int }

func (c *srcCountingOutput) Emit(r runtime.Records) error { c.n += r.Len(); return nil }

// benchSourceSubtask reads the whole topic with one bounded subtask per
// iteration and reports records/s.
func benchSourceSubtask[T any](b *testing.B, decode kafka.Decoder[T]) {
	k := srcBenchKafka(b)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	src, err := kafka.NewSource(cfg, decode)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		out := &srcCountingOutput{}
		st := runtime.EraseSource(src.NewSubtask())
		if err := st.Open(&runtime.Context{Parallelism: 1, Output: out}); err != nil {
			b.Fatal(err)
		}
		for {
			res, err := st.Read()
			if err != nil {
				b.Fatal(err)
			}
			if res.Exhausted {
				break
			}
			if res.Wait > 0 {
				time.Sleep(res.Wait)
			}
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		if out.n != srcBenchRecords {
			b.Fatalf("read %d records, want %d", out.n, srcBenchRecords)
		}
	}
	b.ReportMetric(float64(b.N*srcBenchRecords)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkSourceRaw measures the source with a decoder that keeps the value
// bytes: the cost of fetching from kfake and of the source itself.
func BenchmarkSourceRaw(b *testing.B) {
	benchSourceSubtask(b, func(m kafka.Message) ([]byte, int64, error) { return m.Value, m.Timestamp.UnixNano(), nil })
}

// BenchmarkSourceJSON adds JSON decoding with the event time from a field.
func BenchmarkSourceJSON(b *testing.B) {
	benchSourceSubtask(b, srcDecode)
}

// BenchmarkSourcePipeline runs kafka (2 subtasks) → discard as a bounded job
// with checkpoints every 100 ms.
func BenchmarkSourcePipeline(b *testing.B) {
	k := srcBenchKafka(b)
	cfg := k.config()
	cfg.StopAt = kafka.StopAtLatest
	src, err := kafka.NewSource(cfg, func(m kafka.Message) ([]byte, int64, error) { return m.Value, m.Timestamp.UnixNano(), nil })
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		p := stream.New("kafka-bench")
		stream.To(stream.From[[]byte](p, "events", src, stream.Parallelism(2)), "out", stream.Discard[[]byte]())
		if err := srcRun(srcJob(b, p, b.TempDir(), 100*time.Millisecond, 0)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*srcBenchRecords)/time.Since(start).Seconds(), "records/s")
}
