package dashboard_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/dashboard"
	"github.com/ingest-engine/ingest/httpapi"
)

var realShot = flag.String("dashboard.realshot", "", "TestDashboardOnRealPipeline: write a screenshot of the dashboard under load to this path")

// realPipeline is a rate-limited datagen → per-key window → filter → file
// sink, checkpointing every 250 ms: enough load for the rates, backpressure
// and checkpoint charts to move.
const realPipeline = `pipeline: dashboard-e2e
checkpoint: {interval: 250ms, dir: ckpts, retain: 2}
sources:
  events:
    type: datagen
    parallelism: 2
    rate: 200000
    keys: 50
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value)}
  big:
    type: filter
    input: per_key
    where: count > 15
sinks:
  out:
    type: file
    input: big
    parallelism: 2
    path: out
`

// TestDashboardOnRealPipeline drives the dashboard in Chromium against the
// real HTTP API of a running job (not the simulated API): the checkpoint
// count on the page follows the job's completed checkpoints and increases,
// the graph shows the pipeline's nodes, the duration chart has points, and
// the page logs no errors. With -dashboard.realshot=PATH it writes the
// screenshot docs/dashboard.png is taken from.
func TestDashboardOnRealPipeline(t *testing.T) {
	chromium, driver := browserTools(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(realPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("job: %v", err)
		}
	})
	delivery := p.Delivery()
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{Delivery: &delivery, Dashboard: dashboard.Handler()}))
	t.Cleanup(srv.Close)

	driverURL := startChromedriver(t, driver)
	const width = 1440
	b := newSession(t, driverURL, chromium, width, 1000)
	b.open(srv.URL + "/")
	eventually(t, 20*time.Second, "the page shows a completed checkpoint", func() (bool, string) {
		n := digits(t, b.textOf("#checkpoint-count"))
		return n >= 1, fmt.Sprintf("#checkpoint-count %d", n)
	})
	first := digits(t, b.textOf("#checkpoint-count"))
	if done := job.Observe().Checkpoints.Completed; int64(first) > done {
		t.Fatalf("#checkpoint-count = %d, more than the job's %d completed checkpoints", first, done)
	}
	eventually(t, 20*time.Second, "#checkpoint-count increases with the job's checkpoints", func() (bool, string) {
		n := digits(t, b.textOf("#checkpoint-count"))
		return n > first+2, fmt.Sprintf("%d, first %d, job %d", n, first, job.Observe().Checkpoints.Completed)
	})
	for _, id := range []string{"events", "per_key", "big", "out"} {
		if len(b.findAll(fmt.Sprintf("#graph [data-node-id=%q]", id))) != 1 {
			t.Errorf("the graph has no single node %q", id)
		}
	}
	eventually(t, 10*time.Second, "the duration chart has points", func() (bool, string) {
		n := len(b.findAll("#chart-duration circle.point"))
		return n >= 3, fmt.Sprintf("%d points", n)
	})
	checkNoErrors(b, nil)
	if *realShot != "" {
		*screenshotPath = *realShot
		takeScreenshot(b, width)
	}
}
