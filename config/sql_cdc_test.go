package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// cdcServer connects to the real PostgreSQL server with wal_level =
// logical, or skips (fails under INGEST_REQUIRE_SERVICES=1).
func cdcServer(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test")
	needService(t, "PostgreSQL", err)
	t.Cleanup(func() { _ = pg.Close(context.Background()) })
	var level string
	if err := pg.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		needService(t, "PostgreSQL with wal_level = logical", fmt.Errorf("wal_level %q (%v): ALTER SYSTEM SET wal_level = logical and restart it", level, err))
	}
	return pg
}

// cdcTable creates a table of columns named prefix_<n>, and drops it, its
// slot, publication and replica (all named after it) when t ends; exec
// runs a statement or fails t.
func cdcTable(t *testing.T, pg *pgx.Conn, prefix, columns string) (name string, exec func(string)) {
	t.Helper()
	name = fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
	exec = func(sql string) {
		t.Helper()
		if _, err := pg.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE " + name + " (" + columns + ")")
	t.Cleanup(func() {
		c := context.Background()
		for range 50 {
			if _, err := pg.Exec(c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = pg.Exec(c, "DROP PUBLICATION IF EXISTS "+name)
		_, _ = pg.Exec(c, "DROP TABLE IF EXISTS "+name+", "+name+"_replica, "+name+"_replica__ingest_staging")
	})
	return name, exec
}

// The SQL example of docs/connectors/postgres-cdc.md, on a table of its
// own: a first run snapshots the table and streams while rows are updated,
// deleted, inserted and re-keyed, and is cancelled; a second run with
// stop_at = 'latest' resumes from its checkpoint. The upserted replica
// then equals the table, and the per-state counts, applied as a changelog,
// equal a GROUP BY of the table.
func TestSQLPostgresCDC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	pg := cdcServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	page, err := os.ReadFile("../docs/connectors/postgres-cdc.md")
	if err != nil {
		t.Fatal(err)
	}
	ex := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(string(page))
	if ex == nil {
		t.Fatal("docs/connectors/postgres-cdc.md has no sql example")
	}
	name, exec := cdcTable(t, pg, "sqlcdc", "id bigint PRIMARY KEY, owner text, balance numeric(12,2), active boolean")
	exec("INSERT INTO " + name + " SELECT g, 'owner ' || g, g * 1.25, g % 3 = 0 FROM generate_series(1, 200) g")
	script := strings.NewReplacer("'accounts'", "'"+name+"'", "'ingest_accounts'", "'"+name+"'", "'accounts_replica'", "'"+name+"_replica'").Replace(ex[1])
	dir := t.TempDir()
	load := func(extra string) *config.Pipeline {
		t.Helper()
		src := "SET checkpoint.dir = 'ckpt';\nSET checkpoint.interval = '100ms';\n" + strings.Replace(script, "slot.name", extra+"slot.name", 1)
		path := filepath.Join(dir, "cdc.sql")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatalf("%s\n%v", src, err)
		}
		return p
	}

	first := load("")
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- first.Stream.Run(runCtx, first.RunOptions()) }()
	count := func() int64 {
		var n int64
		if err := pg.QueryRow(ctx, "SELECT count(*) FROM "+name+"_replica").Scan(&n); err != nil {
			return -1 // not created yet
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); count() != 200; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the snapshot's 200 rows did not reach the replica in a minute (%d)", count())
		}
	}
	exec("UPDATE " + name + " SET balance = balance + 1, active = NOT active WHERE id % 7 = 0")
	exec("DELETE FROM " + name + " WHERE id % 11 = 0")
	exec("INSERT INTO " + name + " SELECT g, 'new ' || g, 0.01, true FROM generate_series(1001, 1050) g")
	exec("UPDATE " + name + " SET id = id + 5000 WHERE id BETWEEN 20 AND 30")
	stop()
	if err := <-done; err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("first run: %v", err)
	}
	second := load("stop_at = 'latest', ")
	if err := second.Stream.Run(ctx, second.RunOptions()); err != nil {
		t.Fatalf("second run: %v", err)
	}

	var diff int
	q := "SELECT count(*) FROM ((SELECT id, owner, balance::text, active FROM %[1]s EXCEPT SELECT id, owner, balance, active FROM %[1]s_replica) UNION ALL (SELECT id, owner, balance, active FROM %[1]s_replica EXCEPT SELECT id, owner, balance::text, active FROM %[1]s)) d"
	if err := pg.QueryRow(ctx, fmt.Sprintf(q, name)).Scan(&diff); err != nil || diff != 0 {
		t.Fatalf("the replica differs from the table in %d rows (%v)", diff, err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "counts"))
	if err != nil {
		t.Fatal(err)
	}
	type group struct{ N, IDs int64 }
	got := map[bool]group{}
	for _, l := range lines {
		var r struct {
			Active bool   `json:"active"`
			N      int64  `json:"n"`
			IDs    int64  `json:"ids"`
			Op     string `json:"_op"`
		}
		if err := json.Unmarshal(l.Text, &r); err != nil {
			t.Fatalf("%s: %v", l.Text, err)
		}
		if r.Op == "delete" {
			delete(got, r.Active)
		} else {
			got[r.Active] = group{r.N, r.IDs}
		}
	}
	want := map[bool]group{}
	rows, err := pg.Query(ctx, "SELECT active, count(*), sum(id) FROM "+name+" GROUP BY active")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a bool
		var g group
		if err := rows.Scan(&a, &g.N, &g.IDs); err != nil {
			t.Fatal(err)
		}
		want[a] = g
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("per-state counts %v, want %v (%d changelog lines)", got, want, len(lines))
	}
}

