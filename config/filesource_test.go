package config_test

import (
	"context"

	"fmt"
	"github.com/ingest-engine/ingest/config"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// TestConfigFileSourceWindow runs files → window → file sink from YAML: two
// JSON Lines files matched by a glob relative to the pipeline file, an
// RFC 3339 event-time field, stop_at: latest; the committed windows are
// exact.
func TestConfigFileSourceWindow(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	type agg struct{ count, sum int64 }
	want := map[string]agg{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for f := 0; f < 2; f++ {
		var b strings.Builder
		for i := int64(0); i < 1000; i++ {
			ts := base.Add(time.Duration(i*5+int64(f)) * time.Millisecond)
			key := (i + int64(f)) % 3
			fmt.Fprintf(&b, `{"key":%d,"value":%d,"ts":%q}`+"\n", key, i%10, ts.Format(time.RFC3339Nano))
			w := fmt.Sprintf(`"key":%d,"window_start":%q`, key, ts.Truncate(time.Second).Format(time.RFC3339Nano))
			a := want[w]
			a.count++
			a.sum += i % 10
			want[w] = a
		}
		if err := os.WriteFile(filepath.Join(dir, "in", fmt.Sprintf("part-%d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := `pipeline: files
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  files:
    type: file
    path: in/*.jsonl
    event_time: {field: ts}
    stop_at: latest
    parallelism: 2
transforms:
  w:
    type: window
    input: files
    key: key
    size: 1s
    aggregates: {count: count(), sum: sum(value)}
sinks:
  out: {type: file, input: w, path: out}
`
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runYAMLIn(t, dir)
	lines, err := testkit.ReadCommitted(filepath.Join(out, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(want) {
		t.Fatalf("%d windows, want %d", len(lines), len(want))
	}
	for _, l := range lines {
		s := string(l.Text)
		var key, start string
		if i := strings.Index(s, `"window_end"`); i > 0 {
			key = strings.TrimSuffix(strings.TrimPrefix(s[:i], "{"), ",")
			start = key
		}
		a, ok := want[start]
		if !ok || !strings.Contains(s, fmt.Sprintf(`"count":%d,"sum":%d`, a.count, a.sum)) {
			t.Fatalf("line %s: want %+v for %s", s, a, start)
		}
	}
}

// runYAMLIn loads and runs dir/p.yaml and returns dir.
func runYAMLIn(t *testing.T, dir string) string {
	t.Helper()
	p, err := config.Load(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return dir
}
