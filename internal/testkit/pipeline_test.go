package testkit_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// The contract pipeline parses, keeping its state in memory by default and
// in the pebble backend under the pipeline file's directory with StateDir.
func TestWindowPipelineState(t *testing.T) {
	dir := t.TempDir()
	wp := testkit.WindowPipeline{Name: "p", Interval: time.Second, Count: 10, Keys: 2}
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(wp.YAML()))
	if err != nil {
		t.Fatal(err)
	}
	if p.State != nil {
		t.Fatalf("state %+v without StateDir, want the memory backend (nil)", p.State)
	}
	wp.StateDir = "data/state"
	p, err = config.Parse(filepath.Join(dir, "p.yaml"), []byte(wp.YAML()))
	if err != nil {
		t.Fatalf("%v\n%s", err, wp.YAML())
	}
	if p.State == nil || p.State.Dir != filepath.Join(dir, "data", "state") {
		t.Fatalf("state %+v with StateDir %q, want the pebble backend in %s", p.State, wp.StateDir, filepath.Join(dir, "data", "state"))
	}
}
