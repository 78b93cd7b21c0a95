//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// BenchmarkIcebergSink writes 20 million generated rows per iteration into a
// fresh table with checkpoints every second, as appends and as a changelog
// of updates to 100,000 keys, and reports rows per second and per CPU
// second of this process (the catalog's database is another process), and
// the data and delete files per commit:
//
//	go test -tags iceberg ./connector/iceberg -run '^$' -bench . -benchtime 1x
func BenchmarkIcebergSink(b *testing.B) {
	const benchRows = 20_000_000
	for _, mode := range []string{"append", "changelog"} {
		for _, par := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", mode, par), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					f := newFixture(b)
					name := fmt.Sprintf("bench_%d", i)
					schema, gen := genSchema, func(id, key, value int64) row.Row {
						return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
					}
					cfg := f.config(name, schema)
					if mode == "changelog" {
						schema = changelogSchema
						gen = func(id, _, _ int64) row.Row {
							op := "update"
							if id < 100_000 {
								op = "insert"
							}
							return row.Row{row.IntValue(id % 100_000), row.IntValue(id), row.StringValue(op)}
						}
						cfg = f.config(name, schema)
						cfg.Key, cfg.Op = []string{"k"}, "_op"
					}
					sink, err := ice.NewSink("lake", cfg)
					if err != nil {
						b.Fatal(err)
					}
					src, err := datagen.New(datagen.Config{Count: benchRows, Keys: 100_000}, gen)
					if err != nil {
						b.Fatal(err)
					}
					p := stream.New("icebench", stream.DefaultParallelism(par))
					s := stream.From(p, "gen", src)
					if mode == "changelog" {
						s = stream.KeyBy(s, func(r row.Row) int64 { return r[0].Int() }).Stream
					}
					stream.To(s, "lake", stream.Sink[row.Row](sink))
					ck := checkpoint.DefaultOptions()
					ck.Interval = time.Second
					job, err := p.NewJob(stream.RunOptions{CheckpointDir: filepath.Join(b.TempDir(), "ckpt"), Checkpoint: ck,
						Restart: runtime.RestartOptions{MaxAttempts: 0}})
					if err != nil {
						b.Fatal(err)
					}
					cpu0, start := cpuSeconds(), time.Now()
					if err := job.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
					wall, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
					tbl := f.table(b, name)
					commits, files := map[string]bool{}, 0
					for _, snap := range tbl.Metadata().Snapshots() {
						commits[snap.Summary.Properties["ingest.checkpoint-id"]] = true
					}
					if cur := tbl.CurrentSnapshot(); cur != nil {
						files = atoiProp(cur.Summary.Properties["total-data-files"]) + atoiProp(cur.Summary.Properties["total-delete-files"])
					}
					b.ReportMetric(benchRows/wall, "rows/s")
					b.ReportMetric(benchRows/cpu, "rows/CPU-s")
					b.ReportMetric(float64(files)/float64(len(commits)), "files/commit")
					b.ReportMetric(float64(len(commits)), "commits")
				}
			})
		}
	}
}

func atoiProp(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}
