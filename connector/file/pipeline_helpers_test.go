package file_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

var errInjected = errors.New("injected failure")

// failPlan says when failing operators fail: in attempt a, the first
// subtask that has processed at least after[a] records in that attempt,
// once a checkpoint completed in it (so the restart restores one), fails.
// Every batch is delayed by pace, so runs span many checkpoints.
type failPlan struct {
	after []int
	pace  time.Duration
	mu    sync.Mutex
	// failed[a] is set when attempt a failed.
	failed []bool
}

func newFailPlan(pace time.Duration, after ...int) *failPlan {
	return &failPlan{after: after, pace: pace, failed: make([]bool, len(after))}
}

// injected counts the failures that happened.
func (p *failPlan) injected() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.failed {
		if f {
			n++
		}
	}
	return n
}

// failing adds a pass-through node that fails as plan says.
func failing[T any](s stream.Stream[T], id string, plan *failPlan, opts ...stream.NodeOption) stream.Stream[T] {
	n := &runtime.Node{ID: id, Describe: "fails as planned", NewOperator: func() runtime.Operator { return &failOp[T]{plan: plan} }}
	return stream.Add[T, T](s, n, opts...)
}

type failOp[T any] struct {
	stream.Stateless
	plan            *failPlan
	ctx             *runtime.Context
	completed, seen int
}

func (o *failOp[T]) Open(ctx *runtime.Context) error { o.ctx = ctx; return o.Stateless.Open(ctx) }

func (o *failOp[T]) NotifyComplete(int64) error { o.completed++; return nil }

func (o *failOp[T]) ProcessBatch(_ int, r runtime.Records) error {
	b := r.(runtime.Batch[T])
	o.seen += len(b)
	if p := o.plan; p != nil {
		p.mu.Lock()
		a := o.ctx.Attempt
		fail := a < len(p.after) && !p.failed[a] && o.completed > 0 && o.seen >= p.after[a]
		if fail {
			p.failed[a] = true
		}
		p.mu.Unlock()
		if fail {
			return fmt.Errorf("%v attempt %d after %d records and %d checkpoints: %w", o.ctx.Task, a, o.seen, o.completed, errInjected)
		}
		if p.pace > 0 {
			time.Sleep(p.pace)
		}
	}
	return o.Out.Emit(slices.Clone(b))
}

// failOn makes failpoint name fail on the calls whose numbers (from 1) are
// in at, and counts the calls.
func failOn(t *testing.T, name string, at ...int64) *atomic.Int64 {
	calls := &atomic.Int64{}
	fail := map[int64]bool{}
	for _, n := range at {
		fail[n] = true
	}
	disable := failpoint.Enable(name, func() error {
		if fail[calls.Add(1)] {
			return fmt.Errorf("failpoint %s: %w", name, failpoint.ErrInjected)
		}
		return nil
	})
	t.Cleanup(disable)
	return calls
}

// memStorage is checkpoint storage in memory: checkpoints cost no fsync, so
// they come as often as the interval says.
func memStorage(t *testing.T) storage.Storage {
	t.Helper()
	st, err := storagetest.NewCrashFS().NewLocal("/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newJob plans p with checkpoints every interval on st and restarts after
// 1ms, up to 20 in a row.
func newJob(t *testing.T, p *stream.Pipeline, st storage.Storage, interval time.Duration) *runtime.Job {
	t.Helper()
	ck := checkpoint.DefaultOptions()
	ck.Interval = interval
	ck.TolerableFailures = 100
	opts := stream.RunOptions{Storage: st, Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 20}}
	if testing.Verbose() {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	job, err := p.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// runJob runs job to its end within a minute.
func runJob(t *testing.T, job *runtime.Job) runtime.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatalf("Run: %v (stats %+v)", err, job.Stats())
	}
	return job.Stats()
}
