package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/datagen"
)

// window_top stopped mid-run and restored at another
// parallelism, twice (2 → 3 → 1), with through_end: the committed rows are
// exactly the rows at each window's highest key, none lost or repeated.
func TestWindowTopRescaleExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	const count, keys = 6000, 7
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	doc := func(par int) string {
		return fmt.Sprintf(`pipeline: rescale
checkpoint: {interval: 40ms, dir: ckpts}
sources:
  events: {type: datagen, count: %d, keys: %d, rate: 6000, parallelism: 2}
transforms:
  t: {type: window_top, input: events, size: 30ms, order_by: [key desc], through_end: true, parallelism: %d}
sinks:
  out: {type: file, input: t, path: out, parallelism: %d}
`, count, keys, par, par)
	}
	for i, r := range []struct {
		par  int
		stop time.Duration
	}{{2, 350 * time.Millisecond}, {3, 300 * time.Millisecond}, {1, 0}} {
		if err := os.WriteFile(path, []byte(doc(r.par)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if r.stop > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), r.stop)
		}
		err = p.Stream.Run(ctx, p.RunOptions())
		cancel()
		if err != nil && !(r.stop > 0 && errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("run %d (parallelism %d): %v", i, r.par, err)
		}
		// Committed after this run: the next run restores the checkpoint
		// of these and continues.
		n := 0
		if _, statErr := os.Stat(filepath.Join(dir, "out")); statErr == nil {
			n = len(committedLines(t, dir, "out"))
		}
		t.Logf("run %d (parallelism %d): %v; %d rows committed so far", i, r.par, err, n)
	}
	var got []string
	for _, l := range committedLines(t, dir, "out") {
		var r struct {
			ID          int64     `json:"id"`
			WindowStart time.Time `json:"window_start"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d@%d", r.ID, r.WindowStart.UnixNano()))
	}
	slices.Sort(got)
	size := int64(30 * time.Millisecond)
	start := datagen.DefaultStartTime.UnixNano()
	at := func(i int64) int64 { return start + i*int64(time.Millisecond) }
	best := map[int64]int64{}
	for i := int64(0); i < count; i++ {
		w := at(i) - at(i)%size
		if b, ok := best[w]; !ok || i%keys > b {
			best[w] = i % keys
		}
	}
	var want []string
	for i := int64(0); i < count; i++ {
		w := at(i) - at(i)%size
		if i%keys == best[w] {
			want = append(want, fmt.Sprintf("%d@%d", i, w))
		}
		if b, ok := best[w-size]; ok && at(i) == w && i%keys == b {
			want = append(want, fmt.Sprintf("%d@%d", i, w-size))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		missing, extra := diffLines(want, got)
		t.Fatalf("committed %d rows, want %d: missing %d %v, extra %d %v", len(got), len(want), len(missing), head(missing, 5), len(extra), head(extra, 5))
	}
	t.Logf("%d rows exactly", len(got))
}
