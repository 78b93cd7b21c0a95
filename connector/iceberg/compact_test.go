//go:build iceberg

package iceberg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// TestIcebergCompactWhileWriting compacts the table over and over while the
// sink applies a changelog of updates, deletes and re-inserts to it (with
// failures injected at its commit): neither undoes the other's commits, and
// the table ends with exactly each key's last row.
func TestIcebergCompactWhileWriting(t *testing.T) {
	const n, keys = 6037, 50
	gen, want := changelogRow(keys), changelogWant(n, keys)
	f := newFixture(t)
	failure{point: "sink/iceberg/commit", at: []int64{3, 9}}.inject(t)
	cfg := f.config("compacted", changelogSchema)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	sink, err := ice.NewSink("lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(datagen.Config{Count: n, Rate: 10000}, gen)
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("icetest-compacted", stream.DefaultParallelism(1))
	stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rewrites, groups, attempts int
	var compactErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			res, err := ice.Compact(context.Background(), cfg, 1<<20, 20)
			if err != nil {
				if compactErr == nil && !isMissingTable(err) {
					compactErr = err
				}
				continue
			}
			attempts += res.Attempts
			if res.Groups > 0 {
				rewrites++
				groups += res.Groups
			}
		}
	}()
	st := run(t, p)
	close(stop)
	wg.Wait()
	if compactErr != nil {
		t.Fatalf("compaction: %v", compactErr)
	}
	// One more, on the finished table: it must leave the rows as they are.
	if _, err := ice.Compact(context.Background(), cfg, 1<<20, 5); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d compactions rewrote %d groups in %d plans while the job ran (%d restarts)", rewrites, groups, attempts, st.Restarts)
	if rewrites == 0 {
		t.Log("no compaction landed while the job ran: the check below covers the final one only")
	}
	checkChangelog(t, f, "compacted", want)
}

// isMissingTable says err is the table not existing yet (the sink creates
// it when its first subtask opens).
func isMissingTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "does not exist")
}
