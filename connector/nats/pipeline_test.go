package nats_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file runs the source through the runtime: NATS stream → chaos (fails
// and paces) → keyed 1s tumbling window with count and sum → the file sink,
// checkpoints every 10ms, restarts allowed. The committed output must be the
// closed-form expectation of the datagen contract (testkit.ExpectedWindows):
// nothing lost, nothing twice. Tests using failpoints (process-global) do not
// run in parallel.

// agg is the window's accumulator: count and sum of value.
type agg struct{ Count, Sum int64 }

type aggCodec struct{}

func (aggCodec) Name() string { return "test.count-sum/v1" }
func (aggCodec) Append(dst []byte, a agg) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, a.Count), a.Sum)
}
func (aggCodec) Decode(src []byte) (agg, int, error) {
	c, n := binary.Varint(src)
	if n <= 0 {
		return agg{}, 0, errors.New("count: truncated")
	}
	s, m := binary.Varint(src[n:])
	if m <= 0 {
		return agg{}, 0, errors.New("sum: truncated")
	}
	return agg{c, s}, n + m, nil
}

var countSum = window.Aggregate[event, agg]{
	Init:  func() agg { return agg{} },
	Add:   func(a agg, e event) agg { return agg{a.Count + 1, a.Sum + e.Value} },
	Codec: aggCodec{},
}

