package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

// partsReader reads, seeks and reads at offsets across part boundaries like one slice.
func TestPartsReader(t *testing.T) {
	parts := [][]byte{[]byte("abc"), nil, []byte("d"), []byte("efghij")}
	whole := bytes.Join(parts, nil)
	r := newPartsReader(parts)
	if r.size != int64(len(whole)) {
		t.Fatalf("size %d, want %d", r.size, len(whole))
	}
	for off := 0; off <= len(whole); off++ {
		for n := 0; n <= len(whole)-off+2; n++ {
			b := make([]byte, n)
			got, err := r.ReadAt(b, int64(off))
			want := min(n, len(whole)-off)
			if got != want || !bytes.Equal(b[:got], whole[off:off+want]) || (got < n) != (err == io.EOF) {
				t.Fatalf("ReadAt(%d bytes at %d) = %d %q, %v; want %d %q", n, off, got, b[:got], err, want, whole[off:off+want])
			}
		}
	}
	for range 3 { // a retried upload reads it again from the start
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(r, 100))
		if err != nil || !bytes.Equal(got, whole) {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
	}
	if pos, err := r.Seek(-2, io.SeekEnd); err != nil || pos != int64(len(whole)-2) {
		t.Fatalf("Seek(-2, end) = %d, %v", pos, err)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("Seek to -1 succeeded")
	}
}

// A state file above minio-go's part size (16 MiB) goes up as a multipart upload, read from the
// caller's slice and its trailer without a copy, and comes back whole.
func TestS3LargeStateFile(t *testing.T) {
	f := newFakeS3(t)
	s := openWith(t, f.url("p/"+uniqueName(t)), nil)
	data := make([]byte, 17<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h, err := s.WriteFile(context.Background(), 1, "kg-0", data)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	posts := f.requests["POST"] // initiate and complete a multipart upload
	f.mu.Unlock()
	if posts < 2 {
		t.Fatalf("%d POST requests: the upload was not multipart, so the test proves nothing", posts)
	}
	got, err := s.ReadFile(context.Background(), h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile: %d bytes (equal %v), %v", len(got), bytes.Equal(got, data), err)
	}
}

// file://: the conditional create of the metadata is decided by the filesystem (a hard link), so
// of many writers of the same checkpoint through separate Storages exactly one succeeds, and the
// stored metadata is its.
func TestFileConditionalCreateOneWinner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		s := openWith(t, "file://"+dir, nil)
		wg.Go(func() { errs[i] = s.WriteMetadata(context.Background(), 1, []byte{byte('a' + i)}) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both completed checkpoint 1", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fs.ErrExist):
			t.Fatalf("writer %d: %v, want success or fs.ErrExist", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer completed checkpoint 1")
	}
	got, err := openWith(t, "file://"+dir, nil).ReadMetadata(context.Background(), 1)
	if err != nil || !bytes.Equal(got, []byte{byte('a' + winner)}) {
		t.Fatalf("ReadMetadata = %q, %v; want writer %d's", got, err, winner)
	}
	// No temporary file is left behind.
	matches, _ := filepath.Glob(filepath.Join(dir, "*", tmpPrefix+"*"))
	if len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

// file://: keys cannot leave the directory, temporary files are not listed, and create_dir=false
// needs the directory to exist.
func TestFileStoreEdges(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	f, err := openFileStore(root, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../x", "a//b", "/abs", "a/./b", tmpPrefix + "x"} {
		if err := f.put(ctx, key, [][]byte{[]byte("x")}, false); err == nil {
			t.Errorf("put(%q) succeeded", key)
		}
	}
	if err := os.WriteFile(filepath.Join(root, tmpPrefix+"123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.put(ctx, "chk-0000000001/a", [][]byte{[]byte("x")}, false); err != nil {
		t.Fatal(err)
	}
	for _, delimiter := range []bool{true, false} {
		got, err := f.list(ctx, "", delimiter)
		want := listEntry{key: "chk-0000000001/", isDir: true}
		if !delimiter {
			want = listEntry{key: "chk-0000000001/a"}
		}
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("list(delimiter %v) = %v, %v; want [%v]", delimiter, got, err, want)
		}
	}
	if _, err := f.get(ctx, "chk-0000000001"); !errors.Is(err, errNotExist) {
		t.Errorf("get of a directory = %v, want errNotExist", err)
	}
	if err := f.del(ctx, "chk-0000000001"); err != nil {
		t.Errorf("del of a directory = %v, want nil (no such object)", err)
	}
	if ok, err := f.exists(ctx, "chk-0000000001/a/b"); ok || err != nil {
		t.Errorf("exists below a file = %v, %v", ok, err)
	}
	missingDir := filepath.Join(root, "missing")
	if _, err := Open(ctx, "file://"+missingDir+"?create_dir=false", nil); err == nil {
		t.Error("create_dir=false opened a missing directory")
	}
	if _, err := Open(ctx, "file://"+missingDir+"?metadata=keep", nil); err == nil {
		t.Error("metadata=keep was accepted")
	}
	s, err := Open(ctx, "file://"+missingDir+"?no_tmp_dir=true&metadata=skip", nil)
	if err != nil {
		t.Fatalf("fileblob's parameters with this package's values: %v", err)
	}
	storagetest.MustMeta(t, s, 1, "m")
	if _, err := os.Stat(filepath.Join(missingDir, storage.CheckpointDirName(1), storage.MetadataName)); err != nil {
		t.Fatalf("the metadata is not where storage.Local keeps it: %v", err)
	}
}
