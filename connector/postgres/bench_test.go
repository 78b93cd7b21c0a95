package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

var eventColumns = []postgres.Column{{Name: "id", Type: "bigint"}, {Name: "key", Type: "bigint"}, {Name: "value", Type: "bigint"}}

func eventValues(dst []any, e datagen.Event) []any { return append(dst, e.ID, e.Key, e.Value) }

// BenchmarkSinkThroughput runs datagen → postgres (append, COPY into the
// staging table, one publishing transaction per checkpoint) with 1s
// checkpoints, b.N records, and reports rows/s end to end: from the job's
// start until the final checkpoint's rows are published.
//
//	go test -run '^$' -bench SinkThroughput -benchtime 2000000x ./connector/postgres
func BenchmarkSinkThroughput(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			f := newFixture(b)
			sink, err := postgres.NewSink(f.config("events", postgres.Append), eventColumns, eventValues)
			if err != nil {
				b.Fatal(err)
			}
			src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: 1000})
			if err != nil {
				b.Fatal(err)
			}
			p := stream.New(f.pipeline, stream.DefaultParallelism(par))
			stream.To(stream.From[datagen.Event](p, "events", src), "out", sink)
			ck := checkpoint.DefaultOptions()
			ck.Interval = time.Second
			job, err := p.NewJob(stream.RunOptions{CheckpointDir: filepath.Join(b.TempDir(), "checkpoints"), Checkpoint: ck,
				Restart: runtime.RestartOptions{Delay: time.Second, MaxAttempts: 1}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := job.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if n := f.count("events"); n != int64(b.N) {
				b.Fatalf("%d rows published, want %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
			st := job.Stats()
			b.ReportMetric(float64(st.Completed), "checkpoints")
			if st.Completed > 0 {
				b.ReportMetric(float64(st.CheckpointTime.Milliseconds())/float64(st.Completed), "ms/checkpoint")
			}
		})
	}
}

// BenchmarkStaging measures one writer without the engine: rows copied to
// the staging table in the background, a barrier every 100000 rows, and
// each barrier's rows published by the committer.
func BenchmarkStaging(b *testing.B) {
	f := newFixture(b)
	s, err := postgres.NewSink(f.config("events", postgres.Append), eventColumns, eventValues)
	if err != nil {
		b.Fatal(err)
	}
	w := openWriter(b, s, 0, testJob)
	batch := make(runtime.Batch[datagen.Event], 1024)
	b.ResetTimer()
	var id, latest int64
	for done := 0; done < b.N; {
		n := min(len(batch), b.N-done)
		for i := range n {
			batch[i] = runtime.Record[datagen.Event]{Value: datagen.Event{ID: int64(done + i), Key: int64(done+i) % 1000, Value: int64(done+i) % 1000}}
		}
		if err := w.Write(batch[:n]); err != nil {
			b.Fatal(err)
		}
		done += n
		if done%100000 < n || done == b.N {
			id++
			cs, err := w.Snapshot(id)
			if err != nil {
				b.Fatal(err)
			}
			commit(b, s.Committer(), testJob, commitOf(id, latest, cs.Committables))
			latest = id
			_ = w.NotifyComplete(id)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
