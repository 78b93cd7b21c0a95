package storagetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

var errInjected = errors.New("injected")

// newFaultLocal returns a Local at /ck on a FaultFS over a fresh CrashFS.
func newFaultLocal(t *testing.T) (*FaultFS, *storage.Local) {
	t.Helper()
	f := NewFaultFS(NewCrashFS())
	l, err := f.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	return f, l
}

// complete reports whether checkpoint id of s is a recovery point: its metadata reads and verifies.
func complete(t *testing.T, s storage.Storage, id int64) bool {
	t.Helper()
	_, err := s.ReadMetadata(context.Background(), id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadMetadata(%d) = %v", id, err)
	}
	return err == nil
}

// Each kind of filesystem call can be failed on its own, and the Storage method that makes it
// fails with an error wrapping the injected one and naming the path; a failed metadata write leaves
// the checkpoint incomplete. Calls of other kinds pass.
func TestFaultFSFailsChosenCall(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		op FSOp
		// call is the Storage method that makes op; it runs on a Local holding checkpoint 1
		// (complete, with state file "a") and checkpoint 2's state file "b".
		call func(l *storage.Local) error
		// incomplete: call was a metadata write of checkpoint 2, which must not be complete.
		incomplete bool
	}{
		{FSWrite, func(l *storage.Local) error { _, err := l.WriteFile(ctx, 2, "c", []byte("x")); return err }, false},
		{FSSync, func(l *storage.Local) error { _, err := l.WriteFile(ctx, 2, "c", []byte("x")); return err }, false},
		{FSOpen, func(l *storage.Local) error { _, err := l.WriteFile(ctx, 2, "c", []byte("x")); return err }, false},
		{FSRename, func(l *storage.Local) error { return l.WriteMetadata(ctx, 2, []byte("m")) }, true},
		{FSSyncDir, func(l *storage.Local) error { return l.WriteMetadata(ctx, 2, []byte("m")) }, true},
		{FSReadDir, func(l *storage.Local) error { _, err := l.List(ctx); return err }, false},
		{FSReadFile, func(l *storage.Local) error { _, err := l.ReadMetadata(ctx, 1); return err }, false},
		{FSStat, func(l *storage.Local) error { _, err := l.List(ctx); return err }, false},
		{FSRemoveAll, func(l *storage.Local) error { return l.Discard(ctx, 2) }, false},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			f, l := newFaultLocal(t)
			mustWrite(t, l, 1, "a", []byte("state"))
			mustMeta(t, l, 1, "meta")
			mustWrite(t, l, 2, "b", []byte("state"))
			var seen []string
			f.FailWhen(func(op FSOp, path string) error {
				if op != tc.op {
					return nil
				}
				seen = append(seen, path)
				return errInjected
			})
			err := tc.call(l)
			var pe *fs.PathError
			if !errors.Is(err, errInjected) || !errors.As(err, &pe) || pe.Op != tc.op.String() {
				t.Fatalf("err = %v, want a *fs.PathError of %v wrapping the injected error", err, tc.op)
			}
			if len(seen) == 0 || !strings.Contains(err.Error(), seen[0]) {
				t.Errorf("err = %v, want it to name the path %v", err, seen)
			}
			f.Heal()
			if tc.incomplete && complete(t, l, 2) {
				t.Error("checkpoint 2 is complete after its metadata write failed")
			}
			// Healed, the same call passes, and nothing else was harmed.
			if err := tc.call(l); err != nil {
				t.Fatalf("after Heal: %v", err)
			}
			if !complete(t, l, 1) {
				t.Error("checkpoint 1 is no longer complete")
			}
		})
	}
}

// FailNext queues failures per kind of call, ahead of FailWhen.
func TestFaultFSFailNext(t *testing.T) {
	ctx := context.Background()
	f, l := newFaultLocal(t)
	e1, e2 := errors.New("first"), errors.New("second")
	f.FailNext(FSSync, e1)
	f.FailNext(FSSync, e2)
	f.FailWhen(func(FSOp, string) error { return nil })
	for _, want := range []error{e1, e2, nil} {
		_, err := l.WriteFile(ctx, 1, "a", []byte("x"))
		if !errors.Is(err, want) {
			t.Fatalf("WriteFile = %v, want %v", err, want)
		}
	}
	// A failure armed for a directory listing does not hit writes.
	f.FailNext(FSReadDir, e1)
	mustWrite(t, l, 1, "b", nil)
	mustMeta(t, l, 1, "meta")
	if _, err := l.List(ctx); !errors.Is(err, e1) {
		t.Fatalf("List = %v, want %v", err, e1)
	}
}

