package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// Top-N written with ROW_NUMBER() commits exactly what the top_n transform
// written in YAML commits. One source subtask makes the order in which a
// key's records arrive, and so the changelog's rows, the same in both.
func TestSQLTopNEqualsYAML(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pipelines")
	}
	want := runAndRead(t, writeFile(t, "p.yaml", `pipeline: top
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  events: {type: datagen, count: 3000, keys: 7, parallelism: 1}
transforms:
  big: {type: filter, input: events, where: value > 100}
  top:
    type: top_n
    input: big
    key: [key]
    order_by: [value desc, id]
    limit: 3
    rank: rn
  named: {type: map, input: top, select: {k: key, id: id, v: value, rn: rn, _op: _op}}
sinks:
  out: {type: file, input: named, path: out}
`))
	got := runAndRead(t, writeFile(t, "top.sql", `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE events WITH (connector = 'datagen', count = 3000, keys = 7, parallelism = 1);
CREATE SINK out AS
  SELECT key AS k, id, value AS v, rn
  FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC, id) AS rn FROM events WHERE value > 100) AS t
  WHERE rn <= 3
  WITH (connector = 'file', path = 'out');
`))
	if len(want) < 21 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("SQL committed %d lines, YAML %d:\nSQL  %v\nYAML %v", len(got), len(want), first(got), first(want))
	}
}