// windowLine is the window output contract testkit.CheckWindows reads.
type windowLine struct {
	Key         int64  `json:"key"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	Count       int64  `json:"count"`
	Sum         int64  `json:"sum"`
}

func toLine(k int64, w window.Window, a agg) windowLine {
	f := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
	return windowLine{Key: k, WindowStart: f(w.Start), WindowEnd: f(w.End), Count: a.Count, Sum: a.Sum}
}

// chaos fails the job in the listed attempts, once each, at the first batch
// after a checkpoint completed in that attempt (so the restart restores
// one), and sleeps pace per batch so a run spans many checkpoints.
type chaos struct {
	pace time.Duration
	// before, if set, is called once, before the first batch is processed.
	before func()
	once   sync.Once
	mu     sync.Mutex
	failIn []int
	failed map[int]bool
}

func (c *chaos) injected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.failed)
}

var errChaos = errors.New("injected operator failure")

func (c *chaos) node() *runtime.Node {
	return &runtime.Node{ID: "chaos", Describe: "chaos", NewOperator: func() runtime.Operator { return &chaosOp{c: c} }}
}

type chaosOp struct {
	stream.Stateless
	c         *chaos
	attempt   int
	completed int
}

func (o *chaosOp) Open(ctx *runtime.Context) error {
	o.attempt = ctx.Attempt
	return o.Stateless.Open(ctx)
}

func (o *chaosOp) NotifyComplete(int64) error { o.completed++; return nil }

func (o *chaosOp) ProcessBatch(_ int, r runtime.Records) error {
	c := o.c
	if c.before != nil {
		c.once.Do(c.before)
	}
	if c.pace > 0 {
		time.Sleep(c.pace)
	}
	if o.completed > 0 {
		c.mu.Lock()
		fail := slices.Contains(c.failIn, o.attempt) && !c.failed[o.attempt]
		if fail {
			if c.failed == nil {
				c.failed = map[int]bool{}
			}
			c.failed[o.attempt] = true
		}
		c.mu.Unlock()
		if fail {
			return fmt.Errorf("attempt %d after %d checkpoints: %w", o.attempt, o.completed, errChaos)
		}
	}
	return o.Out.Emit(slices.Clone(r.(runtime.Batch[event])))
}

// jobOptions are checkpoints every 10ms and quick restarts.
func jobOptions(dir string) stream.RunOptions {
	ck := checkpoint.DefaultOptions()
	ck.Interval = 10 * time.Millisecond
	return stream.RunOptions{CheckpointDir: filepath.Join(dir, "checkpoints"), Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: 10 * time.Millisecond, MaxAttempts: 10}}
}

// windowJob builds the window pipeline over src writing under dir/out.
func windowJob(t *testing.T, src *nats.Source[event], c *chaos, dir string, opts stream.RunOptions) *runtime.Job {
	t.Helper()
	p := stream.New("nats-windows")
	ev := stream.Add[event, event](stream.From(p, "events", src), c.node())
	keyed := stream.KeyBy(ev, func(e event) int64 { return e.Key })
	w := window.Tumbling(keyed, "per_key", time.Second, countSum, toLine, stream.Parallelism(2))
	stream.To(w, "out", file.JSONLines[windowLine](filepath.Join(dir, "out")), stream.Parallelism(2))
	job, err := p.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// checkWindows compares the committed output under dir/out with the
// expectation for events 0 … n-1.
func checkWindows(t *testing.T, dir string, n, keys int64) {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	want := testkit.ExpectedWindows(n, keys, baseTime, time.Millisecond, time.Second)
	if r := testkit.CheckWindows(lines, want, time.Second); !r.OK() {
		t.Fatalf("committed output is not exactly the expected: %s", r)
	}
}

// countCalls returns a failpoint action failing call number nth (from 1),
// and the number of calls so far.
func failNth(nth int64) (func() error, *atomic.Int64) {
	var calls atomic.Int64
	return func() error {
		if calls.Add(1) == nth {
			return fmt.Errorf("failpoint: %w", failpoint.ErrInjected)
		}
		return nil
	}, &calls
}

// Exactly-once through the window with failures: operator failures in two
// attempts, a failed prepare of the file sink, a failure between moving two
// files of one commit. Each restart restores the source's saved sequence.
func TestExactlyOnceWindowsWithFailures(t *testing.T) {
	url := requireServer(t)
	const n, keys = 12000, 10
	for _, tc := range []struct {
		name      string
		failIn    []int
		failpoint string
		nth       int64
	}{
		{name: "operator-failures", failIn: []int{0, 1}},
		{name: "sink-prepare", failpoint: "sink/file/prepare", nth: 4},
		{name: "sink-mid-commit", failpoint: "sink/file/mid-commit", nth: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStream(t, url)
			f.publishEvents(0, n, keys)
			cfg := f.config()
			cfg.StopAt = nats.StopAtLatest
			cfg.BatchSize = 100
			var calls *atomic.Int64
			if tc.failpoint != "" {
				var action func() error
				action, calls = failNth(tc.nth)
				t.Cleanup(failpoint.Enable(tc.failpoint, action))
			}
			c := &chaos{pace: time.Millisecond, failIn: tc.failIn}
			dir := t.TempDir()
			job := windowJob(t, eventSource(t, cfg), c, dir, jobOptions(dir))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := job.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkWindows(t, dir, n, keys)
			st := job.Stats()
			wantRestarts := int64(len(tc.failIn))
			if tc.failpoint != "" {
				wantRestarts = 1
				if calls.Load() < tc.nth {
					t.Fatalf("failpoint %s reached %d times, want at least %d", tc.failpoint, calls.Load(), tc.nth)
				}
			}
			if c.injected() != len(tc.failIn) || st.Restarts != wantRestarts {
				t.Errorf("%d operator failures, %d restarts; want %d and %d", c.injected(), st.Restarts, len(tc.failIn), wantRestarts)
			}
			t.Logf("%d checkpoints, %d restarts, restored from %d", st.Completed, st.Restarts, st.RestoredFrom)
		})
	}
}

// A live stream: messages are published while the job runs and fails twice;
// once everything is committed the job is stopped. Every message is in the
// committed output exactly once.
func TestExactlyOnceLiveStream(t *testing.T) {
	url := requireServer(t)
	f := newStream(t, url)
	const n = 6000
	cfg := f.config()
	cfg.BatchSize = 100
	src := eventSource(t, cfg)
	c := &chaos{pace: 200 * time.Microsecond, failIn: []int{0, 1}}
	dir := t.TempDir()
	p := stream.New("nats-live")
	ev := stream.Add[event, event](stream.From(p, "events", src), c.node())
	stream.To(ev, "out", file.JSONLines[event](filepath.Join(dir, "out")))
	job, err := p.NewJob(jobOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()

	for i := int64(0); i < n; i += 200 {
		f.publishEvents(i, i+200, 10)
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages committed after a minute", len(lines), n)
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before it committed everything: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	job.Stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, n)
	for _, l := range lines {
		var e event
		if err := json.Unmarshal(l.Text, &e); err != nil || e.ID < 0 || e.ID >= n {
			t.Fatalf("%s:%d: %s", l.File, l.Number, l.Text)
		}
		seen[e.ID]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("message %d committed %d times, want once", id, k)
		}
	}
	if c.injected() != 2 || job.Stats().Restarts != 2 {
		t.Errorf("%d failures injected, %d restarts; want 2 and 2", c.injected(), job.Stats().Restarts)
	}
}
