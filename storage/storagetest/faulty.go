package storagetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/ingest-engine/ingest/storage"
)

// Op names a storage.Storage method, for fault injection.
type Op int

// The operations of storage.Storage.
const (
	OpWriteFile Op = iota + 1
	OpReadFile
	OpWriteMetadata
	OpReadMetadata
	OpList
	OpDiscard
	OpWriteLedger
	OpReadLedger
	OpTrim
	OpStatFile
)

// String returns the method's name.
func (o Op) String() string {
	switch o {
	case OpWriteFile:
		return "WriteFile"
	case OpReadFile:
		return "ReadFile"
	case OpWriteMetadata:
		return "WriteMetadata"
	case OpReadMetadata:
		return "ReadMetadata"
	case OpList:
		return "List"
	case OpDiscard:
		return "Discard"
	case OpWriteLedger:
		return "WriteLedger"
	case OpReadLedger:
		return "ReadLedger"
	case OpTrim:
		return "Trim"
	case OpStatFile:
		return "StatFile"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Faulty wraps a storage.Storage and fails chosen calls, for tests of the code that uses storage. A failed
// call returns the injected error unchanged and does not reach the wrapped storage.Storage. It is safe for
// concurrent use. To fail the filesystem calls inside a storage.Local's methods instead (a write, an fsync,
// the metadata's rename, running out of space, slow writes, a crash), put the storage.Local on a FaultFS.
type Faulty struct {
	inner storage.Storage // immutable

	mu   sync.Mutex
	next errQueue[Op]                             // guarded by mu; armed by FailNext, oldest first
	when func(op Op, id int64, name string) error // guarded by mu; set by FailWhen
}

var _ storage.Storage = (*Faulty)(nil)

// NewFaulty returns inner wrapped for fault injection. It injects nothing until told to.
func NewFaulty(inner storage.Storage) *Faulty {
	return &Faulty{inner: inner, next: errQueue[Op]{}}
}

// FailNext makes the next call of op return err. Calls queue: FailNext twice fails the next two
// calls. They take precedence over FailWhen.
func (f *Faulty) FailNext(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next.push(op, err)
}

// FailWhen makes every call consult fn, replacing any earlier fn; nil removes it. fn gets the
// operation, the checkpoint id and the file name: for WriteFile and ReadFile the state file's, for
// WriteMetadata and ReadMetadata storage.MetadataName, for WriteLedger and ReadLedger id -1 and
// storage.LedgerName, for Discard and Trim "", and for List id -1 and "". A non-nil
// result fails the call with it; nil passes the call through. fn may be called concurrently and may
// call FailNext or FailWhen.
func (f *Faulty) FailWhen(fn func(op Op, id int64, name string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.when = fn
}

// fault returns the error to inject into this call, or nil.
func (f *Faulty) fault(op Op, id int64, name string) error {
	f.mu.Lock()
	if err, ok := f.next.pop(op); ok {
		f.mu.Unlock()
		return err
	}
	fn := f.when
	f.mu.Unlock() // fn runs unlocked so that it may call FailNext
	if fn == nil {
		return nil
	}
	return fn(op, id, name)
}

// WriteFile implements storage.Storage.
func (f *Faulty) WriteFile(ctx context.Context, id int64, name string, data []byte) (storage.Handle, error) {
	if err := f.fault(OpWriteFile, id, name); err != nil {
		return storage.Handle{}, err
	}
	return f.inner.WriteFile(ctx, id, name, data)
}

// ReadFile implements storage.Storage.
func (f *Faulty) ReadFile(ctx context.Context, h storage.Handle) ([]byte, error) {
	if err := f.fault(OpReadFile, h.Checkpoint, h.Name); err != nil {
		return nil, err
	}
	return f.inner.ReadFile(ctx, h)
}

// WriteMetadata implements storage.Storage.
func (f *Faulty) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	if err := f.fault(OpWriteMetadata, id, storage.MetadataName); err != nil {
		return err
	}
	return f.inner.WriteMetadata(ctx, id, data)
}

// ReadMetadata implements storage.Storage.
func (f *Faulty) ReadMetadata(ctx context.Context, id int64) ([]byte, error) {
	if err := f.fault(OpReadMetadata, id, storage.MetadataName); err != nil {
		return nil, err
	}
	return f.inner.ReadMetadata(ctx, id)
}

// List implements storage.Storage.
func (f *Faulty) List(ctx context.Context) ([]storage.Entry, error) {
	if err := f.fault(OpList, -1, ""); err != nil {
		return nil, err
	}
	return f.inner.List(ctx)
}

// Discard implements storage.Storage.
func (f *Faulty) Discard(ctx context.Context, id int64) error {
	if err := f.fault(OpDiscard, id, ""); err != nil {
		return err
	}
	return f.inner.Discard(ctx, id)
}

// StatFile implements storage.Storage.
func (f *Faulty) StatFile(ctx context.Context, h storage.Handle) error {
	if err := f.fault(OpStatFile, h.Checkpoint, h.Name); err != nil {
		return err
	}
	return f.inner.StatFile(ctx, h)
}

// Trim implements storage.Storage.
func (f *Faulty) Trim(ctx context.Context, id int64, keep []string) error {
	if err := f.fault(OpTrim, id, ""); err != nil {
		return err
	}
	return f.inner.Trim(ctx, id, keep)
}

// Location returns the wrapped storage.Storage's location.
func (f *Faulty) Location() string { return f.inner.Location() }

// WriteLedger implements storage.Storage.
func (f *Faulty) WriteLedger(ctx context.Context, data []byte) error {
	if err := f.fault(OpWriteLedger, -1, storage.LedgerName); err != nil {
		return err
	}
	return f.inner.WriteLedger(ctx, data)
}

// ReadLedger implements storage.Storage.
func (f *Faulty) ReadLedger(ctx context.Context) ([]byte, error) {
	if err := f.fault(OpReadLedger, -1, storage.LedgerName); err != nil {
		return nil, err
	}
	return f.inner.ReadLedger(ctx)
}
