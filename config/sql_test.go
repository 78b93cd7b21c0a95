package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// runScripts returns a function that writes script(arg) as q.sql in one
// directory (so its runs share checkpoints), loads it and runs it.
func runScripts(t *testing.T, script func(string) string) func(string) error {
	path := filepath.Join(t.TempDir(), "q.sql")
	return func(arg string) error {
		if err := os.WriteFile(path, []byte(script(arg)), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return p.Stream.Run(ctx, p.RunOptions())
	}
}

// runAndRead loads and runs the pipeline file at path and returns the lines
// its file sink committed under dir out, sorted.
func runAndRead(t *testing.T, path string) []string {
	t.Helper()
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(filepath.Dir(path), "out"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l.Text))
	}
	slices.Sort(out)
	return out
}

// A windowed query written in SQL commits exactly what the same pipeline
// written in YAML commits: the SQL is planned into that graph.
func TestSQLWindowEqualsYAML(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pipelines")
	}
	yamlPath := writeFile(t, "p.yaml", `pipeline: w
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  events: {type: datagen, count: 3000, keys: 5, parallelism: 2}
transforms:
  big: {type: filter, input: events, where: value >= 100}
  per_key:
    type: window
    input: big
    key: key
    kind: sliding
    size: 200ms
    slide: 100ms
    aggregates: {n: count(), total: sum(value), top: max(value), mean: avg(value)}
sinks:
  out: {type: file, input: per_key, path: out}
`)
	sqlPath := writeFile(t, "q.sql", `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE events WITH (connector = 'datagen', count = 3000, keys = 5, parallelism = 2);
CREATE VIEW big AS SELECT * FROM events WHERE value >= 100;
CREATE SINK out AS
  SELECT key, window_start, window_end, count(*) AS n, sum(value) AS total, max(value) AS top, avg(value) AS mean
  FROM HOP(big, event_time, INTERVAL '100 milliseconds', INTERVAL '0.2' SECOND)
  GROUP BY key, window_start
  WITH (connector = 'file', path = 'out');
`)
	requireSameOutput(t, yamlPath, sqlPath, 100)
}

