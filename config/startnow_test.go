package config_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// start_time: now is the wall-clock time of the pipeline's first start,
// kept in its checkpoints: stopped after a checkpoint and started again
// later in a new process (a new Load), and failing once in that second run
// (an in-process restore), the pipeline commits every record once, each
// with event time T0 + id ms for the one T0 taken at the first start.
func TestDatagenStartNowSurvivesRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	const count = 4000
	src := `pipeline: now
checkpoint: {interval: 50ms, dir: ckpts}
restart: {delay: 10ms, multiplier: 1, max_attempts: 3}
sources:
  events:
    type: datagen
    parallelism: 2
    count: 4000
    start_time: now
    RATE
transforms:
  stamped:
    type: map
    input: events
    select: {id: id, ms: event_time.UnixMilli()}
sinks:
  out: {type: file, input: stamped, path: out}
`
	// The first run reads 200 records a second: it is stopped long before
	// its 4000 records are read.
	path := writeFile(t, "p.yaml", strings.Replace(src, "RATE", "rate: 200", 1))
	dir := filepath.Dir(path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := time.Now()
	p1, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := p1.Stream.NewJob(p1.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- job.Run(ctx) }()
	for job.Stats().Completed < 2 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	job.Stop()
	if err := <-ran; err != nil {
		t.Fatalf("first run: %v", err)
	}
	opened := time.Now()
	first, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 || len(first) >= count {
		t.Fatalf("the first run committed %d records; the test needs it stopped between 1 and %d", len(first), count-1)
	}

	// The second run, as fast as it goes, fails once at its first barrier
	// and restores the first run's checkpoint again.
	if err := os.WriteFile(path, []byte(strings.Replace(src, "RATE", "keys: 100", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	job2, err := p2.Stream.NewJob(p2.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	t.Cleanup(failpoint.Enable("sink/file/prepare", func() error {
		if failed.CompareAndSwap(false, true) {
			return failpoint.ErrInjected
		}
		return nil
	}))
	if err := job2.Run(ctx); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if !failed.Load() || job2.Stats().Restarts != 1 {
		t.Fatalf("the second run failed %v and restarted %d times, want once", failed.Load(), job2.Stats().Restarts)
	}

	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var t0 int64
	for i, l := range lines {
		var r struct{ ID, MS int64 }
		if err := json.Unmarshal(l.Text, &r); err != nil {
			t.Fatal(err)
		}
		if seen[r.ID] {
			t.Fatalf("record %d committed twice", r.ID)
		}
		seen[r.ID] = true
		if i == 0 {
			t0 = r.MS - r.ID
		}
		if r.MS-r.ID != t0 {
			t.Fatalf("record %d at %d ms, want %d: the start time changed", r.ID, r.MS, t0+r.ID)
		}
	}
	if len(seen) != count {
		t.Errorf("%d records committed, want %d", len(seen), count)
	}
	if t0 < before.UnixMilli() || t0 > opened.UnixMilli() {
		t.Errorf("start %v, want the first run's start, between %v and %v", time.UnixMilli(t0).UTC(), before.UTC(), opened.UTC())
	}
}

// The quickstart's event time follows the wall clock, so its watermark lag
// measures something.
func TestQuickstartStartsNow(t *testing.T) {
	p, err := config.Load(filepath.Join("..", "examples", "quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "datagen unbounded, rate=1000/s, keys=10, event time from the first start's wall clock") {
		t.Errorf("quickstart plan:\n%s\nwant its datagen to start now", d)
	}
}