// A ROW_NUMBER() query is refused unless it is top-N as the planner makes
// it: in a subquery, with ORDER BY, filtered by its rank alone, the rank and
// the partition columns selected.
func TestSQLTopNRefusals(t *testing.T) {
	const src = "CREATE SOURCE e WITH (connector = 'datagen', count = 10);\n"
	rank := func(over, where string) string {
		return src + "CREATE VIEW v AS SELECT key, id FROM (SELECT key, id, ROW_NUMBER() OVER (" + over + ") AS rn FROM e) AS t " + where + ";"
	}
	for _, c := range []struct{ name, sql, want string }{
		{"no subquery", src + "CREATE VIEW v AS SELECT key, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM e;", "t.sql:2:30: a window function (… OVER (…)) stands in a subquery"},
		{"no order", rank("PARTITION BY key", "WHERE rn <= 2"), "ROW_NUMBER() OVER (…) needs ORDER BY"},
		{"no filter", rank("PARTITION BY key ORDER BY id", ""), "filter the query by the rank (WHERE rn <= N)"},
		{"another filter", rank("PARTITION BY key ORDER BY id", "WHERE rn <= 2 AND id > 3"), "a ROW_NUMBER() query is filtered by its rank alone"},
		{"rank from 2", rank("PARTITION BY key ORDER BY id", "WHERE rn = 2"), "a ROW_NUMBER() query is filtered by its rank alone"},
		{"ranks without rank", rank("PARTITION BY key ORDER BY id", "WHERE rn <= 2"), "select the rank rn too: the top 2 rows"},
		{"partition not selected", src + "CREATE VIEW v AS SELECT id FROM (SELECT key, id, ROW_NUMBER() OVER (PARTITION BY key ORDER BY id) AS rn FROM e) AS t WHERE rn = 1;", "PARTITION BY key: select key too"},
		{"order by an expression", rank("PARTITION BY key ORDER BY id + 1", "WHERE rn = 1"), "ORDER BY: a column the subquery selects"},
		{"rank()", src + "CREATE VIEW v AS SELECT key FROM (SELECT key, rank() OVER (ORDER BY id) AS r FROM e) AS t WHERE r = 1;", "rank() OVER (…) is not supported"},
		{"a frame", rank("ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "WHERE rn = 1"), "ROW_NUMBER() OVER (…) takes no frame (ROWS …)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseSQL("t.sql", []byte(c.sql))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSQL: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	// Deduplication without the rank, and top-N selecting it, plan.
	for _, ok := range []string{
		rank("PARTITION BY key ORDER BY id DESC", "WHERE rn = 1"),
		src + "CREATE VIEW v AS SELECT key, id, rn FROM (SELECT key, id, ROW_NUMBER() OVER (PARTITION BY key ORDER BY id) AS rn FROM e) AS t WHERE 5 >= rn;",
	} {
		ok += "\nCREATE SINK s FROM v WITH (connector = 'stdout');"
		if _, err := config.ParseSQL("t.sql", []byte(ok)); err != nil {
			t.Errorf("ParseSQL(%q): %v", ok, err)
		}
	}
}

// Of an inner join, WHERE's bounds of both sides' event times make an
// interval join as ON's do; a window result's window_end is its time plus
// 1ns. A one-sided bound in WHERE stays a filter after an inner join.
func TestSQLJoinBoundsInWhere(t *testing.T) {
	const src = "CREATE SOURCE a WITH (connector = 'datagen', count = 10);\nCREATE SOURCE b WITH (connector = 'datagen', count = 10);\n" +
		"CREATE SOURCE f (k BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'f.jsonl');\n" +
		"CREATE SOURCE g (k BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'g.jsonl');\n"
	for _, c := range []struct{ name, query, want string }{
		{"both bounds", "SELECT a.id FROM a JOIN b ON a.key = b.key WHERE b.event_time BETWEEN a.event_time - INTERVAL '2' SECOND AND a.event_time AND b.value > 3",
			"interval join [-2s, 0s]"},
		{"one bound", "SELECT f.k FROM f JOIN g ON f.k = g.k WHERE g.t >= f.t",
			"inner join"},
		{"a window's end", "SELECT a.id FROM a JOIN (SELECT max(value) AS m, window_end AS e FROM TUMBLE(b, event_time, INTERVAL '10' SECOND) GROUP BY window_end) AS w ON a.value = w.m WHERE a.event_time BETWEEN w.e - INTERVAL '10' SECOND AND w.e",
			"interval join [-1ns, 9.999999999s]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := config.ParseSQL("t.sql", []byte(src+"CREATE SINK s AS "+c.query+" WITH (connector = 'stdout');"))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Stream.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.Describe(), c.want) {
				t.Errorf("plan:\n%s\nwant %q", plan.Describe(), c.want)
			}
		})
	}
}

// A GROUP BY of a window result's window_start, without a window, groups
// each window's results: a tumbling window of the windows' slide, whose
// result a join pairs with the others' as results of one window shape.
// Windows whose size is not a multiple of their slide are refused.
func TestSQLGroupByAWindowBound(t *testing.T) {
	const src = "CREATE SOURCE e WITH (connector = 'datagen', count = 10);\n"
	counts := func(size string) string {
		return "CREATE VIEW c AS SELECT key, count(*) AS n, window_start AS ws FROM HOP(e, event_time, INTERVAL '2' SECOND, INTERVAL '" + size + "' SECOND) GROUP BY key, window_start;\n"
	}
	// Joined to its maximum alone, it is window_top (sql_windowtop.go);
	// with a filter of one side, a join.
	for cond, wants := range map[string][]string{
		"":               {"rows at the highest n of each 2s tumbling window"},
		" AND c.key > 3": {"m-window (parallelism 1): tumbling event-time window 2s", "interval join [0s, 0s]"},
	} {
		p, err := config.ParseSQL("t.sql", []byte(src+counts("10")+
			"CREATE VIEW m AS SELECT max(n) AS top, ws AS mws FROM c GROUP BY ws;\n"+
			"CREATE SINK s AS SELECT c.key FROM c JOIN m ON c.ws = m.mws AND c.n >= m.top"+cond+" WITH (connector = 'stdout');"))
		if err != nil {
			t.Fatal(err)
		}
		plan, err := p.Stream.Plan()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(plan.Describe(), want) {
				t.Errorf("plan:\n%s\nwant %q", plan.Describe(), want)
			}
		}
	}
	_, err := config.ParseSQL("t.sql", []byte(src+counts("5")+"CREATE SINK s AS SELECT max(n) AS top, ws FROM c GROUP BY ws WITH (connector = 'stdout');"))
	if err == nil || !strings.Contains(err.Error(), "whose size (5s) is not a multiple of their slide (2s)") {
		t.Fatalf("ParseSQL: %v, want the size refused", err)
	}
	// A bound column still named window_start would be taken for the
	// grouping window's own start (end - slide, not end - size): refused.
	_, err = config.ParseSQL("t.sql", []byte(src+
		"CREATE VIEW w AS SELECT key, count(*) AS n, window_start, window_end FROM HOP(e, event_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) GROUP BY key, window_start;\n"+
		"CREATE SINK s AS SELECT window_start, max(n) AS top FROM w GROUP BY window_start WITH (connector = 'stdout');"))
	if err == nil || !strings.Contains(err.Error(), "w has a column named window_start") {
		t.Fatalf("ParseSQL: %v, want the column named window_start refused", err)
	}
}

