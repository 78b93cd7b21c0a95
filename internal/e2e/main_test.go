package e2e

import (
	"os"
	"testing"
)

// TestMain removes what the tests share once they are done: the ingest
// binary the pebble tests build once (pkBinary).
func TestMain(m *testing.M) {
	code := m.Run()
	if pkBin.dir != "" {
		_ = os.RemoveAll(pkBin.dir)
	}
	os.Exit(code)
}
