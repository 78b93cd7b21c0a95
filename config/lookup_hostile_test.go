package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// lookupReviewLoad writes script as q.sql beside the lookup fixture and loads it.
func lookupReviewLoad(t *testing.T, script string) (string, error) {
	t.Helper()
	dir := lookupFixture(t, 20)
	path := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	return dir, err
}

const lookupReviewHead = `SET checkpoint.dir = 'ckpts';
SET checkpoint.interval = '20ms';
CREATE SOURCE bids (id BIGINT, auction BIGINT, price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (connector = 'file', path = 'bids.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
CREATE TABLE side (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'side.jsonl');
`

// Found in review: docs/sql.md says "the clause on a source or view ... [is] refused
// when the script loads", and lookupQuery refuses it — but joinQuery tries
// windowTopJoin first, which ignores JoinInput.Lookup. A join of the
// window_top shape whose aggregate side is a VIEW read FOR SYSTEM_TIME AS OF
// PROCTIME() loads and is silently planned as an ordinary (window_top)
// stream join: the clause the user wrote is dropped.
func TestLookupClauseOnAViewIsRefused(t *testing.T) {
	script := windowTopHead + `CREATE SINK out AS SELECT a.key, a.n, a.ws FROM counts AS a
  JOIN best FOR SYSTEM_TIME AS OF PROCTIME() AS b ON a.ws = b.ws2 AND a.n >= b.mn
  WITH (connector = 'stdout');
`
	_, err := config.Load(writeFile(t, "q.sql", script))
	if err == nil || !strings.Contains(err.Error(), "FOR SYSTEM_TIME AS OF PROCTIME() looks up a table") {
		t.Errorf("lookup clause on view best: Load error %v, want the refusal lookupQuery gives (best is a view)", err)
	}
}

// Found in review: the string functions are strict in PostgreSQL (a NULL argument
// gives NULL), and the translator means to be (stringish/intish accept a
// NULL constant, guarded() tests it) — but the guard's other branch still
// passes the literal nil to expr's typed functions, which expr's checker
// rejects when the script loads ("cannot use nil as argument").
func TestStringFunctionsOfANullConstant(t *testing.T) {
	for _, sel := range []string{
		"split_part(s, '/', NULL)",
		"split_part(s, NULL, 1)",
		"split_part(NULL, '/', 1)",
		"replace(s, 'a', NULL)",
		"replace(NULL, 'a', 'b')",
		"(regexp_match(NULL, '(a)'))[1]",
	} {
		script := "CREATE SOURCE t (s VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'in.jsonl');\n" +
			"CREATE SINK o AS SELECT " + sel + " AS x FROM t WITH (connector = 'stdout');"
		if _, err := config.Load(writeFile(t, "q.sql", script)); err != nil {
			t.Errorf("SELECT %s: PostgreSQL gives NULL; Load fails: %v", sel, err)
		}
	}
}

// Found in review: a view of a lookup join keeps each stream row's event time (the
// operator copies rec.Time), but lookupQuery declares the output relation
// with timeCol "" even when the stream's time column is selected under its
// own name, so a window over the view is refused.
func TestWindowOverALookupJoinView(t *testing.T) {
	_, err := lookupReviewLoad(t, lookupReviewHead+`CREATE VIEW v AS SELECT b.ts, b.auction, s.value FROM bids b
  JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS s ON b.auction % 12 = s.key;
CREATE SINK out AS SELECT value, count(*) AS n, window_start FROM TUMBLE(v, ts, INTERVAL '1' SECOND)
  GROUP BY value, window_start WITH (connector = 'stdout');
`)
	if err != nil {
		t.Errorf("TUMBLE over a view of a lookup join: %v", err)
	}
}

// Found in review: errors about a table used where no lookup reads it should name
// file:line:column and say what is wrong.
func TestSinkFromATableIsRefused(t *testing.T) {
	_, err := lookupReviewLoad(t, lookupReviewHead+"CREATE SINK o FROM side WITH (connector = 'stdout');\n")
	if err == nil || !strings.Contains(err.Error(), "q.sql:6:") || !strings.Contains(err.Error(), "table") {
		t.Errorf("CREATE SINK o FROM side (a lookup table): error %v, want q.sql:6:… naming side as a table", err)
	}
}

// Found in review: the lookup errors raised by the YAML builder for a SQL script
// should name q.sql:line:column.
func TestLookupErrorPositions(t *testing.T) {
	for _, c := range []struct{ tail, want string }{
		{"CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id = s.value WITH (connector = 'stdout');",
			"q.sql:6:"},
		{"CREATE TABLE t2 (k BIGINT) WITH (connector = 'file', path = 'nowhere.jsonl');\nCREATE SINK o AS SELECT b.id FROM bids b JOIN t2 FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id = s.k WITH (connector = 'stdout');",
			"q.sql:6:"}, // ideally the path option of CREATE TABLE, line 6
	} {
		_, err := lookupReviewLoad(t, lookupReviewHead+c.tail)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n error: %v\n want it to contain %q", c.tail, err, c.want)
		} else {
			t.Logf("%v", err)
		}
	}
}

