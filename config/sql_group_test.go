package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// A GROUP BY without a window is an updating result: its sink receives the
// changelog the aggregate transform makes, which applied in order gives
// exactly the aggregates of all records, HAVING deleting the keys that stop
// qualifying.
func TestSQLGroupByIsAnExactChangelog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const count, keys = 3000, 7
	path := writeFile(t, "totals.sql", `
SET checkpoint.interval = '50ms';
SET parallelism = '2';
CREATE SOURCE events WITH (connector = 'datagen', count = '3000', keys = '7', parallelism = '1');
CREATE VIEW totals AS
  SELECT key, count(*) AS n, sum(value) AS total, max(value) AS hi, avg(value) AS mean
  FROM events
  GROUP BY key
  HAVING sum(value) < 100000;
CREATE SINK out FROM totals WITH (connector = 'file', path = 'out', parallelism = '3');
`)
	runAndRead(t, path)
	checkTotalsChangelog(t, filepath.Join(filepath.Dir(path), "out"), count, keys, 100000)
}

// An updating result goes only where it is applied: a postgres sink must
// upsert on exactly its GROUP BY columns, and a query or join cannot read it;
// the result must select its GROUP BY columns, and names no column _op.
// Each refusal names the line and column and says what to write.
func TestSQLUpdatingResultsAreRefusedWhereTheyWouldBeMisread(t *testing.T) {
	const src = "CREATE SOURCE events WITH (connector = 'datagen', count = '10');\n"
	const view = "CREATE VIEW totals AS SELECT key, count(*) AS n FROM events GROUP BY key;\n"
	const pg = "connector = 'postgres', dsn = 'postgres://x@127.0.0.1/test', table = 't'"
	for _, c := range []struct{ name, sql, want string }{
		{"postgres append", src + view + "CREATE SINK s FROM totals WITH (" + pg + ");",
			"t.sql:3:1: sink s: the query's result is updated by (key), so a postgres sink must apply its updates: WITH (type = 'upsert', primary_key = 'key', …)"},
		{"postgres upsert on another key", src + view + "CREATE SINK s FROM totals WITH (" + pg + ", type = 'upsert', primary_key = 'n');",
			"sink s: the query's result is updated by (key)"},
		{"one group to postgres", src + "CREATE SINK s AS SELECT count(*) AS n FROM events WITH (" + pg + ", type = 'upsert', primary_key = 'n');",
			"the result is one updated row"},
		{"a query over it", src + view + "CREATE SINK s AS SELECT key FROM totals WHERE n > 1 WITH (connector = 'stdout');",
			"t.sql:3:34: totals is an updating result (a GROUP BY without a window, or top-N): a sink can apply it"},
		{"a join over it", src + view + "CREATE SINK s AS SELECT a.key FROM totals a JOIN events b ON a.key = b.key WITH (connector = 'stdout');",
			"totals is an updating result (a GROUP BY without a window): a join cannot read it yet"},
		{"key not selected", src + "CREATE VIEW v AS SELECT count(*) AS n FROM events GROUP BY key;",
			"t.sql:2:60: GROUP BY key: select key too"},
		{"a column named _op", src + "CREATE VIEW v AS SELECT key, count(*) AS _op FROM events GROUP BY key;",
			"the column name _op is the operation"},
		{"window bounds", src + "CREATE VIEW v AS SELECT key, window_start FROM events GROUP BY key;",
			"column window_start must be in GROUP BY"},
		{"max over it", src + view + "CREATE SINK s AS SELECT max(n) AS m FROM totals WITH (connector = 'stdout');",
			"t.sql:3:25: max over an updating result: an update takes the row it replaces back out of its group, which count, sum and avg can do and max cannot"},
		{"WHERE over it", src + view + "CREATE SINK s AS SELECT sum(n) AS m FROM totals WHERE n > 2 WITH (connector = 'stdout');",
			"WHERE over an updating result is not supported"},
		{"a bad sink type", src + view + "CREATE SINK s FROM totals WITH (" + pg + ", type = 'retract');",
			"type = 'retract': want 'append-only' or 'upsert'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseSQL("t.sql", []byte(c.sql))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSQL: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	// What is accepted: an upsert on the key under its selected name, and
	// a changelog to a file sink.
	for _, ok := range []string{
		src + "CREATE VIEW totals AS SELECT key AS k, count(*) AS n FROM events GROUP BY key;\nCREATE SINK s FROM totals WITH (" + pg + ", type = 'upsert', primary_key = 'k');",
		src + view + "CREATE SINK s FROM totals WITH (connector = 'file', path = 'out');",
	} {
		if _, err := config.ParseSQL("t.sql", []byte(ok)); err != nil {
			t.Errorf("ParseSQL(%q): %v", ok, err)
		}
	}
}
