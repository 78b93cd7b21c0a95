package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/dashboard"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// stallOp passes events on; its subtask 1 holds every barrier until the
// job reports that checkpoint failed, so no checkpoint ever completes, by
// the protocol and not by a race with the timeout: the subtask's
// acknowledgement always comes after the checkpoint expired.
type stallOp struct {
	job *atomic.Pointer[runtime.Job]
	// stop ends the hold when the test ends: the job's cancellation does
	// not reach an operator's snapshot.
	stop <-chan struct{}
	ctx  *runtime.Context
}

func (o *stallOp) Open(ctx *runtime.Context) error { o.ctx = ctx; return nil }

func (o *stallOp) ProcessBatch(_ int, r runtime.Records) error {
	in := r.(runtime.Batch[datagen.Event])
	return o.ctx.Output.Emit(append(runtime.Batch[datagen.Event](nil), in...))
}

func (o *stallOp) ProcessWatermark(int64) error { return nil }

func (o *stallOp) Snapshot(id int64) (runtime.Snapshot, error) {
	if o.ctx.Task.Subtask != 1 {
		return runtime.Snapshot{}, nil
	}
	// The minute is a safety valve only: the checkpoint fails within its
	// 100 ms timeout.
	limit := time.After(time.Minute)
	for {
		if r, ok := o.job.Load().Checkpoint(id); !ok || r.Status == runtime.CheckpointFailed {
			return runtime.Snapshot{}, nil
		}
		select {
		case <-o.stop:
			return runtime.Snapshot{}, nil
		case <-limit:
			return runtime.Snapshot{}, nil
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (o *stallOp) NotifyComplete(int64) error { return nil }
func (o *stallOp) Close() error               { return nil }

// TestDashboardOnAFailingPipeline runs the state the dashboard once showed
// as healthy — checkpoints that always time out, restarts that find no
// checkpoint to restore — in a real job behind the real API, and checks what
// the page shows: a critical badge, the failed checkpoints on the chart and
// none completed, the subtasks that never acknowledged (the stalled one and
// the sink that waits for its barrier), restarts that say they started over,
// and no trigger button without a token.
func TestDashboardOnAFailingPipeline(t *testing.T) {
	chromium, driver := browserTools(t)
	var jobRef atomic.Pointer[runtime.Job]
	ctx, cancel := context.WithCancel(context.Background())
	src, err := datagen.Events(datagen.Config{Keys: 10, Rate: 2000})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("stalling")
	source := stream.From[datagen.Event](p, "events", src, stream.Parallelism(1))
	stalled := stream.Add[datagen.Event, datagen.Event](source, &runtime.Node{ID: "stall", Describe: "holds barriers on subtask 1",
		NewOperator: func() runtime.Operator { return &stallOp{job: &jobRef, stop: ctx.Done()} }}, stream.Parallelism(2))
	stream.To(stalled, "out", stream.Discard[datagen.Event](), stream.Parallelism(1))
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval, ck.Timeout, ck.TolerableFailures = 50*time.Millisecond, 100*time.Millisecond, 1
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Restart: runtime.RestartOptions{Delay: 20 * time.Millisecond, MaxAttempts: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	jobRef.Store(job)
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("job: %v", err)
		}
	})
	srv := httptest.NewServer(httpapi.New(job, httpapi.Options{Dashboard: dashboard.Handler()}))
	t.Cleanup(srv.Close)

	b := newSession(t, startChromedriver(t, driver), chromium, 1440, 1000)
	b.open(srv.URL + "/")
	const deadline = 60 * time.Second

	// The job cycles through running, failed and recovering: every state of
	// it is red or amber, never "running" in green.
	eventually(t, deadline, "a restart and a critical badge", func() (bool, string) {
		e := b.find("#pipeline-status")
		return b.attr(e, "data-health") == "critical" && digits(t, b.textOf("#restarts")) > 0,
			fmt.Sprintf("%q (%s), %s restarts", b.text(e), b.attr(e, "data-health"), b.textOf("#restarts"))
	})
	// Five renders in a row, whatever phase each poll found.
	for range 5 {
		var got struct {
			Text, Health string
			Renders      int
		}
		b.exec(&got, "const e = document.getElementById('pipeline-status'); return {Text: e.textContent, Health: e.dataset.health, Renders: window.__dashboard.renders}")
		if got.Health == "ok" || got.Text == "running" {
			t.Errorf("badge %q (%s) for a job whose checkpoints all fail", got.Text, got.Health)
		}
		eventually(t, deadline, "the next render", func() (bool, string) {
			var n int
			b.exec(&n, "return window.__dashboard.renders")
			return n > got.Renders, fmt.Sprintf("%d renders", n)
		})
	}
	eventually(t, deadline, "the last failed checkpoint names who never acknowledged", func() (bool, string) {
		text := b.textOf("#last-failed-checkpoint")
		return strings.HasSuffix(text, " · not acknowledged by stall#1, out#0"), fmt.Sprintf("%q", text)
	})
	eventually(t, deadline, "failed checkpoints on the duration chart, none completed", func() (bool, string) {
		var c struct{ Marks, Points int }
		b.exec(&c, `const c = document.getElementById('chart-duration');
			return {Marks: c.querySelectorAll('.failed-mark').length, Points: c.querySelectorAll('circle.point').length}`)
		return c.Marks >= 2 && c.Points == 0, fmt.Sprintf("%+v", c)
	})
	if got := b.textOf("#checkpoint-count"); got != "0" {
		t.Errorf("#checkpoint-count = %q, want 0", got)
	}
	var events []struct{ Text, Restored string }
	eventually(t, deadline, "the restarts in #recoveries", func() (bool, string) {
		b.exec(&events, "return [...document.querySelectorAll('#recoveries li[data-kind=restart]')].map(li => ({Text: li.textContent, Restored: li.dataset.restored}))")
		return len(events) > 0, fmt.Sprintf("%q", events)
	})
	for _, e := range events {
		if e.Restored != "" || !strings.Contains(e.Text, "started over from the beginning: no complete checkpoint existed") ||
			strings.Contains(e.Text, "restored checkpoint") || strings.Contains(e.Text, "recovered from the last complete checkpoint") {
			t.Errorf("recovery %q (restored %q): want one that started over, claiming no checkpoint", e.Text, e.Restored)
		}
	}
	checkTrigger(b, false, "POST endpoints are disabled because no token is configured: set http.token in the pipeline file or the "+
		httpapi.TokenEnv+" environment variable, restart, and send Authorization: Bearer <token>")
	checkNoErrors(b, nil)
}