// requireSameOutput runs both pipeline files and requires the SQL one to
// commit exactly the YAML one's lines, of which there are at least least.
func requireSameOutput(t *testing.T, yamlPath, sqlPath string, least int) {
	t.Helper()
	want := runAndRead(t, yamlPath)
	if len(want) < least {
		t.Fatalf("the YAML pipeline committed %d lines, want at least %d", len(want), least)
	}
	got := runAndRead(t, sqlPath)
	if !slices.Equal(got, want) {
		t.Fatalf("SQL committed %d lines, YAML %d; first SQL %q, first YAML %q", len(got), len(want), first(got), first(want))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// A stateless query over a file source: WHERE, CASE, casts, string
// functions and a view, each row exactly as a hand computation gives it.
func TestSQLStatelessQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	var in strings.Builder
	var want []string
	for i := range 50 {
		name := []string{"Ada", "bob", "Cy"}[i%3]
		in.WriteString(`{"id":` + itoa(i) + `,"name":"` + name + `","price":` + itoa(i*7) + `,"ts":"2026-01-01T00:00:0` + itoa(i%10) + `Z"}` + "\n")
		if i*7 <= 20 || strings.HasPrefix(strings.ToLower(name), "c") {
			continue
		}
		size := "small"
		if i*7 > 200 {
			size = "large"
		}
		want = append(want, `{"id":`+itoa(i)+`,"who":"`+strings.ToUpper(name)+`","euros":`+ftoa(float64(i*7)*0.908)+`,"size":"`+size+`","half":`+ftoa(float64(i*7)/2)+`}`)
	}
	if err := os.WriteFile(filepath.Join(dir, "bids.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(path, []byte(`SET checkpoint.dir = 'ckpts';
CREATE SOURCE bids (id BIGINT, name VARCHAR, price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = 'bids.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
CREATE VIEW priced AS SELECT id, name, price FROM bids WHERE price > 20 AND NOT lower(name) LIKE 'c%';
CREATE SINK out AS
  SELECT id, upper(name) AS who, price * 0.908 AS euros,
         CASE WHEN price > 200 THEN 'large' ELSE 'small' END AS size,
         CAST(price AS DOUBLE PRECISION) / 2 AS half
  FROM priced
  WITH (connector = 'file', path = 'out');
`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runAndRead(t, path)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("committed:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Errors in a SQL script name the file, line and column: the parser's, the
// planner's, and the builder's (an option the connector does not declare).
func TestSQLErrorsNameLineAndColumn(t *testing.T) {
	for _, c := range []struct{ script, want string }{
		{"CREATE SOURCE e WITH (connector = 'datagen', cout = 10);\nCREATE SINK o FROM e WITH (connector = 'stdout');",
			"q.sql:1:46: sources.e.cout: unknown field, did you mean count?"},
		{"CREATE SOURCE e WITH (connector = 'datagen');\nCREATE SINK o AS SELECT id, valeu FROM e WITH (connector = 'stdout');",
			"q.sql:2:29: e has no column valeu (columns: id, key, value)"},
		{"CREATE SOURCE e WITH (connector = 'kinesis');", `q.sql:1:23: sources.e.type: unknown source type "kinesis"`},
		{"CREATE SOURCE e WITH (connector = 'datagen');\nCREATE SINK o AS SELECT count(*) AS n FROM e GROUP BY key WITH (connector = 'stdout');",
			"q.sql:2:55: GROUP BY key: select key too"},
		{"CREATE SOURCE e WITH (connector = 'datagen');\nCREATE SINK o AS SELECT id / 2 AS h FROM e WITH (connector = 'stdout');",
			"q.sql:2:28: division: write one side as a real number"},
		{"CREATE SOURCE e WITH (connector = 'datagen', rate = -1);\nCREATE SINK o FROM e WITH (connector = 'stdout');",
			"q.sql:1:46: sources.e.rate: must be positive"},
	} {
		path := filepath.Join(t.TempDir(), "q.sql")
		if err := os.WriteFile(path, []byte(c.script), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error: %v\n  want it to contain %q", c.script, err, c.want)
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// An interval join written in SQL commits what the YAML interval join
// commits: BETWEEN on the two sides' event times gives the bounds.
func TestSQLIntervalJoinEqualsYAML(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pipelines")
	}
	yamlPath := writeFile(t, "p.yaml", `pipeline: j
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  a: {type: datagen, count: 2000, keys: 10}
  b: {type: datagen, count: 1500, keys: 10, event_interval: 3ms}
transforms:
  big: {type: filter, input: b, where: value > 10}
  j:
    type: join
    kind: interval
    left: a
    right: big
    on: key
    lower: -5ms
    upper: 2ms
    select: {k: left.key, ai: left.id, bi: right.id}
sinks:
  out: {type: file, input: j, path: out}
`)
	sqlPath := writeFile(t, "q.sql", `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE a WITH (connector = 'datagen', count = 2000, keys = 10);
CREATE SOURCE b WITH (connector = 'datagen', count = 1500, keys = 10, event_interval = '3ms');
CREATE SINK out AS
  SELECT a.key AS k, a.id AS ai, b.id AS bi
  FROM a JOIN b ON a.key = b.key
    AND b.event_time BETWEEN a.event_time - INTERVAL '5 milliseconds' AND a.event_time + INTERVAL '2 milliseconds'
  WHERE b.value > 10
  WITH (connector = 'file', path = 'out');
`)
	requireSameOutput(t, yamlPath, sqlPath, 100)
}

// A string constant reaches the expression exactly: quotes, a doubled
// single quote, a tab, non-ASCII letters.
func TestSQLStringConstants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	names := []string{"it's \"q\"\tü", "it's \"q\" ü", "plain"}
	var in strings.Builder
	for i, n := range names {
		b, _ := json.Marshal(n)
		in.WriteString(`{"id":` + strconv.Itoa(i) + `,"name":` + string(b) + `,"ts":"2026-01-01T00:00:00Z"}` + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.sql")
	script := "SET checkpoint.dir = 'ckpts';\n" +
		"CREATE SOURCE s (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl', stop_at = 'latest');\n" +
		"CREATE SINK out AS SELECT id FROM s WHERE name = 'it''s \"q\"\tü' WITH (connector = 'file', path = 'out');\n"
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runAndRead(t, path); !slices.Equal(got, []string{`{"id":0}`}) {
		t.Fatalf("committed %q, want only id 0", got)
	}
}

// NULL behaves as in PostgreSQL: an operator on NULL gives NULL, AND and OR
// are three-valued, a condition keeps a row only when it is true, a NULL
// join key matches nothing; CAST of a float to BIGINT rounds.
func TestSQLNullSemantics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	input := `{"id":1,"f":null,"name":null,"flag":null,"k":null,"ts":"2026-01-01T00:00:00Z"}
{"id":2,"f":2.5,"name":"abc","flag":true,"k":7,"ts":"2026-01-01T00:00:01.25Z"}
{"id":3,"f":2.7,"name":"xyz","flag":false,"k":8,"ts":"2026-01-01T00:00:02Z"}
`
	source := "CREATE SOURCE s (id BIGINT, f DOUBLE PRECISION, name VARCHAR, flag BOOLEAN, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) " +
		"WITH (connector = 'file', path = 'in.jsonl', stop_at = 'latest');\n"
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"<> on NULL", "SELECT id FROM s WHERE f <> 2.5", []string{`{"id":3}`}},
		{"NOT IN on NULL", "SELECT id FROM s WHERE f NOT IN (2.5, 2.6)", []string{`{"id":3}`}},
		{"NOT LIKE on NULL", "SELECT id FROM s WHERE name NOT LIKE 'a%'", []string{`{"id":3}`}},
		{"NOT on NULL", "SELECT id FROM s WHERE NOT (flag = true)", []string{`{"id":3}`}},
		{"= NULL", "SELECT id FROM s WHERE k = NULL", nil},
		{"NULL OR TRUE", "SELECT id FROM s WHERE f > 2.6 OR id > 0", []string{`{"id":1}`, `{"id":2}`, `{"id":3}`}},
		{"NULL AND FALSE", "SELECT id, (f > 2.6 AND id > 5) IS NULL AS unknown FROM s", []string{`{"id":1,"unknown":false}`, `{"id":2,"unknown":false}`, `{"id":3,"unknown":false}`}},
		{"NULL AND TRUE", "SELECT id FROM s WHERE (f > 2.6 AND id > 0) IS NULL", []string{`{"id":1}`}},
		{"arithmetic and functions", "SELECT id, f * 2 AS g, upper(name) AS u, CAST(f AS VARCHAR) AS t, coalesce(k, -1) AS c FROM s WHERE id = 1",
			[]string{`{"id":1,"g":null,"u":null,"t":null,"c":-1}`}},
		{"CASE on NULL", "SELECT id, CASE WHEN f > 2.6 THEN 'big' ELSE 'other' END AS size FROM s",
			[]string{`{"id":1,"size":"other"}`, `{"id":2,"size":"other"}`, `{"id":3,"size":"big"}`}},
		{"CAST rounds", "SELECT id, CAST(f AS BIGINT) AS n FROM s WHERE id > 1", []string{`{"id":2,"n":3}`, `{"id":3,"n":3}`}},
		{"aggregates skip NULL", "SELECT window_start, max(f) AS m, max(f) + 1.0 AS m1, count(*) AS n FROM TUMBLE(s, ts, INTERVAL '1' SECOND) GROUP BY window_start",
			[]string{`{"window_start":"2026-01-01T00:00:00Z","m":null,"m1":null,"n":1}`, `{"window_start":"2026-01-01T00:00:01Z","m":2.5,"m1":3.5,"n":1}`,
				`{"window_start":"2026-01-01T00:00:02Z","m":2.7,"m1":3.7,"n":1}`}},
		{"aggregates with FILTER, of expressions, count(col)",
			"SELECT window_start, count(*) AS n, count(f) AS nf, count(*) FILTER (WHERE f > 2.6) AS big, sum(id * 2) AS s2, " +
				"max(f) FILTER (WHERE id < 3) AS m, min(f) FILTER (WHERE id > 100) AS none, count(DISTINCT id % 2) AS parities, max(event_time) AS last " +
				"FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY window_start",
			[]string{`{"window_start":"2026-01-01T00:00:00Z","n":3,"nf":2,"big":1,"s2":12,"m":2.5,"none":null,"parities":2,"last":"2026-01-01T00:00:02Z"}`}},
		{"sum and avg of no value are NULL",
			"SELECT window_start, sum(id) FILTER (WHERE id > 100) AS s, coalesce(sum(id) FILTER (WHERE id > 100), -1) AS cs, " +
				"coalesce(avg(id) FILTER (WHERE id > 100), -1.0) AS ca, sum(k) FILTER (WHERE id = 1) AS sk " +
				"FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY window_start",
			[]string{`{"window_start":"2026-01-01T00:00:00Z","s":null,"cs":-1,"ca":-1,"sk":null}`}},
		{"EXTRACT", "SELECT id, EXTRACT(SECOND FROM ts) AS sec, EXTRACT(HOUR FROM ts) AS h, to_char(ts, 'HH24:MI:SS.MS') AS t FROM s WHERE id = 2",
			[]string{`{"id":2,"sec":1.25,"h":0,"t":"00:00:01.250"}`}},
		{"deep expressions over NULLs", "SELECT id, " + strings.Repeat("f + ", 24) + "f AS g, " + strings.Repeat("(f > 1 AND ", 12) + "id > 0" + strings.Repeat(")", 12) + " AS all FROM s WHERE id < 3",
			[]string{`{"id":1,"g":null,"all":null}`, `{"id":2,"g":62.5,"all":true}`}},
		{"NULL keys do not join", "SELECT a.id AS l, b.id AS r FROM s AS a JOIN s AS b ON a.k = b.k",
			[]string{`{"l":2,"r":2}`, `{"l":3,"r":3}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "q.sql")
			script := "SET checkpoint.dir = 'ckpts';\n" + source + "CREATE SINK out AS " + c.query + " WITH (connector = 'file', path = 'out');\n"
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			got := runAndRead(t, path)
			if !slices.Equal(got, c.want) {
				t.Fatalf("%s\ncommitted %q, want %q", c.query, got, c.want)
			}
		})
	}
}

