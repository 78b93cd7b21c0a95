package kafka

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/stream"
)

// BenchmarkSinkThroughput: datagen → Kafka sink (in-process kfake broker,
// 6 partitions) with a checkpoint — a prepare and a commit per sink
// subtask — every second. b.N is the number of records; run with a fixed
// count so several checkpoints happen, e.g.
//
//	go test ./connector/kafka -run '^$' -bench SinkThroughput -benchtime 20000000x
//
// It reports records/s (wall clock) and the checkpoints completed. The broker
// runs in the same process and shares its CPUs, so the figure is a floor for
// the sink's own cost, not a real cluster's throughput.
func BenchmarkSinkThroughput(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run("sink_parallelism="+strconv.Itoa(par), func(b *testing.B) {
			k := newSinkCluster(b, 6)
			src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: 1000})
			if err != nil {
				b.Fatal(err)
			}
			sink, err := NewSink(k.config("bench"), func(e datagen.Event) ([]byte, []byte, error) {
				v := strconv.AppendInt(make([]byte, 0, 48), e.ID, 10)
				v = append(v, ',')
				v = strconv.AppendInt(v, e.Key, 10)
				v = append(v, ',')
				v = strconv.AppendInt(v, e.Value, 10)
				return strconv.AppendInt(nil, e.Key, 10), v, nil
			})
			if err != nil {
				b.Fatal(err)
			}
			ck := checkpoint.DefaultOptions()
			ck.Interval = time.Second
			p := stream.New("bench-kafka-sink")
			events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(par))
			stream.To(events, "out", stream.Sink[datagen.Event](sink), stream.Parallelism(par))
			job, err := p.NewJob(stream.RunOptions{Checkpoint: ck, CheckpointDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			wall := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
			b.ReportMetric(float64(job.Stats().Completed), "checkpoints")
			if b.N >= 1000 && b.N <= 5_000_000 { // reading more back takes longer than the run
				if got := len(k.readTopic(b, k.topic, true)); got != b.N {
					b.Fatalf("%d records committed, want %d", got, b.N)
				}
			}
		})
	}
}
