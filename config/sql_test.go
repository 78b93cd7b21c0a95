package config_test

import (
	"context"
	"encoding/json"
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
	want := runAndRead(t, yamlPath)
	if len(want) < 100 {
		t.Fatalf("the YAML pipeline committed %d lines, want the windows of 3000 records", len(want))
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
		{"CREATE SOURCE e WITH (connector = 'datagen');\nCREATE SINK o AS SELECT key, count(*) FROM e GROUP BY key WITH (connector = 'stdout');",
			"q.sql:2:30: an aggregate without a window in FROM (TUMBLE, HOP, SESSION) is an updating result, which is not supported yet"},
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
	want := runAndRead(t, yamlPath)
	if len(want) < 100 {
		t.Fatalf("the YAML join committed %d lines", len(want))
	}
	got := runAndRead(t, sqlPath)
	if !slices.Equal(got, want) {
		t.Fatalf("SQL committed %d lines, YAML %d; first SQL %q, first YAML %q", len(got), len(want), first(got), first(want))
	}
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