// Constructs whose meaning the engine would change are refused at load,
// naming them: month intervals, OFFSET, column renames in FROM, change-data
// formats, sink encodings other than JSON, LIKE … ESCAPE, HAVING without a
// window, || of numbers, CAST of a time.
func TestSQLRefusesWhatItWouldChange(t *testing.T) {
	source := "CREATE SOURCE s (id BIGINT, name VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl', stop_at = 'latest');\n"
	for _, c := range []struct{ script, want string }{
		{source + "CREATE SINK o AS SELECT count(*) FROM TUMBLE(s, ts, INTERVAL '1' MONTH) GROUP BY window_start WITH (connector = 'stdout');", "INTERVAL in months or years is not supported"},
		{source + "CREATE SINK o AS SELECT id FROM s OFFSET 3 WITH (connector = 'stdout');", "LIMIT and OFFSET are not supported"},
		{source + "CREATE SINK o AS SELECT a FROM s AS t(a, b) WITH (connector = 'stdout');", "renaming a relation's columns in FROM"},
		{"CREATE SOURCE s (id BIGINT) WITH (connector = 'kafka', topic = 't', brokers = 'b:9092') FORMAT DEBEZIUM ENCODE JSON;", "FORMAT DEBEZIUM is not supported"},
		{source + "CREATE SINK o FROM s WITH (connector = 'stdout') FORMAT PLAIN ENCODE AVRO;", "FORMAT PLAIN ENCODE AVRO is not supported"},
		{source + "CREATE SINK o AS SELECT id FROM s WHERE name LIKE 'a#%' ESCAPE '#' WITH (connector = 'stdout');", "LIKE takes a constant pattern"},
		{source + "CREATE SINK o AS SELECT id FROM s WHERE name LIKE name WITH (connector = 'stdout');", "LIKE takes a constant pattern"},
		{source + "CREATE SINK o AS SELECT id FROM s HAVING id > 1 WITH (connector = 'stdout');", "HAVING without GROUP BY"},
		{source + "CREATE SINK o AS SELECT id || id AS x FROM s WITH (connector = 'stdout');", "|| joins text"},
		{source + "CREATE SINK o AS SELECT CAST(ts AS VARCHAR) AS x FROM s WITH (connector = 'stdout');", "CAST of time to VARCHAR is not supported"},
	} {
		path := filepath.Join(t.TempDir(), "q.sql")
		if err := os.WriteFile(path, []byte(c.script), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error: %v\n  want it to contain %q", c.script, err, c.want)
		}
	}
}

