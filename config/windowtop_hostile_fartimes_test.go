package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// The earliest time the engine represents is 1677-09-21T00:12:43.145224192Z
// (math.MinInt64 ns), which a generator accepts as its start. The tumbling
// window holding such a time would start before it: its start saturates at
// the earliest time, as the window operator's does, and the job runs on
// (it once wrapped around to 2262 and stopped).
//
// Records 0..8 (0 to 800 ms after the start, keys 0, 1, 2, …) are in the
// first 1 s window, which ends at the first whole second; its highest key
// is 2: ids 2, 5 and 8.
func TestWindowTopEarliestTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	path := writeFile(t, "p.yaml", `pipeline: far
checkpoint: {interval: 50ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  events: {type: datagen, count: 20, keys: 3, start_time: "1677-09-21T00:12:43.145224192Z", event_interval: 100ms}
transforms:
  t: {type: window_top, input: events, size: 1s, order_by: [key desc]}
sinks:
  out: {type: file, input: t, path: out}
`)
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := runToEnd(t, p); err != nil {
		t.Fatalf("a record dated 1677 stops the job: %v", err)
	}
	got := strings.Join(committedLines(t, filepath.Dir(path), "out"), "\n")
	for _, id := range []string{`"id":2,`, `"id":5,`, `"id":8,`} {
		if !strings.Contains(got, id) {
			t.Errorf("no row %s in the first window:\n%s", id, got)
		}
	}
}

// The same records through the SQL join that window_top replaces run to
// the end too (the window aggregate saturates the first window's start).
func TestWindowTopEarliestTimeJoinRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	script := `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
SET restart.max_attempts = 0;
CREATE SOURCE events WITH (connector = 'datagen', count = 20, keys = 3, start_time = '1677-09-21T00:12:43.145224192Z', event_interval = '100ms');
CREATE SINK out AS SELECT c.id, c.key, w.e FROM events AS c JOIN (
    SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '1' SECOND) GROUP BY window_end
  ) AS w ON c.key = w.m
  WHERE c.event_time BETWEEN w.e - INTERVAL '1' SECOND AND w.e`
	run := func(extra string) error {
		p, err := config.Load(writeFile(t, "q.sql", script+extra+"\n  WITH (connector = 'file', path = 'out');\n"))
		if err != nil {
			t.Fatal(err)
		}
		return runToEnd(t, p)
	}
	if err := run(" AND c.id >= 0"); err != nil {
		t.Fatalf("the join: %v", err)
	}
	if err := run(""); err != nil {
		t.Logf("the same query rewritten into window_top fails: %v", err)
	}
}