// Found in review: count(*) over a lookup join without GROUP BY (an aggregate, so
// groupedJoin, whose inner join selects no column).
func TestCountStarOverALookupJoin(t *testing.T) {
	_, err := lookupReviewLoad(t, lookupReviewHead+`CREATE SINK out AS SELECT count(*) AS n FROM bids b
  JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS s ON b.auction % 12 = s.key WITH (connector = 'stdout');
`)
	if err != nil {
		t.Errorf("count(*) over a lookup join: %v", err)
	}
}

// Found in review: planner.table records the table in p.rels only; unlike sources
// and views it adds no node through planner.add, so "the name … is already
// used" is never checked for it. A second CREATE TABLE of the same name (or
// a source or view declared after it under its name) silently replaces it:
// the join reads the last declaration's file. PostgreSQL: relation "side"
// already exists.
func TestTableNameDeclaredTwice(t *testing.T) {
	for _, tail := range []string{
		"CREATE TABLE side (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'bids.jsonl');\n",
		"CREATE SOURCE side (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'bids.jsonl') FORMAT PLAIN ENCODE JSON;\n",
		"CREATE TABLE bids (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'side.jsonl');\n",
	} {
		_, err := lookupReviewLoad(t, lookupReviewHead+tail+
			"CREATE SINK out AS SELECT b.id, s.value FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS s ON b.auction = s.key WITH (connector = 'stdout');\n")
		if err == nil || !strings.Contains(err.Error(), "already used") {
			t.Errorf("%s: Load error %v, want the name refused as already used", strings.TrimSpace(tail), err)
		}
	}
}

// Found in review: lookupJoin returns without reporting anything when on.left,
// on.right or table.path is an empty string (m.required only reports a
// missing key; the regular join reports an empty on.left itself). The
// transform and every sink reading it are silently left out of the plan:
// validate passes and the job runs to exit 0 writing nothing.
func TestLookupJoinEmptyFieldsAreRefused(t *testing.T) {
	for _, c := range []struct{ table, on string }{
		{`{path: side.jsonl, fields: {key: int, value: string}}`, `{left: "", right: key}`},
		{`{path: side.jsonl, fields: {key: int, value: string}}`, `{left: auction, right: ""}`},
		{`{path: "", fields: {key: int, value: string}}`, `{left: auction, right: key}`},
	} {
		dir := lookupFixture(t, 5)
		path := filepath.Join(dir, "q.yaml")
		if err := os.WriteFile(path, []byte(`pipeline: empty
checkpoint: {interval: 20ms, dir: ckpts}
sources:
  bids: {type: file, path: bids.jsonl, stop_at: latest, event_time: {field: ts}, fields: {id: int, auction: int, ts: time}}
transforms:
  j:
    type: lookup_join
    input: bids
    table: `+c.table+`
    on: `+c.on+`
    select: [left.id, right.value]
sinks:
  out: {type: file, input: j, path: out}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err == nil {
			plan, _ := p.Stream.Plan()
			t.Errorf("table %s, on %s: loads without error; plan has no sink:\n%s", c.table, c.on, plan.Describe())
		}
	}
}

// two lookups, one in a subquery, and a
// key expression over a nullable column, give what the inner joins give.
func TestLookupNestedAndNullableKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := lookupFixture(t, 60)
	path := filepath.Join(dir, "q.sql")
	script := lookupReviewHead + `CREATE SINK out AS SELECT x.id, x.v1, y.value AS v2 FROM (
    SELECT b.id, b.auction, s.value AS v1 FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS s ON CASE WHEN b.id % 5 = 0 THEN NULL ELSE b.auction % 12 END = s.key
  ) AS x JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS y ON x.auction % 6 = y.key WHERE y.value <> x.v1
  WITH (connector = 'file', path = 'out');
`
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runAndRead(t, path)
	vals := func(k int) []string {
		switch k {
		case 5:
			return nil
		case 3:
			return []string{"v3", "v3-again"}
		}
		return []string{"v" + strconv.Itoa(k)}
	}
	var want []string
	for i := range 60 {
		if i%5 == 0 {
			continue
		}
		a := i * 7 % 40
		for _, v1 := range vals(a % 12) {
			for _, v2 := range vals(a % 6) {
				if v2 != v1 {
					want = append(want, fmt.Sprintf(`{"id":%d,"v1":%q,"v2":%q}`, i, v1, v2))
				}
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("got %d rows, want %d\n got %v\nwant %v", len(got), len(want), got, want)
	}
}