// A source's AS PROCTIME() column is the processing time: a TUMBLE over it
// is a processing-time window and selecting it reads the clock, both
// reported as nondeterministic; what it cannot be is refused.
func TestSQLProctime(t *testing.T) {
	const src = "CREATE SOURCE e (id BIGINT, key BIGINT, value BIGINT, pt TIMESTAMP AS PROCTIME()) WITH (connector = 'datagen', count = 10);\n"
	p, err := config.ParseSQL("t.sql", []byte(src+
		"CREATE SINK s AS SELECT key, count(*) AS n FROM TUMBLE(e, pt, INTERVAL '1' SECOND) GROUP BY key, window_start WITH (connector = 'stdout');\n"+
		"CREATE SINK u AS SELECT id, pt AS seen FROM e WITH (connector = 'stdout');"))
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := p.Stream.Plan()
	if !strings.Contains(plan.Describe(), "tumbling processing-time window 1s") {
		t.Errorf("plan:\n%s\nwant a processing-time window", plan.Describe())
	}
	lines := strings.Join(p.Delivery().Lines(), "\n")
	for _, want := range []string{"window s-query-window is of processing time", "expression in 'u-query' calls now()"} {
		if !strings.Contains(lines, want) {
			t.Errorf("delivery:\n%s\nwant %q", lines, want)
		}
	}
	for _, c := range []struct{ sql, want string }{
		{src + "CREATE SINK s AS SELECT key, count(*) AS n FROM HOP(e, pt, INTERVAL '1' SECOND, INTERVAL '2' SECOND) GROUP BY key, window_start WITH (connector = 'stdout');", "windows of processing time (AS PROCTIME()) are tumbling"},
		{"CREATE SOURCE e (pt BIGINT AS PROCTIME()) WITH (connector = 'datagen');", "a processing time is a TIMESTAMP"},
		{"CREATE SOURCE e (a TIMESTAMP AS PROCTIME(), b TIMESTAMP AS PROCTIME()) WITH (connector = 'datagen');", "a and b are both AS PROCTIME()"},
		{"CREATE SOURCE e (a TIMESTAMP AS now()) WITH (connector = 'datagen');", "a generated column is AS PROCTIME()"},
	} {
		if _, err := config.ParseSQL("t.sql", []byte(c.sql)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSQL(%q): %v, want %q", c.sql, err, c.want)
		}
	}
}

// PARTITION BY and ORDER BY name the subquery's FROM columns: over a join,
// B.t is the column that selects B.t, whatever its alias, not another
// side's t.
func TestSQLTopNOrdersByTheQualifiedColumn(t *testing.T) {
	const src = "CREATE SOURCE a (id BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'a.jsonl');\n" +
		"CREATE SOURCE b (id BIGINT, v BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'b.jsonl');\n"
	p, err := config.ParseSQL("t.sql", []byte(src+`CREATE SINK s AS SELECT id, t, bt, v FROM (
  SELECT A.id, A.t, B.t AS bt, B.v, ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.v DESC, B.t) AS rn
  FROM a AS A JOIN b AS B ON A.id = B.id) AS w WHERE rn = 1 WITH (connector = 'stdout');`))
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := p.Stream.Plan()
	if want := "top 1 by [id] ordered by v desc, bt asc"; !strings.Contains(plan.Describe(), want) {
		t.Errorf("plan:\n%s\nwant %q", plan.Describe(), want)
	}
}

