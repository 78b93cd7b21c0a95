package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the file in a Local directory that the process running a
// pipeline holds an exclusive lock on.
const LockName = ".lock"

// ErrLocked marks a checkpoint directory another process is using, or storage whose lock this
// process lost while running (see storage/blob): every later call fails with it. A restart cannot
// cure it, so a job stops at once on an error wrapping it.
var ErrLocked = errors.New("storage: checkpoint directory is in use")

// ErrLockLapsed marks a call refused because the lock of the storage lapsed: it could not be
// renewed in time because the store did not answer (storage/blob's lease). Unlike ErrLocked it is
// not final: no call may use the storage while it lasts, so that nothing this process writes can
// race a process that took over meanwhile, but once a renewal finds that nobody else took the lock
// it is held again and calls succeed. A job fails and restarts (with its restart strategy) instead
// of stopping.
var ErrLockLapsed = errors.New("storage: checkpoint storage lock lapsed")

// Locker is implemented by storage that can be claimed by one job at a time.
// Two processes running the same pipeline would each abandon the other's
// staged output and interleave checkpoints.
type Locker interface {
	// Lock claims the storage until release is called, or fails with an error
	// wrapping ErrLocked when another process holds it. A Lock that has to wait
	// (to tell a live holder from a dead one) returns ctx.Err(), wrapped, once
	// ctx is done; release is independent of ctx.
	Lock(ctx context.Context) (release func() error, err error)
}

var _ Locker = (*Local)(nil)

// Lock takes an exclusive, non-blocking flock on <dir>/.lock. The kernel
// drops it when the process dies, so a crash never leaves the directory
// locked. It applies to the real filesystem only; on a test filesystem it
// does nothing. It never waits; a done ctx fails it before it locks.
func (l *Local) Lock(ctx context.Context) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: locking %s: %w", l.dir, err)
	}
	if _, ok := l.fs.(osFS); !ok {
		return func() error { return nil }, nil
	}
	path := filepath.Join(l.dir, LockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another process running this pipeline", ErrLocked, l.dir)
		}
		return nil, fmt.Errorf("storage: locking %s: %w", path, err)
	}
	return func() error {
		// Closing the file releases the flock.
		return f.Close()
	}, nil
}
