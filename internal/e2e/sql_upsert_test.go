package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// The updating SQL query of these tests: a GROUP BY without a window over
// datagen records, whose HAVING deletes keys once their total passes a
// limit, into a postgres upsert sink. Key k of upsertCount records over
// upsertKeys = 50 keys sees the values k, k+50, …, k+950 twenty times over,
// so its final total is 400k + 190000 and the keys below 25 stay.
const (
	upsertCount = 20000
	upsertKeys  = 50
	upsertLimit = 200000
)

// upsertSQL is the query into table of the server at pkDSN, with datagen at
// rate records per second (of the run's clock).
func upsertSQL(pipeline, table string, rate int) string {
	return fmt.Sprintf(`SET pipeline = '%s';
SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'data/checkpoints';
SET checkpoint.retain = 2;
SET checkpoint.tolerable_failures = 1000;
SET restart.delay = '5ms';
SET restart.multiplier = 1;
SET restart.max_attempts = 1000;
CREATE SOURCE events WITH (connector = 'datagen', count = %d, keys = %d, rate = %d, parallelism = 2);
CREATE VIEW totals AS
  SELECT key, count(*) AS n, sum(value) AS total, max(value) AS hi
  FROM events
  GROUP BY key
  HAVING sum(value) < %d;
CREATE SINK out FROM totals
  WITH (connector = 'postgres', dsn = '%s', table = '%s', type = 'upsert', primary_key = 'key',
        create_table = 'true', parallelism = 2);
`, pipeline, upsertCount, upsertKeys, rate, upsertLimit, pkDSN, table)
}

// upsertTable connects to the server (skipping the test when it is not
// there), names a new table and pipeline, and drops them when the test ends.
func upsertTable(t *testing.T) (conn *pgx.Conn, pipeline, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pkDSN)
	nkNeedService(t, "PostgreSQL", err)
	suffix := time.Now().UnixNano()
	pipeline, table = fmt.Sprintf("sql-upsert-%d", suffix), fmt.Sprintf("sql_upsert_%d", suffix)
	t.Cleanup(func() {
		c := context.Background()
		_, _ = conn.Exec(c, "DROP TABLE IF EXISTS "+table+", "+table+"__ingest_staging")
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_progress WHERE pipeline = $1", pipeline)
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_writers WHERE pipeline = $1", pipeline)
		_ = conn.Close(c)
	})
	return conn, pipeline, table
}

// checkUpsertTable requires table to hold exactly the query's final rows,
// with nothing left staged.
func checkUpsertTable(t *testing.T, conn *pgx.Conn, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT key, n, total, hi FROM "+table+" ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([4]int64, error) {
		var v [4]int64
		err := r.Scan(&v[0], &v[1], &v[2], &v[3])
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want [][4]int64
	for k := int64(0); k < upsertKeys; k++ {
		if total := 400*k + 190000; total < upsertLimit {
			want = append(want, [4]int64{k, upsertCount / upsertKeys, total, k + 950})
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("table %s holds %d rows, want %d:\n got %v\nwant %v", table, len(got), len(want), got, want)
	}
	var staged int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+"__ingest_staging").Scan(&staged); err != nil {
		t.Fatal(err)
	}
	if staged != 0 {
		t.Errorf("%d rows left staged after the final commit", staged)
	}
}

// TestSQLUpsertInjectedFailures fails the updating SQL query in process
// inside the checkpoint protocol and inside the sink's publishing
// transaction, and requires the upserted table to hold exactly the query's
// result: no update lost, none applied twice, every delete applied.
func TestSQLUpsertInjectedFailures(t *testing.T) {
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{4, 13}},
		{"job/after-metadata-before-commit", []int64{2, 5}},
		{"sink/postgres/mid-commit", []int64{2, 6}},
		{"task/process-batch", []int64{7, 19}},
	} {
		t.Run(c.point, func(t *testing.T) {
			conn, pipeline, table := upsertTable(t)
			runSQLFailing(t, upsertSQL(pipeline, table, 20000), 50*time.Millisecond, c)
			checkUpsertTable(t, conn, table)
		})
	}
}

