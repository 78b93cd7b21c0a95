package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckpointDirURL: checkpoint.dir may be an object-storage URL;
// a bounded pipeline's checkpoints land there (file:// here, an S3 bucket
// in production), not in a directory named after the URL.
func TestConfigCheckpointDirURL(t *testing.T) {
	ck := t.TempDir()
	dir := runYAML(t, fmt.Sprintf(`pipeline: url
checkpoint: {interval: 50ms, dir: "file://%s"}
sources:
  events: {type: datagen, count: 3000}
sinks:
  out: {type: file, input: events, path: out}
`, filepath.ToSlash(ck)))
	entries, err := os.ReadDir(ck)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || strings.HasPrefix(e.Name(), "chk-")
	}
	if !found {
		t.Fatalf("no checkpoint under %s: %v", ck, entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "file:")); err == nil {
		t.Fatal("the URL was taken for a relative directory")
	}
}