// A GROUP BY over a join names the join's columns by side, so two columns
// whose side and name would read alike (a.b_value and a_b.value) stay two.
func TestSQLGroupedJoinKeepsColumnsApart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"l.jsonl": `{"k": 1, "b_value": 10, "t": "2026-01-01T00:00:00Z"}` + "\n",
		"f.jsonl": `{"k": 1, "value": 100, "t": "2026-01-01T00:00:00Z"}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const src = "CREATE SOURCE l (k BIGINT, b_value BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'l.jsonl', stop_at = 'latest');\n" +
		"CREATE SOURCE f (k BIGINT, value BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'f.jsonl', stop_at = 'latest');\n"
	path := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(path, []byte(src+"CREATE SINK s AS SELECT a.k, sum(a.b_value) AS s1, sum(a_b.value) AS s2 FROM l AS a JOIN f AS a_b ON a.k = a_b.k GROUP BY a.k WITH (connector = 'file', path = 'out');"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runAndRead(t, path)
	if want := []string{`{"k":1,"s1":10,"s2":100,"_op":"insert"}`}; !slices.Equal(got, want) {
		t.Errorf("committed %q, want %q", got, want)
	}
}

// The top-N cases a review found misread, each now planned right or refused:
// PARTITION BY names the subquery's input column whatever the aliases, the
// outer query's GROUP BY and HAVING are refused, and * beside an expression
// keeps both; a nullable key is refused for a postgres upsert.
func TestSQLTopNReviewCases(t *testing.T) {
	const src = "CREATE SOURCE e WITH (connector = 'datagen', count = 20, keys = 3);\n"
	plan := func(query string) string {
		t.Helper()
		p, err := config.ParseSQL("t.sql", []byte(src+"CREATE SINK s AS "+query+" WITH (connector = 'stdout');"))
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		pl, _ := p.Stream.Plan()
		return pl.Describe()
	}
	if d := plan("SELECT id, value, rn FROM (SELECT id AS key, key AS id, value, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2"); !strings.Contains(d, "top 2 by [id]") {
		t.Errorf("PARTITION BY key, selected as id:\n%s\nwant the top_n keyed by [id]", d)
	}
	if d := plan("SELECT *, value * 2 AS dbl FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2"); !strings.Contains(d, "map id, key, value, rn, dbl, _op") {
		t.Errorf("* with an expression:\n%s\nwant every column and dbl", d)
	}
	for _, c := range []struct{ sql, want string }{
		{src + "CREATE SINK s AS SELECT key, value, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2 HAVING value > 100 WITH (connector = 'stdout');",
			"GROUP BY and HAVING of a ROW_NUMBER() query are not supported"},
		{src + "CREATE SINK s AS SELECT key, value, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2 GROUP BY key WITH (connector = 'stdout');",
			"GROUP BY and HAVING of a ROW_NUMBER() query are not supported"},
		{"CREATE SOURCE f (k BIGINT, t TIMESTAMP, WATERMARK FOR t AS t) WITH (connector = 'file', path = 'f.jsonl');\n" +
			"CREATE SINK s AS SELECT k, count(*) AS n FROM f GROUP BY k WITH (connector = 'postgres', dsn = 'postgres://x@127.0.0.1/test', table = 't', type = 'upsert', primary_key = 'k');",
			"sink s: key column k may be NULL, which a primary key cannot hold"},
	} {
		if _, err := config.ParseSQL("t.sql", []byte(c.sql)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSQL(%q): %v, want %q", c.sql, err, c.want)
		}
	}
}

// A top-N's kept rows are stored by position: a checkpoint taken with the
// ranked columns in another order is refused at restore, never read into
// the wrong fields.
func TestSQLTopNReorderedColumnsAreRefusedAtRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	run := runScripts(t, func(cols string) string {
		return "SET checkpoint.dir = 'ckpts';\nSET restart.max_attempts = 0;\n" +
			"CREATE SOURCE e WITH (connector = 'datagen', count = 2000, keys = 4);\n" +
			"CREATE SINK out AS SELECT * FROM (SELECT " + cols + ", ROW_NUMBER() OVER (PARTITION BY key ORDER BY value DESC) AS rn FROM e) AS t WHERE rn <= 2 WITH (connector = 'file', path = 'out');\n"
	})
	if err := run("key, value, id"); err != nil {
		t.Fatal(err)
	}
	err := run("key, id, value")
	if err == nil || !strings.Contains(err.Error(), "topn.rows.v1") {
		t.Fatalf("the reordered columns: %v, want the old state refused", err)
	}
}
