package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// legacyWindowsYAML is the pipeline that wrote testdata/legacy-windows: a
// build whose tumbling windows kept a timer per key and window
// ("window-timers") was stopped at checkpoint 31, with 1,610 of the 3,000
// records read, window [1s, 2s) open, window [0s, 1s) committed. (It ran
// with rate: 500 to stop it mid-way; the rate is no part of the state.)
//
// testdata/legacy-late-windows is the same with 500 ms windows, an allowed
// lateness of 1 s and the window at parallelism 2, stopped at checkpoint 31
// with windows fired and kept for their lateness (their timers moved to
// their cleanup times) and one open; it resumes at parallelism 1.
// testdata/legacy-sliding-windows: 1 s windows sliding by 250 ms (panes,
// one timer per key), stopped at checkpoint 31 after 1,592 records.
const legacyWindowsYAML = `pipeline: %s
checkpoint:
  interval: 100ms
  dir: checkpoints
sources:
  events:
    type: datagen
    count: 3000
    keys: 7
    event_interval: 1ms
transforms:
  w:
    type: window
    input: events
    key: key
    size: %v
%s    aggregates:
      count: count()
      sum: sum(value)
sinks:
  out:
    type: file
    input: w
    path: out
`

// A checkpoint written by an earlier build resumes to the exact output: the
// windows open in it fire, none twice, none lost.
func TestLegacyWindowCheckpointResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	for _, c := range []struct {
		dir, pipeline string
		size, slide   time.Duration
		extra         string
	}{
		{"legacy-windows", "legacy-windows", time.Second, time.Second, ""},
		{"legacy-late-windows", "legacy-late-windows", 500 * time.Millisecond, 500 * time.Millisecond, "    allowed_lateness: 1s\n"},
		{"legacy-sliding-windows", "legacy-sliding-windows", time.Second, 250 * time.Millisecond, "    kind: sliding\n    slide: 250ms\n"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			got := resumeGolden(t, c.dir, fmt.Sprintf(legacyWindowsYAML, c.pipeline, c.size, c.extra))
			type kw struct{ key, start int64 }
			count, sum := map[kw]int64{}, map[kw]int64{}
			var order []kw
			for _, r := range datagenRecords(3000, 7, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond) {
				for start := floorTo(r.time, c.slide); start > r.time-int64(c.size); start -= int64(c.slide) {
					w := kw{r.key, start}
					if _, ok := count[w]; !ok {
						order = append(order, w)
					}
					count[w]++
					sum[w] += r.value
				}
			}
			var want []string
			for _, w := range order {
				start := time.Unix(0, w.start).UTC()
				want = append(want, fmt.Sprintf(`{"key":%d,"window_start":%q,"window_end":%q,"count":%d,"sum":%d}`,
					w.key, start.Format(time.RFC3339Nano), start.Add(c.size).Format(time.RFC3339Nano), count[w], sum[w]))
			}
			slices.Sort(want)
			sameLines(t, "committed output after resuming the legacy checkpoint", got, want)
		})
	}
}

// legacyWindowJoinYAML wrote testdata/legacy-window-join: a build whose
// window join kept its buffers as "left" and "right" and a timer per key
// and window ("window-timers"), stopped at checkpoint 30 with window
// [1s, 2s) open on both sides and window [0s, 1s) committed.
const legacyWindowJoinYAML = `pipeline: legacy-window-join
checkpoint:
  interval: 100ms
  dir: checkpoints
sources:
  a:
    type: datagen
    count: 3000
    keys: 500
    event_interval: 1ms
  b:
    type: datagen
    count: 1500
    keys: 500
    event_interval: 2ms
transforms:
  j:
    type: join
    kind: window
    left: a
    right: b
    on: key
    size: 1s
    select:
      key: key
      a: left.id
      b: right.id
sinks:
  out:
    type: file
    input: j
    path: out
`

// A window join's checkpoint written by an earlier build resumes to the
// exact output: every pair of each key's records in a window, once.
func TestLegacyWindowJoinCheckpointResumes(t *testing.T) {
	got := resumeGolden(t, "legacy-window-join", legacyWindowJoinYAML)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type kw struct{ key, window int64 }
	as := map[kw][]int64{}
	for _, r := range datagenRecords(3000, 500, start, time.Millisecond) {
		w := kw{r.key, floorTo(r.time, time.Second)}
		as[w] = append(as[w], r.id)
	}
	var want []string
	for _, r := range datagenRecords(1500, 500, start, 2*time.Millisecond) {
		for _, a := range as[kw{r.key, floorTo(r.time, time.Second)}] {
			want = append(want, fmt.Sprintf(`{"key":%d,"a":%d,"b":%d}`, r.key, a, r.id))
		}
	}
	slices.Sort(want)
	sameLines(t, "committed output after resuming the legacy window join checkpoint", got, want)
}

// An interval join's checkpoint written by an earlier build, which kept a
// cleanup timer per key and bucket ("left-cleanup", "right-cleanup"),
// resumes to the exact pairs: testdata/legacy-interval-join is the window
// join's pipeline above as an interval join (b from 0 to 100 ms after a),
// stopped at checkpoint 30.
func TestLegacyIntervalJoinCheckpointResumes(t *testing.T) {
	src := strings.Replace(strings.Replace(legacyWindowJoinYAML, "legacy-window-join", "legacy-interval-join", 1),
		"    kind: window\n", "    kind: interval\n", 1)
	src = strings.Replace(src, "    size: 1s\n", "    lower: 0s\n    upper: 100ms\n", 1)
	got := resumeGolden(t, "legacy-interval-join", src)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bs := datagenRecords(1500, 500, start, 2*time.Millisecond)
	var want []string
	for _, a := range datagenRecords(3000, 500, start, time.Millisecond) {
		for _, b := range bs {
			if a.key == b.key && b.time >= a.time && b.time <= a.time+int64(100*time.Millisecond) {
				want = append(want, fmt.Sprintf(`{"key":%d,"a":%d,"b":%d}`, a.key, a.id, b.id))
			}
		}
	}
	slices.Sort(want)
	sameLines(t, "committed output after resuming the legacy interval join checkpoint", got, want)
}

// resumeGolden copies testdata/<golden> (a checkpoint directory and the sink
// directory of an earlier build's stopped run) to a new directory, runs the
// pipeline src there to the end, and returns the committed output lines,
// sorted.
func resumeGolden(t *testing.T, golden, src string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", golden))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(lines))
	for i, l := range lines {
		got[i] = string(l.Text)
	}
	slices.Sort(got)
	return got
}
