package storage

import (
	"context"
	"errors"
	"testing"
)

// Only one job may use a checkpoint directory at a time; the lock is released
// with the job. (flock is per open file description, so a second Lock in the
// same process is refused just as another process's would be.)
func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	a, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	release, err := a.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(t.Context()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release2, err := b.Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock after release = %v", err)
	}
	release2()
	entries, err := b.List(t.Context())
	if err != nil || len(entries) != 0 {
		t.Fatalf("List = %v, %v: the lock file must not look like a checkpoint", entries, err)
	}
}

// A cancelled context fails Lock before it locks: the directory stays free.
func TestLockCancelled(t *testing.T) {
	dir := t.TempDir()
	a, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context = %v, want context.Canceled", err)
	}
	release, err := a.Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock after a cancelled Lock = %v", err)
	}
	release()
}
