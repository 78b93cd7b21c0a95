package runtime_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// stallingStorage blocks the metadata writes it is told to until released,
// whatever their context says, as a storage does whose write hangs past its
// commit point (a local rename or directory fsync) and so cannot be
// abandoned.
type stallingStorage struct {
	storage.Storage
	stall   atomic.Bool
	release chan struct{}
	// stalled is closed when the first write stalls.
	stalled     chan struct{}
	stalledOnce sync.Once
}

func (s *stallingStorage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	if s.stall.Load() {
		s.stalledOnce.Do(func() { close(s.stalled) })
		<-s.release
		// Past its commit point: the write lands whatever the deadline says.
		ctx = context.WithoutCancel(ctx)
	}
	return s.Storage.WriteMetadata(ctx, id, data)
}

// A metadata write that does not return when its deadline passes may still
// land (and then the checkpoint is complete), so checkpointing waits for it;
// the job says so in a warning once the write has taken longer than the
// checkpoint timeout, naming the checkpoint and the storage, instead of
// stalling silently. When the write returns, checkpoints complete again.
// (A write that can still be abandoned is: TestStorageFaultMatrix, "metadata
// write past the timeout".)
func TestStalledMetadataWriteIsReported(t *testing.T) {
	st := &stallingStorage{Storage: newLocal(t), release: make(chan struct{}), stalled: make(chan struct{})}
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Keys: 10, Rate: 20_000}, 2, 2, store, nil)
	// On a fake clock the checkpoint timeout passes only when the test says
	// so: a busy machine cannot make a checkpoint time out first.
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	const interval = 10 * time.Millisecond
	ck := fastCheckpoints(interval)
	ck.Timeout = 100 * time.Millisecond
	log := &testkit.SyncBuffer{}
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Restart: quickRestarts(3), Clock: fake,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	// step drives the clock until cond holds. It advances the clock an
	// interval only while the job runs and no checkpoint is in flight, to
	// trigger the next one, and then waits for that trigger: a checkpoint in
	// flight sees no time pass, so it cannot time out however long a busy
	// machine takes to acknowledge and write it. Only the explicit advances
	// below pass the checkpoint timeout, while the stalled write is in
	// flight (the coordinator does not time out a checkpoint whose metadata
	// it writes, and the write's own deadline is on the job's clock too).
	// The real-time deadline only bounds how long the test can take.
	step := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(runTimeout)
		wait := func(until func() bool) bool {
			for !cond() && !until() {
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for %s: %+v %+v", what, job.Stats(), job.Observe().Checkpoints)
				}
				select {
				case err := <-done:
					t.Fatalf("Run returned %v while waiting for %s", err, what)
				case <-time.After(time.Millisecond):
				}
			}
			return cond()
		}
		for {
			if wait(func() bool {
				o := job.Observe() // running: the attempt's ticker waits on the clock
				return o.Phase == runtime.PhaseRunning && o.Checkpoints.InProgress == 0
			}) {
				return
			}
			triggered := job.Observe().Checkpoints.Triggered
			fake.Advance(interval)
			if wait(func() bool { return job.Observe().Checkpoints.Triggered > triggered }) {
				return
			}
		}
	}
	step("a complete checkpoint", func() bool { return job.Stats().Completed >= 1 })

	st.stall.Store(true)
	step("a stalled metadata write", func() bool {
		select {
		case <-st.stalled:
			return true
		default:
			return false
		}
	})
	// On the job's clock the write now takes longer than the checkpoint
	// timeout and the grace the runtime gives an abandoned write (1 s).
	overdue := ck.Timeout + time.Second + interval
	fake.Advance(overdue)
	const warning = "the checkpoint metadata write has not returned within the checkpoint timeout"
	sfWaitFor(t, done, "the stalled-write warning", func() bool { return strings.Contains(log.String(), warning) })
	stalled := job.Stats().Completed
	for _, want := range []string{"writing_for=", "timeout=100ms", "storage=" + st.Location()} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the warning does not say %q:\n%s", want, log)
		}
	}
	fake.Advance(overdue)
	if n := strings.Count(log.String(), warning); n != 1 {
		t.Errorf("%d warnings for one stalled write, want 1", n)
	}

	st.stall.Store(false)
	close(st.release)
	step("checkpoints after the write returned", func() bool { return job.Stats().Completed >= stalled+2 })
	if f := job.Stats().Failed; f != 0 {
		t.Errorf("%d checkpoints failed: the stalled write landed, so its checkpoint is complete, and none was triggered meanwhile", f)
		for _, r := range job.Checkpoints() {
			if r.Status == runtime.CheckpointFailed {
				t.Logf("checkpoint %d (triggered at %v on the job's clock) failed: %s", r.ID, r.TriggeredAt, r.FailureReason)
			}
		}
	}
	job.Stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
