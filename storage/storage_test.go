package storage_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/storage/storagetest"
)

// The contract every Storage keeps (storagetest, which storage/blob runs too) and the retention
// functions, against Local. The tests below them are about Local's directories on disk.

func TestLocalContract(t *testing.T) { storagetest.TestStorage(t, storagetest.OpenLocal) }

func TestLocalRetention(t *testing.T) { storagetest.TestRetention(t, storagetest.OpenLocal) }

func TestNewLocalRejectsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.NewLocal(p); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("NewLocal(file) = %v, want 'not a directory'", err)
	}
	if _, err := storage.NewLocal(""); err == nil {
		t.Fatal("NewLocal(\"\") succeeded")
	}
}

// A directory can be empty, which object storage cannot represent (storagetest's List check puts a
// file into each): empty directories whose names are not checkpoint directories are not listed.
func TestListSkipsEmptyJunkDirectories(t *testing.T) {
	ctx := context.Background()
	s := storagetest.OpenLocal(t)
	for _, d := range []string{"chk-", "chk-abc", "chk-12x", "chk-5", "chk-+000000001", "lost+found", "chk-99999999999999999999"} {
		if err := os.Mkdir(filepath.Join(s.Location(), d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteMetadata(ctx, 7, []byte("m")); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx)
	want := []storage.Entry{{ID: 7, Complete: true, Path: filepath.Join(s.Location(), "chk-0000000007")}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %v, %v; want %v", got, err, want)
	}
}

// Discard removes the checkpoint's directory, not only the files in it.
func TestDiscardRemovesDirectory(t *testing.T) {
	ctx := context.Background()
	s := storagetest.OpenLocal(t)
	if _, err := s.WriteFile(ctx, 1, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMetadata(ctx, 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Location(), "chk-0000000001")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("chk-0000000001 still there: %v", err)
	}
}
