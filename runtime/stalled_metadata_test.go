package runtime_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
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
}

func (s *stallingStorage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	if s.stall.Load() {
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
	st := &stallingStorage{Storage: newLocal(t), release: make(chan struct{})}
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Keys: 10, Rate: 20_000}, 2, 2, store, nil)
	ck := fastCheckpoints(10 * time.Millisecond)
	ck.Timeout = 100 * time.Millisecond
	log := &testkit.SyncBuffer{}
	job, err := p.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck, Restart: quickRestarts(3), Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	sfWaitFor(t, done, "a complete checkpoint", func() bool { return job.Stats().Completed >= 1 })

	st.stall.Store(true)
	const warning = "the checkpoint metadata write has not returned within the checkpoint timeout"
	sfWaitFor(t, done, "the stalled-write warning", func() bool { return strings.Contains(log.String(), warning) })
	stalled := job.Stats().Completed
	for _, want := range []string{"writing_for=", "timeout=100ms", "storage=" + st.Location()} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the warning does not say %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log.String(), warning); n != 1 {
		t.Errorf("%d warnings for one stalled write, want 1", n)
	}

	st.stall.Store(false)
	close(st.release)
	sfWaitFor(t, done, "checkpoints after the write returned", func() bool { return job.Stats().Completed >= stalled+2 })
	if f := job.Stats().Failed; f != 0 {
		t.Errorf("%d checkpoints failed: the stalled write landed, so its checkpoint is complete, and none was triggered meanwhile", f)
	}
	job.Stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
