package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// The pipeline a file describes runs: a bounded datagen → window → file
// pipeline commits exactly the windows the datagen contract implies, in the
// README's output format.
func TestLoadedPipelineRunsToExactOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const (
		count = 4000
		keys  = 7
	)
	path := writeFile(t, "p.yaml", fmt.Sprintf(`pipeline: run
checkpoint:
  interval: 100ms
  dir: ckpts
restart:
  delay: 10ms
  max_attempts: 1
sources:
  events:
    type: datagen
    parallelism: 2
    count: %d
    keys: %d
    start_time: 2026-01-01T00:00:00.250Z
    event_interval: 1ms
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 500ms
    parallelism: 2
    aggregates:
      count: count()
      sum: sum(value)
      lo: min(value)
      hi: max(value)
      mean: avg(value)
sinks:
  out:
    type: file
    input: per_key
    path: out
    parallelism: 2
`, count, keys))
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}

	type key struct {
		k     int64
		start string
	}
	type agg struct{ n, sum, lo, hi int64 }
	want := map[key]*agg{}
	start := time.Date(2026, 1, 1, 0, 0, 0, int(250*time.Millisecond), time.UTC)
	size := 500 * time.Millisecond
	for i := int64(0); i < count; i++ {
		ts := start.Add(time.Duration(i) * time.Millisecond)
		ws := ts.Truncate(size) // size divides a second: epoch-aligned
		k := key{i % keys, ws.UTC().Format(time.RFC3339Nano)}
		a := want[k]
		v := i % 1000
		if a == nil {
			a = &agg{lo: v, hi: v}
			want[k] = a
		}
		a.n++
		a.sum += v
		a.lo, a.hi = min(a.lo, v), max(a.hi, v)
	}

	seen := map[key]int{}
	lines, err := testkit.ReadCommitted(filepath.Join(filepath.Dir(path), "out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		text := string(l.Text)
		dec := json.NewDecoder(bytes.NewReader(l.Text))
		dec.UseNumber()
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("%s:%d: %q: %v", l.File, l.Number, text, err)
		}
		ws, _ := rec["window_start"].(string)
		we, _ := rec["window_end"].(string)
		num := func(f string) json.Number { n, _ := rec[f].(json.Number); return n }
		ints := map[string]int64{}
		for _, f := range []string{"key", "count", "sum", "lo", "hi"} {
			n, err := num(f).Int64()
			if err != nil {
				t.Errorf("line %q: %s is not a JSON integer", text, f)
			}
			ints[f] = n
		}
		if len(rec) != 8 {
			t.Errorf("line %q: fields %v; want key, window_start, window_end, count, sum, lo, hi, mean", text, rec)
		}
		ts, err := time.Parse(time.RFC3339Nano, ws)
		te, err2 := time.Parse(time.RFC3339Nano, we)
		if err != nil || err2 != nil || !strings.HasSuffix(ws, "Z") || te.Sub(ts) != size {
			t.Errorf("line %q: window %q..%q is not a 500ms RFC 3339 UTC interval", text, ws, we)
		}
		k := key{ints["key"], ws}
		seen[k]++
		a := want[k]
		if a == nil {
			t.Errorf("unexpected window %+v: %q", k, text)
			continue
		}
		if ints["count"] != a.n || ints["sum"] != a.sum || ints["lo"] != a.lo || ints["hi"] != a.hi {
			t.Errorf("window %+v: %q; want count %d sum %d min %d max %d", k, text, a.n, a.sum, a.lo, a.hi)
		}
		if m, err := num("mean").Float64(); err != nil || m != float64(a.sum)/float64(a.n) {
			t.Errorf("window %+v: mean %v, want %v", k, rec["mean"], float64(a.sum)/float64(a.n))
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("window %+v committed %d times, want once", k, seen[k])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct windows committed, want %d", len(seen), len(want))
	}
}
