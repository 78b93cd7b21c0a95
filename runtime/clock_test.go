package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// A job on a fake clock triggers a checkpoint only when the clock has
// advanced by the interval, and its rate-limited source emits only as the
// clock advances: advancing one interval at a time and waiting for each
// checkpoint gives exactly one checkpoint per interval however busy the
// machine is, and the committed output is exact.
func TestJobOnFakeClock(t *testing.T) {
	const interval = 10 * time.Second
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	store := newTxStore[keyCount]()
	// One record per second of the job's clock, 45 in all.
	cfg := datagen.Config{Count: 45, Rate: 1, Keys: 3}
	p := countPipeline(t, cfg, 1, 2, store, nil)
	ck := checkpoint.DefaultOptions()
	ck.Interval = interval
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Clock: fake,
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()

	// The job runs once the driver's ticker and the source's rate wait are
	// on the clock. The first record is due at once (and crosses two
	// edges: source to count, count to sink), the next a second on.
	sfWaitFor(t, done, "the job to wait on the clock", func() bool { return fake.Waiters() >= 2 && job.Stats().Records == 2 })
	if c := job.Stats().Completed; c != 0 {
		t.Fatalf("%d checkpoints completed before the clock moved", c)
	}
	// Intervals 1-4 end before the input does (at 44s): each gives exactly
	// one checkpoint. In the fifth the input ends and the final checkpoint
	// follows, with no clock.
	var ended error
	finished := false
	for k := int64(1); !finished; k++ {
		if k > 10 {
			t.Fatalf("45 records at one a second, but the job runs after %v: %+v", time.Duration(k)*interval, job.Stats())
		}
		fake.Advance(interval)
		for c := job.Stats().Completed; c < k && !finished; c = job.Stats().Completed {
			select {
			case ended = <-done:
				finished = true
			case <-ctx.Done():
				t.Fatalf("checkpoint %d did not complete: %+v", k, job.Stats())
			case <-time.After(time.Millisecond):
			}
		}
		if c := job.Stats().Completed; k <= 4 && c != k {
			t.Fatalf("after %d intervals %d checkpoints completed", k, c)
		}
		if k == 5 && !finished {
			ended, finished = <-done, true
		}
	}
	if ended != nil {
		t.Fatalf("Run: %v", ended)
	}
	stats := job.Stats()
	// 45 records at one a second end at 44s, in the fifth interval; the
	// final checkpoint is the one after the input's end.
	if stats.Completed < 5 || stats.Completed > 6 {
		t.Fatalf("%d checkpoints for 44s of input at a %v interval", stats.Completed, interval)
	}
	var got, want []string
	for _, v := range store.values() {
		got = append(got, fmt.Sprintf("%d:%d", v.Key, v.Count))
	}
	for k := range int64(3) {
		for n := int64(1); n <= 15; n++ {
			want = append(want, fmt.Sprintf("%d:%d", k, n))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("committed %d records %v, want %v", len(got), got, want)
	}
}
