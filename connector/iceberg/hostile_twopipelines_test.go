//go:build iceberg

package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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

// TestIcebergTwoPipelinesOneTable: two different pipelines append to one
// table at once, each committing every checkpoint. Their commits race in
// the catalog; the sink says it retries a commit that lost a race. Count
// how many restarts the races cost, and check every row of both is there.
func TestIcebergTwoPipelinesOneTable(t *testing.T) {
	const n = 6000
	f := newFixture(t)
	var wg sync.WaitGroup
	stats := make([]runtime.Stats, 2)
	errs := make([]error, 2)
	// What the jobs log (warnings up) and the recoveries they made, so that
	// a restart says which failure caused it.
	logs := make([]*lockedBuffer, 2)
	recoveries := make([][]runtime.RecoveryEvent, 2)
	for i := range 2 {
		name := []string{"pipeline-a", "pipeline-b"}[i]
		cfg := f.config("shared", genSchema)
		cfg.Pipeline = name
		sink, err := ice.NewSink("lake", cfg)
		if err != nil {
			t.Fatal(err)
		}
		src, err := datagen.New(datagen.Config{Count: n, Rate: 3000, Keys: 10}, func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(int64(i)), row.IntValue(value)}
		})
		if err != nil {
			t.Fatal(err)
		}
		p := stream.New(name, stream.DefaultParallelism(1))
		stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))
		ck := checkpoint.DefaultOptions()
		ck.Interval = 20 * time.Millisecond
		logs[i] = new(lockedBuffer)
		job, err := p.NewJob(stream.RunOptions{
			CheckpointDir: filepath.Join(t.TempDir(), "ckpts"), Checkpoint: ck,
			Log:     slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelWarn})),
			Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 1000},
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errs[i] = job.Run(ctx)
			stats[i] = job.Stats()
			recoveries[i] = job.RecoveryLog()
		}()
	}
	wg.Wait()
	var causes []string
	for i := range 2 {
		lines := strings.Split(strings.TrimSpace(logs[i].String()), "\n")
		if lines[0] == "" {
			lines = nil
		}
		retries, most := 0, 0 // lost races, and the most one commit lost in a row
		for _, l := range lines {
			if strings.Contains(l, "lost a race") {
				retries++
				var n int
				if _, after, ok := strings.Cut(l, " attempt="); ok {
					_, _ = fmt.Sscan(after, &n)
				}
				most = max(most, n)
			}
		}
		t.Logf("pipeline %d: err=%v restarts=%d completed=%d lost-race retries=%d (at most %d in a row) warnings=%d",
			i, errs[i], stats[i].Restarts, stats[i].Completed, retries, most, len(lines))
		for _, ev := range recoveries[i] {
			if ev.Cause == "restart" {
				c := fmt.Sprintf("pipeline %d: attempt %d restored checkpoint %d after a %s failure at %s: %s", i, ev.Attempt, ev.Restored, ev.Class, ev.FailedAt.Format(time.StampMicro), ev.Failure)
				causes = append(causes, c)
				t.Log(c)
			}
		}
		// Every warning but the retries when the job restarted or failed;
		// else the other warnings only.
		failed := stats[i].Restarts > 0 || errs[i] != nil
		shown := 0
		for _, l := range lines {
			if (failed || !strings.Contains(l, "lost a race")) && shown < 60 {
				t.Logf("pipeline %d log: %s", i, l)
				shown++
			}
		}
	}
	per := map[int64]map[int64]int{0: {}, 1: {}}
	for _, r := range f.scan(t, "shared", "id", "key") {
		per[r[1].(int64)][r[0].(int64)]++
	}
	for i := int64(0); i < 2; i++ {
		dups := 0
		for _, c := range per[i] {
			if c > 1 {
				dups++
			}
		}
		if len(per[i]) != n || dups > 0 {
			t.Errorf("pipeline %d: %d distinct ids of %d, %d repeated", i, len(per[i]), n, dups)
		}
	}
	if stats[0].Restarts+stats[1].Restarts > 0 {
		t.Errorf("commit races with the other pipeline restarted the jobs %d times (the committer's retry of a lost race never fires); causes:\n%s",
			stats[0].Restarts+stats[1].Restarts, strings.Join(causes, "\n"))
	}
}

// lockedBuffer is a log's destination that is safe to read while the job
// may still write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
