package config_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	runStages(t, path, rescaled(350*time.Millisecond, 300*time.Millisecond), doc)
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
