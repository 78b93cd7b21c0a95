package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func newTestLocal(t *testing.T) *Local {
	t.Helper()
	l, err := NewLocal(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustWrite(t *testing.T, s Storage, id int64, name string, data []byte) Handle {
	t.Helper()
	h, err := s.WriteFile(context.Background(), id, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustMeta(t *testing.T, s Storage, id int64, data string) {
	t.Helper()
	if err := s.WriteMetadata(context.Background(), id, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	for _, data := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("state"), 10000)} {
		h := mustWrite(t, l, 3, "op-1.kg-7", data)
		want := Handle{Name: "op-1.kg-7", Checkpoint: 3, Size: int64(len(data)), CRC: checksum(data)}
		if h != want {
			t.Fatalf("handle = %+v, want %+v", h, want)
		}
		got, err := l.ReadFile(ctx, h)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadFile = %q, %v; want %d bytes", got, err, len(data))
		}
	}
	mustMeta(t, l, 3, "meta")
	got, err := l.ReadMetadata(ctx, 3)
	if err != nil || string(got) != "meta" {
		t.Fatalf("ReadMetadata = %q, %v", got, err)
	}
	// The layout is part of the contract: operators look at these directories.
	for _, p := range []string{"chk-0000000003/op-1.kg-7", "chk-0000000003/_metadata"} {
		if _, err := os.Stat(filepath.Join(l.Location(), p)); err != nil {
			t.Error(err)
		}
	}
}

func TestFileFormat(t *testing.T) {
	l := newTestLocal(t)
	mustWrite(t, l, 1, "f", []byte("abc"))
	b, err := os.ReadFile(filepath.Join(l.Location(), "chk-0000000001", "f"))
	if err != nil {
		t.Fatal(err)
	}
	// payload, "IGCK", uint64le 3, uint32le crc32c("abc") = 0x364b3fb7.
	want := []byte("abcIGCK\x03\x00\x00\x00\x00\x00\x00\x00\xb7\x3f\x4b\x36")
	if !bytes.Equal(b, want) {
		t.Fatalf("file = %x\nwant   %x", b, want)
	}
}

func TestNewLocalRejectsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLocal(p); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("NewLocal(file) = %v, want 'not a directory'", err)
	}
	if _, err := NewLocal(""); err == nil {
		t.Fatal("NewLocal(\"\") succeeded")
	}
}

