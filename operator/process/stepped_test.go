package process_test

import (
	"context"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// epoch is where the tests' fake clocks start.
var epoch = time.Unix(1_800_000_000, 0)

// runStepped runs p to its end on fake (a new one at epoch when nil),
// stepping it by step each time the job makes protocol progress, so rates,
// checkpoint intervals and processing-time timers advance with the job and
// not with the machine's speed. A step of at least the driver's 10 ms tick
// and the checkpoint interval makes each step yield a checkpoint (progress);
// a shorter one stalls each step for DriveClock's patience. It fails the test if the run fails and
// returns the job.
func runStepped(t *testing.T, p *stream.Pipeline, opts stream.RunOptions, fake *clock.Fake, step time.Duration) *runtime.Job {
	t.Helper()
	if fake == nil {
		fake = clock.NewFake(epoch)
	}
	opts.Clock = fake
	job, err := p.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testkit.RunStepped(ctx, fake, step, job.Run, func() int64 { return job.Stats().Progress() }); err != nil {
		t.Fatalf("run: %v (stats %+v)", err, job.Stats())
	}
	return job
}
