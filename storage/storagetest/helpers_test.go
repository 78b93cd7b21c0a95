package storagetest

import (
	"context"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// Helpers of the tests of the filesystem and storage doubles.

func newTestLocal(t *testing.T) *storage.Local {
	t.Helper()
	l, err := storage.NewLocal(filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustWrite(t *testing.T, s storage.Storage, id int64, name string, data []byte) storage.Handle {
	t.Helper()
	h, err := s.WriteFile(context.Background(), id, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustMeta(t *testing.T, s storage.Storage, id int64, data string) {
	t.Helper()
	if err := s.WriteMetadata(context.Background(), id, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// chkDir is the directory of checkpoint id of the tests' Locals, at /ck.
func chkDir(id int64) string { return filepath.Join("/ck", storage.CheckpointDirName(id)) }

// tmpPrefix begins the names of storage.Local's temporary files.
const tmpPrefix = ".tmp-"

// checksum is the CRC-32C storage.Local's trailers hold.
func checksum(p []byte) uint32 { return crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) }
