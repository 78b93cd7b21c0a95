//go:build iceberg

package iceberg_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

func appendPipeline(t *testing.T, f *fixture, n int64, rate float64, interval ...time.Duration) *stream.Pipeline {
	t.Helper()
	cfg := f.config("claim", genSchema)
	if len(interval) > 0 {
		cfg.CommitInterval = interval[0]
	}
	cfg.Pipeline = "icetest-claim"
	sink, err := ice.NewSink("lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(datagen.Config{Count: n, Rate: rate, Keys: 10}, func(id, key, value int64) row.Row {
		return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
	})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("icetest-claim", stream.DefaultParallelism(1))
	stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))
	return p
}

func runJobIn(p *stream.Pipeline, dir string) error {
	ck := checkpoint.DefaultOptions()
	ck.Interval = 100 * time.Millisecond
	job, err := p.NewJob(stream.RunOptions{
		CheckpointDir: dir, Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 3},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return job.Run(ctx)
}

// TestIcebergTwoJobsSameTable: the same pipeline started twice at once with
// two checkpoint directories (two hosts, or a copy of the spec with another
// checkpoint dir). Each reads the whole bounded source. At most one of them
// may publish: the table must hold every row once, or a job must fail.
func TestIcebergTwoJobsSameTable(t *testing.T) {
	const n = 3000
	f := newFixture(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		p := appendPipeline(t, f, n, 3000)
		dir := filepath.Join(t.TempDir(), "ckpts")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runJobIn(p, dir)
		}()
	}
	wg.Wait()
	t.Logf("job errors: %v / %v", errs[0], errs[1])
	rows := f.scan(t, "claim", "id")
	seen := map[int64]int{}
	for _, r := range rows {
		seen[r[0].(int64)]++
	}
	dups := 0
	for _, c := range seen {
		if c > 1 {
			dups++
		}
	}
	t.Logf("table: %d rows, %d distinct ids, %d ids more than once", len(rows), len(seen), dups)
	if errs[0] == nil && errs[1] == nil && dups > 0 {
		t.Errorf("both jobs of pipeline icetest-claim ran to exit 0 and published the same rows: %d ids in the table more than once", dups)
	}
}

// TestIcebergRerunAfterCheckpointDirDeleted: a bounded run completes; the
// checkpoint directory is deleted and the pipeline is run again. The rerun
// must refuse (it would publish every row again).
func TestIcebergRerunAfterCheckpointDirDeleted(t *testing.T) {
	const n = 1000
	f := newFixture(t)
	dir := filepath.Join(t.TempDir(), "ckpts")
	if err := runJobIn(appendPipeline(t, f, n, 20000), dir); err != nil {
		t.Fatal(err)
	}
	if err := removeAll(dir); err != nil {
		t.Fatal(err)
	}
	err := runJobIn(appendPipeline(t, f, n, 20000), dir)
	rows := f.scan(t, "claim", "id")
	t.Logf("rerun: err=%v; table %d rows", err, len(rows))
	if err == nil || len(rows) != n {
		t.Errorf("rerun after deleting the checkpoint directory: err=%v, %d rows (want an error and %d rows)", err, len(rows), n)
	}
}

func removeAll(dir string) error { return os.RemoveAll(dir) }

// TestIcebergSinkReusedBySecondJob: a Go program runs one pipeline value
// twice, the second time on a new checkpoint directory with
// AllowDuplicates (take the table over, publishing the output again). The
// second job's checkpoint ids start at 1 again, but Sink.published still
// holds the first job's last checkpoint.
func TestIcebergSinkReusedBySecondJob(t *testing.T) {
	const n = 3000
	f := newFixture(t)
	p := appendPipeline(t, f, n, 1500, 500*time.Millisecond)
	if err := runJobIn(p, filepath.Join(t.TempDir(), "a")); err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 100 * time.Millisecond
	job, err := p.NewJob(stream.RunOptions{CheckpointDir: filepath.Join(t.TempDir(), "b"), Checkpoint: ck, AllowDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := f.scan(t, "claim", "id")
	t.Logf("table after two jobs: %d rows (first job %d)", len(rows), n)
	if len(rows) != 2*n {
		t.Errorf("the second job (duplicates allowed) published %d of its %d rows", len(rows)-n, n)
	}
}