// NoSpaceAfter: writes store up to the limit; the write crossing it stores what fits and fails
// with ENOSPC, as do the later ones; Local removes the partial file; files the match excludes and a
// freed device write again.
func TestFaultFSNoSpace(t *testing.T) {
	ctx := context.Background()
	f, l := newFaultLocal(t)
	small := []byte("0123456789")
	f.NoSpaceAfter(3*int64(len(small)+storage.TrailerSize), func(path string) bool { return !strings.HasSuffix(path, "/other") })
	for _, name := range []string{"a", "b", "c"} {
		mustWrite(t, l, 1, name, small)
	}
	_, err := l.WriteFile(ctx, 1, "d", small)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteFile past the limit = %v, want ENOSPC", err)
	}
	if _, err := f.inner.Stat("/ck/chk-0000000001/d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("partial file left behind: %v", err)
	}
	if err := l.WriteMetadata(ctx, 1, []byte("m")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteMetadata on a full device = %v, want ENOSPC", err)
	}
	if complete(t, l, 1) {
		t.Error("checkpoint complete although its metadata could not be written")
	}
	mustWrite(t, l, 1, "other", small) // not on the full device
	f.NoSpaceAfter(-1, nil)
	mustWrite(t, l, 1, "d", small)
	mustMeta(t, l, 1, "m")

	// The write that crosses the limit stores only what fits.
	f.NoSpaceAfter(4, nil)
	fl, err := faultFS{f}.OpenFile("/ck/partial", os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n, err := fl.Write([]byte("0123456789"))
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Write = %d, %v; want 4 bytes stored and ENOSPC", n, err)
	}
	fl.Close()
	if b, err := f.inner.ReadFile("/ck/partial"); err != nil || string(b) != "0123" {
		t.Errorf("partial file holds %q, %v; want the 4 bytes that fit", b, err)
	}
}

// SlowWrites delays each matching write; Heal wakes a sleeping write at once.
func TestFaultFSSlowWrites(t *testing.T) {
	f, l := newFaultLocal(t)
	const d = 50 * time.Millisecond
	f.SlowWrites(d, func(path string) bool { return filepath.Base(path) == "slow" })
	start := time.Now()
	mustWrite(t, l, 1, "fast", []byte("x"))
	if took := time.Since(start); took >= d {
		t.Errorf("a write the match excludes took %v", took)
	}
	start = time.Now()
	mustWrite(t, l, 1, "slow", []byte("x"))
	if took := time.Since(start); took < 2*d {
		t.Errorf("WriteFile (payload and trailer) took %v, want at least %v", took, 2*d)
	}

	f.SlowWrites(time.Hour, nil)
	done := make(chan error, 1)
	go func() { _, err := l.WriteFile(context.Background(), 1, "b", []byte("x")); done <- err }()
	time.Sleep(10 * time.Millisecond)
	f.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("healed write: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Heal did not wake a slow write")
	}
}