// A view that redefines event_time as a column does not window on the
// record's own event time any more; an unquoted capitalised column draws a
// warning.
func TestSQLEventTimeAndCaseFolding(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	script := `CREATE SOURCE e WITH (connector = 'datagen', count = 10);
CREATE VIEW v AS SELECT id, event_time + INTERVAL '90' SECOND AS event_time FROM e;
CREATE SINK o AS SELECT window_start, count(*) AS n FROM TUMBLE(v, event_time, INTERVAL '1' MINUTE) GROUP BY window_start WITH (connector = 'stdout');`
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "windows are over the event time") {
		t.Errorf("a window over a redefined event_time: %v, want it refused", err)
	}
	script = "CREATE SOURCE s (Price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl', stop_at = 'latest');\n" +
		"CREATE SINK o FROM s WITH (connector = 'stdout');"
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0].Msg, `column Price is read as price`) {
		t.Errorf("warnings %v, want one about Price", p.Warnings)
	}
}

// GROUP BY several columns groups by their combination (a window keyed by
// a list of fields), and the result keeps each under its name; a query that
// selects no aggregate lists each window's distinct keys.
func TestSQLGroupBySeveralColumns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	script := `SET checkpoint.dir = 'ckpts';
CREATE SOURCE events WITH (connector = 'datagen', count = 1000, keys = 4);
CREATE VIEW v AS SELECT key, value % 3 AS r, value FROM events;
CREATE SINK out AS
  SELECT r, key, window_start, count(*) AS n, sum(value) AS s
  FROM TUMBLE(v, event_time, INTERVAL '0.25' SECOND)
  GROUP BY key, r, window_start
  WITH (connector = 'file', path = 'out');
CREATE SINK keys AS
  SELECT key, r, window_start FROM TUMBLE(v, event_time, INTERVAL '0.5' SECOND)
  GROUP BY key, r, window_start
  WITH (connector = 'file', path = 'keys');
`
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	type group struct {
		key, r int64
		start  time.Time
	}
	sums, counts, distinct := map[group]int64{}, map[group]int64{}, map[group]bool{}
	for i := int64(0); i < 1000; i++ {
		at := datagenStart.Add(time.Duration(i) * time.Millisecond)
		v := i % 1000
		g := group{i % 4, v % 3, at.Truncate(250 * time.Millisecond)}
		sums[g] += v
		counts[g]++
		distinct[group{i % 4, v % 3, at.Truncate(500 * time.Millisecond)}] = true
	}
	var want, wantKeys []string
	for g, n := range counts {
		want = append(want, fmt.Sprintf(`{"r":%d,"key":%d,"window_start":"%s","n":%d,"s":%d}`, g.r, g.key, g.start.Format(time.RFC3339Nano), n, sums[g]))
	}
	for g := range distinct {
		wantKeys = append(wantKeys, fmt.Sprintf(`{"key":%d,"r":%d,"window_start":"%s"}`, g.key, g.r, g.start.Format(time.RFC3339Nano)))
	}
	slices.Sort(want)
	slices.Sort(wantKeys)
	if got := runAndRead(t, path); !slices.Equal(got, want) {
		t.Fatalf("committed %d rows, want %d; first %q, want %q", len(got), len(want), first(got), first(want))
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, string(l.Text))
	}
	slices.Sort(got)
	if !slices.Equal(got, wantKeys) {
		t.Fatalf("keys: committed %d rows, want %d; first %q, want %q", len(got), len(wantKeys), first(got), first(wantKeys))
	}
}

// datagenStart is datagen's default start time.
var datagenStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A checkpoint of a window whose computed aggregates changed (order, or an
// expression) is refused, never restored into other aggregates.
func TestSQLChangedAggregatesAreRefusedAtRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	run := runScripts(t, func(aggs string) string {
		return "SET checkpoint.dir = 'ckpts';\nSET restart.max_attempts = 0;\n" +
			"CREATE SOURCE e WITH (connector = 'datagen', count = 2000);\n" +
			"CREATE SINK out AS SELECT window_start, " + aggs + " FROM TUMBLE(e, event_time, INTERVAL '1' SECOND) GROUP BY window_start WITH (connector = 'file', path = 'out');\n"
	})
	if err := run("count(*) FILTER (WHERE value < 500) AS low, count(*) FILTER (WHERE value >= 500) AS high"); err != nil {
		t.Fatal(err)
	}
	err := run("count(*) FILTER (WHERE value >= 500) AS low, count(*) FILTER (WHERE value < 500) AS high")
	if err == nil {
		t.Fatal("the changed aggregates restored the old checkpoint's state")
	}
	t.Logf("refused: %v", err)
}
