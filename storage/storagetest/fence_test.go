package storagetest

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// errWriteDeadline is the cause the fence tests give their contexts.
var errWriteDeadline = errors.New("checkpoint deadline")

// isMetadataTmp reports whether path is a temporary metadata file.
func isMetadataTmp(path string) bool { return strings.Contains(path, tmpPrefix+storage.MetadataName) }

// A metadata write whose context ends while its temporary file is still being written (a stuck
// disk) returns at once with the context's cause, and the write, once the disk comes back, removes
// its temporary file instead of renaming it: the checkpoint never becomes complete, though its
// write finished after the caller had reported it failed.
func TestMetadataWriteAbandonedBeforeRename(t *testing.T) {
	f, l := newFaultLocal(t)
	writing := make(chan struct{})
	var once sync.Once
	// The write sleeps in the temporary file's write when its context ends.
	f.SlowWrites(time.Hour, func(path string) bool {
		if !isMetadataTmp(path) {
			return false
		}
		once.Do(func() { close(writing) })
		return true
	})
	done := writeUntil(l, writing)
	select {
	case err := <-done:
		if !errors.Is(err, errWriteDeadline) || !errors.Is(err, context.Canceled) {
			t.Fatalf("WriteMetadata on a stuck disk = %v, want an error wrapping the context's error and cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteMetadata did not return when its context ended: it waits for the stuck write")
	}

	f.Heal() // the disk comes back: the abandoned write finishes its temporary file
	deadline := time.Now().Add(10 * time.Second)
	for tmpFiles(t, f.inner, 1) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned write did not remove its temporary file")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := l.ReadMetadata(context.Background(), 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadMetadata after the abandoned write finished = %v, want storage.ErrNotFound: the write landed", err)
	}
	entries, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Complete {
			t.Fatalf("checkpoint %d is complete after an abandoned metadata write", e.ID)
		}
	}
	// The id is still usable: a later write of the same checkpoint completes it.
	if err := l.WriteMetadata(context.Background(), 1, []byte("meta")); err != nil {
		t.Fatalf("WriteMetadata after the abandoned one = %v", err)
	}
}

// A metadata write abandoned before it created the checkpoint's directory (here stuck checking
// whether the checkpoint is already complete) creates nothing when it wakes, so it cannot
// recreate a directory the caller discarded after the abandonment.
func TestAbandonedMetadataWriteCreatesNothing(t *testing.T) {
	f, l := newFaultLocal(t)
	stating, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	f.FailWhen(func(op FSOp, path string) error {
		if _, ok := PathCheckpoint(path); !ok {
			return nil
		}
		if op == FSStat && strings.HasSuffix(path, storage.MetadataName) && calls.Add(1) == 1 {
			close(stating)
			<-release // a stuck disk
			return nil
		}
		calls.Add(1)
		return nil
	})
	done := writeUntil(l, stating)
	if err := <-done; !errors.Is(err, errWriteDeadline) {
		t.Fatalf("WriteMetadata = %v, want the context's cause", err)
	}
	if err := l.Discard(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	before := calls.Load()
	close(release)
	// The woken write must not touch checkpoint 1 again. It has nothing to wait for, so give it
	// ample time to do what it would.
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the abandoned write made %d filesystem calls on checkpoint 1 after it woke", n)
	}
	entries, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("List after the abandoned write woke = %+v, want no checkpoint", entries)
	}
}

// Once a metadata write has started its rename (the commit point), the end of its context does not
// abandon it: WriteMetadata waits for the rename's outcome and reports it, so the caller never
// calls failed a checkpoint whose metadata became visible.
func TestMetadataWriteNotAbandonedDuringRename(t *testing.T) {
	f, l := newFaultLocal(t)
	renaming, release := make(chan struct{}), make(chan struct{})
	f.FailWhen(func(op FSOp, path string) error {
		if op == FSRename && isMetadataTmp(path) {
			close(renaming)
			<-release // a rename that hangs
		}
		return nil
	})
	done := writeUntil(l, renaming)
	select {
	case err := <-done:
		t.Fatalf("WriteMetadata returned %v while its rename was in progress", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("WriteMetadata = %v after its rename succeeded, want nil", err)
	}
	if got, err := l.ReadMetadata(context.Background(), 1); err != nil || string(got) != "meta" {
		t.Fatalf("ReadMetadata = %q, %v; want the metadata written", got, err)
	}
}

// writeUntil starts writing the metadata of checkpoint 1 of l, and ends the
// write's context with errWriteDeadline once stuck is closed (the write is
// stuck where the test wants it). The write's result arrives on done.
func writeUntil(l *storage.Local, stuck <-chan struct{}) (done <-chan error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	result := make(chan error, 1)
	go func() { result <- l.WriteMetadata(ctx, 1, []byte("meta")) }()
	<-stuck
	cancel(errWriteDeadline)
	return result
}

// tmpFiles counts the temporary files in checkpoint id's directory of the Local at /ck on fsys.
func tmpFiles(t *testing.T, fsys storage.FS, id int64) int {
	t.Helper()
	des, err := fsys.ReadDir(chkDir(id))
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tmpPrefix) {
			n++
		}
	}
	return n
}