func TestInvalidNames(t *testing.T) {
	l := newTestLocal(t)
	for name, why := range map[string]string{
		"":                       "empty",
		"a/b":                    "path separator",
		`a\b`:                    "path separator",
		"..":                     `".."`,
		"a..b":                   `".."`,
		".hidden":                `starts with "."`,
		".tmp-x":                 `starts with "."`,
		"_metadata":              `starts with "_"`,
		"nul\x00byte":            "NUL",
		strings.Repeat("n", 256): "longer than 255",
	} {
		_, err := l.WriteFile(context.Background(), 1, name, []byte("x"))
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "invalid state file name") {
			t.Errorf("WriteFile(%q) = %v, want an error saying %s", name, err, why)
		}
		_, err = l.ReadFile(context.Background(), Handle{Name: name, Checkpoint: 1})
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ReadFile(%q) = %v, want an error saying %s", name, err, why)
		}
	}
	if _, err := l.WriteFile(context.Background(), -1, "a", nil); err == nil {
		t.Error("WriteFile with id -1 succeeded")
	}
	entries, err := l.List(context.Background())
	if err != nil || len(entries) != 0 {
		t.Fatalf("rejected writes left %v, %v", entries, err)
	}
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	_, err := l.ReadMetadata(ctx, 9)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join("chk-0000000009", "_metadata")) {
		t.Errorf("ReadMetadata(absent) = %v, want ErrNotFound naming the file", err)
	}
	h := mustWrite(t, l, 9, "a", []byte("x"))
	h.Name = "b"
	_, err = l.ReadFile(ctx, h)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), filepath.Join("chk-0000000009", "b")) {
		t.Errorf("ReadFile(absent) = %v, want ErrNotFound naming the file", err)
	}
	if IsCorrupt(err) {
		t.Errorf("a missing file is reported as corrupt: %v", err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	mustWrite(t, l, 12, "a", []byte("x"))
	mustMeta(t, l, 12, "m")
	mustWrite(t, l, 2, "a", []byte("x")) // incomplete
	mustMeta(t, l, 7, "m")
	// A crash while writing metadata leaves a temporary file: checkpoint 30 is not complete.
	chk30 := filepath.Join(l.Location(), "chk-0000000030")
	if err := os.MkdirAll(chk30, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chk30, ".tmp-_metadata-XYZ"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Junk that is not a checkpoint directory.
	for _, d := range []string{"chk-", "chk-abc", "chk-12x", "chk-5", "chk-+000000001", "lost+found", "chk-99999999999999999999"} {
		if err := os.Mkdir(filepath.Join(l.Location(), d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(l.Location(), "chk-0000000040"), nil, 0o644); err != nil {
		t.Fatal(err) // a file, not a directory
	}

	got, err := l.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{2, false, filepath.Join(l.Location(), "chk-0000000002")},
		{7, true, filepath.Join(l.Location(), "chk-0000000007")},
		{12, true, filepath.Join(l.Location(), "chk-0000000012")},
		{30, false, chk30},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List =\n%v\nwant\n%v", got, want)
	}
	if _, err := l.ReadMetadata(ctx, 30); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadMetadata with only a .tmp- file = %v, want ErrNotFound", err)
	}
}

func TestListIDsBeyondTenDigits(t *testing.T) {
	l := newTestLocal(t)
	mustMeta(t, l, 123456789012, "big")
	mustMeta(t, l, 9, "small")
	got, err := l.List(context.Background())
	if err != nil || len(got) != 2 || got[0].ID != 9 || got[1].ID != 123456789012 {
		t.Fatalf("List = %v, %v", got, err)
	}
}

// fileOf returns the path of a state file of l.
func fileOf(l *Local, h Handle) string { return filepath.Join(l.chkDir(h.Checkpoint), h.Name) }

func TestTruncationDetected(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	payload := []byte("operator state of key group 7, 42 bytes..")
	h := mustWrite(t, l, 1, "kg-7", payload)
	mustMeta(t, l, 1, "metadata payload")
	for _, tc := range []struct {
		path string
		read func() error
	}{
		{fileOf(l, h), func() error { _, err := l.ReadFile(ctx, h); return err }},
		{filepath.Join(l.chkDir(1), MetadataName), func() error { _, err := l.ReadMetadata(ctx, 1); return err }},
	} {
		full, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(full); n++ {
			if err := os.WriteFile(tc.path, full[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			err := tc.read()
			if !IsCorrupt(err) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("%s cut to %d of %d bytes: err = %v, want a truncation error naming the file", tc.path, n, len(full), err)
			}
			if n < trailerSize && !strings.Contains(err.Error(), fmt.Sprintf("truncated: %d bytes, expected at least 16", n)) {
				t.Fatalf("cut to %d bytes: err = %v", n, err)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != tc.path {
				t.Fatalf("err = %#v, want *CorruptError with Path %s", err, tc.path)
			}
		}
		if err := os.WriteFile(tc.path, full, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := tc.read(); err != nil {
			t.Fatalf("restored file: %v", err)
		}
	}
}

func TestFlippedByteDetected(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	h := mustWrite(t, l, 1, "kg-0", []byte("some operator state"))
	mustMeta(t, l, 1, "metadata")
	for _, tc := range []struct {
		path string
		read func() error
	}{
		{fileOf(l, h), func() error { _, err := l.ReadFile(ctx, h); return err }},
		{filepath.Join(l.chkDir(1), MetadataName), func() error { _, err := l.ReadMetadata(ctx, 1); return err }},
	} {
		full, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range full {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				b := bytes.Clone(full)
				b[i] ^= mask
				if err := os.WriteFile(tc.path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				err := tc.read()
				if !IsCorrupt(err) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("byte %d of %s ^= %#x: err = %v, want corruption naming the file", i, tc.path, mask, err)
				}
				if i < len(full)-trailerSize && !strings.Contains(err.Error(), "checksum mismatch: stored 0x") {
					t.Fatalf("payload byte %d flipped: err = %v, want a checksum mismatch", i, err)
				}
			}
		}
		if err := os.WriteFile(tc.path, full, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadFileChecksHandle(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	h := mustWrite(t, l, 1, "a", []byte("version 1"))
	wrongSize, wrongCRC := h, h
	wrongSize.Size++
	wrongCRC.CRC ^= 1
	for _, bad := range []Handle{wrongSize, wrongCRC} {
		_, err := l.ReadFile(ctx, bad)
		if !IsCorrupt(err) || !strings.Contains(err.Error(), "does not match its handle") || !strings.Contains(err.Error(), fileOf(l, h)) {
			t.Errorf("ReadFile(%+v) = %v, want a handle mismatch naming the file", bad, err)
		}
	}
	// A well-formed file that was replaced after the handle was taken is not the file the handle names.
	mustWrite(t, l, 1, "a", []byte("version 2"))
	if _, err := l.ReadFile(ctx, h); !IsCorrupt(err) {
		t.Errorf("ReadFile(old handle of a replaced file) = %v, want corruption", err)
	}
}

func TestWriteMetadataRefusesComplete(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	mustMeta(t, l, 4, "first")
	err := l.WriteMetadata(ctx, 4, []byte("second"))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already complete") {
		t.Fatalf("second WriteMetadata = %v, want already complete", err)
	}
	if got, _ := l.ReadMetadata(ctx, 4); string(got) != "first" {
		t.Fatalf("metadata = %q, want the first", got)
	}
}

func TestDiscard(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	mustWrite(t, l, 1, "a", []byte("x"))
	mustMeta(t, l, 1, "m")
	mustWrite(t, l, 2, "a", []byte("x"))
	if err := l.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Discard(ctx, 1); err != nil {
		t.Fatalf("discarding an absent id: %v", err)
	}
	if err := l.Discard(ctx, 77); err != nil {
		t.Fatalf("discarding a never-written id: %v", err)
	}
	got, err := l.List(ctx)
	if err != nil || len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("List after Discard = %v, %v", got, err)
	}
	if _, err := os.Stat(l.chkDir(1)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("chk-1 still there: %v", err)
	}
	// The directory can be written again after a discard.
	h := mustWrite(t, l, 1, "b", []byte("again"))
	if _, err := l.ReadFile(ctx, h); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := newTestLocal(t)
	if _, err := l.WriteFile(ctx, 1, "a", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteFile = %v", err)
	}
	if err := l.WriteMetadata(ctx, 1, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteMetadata = %v", err)
	}
	if _, err := l.List(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v", err)
	}
}

func TestConcurrentWriteFile(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	const writers, files = 16, 20
	var wg sync.WaitGroup
	handles := make([][]Handle, writers)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				id := int64(1 + i%3) // several goroutines create each checkpoint directory
				data := []byte(fmt.Sprintf("writer %d file %d", w, i))
				h, err := l.WriteFile(ctx, id, fmt.Sprintf("w%d-f%d", w, i), data)
				if err != nil {
					errs <- err
					return
				}
				handles[w] = append(handles[w], h)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		for i, h := range handles[w] {
			got, err := l.ReadFile(ctx, h)
			if want := fmt.Sprintf("writer %d file %d", w, i); err != nil || string(got) != want {
				t.Fatalf("ReadFile(%+v) = %q, %v; want %q", h, got, err, want)
			}
		}
	}
	entries, err := l.List(ctx)
	if err != nil || len(entries) != 3 {
		t.Fatalf("List = %v, %v", entries, err)
	}
}
