package config_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/datagen"
)

// windowTopHead is a generator of 3000 records, one per millisecond, with 7
// keys, and a view of it whose k2 is NULL where the key is 6.
const windowTopHead = `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE events WITH (connector = 'datagen', count = 3000, keys = 7, parallelism = 1);
CREATE VIEW nullable AS SELECT id, key, value, CASE WHEN key = 6 THEN NULL ELSE key END AS k2 FROM events;
CREATE VIEW counts AS
  SELECT key, count(*) AS n, window_start AS ws
  FROM HOP(events, event_time, INTERVAL '10 milliseconds', INTERVAL '30 milliseconds')
  GROUP BY window_start, key;
CREATE VIEW best AS SELECT max(n) AS mn, ws AS ws2 FROM counts GROUP BY ws;
`

// planOf loads the script and describes its plan.
func planOf(t *testing.T, script string) string {
	t.Helper()
	p, err := config.Load(writeFile(t, "q.sql", script))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return plan.Describe()
}

// A join of a relation with its windows' highest or lowest value, at that
// value and in the window, is planned as window_top and commits exactly
// what the join commits (the same query with a condition that makes it an
// ordinary join: a filter of one side that keeps every row): ties, rows at
// a window's end instant under BETWEEN, the lowest value, either side first,
// window_start or window_end, NULL values, and a window result's maximum
// per window (q5).
func TestSQLWindowTopEqualsTheJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	sink := "\n  WITH (connector = 'file', path = 'out');\n"
	for _, c := range []struct {
		name, query, keepAll, want string
	}{
		{"highest, through the end", `SELECT c.id, c.key, w.e FROM events AS c JOIN (
    SELECT max(key) AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end
  ) AS w ON c.key = w.m
  WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e`, " AND c.id >= 0", "ties included, rows at a window's end instant included"},
		{"lowest, the window only, aggregate first", `SELECT c.id, c.value, w.s AS s FROM (
    SELECT window_start AS s, min(value) AS m FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_start
  ) AS w JOIN events AS c ON w.m = c.value
  WHERE c.event_time >= w.s AND c.event_time < w.s + INTERVAL '30 milliseconds'`, "", "rows at the lowest value of each 30ms tumbling window, ties included {"},
		{"the best selected, window_start through the end", `SELECT c.id, w.m AS best, w.s FROM events AS c JOIN (
    SELECT max(value) AS m, window_start AS s FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_start
  ) AS w ON w.m = c.value AND c.event_time BETWEEN w.s AND w.s + INTERVAL '30 milliseconds'`, " AND c.id >= 0", "rows at the highest value"},
		{"NULL values", `SELECT c.id, c.k2 FROM nullable AS c JOIN (
    SELECT max(k2) AS m, window_end AS e FROM TUMBLE(nullable, event_time, INTERVAL '30 milliseconds') GROUP BY window_end
  ) AS w ON c.k2 = w.m
  WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e`, " AND c.id >= 0", "rows at the highest k2"},
		{"a window result's maximum (q5)", `SELECT a.key, a.n, a.ws FROM counts AS a JOIN best AS b ON a.ws = b.ws2 AND a.n >= b.mn`, " AND a.key >= 0", "rows at the highest n of each 10ms tumbling window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := windowTopHead + "CREATE SINK out AS " + c.query + sink
			join := windowTopHead + "CREATE SINK out AS " + c.query + c.keepAll + sink
			if d := planOf(t, top); !strings.Contains(d, c.want) || strings.Contains(d, "join") {
				t.Fatalf("plan:\n%s\nwant %q and no join", d, c.want)
			}
			if c.keepAll == "" {
				// The join cannot plan a strict bound on a time that is
				// not a column: the lowest value of 30 consecutive ids'
				// i %% 1000 is one id's per window.
				checkLowestValues(t, runAndRead(t, writeFile(t, "top.sql", top)))
				return
			}
			if d := planOf(t, join); !strings.Contains(d, "join") || strings.Contains(d, "window_top") || strings.Contains(d, "rows at the") {
				t.Fatalf("the reference's plan:\n%s\nwant a join", d)
			}
			got := runAndRead(t, writeFile(t, "top.sql", top))
			want := runAndRead(t, writeFile(t, "join.sql", join))
			if len(want) < 20 || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("window_top committed %d lines, the join %d:\nwindow_top %v\njoin       %v", len(got), len(want), first(got), first(want))
			}
			t.Logf("%d rows alike", len(got))
		})
	}
}

