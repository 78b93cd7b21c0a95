package window_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// count_distinct(field) works from a pipeline file: datagen record i has key
// i % 4 and value i % 1000, so a 1 s window of 1000 records (1 ms apart)
// holds 250 records of each key, with 250 distinct values.
func TestYAMLCountDistinct(t *testing.T) {
	dir := t.TempDir()
	yaml := `pipeline: distinct
checkpoint:
  interval: 50ms
  dir: data/checkpoints
sources:
  events:
    type: datagen
    count: 3000
    keys: 4
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 1s
    aggregates:
      n: count()
      distinct: count_distinct(value)
sinks:
  out:
    type: file
    input: per_key
    path: data/out
`
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatal(err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data/out"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 12 {
		t.Fatalf("%d results, want 12 (3 windows x 4 keys)", len(lines))
	}
	for _, l := range lines {
		var r struct{ N, Distinct int64 }
		if err := json.Unmarshal(l.Text, &r); err != nil || r.N != 250 || r.Distinct != 250 {
			t.Fatalf("result %s: want n 250 and distinct 250 (%v)", l.Text, err)
		}
	}
}