var sqlUpsertKillSeed = flag.Uint64("sqlupsertkillseed", 0, "replay TestSQLUpsertKillNine with this seed (0: random)")

// TestSQLUpsertKillNine runs the updating SQL query as a separate process,
// kills it with SIGKILL at random moments and inside the sink's publishing
// transaction, restarts it until it exits 0, and requires the upserted
// table to hold exactly the query's result.
func TestSQLUpsertKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test; not in -short")
	}
	seed := knSeed(*sqlUpsertKillSeed)
	t.Logf("seed %d (replay with -sqlupsertkillseed=%d)", seed, seed)
	conn, pipeline, table := upsertTable(t)
	bin := knBuild(t, t.TempDir())
	work, _ := scenarioDir(t, "pipeline: unused\n")
	path := filepath.Join(work, "pipeline.sql")
	if err := os.WriteFile(path, []byte(upsertSQL(pipeline, table, 4000)), 0o644); err != nil {
		t.Fatal(err)
	}
	kills, aimed := killSchedule{
		Bin: bin, YAML: path, Ckpts: filepath.Join(work, "data", "checkpoints"), Seed: seed,
		Kills: 5, AimedKills: 2, Aim: "sink/postgres/mid-commit", Pause: 300 * time.Millisecond,
		MinDelay: 600 * time.Millisecond, MaxDelay: 2500 * time.Millisecond, Budget: 30 * time.Second, FinalWait: 90 * time.Second,
	}.run(t)
	t.Logf("%d SIGKILLs (%d aimed)", kills, aimed)
	if kills == 0 {
		t.Fatal("no run was killed: the test tested nothing")
	}
	checkUpsertTable(t, conn, table)
}

// TestSQLRetractInjectedFailures fails, in process, a GROUP BY over an
// updating result — each key's count, then how many keys have each count —
// and requires the file sink's changelog, applied, to end at exactly the
// query's table: the aggregate's state and the last rows it takes back are
// restored from every checkpoint.
func TestSQLRetractInjectedFailures(t *testing.T) {
	const script = `SET pipeline = 'sql-retract';
SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'data/checkpoints';
SET checkpoint.tolerable_failures = 1000;
SET restart.delay = '5ms';
SET restart.multiplier = 1;
SET restart.max_attempts = 1000;
CREATE SOURCE events WITH (connector = 'datagen', count = 20000, keys = 50, rate = 20000, parallelism = 2);
CREATE VIEW counts AS SELECT key, count(*) AS n FROM events GROUP BY key;
CREATE SINK out AS SELECT n, count(*) AS keys FROM counts GROUP BY n
  WITH (connector = 'file', path = 'data/out', parallelism = 2);
`
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{4, 13}},
		{"job/after-metadata-before-commit", []int64{2, 5}},
		{"task/process-batch", []int64{7, 19}},
	} {
		t.Run(c.point, func(t *testing.T) {
			dir := runSQLFailing(t, script, 50*time.Millisecond, c)
			table := map[string]string{}
			// The rows in publication order, applied by n.
			lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "out"))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				var r struct {
					N    int64  `json:"n"`
					Keys int64  `json:"keys"`
					Op   string `json:"_op"`
				}
				if err := json.Unmarshal(l.Text, &r); err != nil {
					t.Fatal(err)
				}
				k := fmt.Sprint(r.N)
				if r.Op == "delete" {
					delete(table, k)
				} else {
					table[k] = fmt.Sprint(r.Keys)
				}
			}
			// Every key ends with 400 records: one group of 50 keys.
			if len(table) != 1 || table["400"] != "50" {
				t.Fatalf("the changelog ends at %v, want {400: 50}", table)
			}
		})
	}
}