// Joins of another shape stay joins: the rewrite would change which rows
// the aggregate sees or which rows join it.
func TestSQLWindowTopOnlyForItsShape(t *testing.T) {
	sub := func(agg, group, where string) string {
		return fmt.Sprintf("(SELECT %s AS m, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') %s GROUP BY window_end%s) AS w", agg, where, group)
	}
	bound := " WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e"
	for _, c := range []struct{ name, query string }{
		{"a filter on the relation", "SELECT c.id FROM events AS c JOIN " + sub("max(key)", "", "") + " ON c.key = w.m" + bound + " AND c.value > 3"},
		{"a filter in the aggregate", "SELECT c.id FROM events AS c JOIN " + sub("max(key)", "", "WHERE value > 3") + " ON c.key = w.m" + bound},
		{"another bound", "SELECT c.id FROM events AS c JOIN " + sub("max(key)", "", "") + " ON c.key = w.m WHERE c.event_time BETWEEN w.e - INTERVAL '20 milliseconds' AND w.e"},
		{"a count", "SELECT c.id FROM events AS c JOIN " + sub("count(*)", "", "") + " ON c.key = w.m" + bound},
		{"max joined by >=... of min", "SELECT c.id FROM events AS c JOIN " + sub("min(key)", "", "") + " ON c.key >= w.m" + bound},
		{"another relation", "SELECT c.id FROM nullable AS c JOIN " + sub("max(key)", "", "") + " ON c.key = w.m WHERE c.id >= 0"},
		{"the record's time selected", "SELECT c.id, c.event_time AS t FROM events AS c JOIN " + sub("max(key)", "", "") + " ON c.key = w.m" + bound},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := windowTopHead + "CREATE SINK out AS " + c.query + "\n  WITH (connector = 'file', path = 'out');\n"
			p, err := config.Load(writeFile(t, "q.sql", script))
			if err != nil {
				if strings.Contains(err.Error(), "window_top") {
					t.Fatalf("refused by window_top: %v", err)
				}
				return // refused as a join
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if d := plan.Describe(); strings.Contains(d, "rows at the") {
				t.Fatalf("planned as window_top:\n%s", d)
			}
		})
	}
}

// window_top written in YAML: its mistakes are refused at load, each naming
// its field.
func TestWindowTopRefusals(t *testing.T) {
	head := "pipeline: w\nsources:\n  events: {type: datagen, count: 10}\ntransforms:\n"
	for _, c := range []struct{ name, transform, want string }{
		{"no order", "  t: {type: window_top, input: events, size: 1s}", "transforms.t.order_by: is required, one field"},
		{"two fields", "  t: {type: window_top, input: events, size: 1s, order_by: [key, value]}", "transforms.t.order_by: is required, one field"},
		{"no such field", "  t: {type: window_top, input: events, size: 1s, order_by: [price desc]}", `transforms.t.order_by: "price desc": want a field of input events`},
		{"bad direction", "  t: {type: window_top, input: events, size: 1s, order_by: [key up]}", `"key up": want a field`},
		{"no size", "  t: {type: window_top, input: events, order_by: [key]}", "transforms.t.size"},
		{"negative size", "  t: {type: window_top, input: events, size: -1s, order_by: [key]}", "transforms.t.size"},
		{"a window_start field", "  m: {type: map, input: events, select: {window_start: id, key: key}}\n  t: {type: window_top, input: m, size: 1s, order_by: [key]}", "has a field window_start, which window_top adds"},
		{"a changelog", "  a: {type: aggregate, input: events, key: [key], aggregates: {n: count()}}\n  t: {type: window_top, input: a, size: 1s, order_by: [n]}", "is a changelog"},
		{"an unknown field", "  t: {type: window_top, input: events, size: 1s, order_by: [key], limit: 2}", "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load(writeFile(t, "p.yaml", head+c.transform+"\nsinks:\n  out: {type: stdout, input: t}\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// checkLowestValues checks the rows of the lowest value per 30 ms window of
// windowTopHead's generator (value i % 1000, a record per millisecond from
// a start that is a multiple of 30 ms): one id per window, with its value
// and window start.
func checkLowestValues(t *testing.T, lines []string) {
	t.Helper()
	start := datagen.DefaultStartTime
	if start.UnixNano()%int64(30*time.Millisecond) != 0 {
		t.Fatalf("the generator's start %v is not a multiple of 30 ms", start)
	}
	var want []string
	for w := 0; w < 3000; w += 30 {
		low := w
		for i := w; i < w+30; i++ {
			if i%1000 < low%1000 {
				low = i
			}
		}
		want = append(want, fmt.Sprintf(`{"id":%d,"value":%d,"s":%q}`, low, low%1000, start.Add(time.Duration(w)*time.Millisecond).Format(time.RFC3339Nano)))
	}
	var got []string
	for _, l := range lines {
		var r struct {
			ID, Value int
			S         time.Time
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, fmt.Sprintf(`{"id":%d,"value":%d,"s":%q}`, r.ID, r.Value, r.S.UTC().Format(time.RFC3339Nano)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("committed %d rows, want %d:\ngot  %v\nwant %v", len(got), len(want), first(got), first(want))
	}
}

// Times far away: windows before 1970 are windows like the others; a row
// whose window would end after the latest time there is (2262-04-11) stops
// the job naming its time, instead of closing the window at a wrapped time.
func TestWindowTopFarTimes(t *testing.T) {
	run := func(start string) ([]string, error) {
		path := writeFile(t, "p.yaml", `pipeline: far
checkpoint: {interval: 50ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  events: {type: datagen, count: 20, keys: 3, start_time: "`+start+`", event_interval: 100ms}
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
			return nil, err
		}
		return committedLines(t, filepath.Dir(path), "out"), nil
	}
	got, err := run("1677-09-22T00:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	// Ids 0..9 and 10..19 are two windows; key 2 is ids 2, 5, 8 and 11,
	// 14, 17.
	if len(got) != 6 || !strings.Contains(strings.Join(got, "\n"), `"id":17,"key":2,"value":17,"window_start":"1677-09-22T00:00:01Z","window_end":"1677-09-22T00:00:02Z"`) {
		t.Fatalf("1677: %d rows %v", len(got), got)
	}
	if _, err := run("2262-04-11T23:47:14.1Z"); err == nil || !strings.Contains(err.Error(), "falls in a window that ends after the latest time there is") {
		t.Fatalf("2262: error %v", err)
	}
}
