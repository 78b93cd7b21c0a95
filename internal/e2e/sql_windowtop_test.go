package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/datagen"
)

// windowTopSQL joins a generator's records with the highest key of their
// 30 ms window, BETWEEN its start and its end (q7's shape, which the
// planner runs as window_top): with 7 keys and a record per millisecond,
// each window has ties at its highest key, and a record at every window's
// end instant, which joins that window too when its key is the highest
// (for one window in 7).
func windowTopSQL(count, rate int) string {
	return fmt.Sprintf(`SET pipeline = 'sql-window-top';
SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'data/checkpoints';
SET checkpoint.retain = 2;
SET checkpoint.tolerable_failures = 1000;
SET restart.delay = '5ms';
SET restart.multiplier = 1;
SET restart.max_attempts = 1000;
CREATE SOURCE clicks WITH (connector = 'datagen', count = %d, keys = 7, rate = %d);
CREATE SINK out AS
  SELECT c.id AS id, c.key AS k, w.e AS wend
  FROM clicks AS c JOIN (
    SELECT max(key) AS m, window_end AS e
    FROM TUMBLE(clicks, event_time, INTERVAL '30 milliseconds')
    GROUP BY window_end
  ) AS w ON c.key = w.m
  WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e
  WITH (connector = 'file', path = 'data/out', parallelism = 2);
`, count, rate)
}

// windowTopWant computes windowTopSQL's rows from the generator's
// definition (record i: key i % 7 at start + i ms), as the sink writes
// them, sorted, and how many are at their window's end instant.
func windowTopWant(t *testing.T, count int) (rows []string, atEnd int) {
	t.Helper()
	const size = int64(30 * time.Millisecond)
	start := datagen.DefaultStartTime.UnixNano()
	at := func(i int) int64 { return start + int64(i)*int64(time.Millisecond) }
	best := map[int64]int{} // window start → highest key
	for i := range count {
		w := at(i) - at(i)%size
		best[w] = max(best[w], i%7)
	}
	for i := range count {
		t0 := at(i)
		w := t0 - t0%size
		for _, ws := range []int64{w, w - size} {
			m, ok := best[ws]
			if !ok || m != i%7 || (ws != w && t0 != ws+size) {
				continue
			}
			if ws != w {
				atEnd++
			}
			b, err := json.Marshal(map[string]any{"id": i, "k": i % 7, "wend": time.Unix(0, ws+size).UTC().Format(time.RFC3339Nano)})
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, string(b))
		}
	}
	slices.Sort(rows)
	return rows, atEnd
}

// TestSQLWindowTopInjectedFailures fails the join of records with their
// window's highest key (planned as window_top) in process, while it
// processes records and inside the checkpoint protocol, and requires
// exactly the rows the generator's definition gives: every tie, every
// record at a window's end instant that ties its highest key.
func TestSQLWindowTopInjectedFailures(t *testing.T) {
	const count = 6000
	want, atEnd := windowTopWant(t, count)
	if atEnd < 10 {
		t.Fatalf("%d of the %d rows are at their window's end instant: the test would not test it", atEnd, len(want))
	}
	t.Logf("%d rows, %d at their window's end instant", len(want), atEnd)
	p, err := config.ParseSQL("p.sql", []byte(windowTopSQL(count, 15000)))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "rows at the highest key of each 30ms tumbling window, ties included, rows at a window's end instant included") {
		t.Fatalf("plan:\n%s\nwant window_top", d)
	}
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{4, 13}},
		{"job/after-metadata-before-commit", []int64{2, 4}},
		{"task/process-batch", []int64{7, 19}},
	} {
		t.Run(c.point, func(t *testing.T) {
			got := committedSorted(t, runSQLFailing(t, windowTopSQL(count, 15000), 50*time.Millisecond, c))
			compareJoin(t, canonicalTimes(t, got), want)
		})
	}
}

// canonicalTimes rewrites each JSON line's wend as RFC 3339 in UTC with
// nanoseconds, as windowTopWant writes it.
func canonicalTimes(t *testing.T, lines []string) []string {
	t.Helper()
	out := make([]string, len(lines))
	for i, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["wend"]))
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		r["wend"] = ts.UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(r)
		out[i] = string(b)
	}
	slices.Sort(out)
	return out
}
