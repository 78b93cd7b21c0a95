package blob

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

// lockURLs are the backends the lock tests run on; each call makes fresh locations.
func lockURLs(t *testing.T) map[string]string {
	return map[string]string{
		"mem":  "mem://" + uniqueName(t) + "/p",
		"file": "file://" + t.TempDir() + "/ck",
		"s3":   newFakeS3(t).url("p/" + uniqueName(t)),
	}
}

func openWith(t *testing.T, raw string, o *Options) *Storage {
	t.Helper()
	s, err := Open(context.Background(), raw, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeLockRecord stores rec as the lock object of s, as another process would.
func writeLockRecord(t *testing.T, s *Storage, rec lockRecord) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.put(context.Background(), s.loc.prefix+LeaseName, data, false); err != nil {
		t.Fatal(err)
	}
}

func lockExists(t *testing.T, s *Storage) bool {
	t.Helper()
	ok, err := s.bucket.exists(context.Background(), s.loc.prefix+LeaseName)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A second Storage on the same location is refused while the first holds the lock, and gets it
// once the first releases it; the lock object exists exactly while a lock is held.
func TestLockIsExclusive(t *testing.T) {
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := openWith(t, raw, nil), openWith(t, raw, nil)
			release, err := a.Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !lockExists(t, a) {
				t.Fatal("no lock object while locked")
			}
			start := time.Now()
			if _, err := b.Lock(t.Context()); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("second Lock = %v, want ErrLocked", err)
			} else if !strings.Contains(err.Error(), a.Location()) {
				t.Errorf("ErrLocked does not name the location: %v", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refusing a holder in this process took %v; it is known to be alive", d)
			}
			if _, err := a.Lock(t.Context()); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("Lock twice on one Storage = %v, want ErrLocked", err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if err := release(); err != nil {
				t.Fatalf("second release: %v", err)
			}
			if lockExists(t, a) {
				t.Fatal("lock object left after release")
			}
			releaseB, err := b.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock after release: %v", err)
			}
			if err := releaseB(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lock left by a process of this machine that no longer exists (kill -9) is taken over at once.
func TestLockTakeoverDeadProcess(t *testing.T) {
	if processNamespace() == "" {
		t.Skip("no PID namespace identity on this system: stale locks are only judged by watching them")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot start a process to get a dead pid: %v", err)
	}
	dead := cmd.ProcessState.Pid()
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openWith(t, raw, &Options{Lease: time.Hour})
			writeLockRecord(t, s, lockRecord{Owner: "crashed", Host: "here", PID: dead, Namespace: processNamespace(), Lease: "1h"})
			start := time.Now()
			release, err := s.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock over a dead process's lock: %v", err)
			}
			defer release()
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v with a one-hour lease: the dead pid was not recognised", d)
			}
		})
	}
}

// A lock object this process left behind (its release could not delete it) is taken over at
// once: its owner token is no longer held here.
func TestLockTakeoverOwnLeftover(t *testing.T) {
	if processNamespace() == "" {
		t.Skip("no PID namespace identity on this system")
	}
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openWith(t, raw, &Options{Lease: time.Hour})
			writeLockRecord(t, s, lockRecord{Owner: "released-long-ago", Host: "here", PID: os.Getpid(), Namespace: processNamespace(), Lease: "1h"})
			start := time.Now()
			release, err := s.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock over this process's leftover lock: %v", err)
			}
			defer release()
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v with a one-hour lease", d)
			}
		})
	}
}

// A lock of another machine that nobody renews is taken over after one lease; a corrupt lock
// object too.
func TestLockTakeoverStale(t *testing.T) {
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const lease = 300 * time.Millisecond
			s := openWith(t, raw, &Options{Lease: lease})
			writeLockRecord(t, s, lockRecord{Owner: "gone", Host: "elsewhere", PID: 1, Namespace: "other-machine", Lease: "300ms"})
			start := time.Now()
			release, err := s.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock over a stale lock: %v", err)
			}
			if d := time.Since(start); d < lease {
				t.Fatalf("took over after %v, before one lease (%v) passed", d, lease)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			// Garbage in the lock object: watched like any other, then taken over.
			if err := s.bucket.put(context.Background(), s.loc.prefix+LeaseName, [][]byte{[]byte("garbage")}, false); err != nil {
				t.Fatal(err)
			}
			release, err = s.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock over a corrupt lock object: %v", err)
			}
			release()
		})
	}
}

