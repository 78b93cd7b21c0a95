package blob

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// Checkpoint write and read latency with one 1 MiB state file, per backend:
//
//	go test ./storage/blob -run '^$' -bench Checkpoint -benchtime 200x
//
// write is one checkpoint as the runtime stores it: WriteFile of the state file, then
// WriteMetadata (a small object, conditional create). read is a restore: ReadMetadata, then
// ReadFile with its checksum checks. The s3 backend is gofakes3 over HTTP on 127.0.0.1, so its
// figures are this package's and the AWS SDK's overhead, not a network's.
func BenchmarkCheckpoint1MiB(b *testing.B) {
	state := make([]byte, 1<<20)
	rand.Read(state)
	meta := make([]byte, 2<<10)
	for _, bk := range []struct {
		name string
		open func(b *testing.B) storage.Storage
	}{
		{"local", func(b *testing.B) storage.Storage {
			l, err := storage.NewLocal(filepath.Join(b.TempDir(), "ck"))
			if err != nil {
				b.Fatal(err)
			}
			return l
		}},
		{"mem", func(b *testing.B) storage.Storage { return benchOpen(b, "mem://"+uniqueName(b)) }},
		{"file", func(b *testing.B) storage.Storage { return benchOpen(b, "file://"+filepath.Join(b.TempDir(), "ck")) }},
		{"s3", func(b *testing.B) storage.Storage { return benchOpen(b, newFakeS3(b).url("bench")) }},
	} {
		b.Run(bk.name+"/write", func(b *testing.B) {
			st := bk.open(b)
			ctx := context.Background()
			b.SetBytes(int64(len(state)))
			b.ResetTimer()
			for i := range b.N {
				if _, err := st.WriteFile(ctx, int64(i), "kg-0", state); err != nil {
					b.Fatal(err)
				}
				if err := st.WriteMetadata(ctx, int64(i), meta); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/checkpoint")
		})
		b.Run(bk.name+"/read", func(b *testing.B) {
			st := bk.open(b)
			ctx := context.Background()
			h, err := st.WriteFile(ctx, 1, "kg-0", state)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.WriteMetadata(ctx, 1, meta); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(state)))
			b.ResetTimer()
			for range b.N {
				if _, err := st.ReadMetadata(ctx, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := st.ReadFile(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/restore")
		})
	}
}

// Latency of the small requests a checkpoint makes besides its state: a metadata write and the
// List a recovery or retention makes, on s3 (gofakes3).
func BenchmarkS3SmallOps(b *testing.B) {
	st := benchOpen(b, newFakeS3(b).url("small"))
	ctx := context.Background()
	b.Run("WriteFile-1KiB", func(b *testing.B) {
		data := make([]byte, 1<<10)
		for i := range b.N {
			if _, err := st.WriteFile(ctx, int64(i%10), fmt.Sprintf("f%d", i), data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteMetadata", func(b *testing.B) {
		for i := range b.N {
			if err := st.WriteMetadata(ctx, int64(1000+i), []byte("meta")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("List-10", func(b *testing.B) {
		st := benchOpen(b, newFakeS3(b).url("list"))
		for i := range 10 {
			if err := st.WriteMetadata(ctx, int64(i), []byte("m")); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for range b.N {
			if _, err := st.List(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchOpen(b *testing.B, raw string) *Storage {
	b.Helper()
	s, err := Open(context.Background(), raw, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// Pipeline throughput with checkpoints every 100 ms on local storage and on s3 (gofakes3):
// datagen → per-key tumbling window (1000 keys) → discard, parallelism 2. b.N is the number of
// records; run with a fixed count, e.g.
//
//	go test ./storage/blob -run '^$' -bench Pipeline -benchtime 2000000x
func BenchmarkPipelineCheckpoints(b *testing.B) {
	for _, bk := range []struct {
		name string
		open func(b *testing.B) storage.Storage
	}{
		{"local", func(b *testing.B) storage.Storage {
			l, err := storage.NewLocal(filepath.Join(b.TempDir(), "ck"))
			if err != nil {
				b.Fatal(err)
			}
			return l
		}},
		{"s3", func(b *testing.B) storage.Storage { return benchOpen(b, newFakeS3(b).url("pipe")) }},
	} {
		b.Run(bk.name, func(b *testing.B) {
			p := stream.New("bench-blob", stream.DefaultParallelism(2))
			src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: 1000})
			if err != nil {
				b.Fatal(err)
			}
			byKey := stream.KeyBy(stream.From[datagen.Event](p, "events", src), func(e datagen.Event) int64 { return e.Key })
			agg := window.Aggregate[datagen.Event, totals]{
				Init:  func() totals { return totals{} },
				Add:   func(a totals, e datagen.Event) totals { return totals{Count: a.Count + 1, Sum: a.Sum + e.Value} },
				Codec: totalsCodec{},
			}
			perKey := window.Tumbling(byKey, "per_key", time.Second, agg, func(key int64, w window.Window, a totals) totals { return a })
			stream.To(perKey, "discard", stream.Discard[totals]())
			opts := checkpoint.DefaultOptions()
			opts.Interval = 100 * time.Millisecond
			job, err := p.NewJob(stream.RunOptions{Checkpoint: opts, Storage: bk.open(b)})
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
			st := job.Stats()
			b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
			b.ReportMetric(float64(st.Completed), "checkpoints")
			if st.Completed > 0 {
				b.ReportMetric(float64(st.CheckpointTime.Milliseconds())/float64(st.Completed), "ms/checkpoint")
			}
		})
	}
}
