package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/storage"
)

// lockedStorage is storage with a lock that can be lost, as storage/blob's lease is when another
// process takes it over: from then on every call fails with an error wrapping storage.ErrLocked.
// Its Lock waits for its context when wait is set, as blob's Lock watches a lock object.
type lockedStorage struct {
	storage.Storage
	wait     bool
	lost     atomic.Bool
	locked   atomic.Int32 // Lock calls that succeeded
	released atomic.Int32
	calls    atomic.Int64 // Storage calls made
	// mu orders a metadata write's lock check against lose: lastMeta is
	// the newest checkpoint whose metadata write found the lock held.
	mu       sync.Mutex
	lastMeta int64
}

// lose loses the lock and returns the newest checkpoint whose metadata
// write found it held: that one may still complete, no later one.
func (s *lockedStorage) lose() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost.Store(true)
	return s.lastMeta
}

var _ storage.Locker = (*lockedStorage)(nil)

func (s *lockedStorage) Lock(ctx context.Context) (func() error, error) {
	if s.wait {
		<-ctx.Done()
		return nil, fmt.Errorf("watching the lock: %w", ctx.Err())
	}
	s.locked.Add(1)
	return func() error { s.released.Add(1); return nil }, nil
}

// check fails a call once the lock is lost.
func (s *lockedStorage) check() error {
	s.calls.Add(1)
	if s.lost.Load() {
		return fmt.Errorf("%w: the lock on %s was taken over by host other pid 7", storage.ErrLocked, s.Location())
	}
	return nil
}

func (s *lockedStorage) WriteFile(ctx context.Context, id int64, name string, data []byte) (storage.Handle, error) {
	if err := s.check(); err != nil {
		return storage.Handle{}, err
	}
	return s.Storage.WriteFile(ctx, id, name, data)
}

func (s *lockedStorage) ReadFile(ctx context.Context, h storage.Handle) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Storage.ReadFile(ctx, h)
}

func (s *lockedStorage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	s.mu.Lock()
	err := s.check()
	if err == nil {
		s.lastMeta = max(s.lastMeta, id)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Storage.WriteMetadata(ctx, id, data)
}

func (s *lockedStorage) ReadMetadata(ctx context.Context, id int64) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Storage.ReadMetadata(ctx, id)
}

func (s *lockedStorage) List(ctx context.Context) ([]storage.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Storage.List(ctx)
}

func (s *lockedStorage) Discard(ctx context.Context, id int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Storage.Discard(ctx, id)
}

func (s *lockedStorage) Trim(ctx context.Context, id int64, keep []string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Storage.Trim(ctx, id, keep)
}

// storage.ErrLocked ("another process holds the checkpoint directory, or the lease was lost")
// cannot be cured by a restart: a job whose storage loses its lock mid-run stops with an error
// wrapping it, without restarting (which would only fail again, or worse abandon the new holder's
// staged output), and releases the lock.
func TestJobStopsWhenStorageLockIsLost(t *testing.T) {
	defer goleak.VerifyNone(t)
	st := &lockedStorage{Storage: newLocal(t)}
	store := newTxStore[keyCount]()
	p := countPipeline(t, datagen.Config{Keys: 10, Rate: 20_000}, 2, 2, store, nil)
	// However many checkpoint failures the job would tolerate, a lost lock
	// is not one of them: the job must stop processing at once.
	ck := fastCheckpoints(10 * time.Millisecond)
	ck.TolerableFailures = 1000
	job := newJob(t, p, st, ck, quickRestarts(5))

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	sfWaitFor(t, done, "two complete checkpoints", func() bool { return job.Stats().Completed >= 2 })
	before := job.Stats()
	// A checkpoint whose metadata write found the lock held before it was
	// lost may still complete (its write raced the loss); none after it.
	lastHeld := st.lose()

	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job still runs 10 s after losing its lock (stats %+v)", job.Stats())
	}
	if !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("Run = %v, want an error wrapping storage.ErrLocked", err)
	}
	s := job.Stats()
	if s.Restarts != 0 {
		t.Errorf("Restarts = %d after the lock was lost, want 0: a restart cannot get the lock back", s.Restarts)
	}
	if s.Failed > before.Failed+1 {
		t.Errorf("%d checkpoints failed after the lock was lost; want the first storage error to stop the job", s.Failed-before.Failed)
	}
	if s.Latest > max(before.Latest, lastHeld) || s.Completed-before.Completed > max(0, lastHeld-before.Latest) || s.Abandoned != before.Abandoned {
		t.Errorf("stats went from %+v to %+v (the last metadata written with the lock held: checkpoint %d): nothing may complete or be abandoned without the lock", before, s, lastHeld)
	}
	if st.locked.Load() != 1 || st.released.Load() != 1 {
		t.Errorf("locked %d times, released %d times; want once each", st.locked.Load(), st.released.Load())
	}
}

// Another process holds the checkpoint directory (its flock): Run refuses at once, without
// touching the checkpoints or restarting.
func TestJobRefusesLockedDirectory(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	holder, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	release, err := holder.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := newTxStore[keyCount]()
	job := newJob(t, countPipeline(t, datagen.Config{Count: 1000, Keys: 10}, 2, 2, store, nil), st, fastCheckpoints(0), quickRestarts(5))
	if err := runBounded(t, job); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("Run = %v, want an error wrapping storage.ErrLocked", err)
	}
	if s := job.Stats(); s.Restarts != 0 || s.Completed != 0 {
		t.Errorf("Stats = %+v, want nothing done", s)
	}
	if entries, err := st.List(t.Context()); err != nil || len(entries) != 0 {
		t.Errorf("checkpoints %v, %v: want none written", entries, err)
	}
	if store.count() != 0 {
		t.Error("output published by a job that could not lock its checkpoints")
	}
}

// Run passes its context to Lock: a Lock that waits (storage/blob watches a foreign lock object for
// up to a lease) ends when Run's context does, and the job does not start.
func TestJobLockFollowsRunContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	st := &lockedStorage{Storage: newLocal(t), wait: true}
	store := newTxStore[keyCount]()
	job := newJob(t, countPipeline(t, datagen.Config{Count: 1000, Keys: 10}, 2, 2, store, nil), st, fastCheckpoints(0), quickRestarts(5))
	start := time.Now()
	err := runWithin(job, 100*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded from Lock", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run returned %v after its context ended", d)
	}
	if n := st.calls.Load(); n != 0 {
		t.Errorf("%d storage calls without the lock", n)
	}
}
