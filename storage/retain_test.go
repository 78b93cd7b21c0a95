package storage

import (
	"context"
	"path/filepath"
	"testing"
)

// The Retain and Latest tests run against Local from storage_test.go, through storagetest (shared
// with storage/blob). That file is in package storage_test, since storagetest imports this package;
// the helpers below serve the tests inside the package (faults_test.go, faulty_test.go), which
// cannot import storagetest.

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

// ids returns the ids of the checkpoints s lists, as storagetest.IDs.
func ids(t *testing.T, s Storage) []int64 {
	t.Helper()
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}