// A lock that another machine keeps renewing is refused, within about one renewal period.
func TestLockLiveHolderRefused(t *testing.T) {
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const lease = 3 * time.Second
			s := openWith(t, raw, &Options{Lease: lease})
			rec := lockRecord{Owner: "alive", Host: "other-host", PID: 4242, Namespace: "other-machine", Acquired: time.Now().UTC(), Lease: "3s"}
			writeLockRecord(t, s, rec)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the holder renews every lease/3
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(lease / 3):
					}
					rec.Seq++
					data, _ := json.Marshal(rec)
					if err := s.put(context.Background(), s.loc.prefix+LeaseName, data, false); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			start := time.Now()
			_, err := s.Lock(t.Context())
			if !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), "other-host") || !strings.Contains(err.Error(), "4242") {
				t.Fatalf("Lock = %v, want ErrLocked naming the holder", err)
			}
			if d := time.Since(start); d >= lease {
				t.Errorf("refused after %v, want within a lease (%v)", d, lease)
			}
		})
	}
}

// A holder keeps its lock by renewing it; once another process owns the object, the old holder
// can no longer use the storage, and its release leaves the new lock.
func TestLockLostFencesWrites(t *testing.T) {
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// Renewals every second: a renewal may take 1.25 s before the holder fences itself,
			// room for a loaded machine under -race.
			const lease = 3 * time.Second
			s := openWith(t, raw, &Options{Lease: lease})
			release, err := s.Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(lease / 2) // past the first renewal
			storagetest.MustWrite(t, s, 1, "kg-0", []byte("x"))
			storagetest.MustMeta(t, s, 1, "m")
			rec, _, err := s.readLock(context.Background(), s.loc.prefix+LeaseName)
			if err != nil || rec.Seq < 1 {
				t.Fatalf("lock record %+v, %v: want a renewal", rec, err)
			}

			writeLockRecord(t, s, lockRecord{Owner: "usurper", Host: "other-host", PID: 7, Namespace: "x", Lease: "1m"})
			deadline := time.Now().Add(lease)
			for s.usable() == nil && time.Now().Before(deadline) {
				time.Sleep(lease / 30)
			}
			if _, err := s.WriteFile(ctx, 2, "kg-0", []byte("x")); !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), "taken over") {
				t.Fatalf("WriteFile after losing the lock = %v, want ErrLocked", err)
			}
			if err := s.WriteMetadata(ctx, 2, []byte("m")); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("WriteMetadata after losing the lock = %v, want ErrLocked", err)
			}
			if err := s.Discard(ctx, 1); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("Discard after losing the lock = %v, want ErrLocked", err)
			}
			// Nor read: a restart of its job must not get past List to the recovery step that
			// abandons staged sink output (the new holder's).
			if _, err := s.ReadMetadata(ctx, 1); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("ReadMetadata after losing the lock = %v, want ErrLocked", err)
			}
			if _, _, _, err := storage.Latest(ctx, s); !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("Latest after losing the lock = %v, want ErrLocked", err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if rec, _, err := s.readLock(context.Background(), s.loc.prefix+LeaseName); err != nil || rec.Owner != "usurper" {
				t.Fatalf("release touched the new holder's lock: %+v, %v", rec, err)
			}
		})
	}
}

// Lock watches a foreign lock object for up to one lease (here a minute) to tell a live holder from
// a dead one; a cancelled context ends the watch promptly with the context's error, not
// ErrLocked, and leaves the object and this Storage as they were. A context done before Lock
// creates nothing.
func TestLockCancelledWhileWatching(t *testing.T) {
	for name, raw := range lockURLs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openWith(t, raw, &Options{Lease: time.Minute})

			done, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := s.Lock(done); !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock with a cancelled context = %v, want context.Canceled", err)
			}
			if lockExists(t, s) {
				t.Fatal("a Lock whose context was done created the lock object")
			}

			writeLockRecord(t, s, lockRecord{Owner: "elsewhere", Host: "other-host", PID: 4242, Namespace: "other-machine", Lease: "1m"})
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.Lock(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, storage.ErrLocked) {
				t.Fatalf("Lock = %v, want context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Lock returned %v after its context was done", d)
			}
			if rec, _, err := s.readLock(context.Background(), s.loc.prefix+LeaseName); err != nil || rec.Owner != "elsewhere" {
				t.Fatalf("the holder's lock object was touched: %+v, %v", rec, err)
			}
			// The cancelled Lock holds nothing: once the holder is gone, Lock succeeds.
			if err := s.bucket.del(context.Background(), s.loc.prefix+LeaseName); err != nil {
				t.Fatal(err)
			}
			release, err := s.Lock(t.Context())
			if err != nil {
				t.Fatalf("Lock after a cancelled Lock: %v", err)
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
