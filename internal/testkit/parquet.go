package testkit

import (
	"os"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// OpenParquet opens the Parquet file at path for its metadata and rows; the
// file is closed when the test ends.
func OpenParquet(t testing.TB, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	return pf
}
