package config_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// With through_end, window_top closes a window when the watermark reaches
// its end (not end - 1ns), and emits its rows at that instant: were they at
// end - 1ns, as a window's results are, they could arrive downstream at a
// time equal to its watermark (a generator's watermark is its last event
// time - 1ns), and an event-time operator after window_top (here a tumbling
// window counting them) would drop them as late. With and without
// through_end the chain loses nothing.
func TestWindowTopThroughEndRowsAreLateDownstream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	run := func(through bool) (out, late []string) {
		path := writeFile(t, "p.yaml", fmt.Sprintf(`pipeline: late
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  events: {type: datagen, count: 200, keys: 3, event_interval: 1s, rate: 2000}
transforms:
  t: {type: window_top, input: events, size: 1s, order_by: [key desc], through_end: %t}
  c:
    type: window
    input: t
    key: key
    size: 1s
    late_records: late
    aggregates: {n: count()}
sinks:
  out: {type: file, input: c, path: out}
  late: {type: file, input: c.late, path: late}
`, through))
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := runToEnd(t, p); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(path)
		return committedLines(t, dir, "out"), committedLines(t, dir, "late")
	}
	// One record per 1 s window, at its start; keys 0, 1, 2, 0, …: each
	// window's own record is its best, and no end-instant record ties it.
	// So each of the 200 windows emits one row, and the count per window
	// downstream is 200 windows of n = 1.
	for _, through := range []bool{false, true} {
		out, late := run(through)
		if len(out) != 200 || len(late) != 0 {
			t.Errorf("through_end %t: the window after window_top counted %d windows (want 200) and dropped %d rows as late (want 0), e.g. %s",
				through, len(out), len(late), strings.Join(head(late, 2), " "))
		}
	}
}