// A postgres-cdc source declares its PRIMARY KEY, and its columns as the
// table has them; other sources take no PRIMARY KEY, and its time is the
// commit time. Each mistake is an error naming its place.
func TestSQLPostgresCDCRefusals(t *testing.T) {
	pg := cdcServer(t)
	name := fmt.Sprintf("sqlcdcref_%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := pg.Exec(context.Background(), "CREATE TABLE "+name+" (id bigint PRIMARY KEY, owner text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), "DROP TABLE "+name) })
	with := "WITH (connector = 'postgres-cdc', dsn = 'postgres://postgres@127.0.0.1:5432/test', tables = 'public." + name + "', slot.name = 'x', publication.name = 'x')"
	sink := ";\nCREATE SINK o FROM a WITH (connector = 'file', path = 'out');\n"
	for _, c := range []struct{ name, src, want string }{
		{"no key", "CREATE SOURCE a (id BIGINT, owner VARCHAR) " + with + sink, "t.sql:1:1: source a: a change-data-capture source needs its PRIMARY KEY"},
		{"key not declared", "CREATE SOURCE a (id BIGINT, owner VARCHAR, PRIMARY KEY (idx)) " + with + sink, "PRIMARY KEY (idx): idx is not a declared column"},
		{"another key", "CREATE SOURCE a (id BIGINT, owner VARCHAR PRIMARY KEY) " + with + sink, "the declared key (owner) is not the primary key of the tables, (id)"},
		{"no such column", "CREATE SOURCE a (id BIGINT PRIMARY KEY, name VARCHAR) " + with + sink, "declared column name is not a column of public." + name},
		{"another kind", "CREATE SOURCE a (id BIGINT PRIMARY KEY, owner BIGINT) " + with + sink, "declared column owner is int, but the table's column is read as string"},
		{"watermark", "CREATE SOURCE a (id BIGINT PRIMARY KEY, owner VARCHAR, WATERMARK FOR id AS id) " + with + sink, "WATERMARK FOR id: a change-data-capture source's event time is its commit time, _commit_time"},
		{"key on records", "CREATE SOURCE a (id BIGINT PRIMARY KEY) WITH (connector = 'datagen', count = '10')" + sink, "t.sql:1:28: source a: connector datagen reads records, not a table's changes, so the engine cannot enforce a PRIMARY KEY (that is for connector = 'postgres-cdc'); to declare that no two records share the key, write PRIMARY KEY (id) NOT ENFORCED"},
		{"appending sink", "CREATE SOURCE a (id BIGINT PRIMARY KEY, owner VARCHAR) " + with + ";\nCREATE SINK o FROM a WITH (connector = 'postgres', dsn = 'postgres://postgres@127.0.0.1:5432/test', table = 't');\n", "t.sql:2:1: sink o: the query's result is updated by (id), so a postgres sink must apply its updates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.sql")
			if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s\nLoad: %v\nwant an error containing %q", c.src, err, c.want)
			}
		})
	}
}

// before_images = 'true' on a SQL CDC source gives queries its
// _before_<column> columns; without it a query naming one is refused, and a
// table without REPLICA IDENTITY FULL is refused naming the fix.
func TestSQLPostgresCDCBeforeImages(t *testing.T) {
	pg := cdcServer(t)
	name, exec := cdcTable(t, pg, "sqlbefore", "id bigint PRIMARY KEY, v text")
	script := func(before string) string {
		return fmt.Sprintf(`CREATE SOURCE src (id BIGINT, v VARCHAR, PRIMARY KEY (id)) WITH (
  connector = 'postgres-cdc', dsn = 'postgres://postgres@127.0.0.1:5432/test', table.name = '%s',
  slot.name = '%s', publication.name = '%s'%s);
CREATE SINK o AS SELECT _before_v, count(*) AS n FROM src GROUP BY _before_v WITH (connector = 'stdout');
`, name, name, name, before)
	}
	load := func(text string) error {
		path := filepath.Join(t.TempDir(), "q.sql")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		return err
	}
	if err := load(script("")); err == nil || !strings.Contains(err.Error(), "no column _before_v") {
		t.Fatalf("without before_images: %v, want the column refused", err)
	}
	if err := load(script(", before_images = 'true'")); err == nil || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Fatalf("a DEFAULT identity table: %v, want a refusal naming REPLICA IDENTITY FULL", err)
	}
	exec("ALTER TABLE " + name + " REPLICA IDENTITY FULL")
	if err := load(script(", before_images = 'true'")); err != nil {
		t.Fatalf("with before_images: %v", err)
	}
}