// A crash keeps only what was synced, and the crashed process can do nothing more: a checkpoint
// whose metadata was being renamed is not complete in the survivor, the one before it is, and
// every later call fails with ErrCrashed.
func TestFaultFSCrashWhen(t *testing.T) {
	ctx := context.Background()
	f, l := newFaultLocal(t)
	mustWrite(t, l, 1, "a", []byte("one"))
	mustMeta(t, l, 1, "meta-1")
	mustWrite(t, l, 2, "a", []byte("two"))
	f.CrashWhen(func(op FSOp, path string) bool {
		id, ok := PathCheckpoint(path)
		return op == FSRename && ok && id == 2
	})
	select {
	case <-f.Crashed():
		t.Fatal("crashed before the crash point")
	default:
	}
	if err := l.WriteMetadata(ctx, 2, []byte("meta-2")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("WriteMetadata at the crash point = %v, want ErrCrashed", err)
	}
	select {
	case <-f.Crashed():
	default:
		t.Fatal("Crashed not closed after the crash")
	}
	if _, err := l.List(ctx); !errors.Is(err, ErrCrashed) {
		t.Fatalf("List after the crash = %v, want ErrCrashed", err)
	}
	f.Heal() // heals faults, not a crash
	if _, err := l.WriteFile(ctx, 3, "a", nil); !errors.Is(err, ErrCrashed) {
		t.Fatalf("WriteFile after the crash = %v, want ErrCrashed", err)
	}

	survivor := f.Survivor()
	if survivor == nil || f.Crash() != survivor {
		t.Fatal("Survivor is not the crash's filesystem")
	}
	after, err := survivor.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	id, meta, _, err := storage.Latest(ctx, after)
	if err != nil || id != 1 || string(meta) != "meta-1" {
		t.Fatalf("Latest after the crash = %d, %q, %v; want checkpoint 1", id, meta, err)
	}
	if complete(t, after, 2) {
		t.Error("checkpoint 2 is complete after a crash before its metadata was renamed")
	}
	// The survivor is a working filesystem of its own.
	mustWrite(t, after, 3, "a", []byte("three"))
	mustMeta(t, after, 3, "meta-3")
}

// A crash waits for calls in progress and lets no later one act: a write sleeping in a slow write
// when the crash comes fails with ErrCrashed, and its file is not in the survivor.
func TestFaultFSCrashStopsCallsInFlight(t *testing.T) {
	f, l := newFaultLocal(t)
	f.SlowWrites(time.Hour, nil)
	done := make(chan error, 1)
	go func() { _, err := l.WriteFile(context.Background(), 1, "a", []byte("x")); done <- err }()
	time.Sleep(10 * time.Millisecond)
	survivor := f.Crash()
	f.Heal()
	if err := <-done; !errors.Is(err, ErrCrashed) {
		t.Fatalf("write in flight at the crash = %v, want ErrCrashed", err)
	}
	after, err := survivor.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.ReadFile(context.Background(), storage.Handle{Name: "a", Checkpoint: 1, Size: 1, CRC: checksum([]byte("x"))}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadFile in the survivor = %v, want storage.ErrNotFound", err)
	}
}

// On the operating system's filesystem the faults work the same; a crash stops the process's calls
// and leaves the directory as it is.
func TestFaultFSOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ck")
	f := NewFaultFS(nil)
	l, err := f.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l, 1, "a", []byte("x"))
	f.FailNext(FSSync, errInjected)
	if err := l.WriteMetadata(ctx, 1, []byte("m")); !errors.Is(err, errInjected) {
		t.Fatalf("WriteMetadata = %v, want the injected error", err)
	}
	mustMeta(t, l, 1, "m")
	if s := f.Crash(); s != nil {
		t.Fatalf("Crash on disk returned a CrashFS %v", s)
	}
	if _, err := l.List(ctx); !errors.Is(err, ErrCrashed) {
		t.Fatalf("List after the crash = %v, want ErrCrashed", err)
	}
	after, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _, err := storage.Latest(ctx, after); err != nil || id != 1 {
		t.Fatalf("Latest after the crash = %d, %v; want 1", id, err)
	}
}

func TestPathCheckpoint(t *testing.T) {
	for path, want := range map[string]int64{
		"/ck/chk-0000000007/state-count-0":      7,
		"/ck/chk-0000000007":                    7,
		"/ck/chk-0000000012/.tmp-_metadata-ABC": 12,
		"ck/chk-0000000003/_metadata":           3,
		"/ck":                                   -1,
		"/":                                     -1,
		"/ck/chk-7/a":                           -1,
		"/ck/chk-0000000001/chk-0000000002/deep/er": 2,
	} {
		id, ok := PathCheckpoint(path)
		if (want < 0) == ok || (ok && id != want) {
			t.Errorf("PathCheckpoint(%q) = %d, %v; want %d", path, id, ok, want)
		}
	}
}
