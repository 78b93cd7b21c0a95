package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/runtime"
)

// realDSN is the server the tests use; INGEST_POSTGRES_DSN overrides it.
func realDSN() string {
	if d := os.Getenv("INGEST_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

// requireServer connects to the real server, or skips the test (fails it
// under INGEST_REQUIRE_SERVICES=1) when it is not reachable.
func requireServer(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, realDSN())
	if err == nil {
		err = conn.Ping(ctx)
	}
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL at %s is not reachable (%v): start it (user postgres, trust auth, database test; or set INGEST_POSTGRES_DSN) to run this test",
			postgres.RedactDSN(realDSN()), err)
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg + " (INGEST_REQUIRE_SERVICES=1)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// fixture is a schema of its own on the real server, dropped when the test
// ends, so tests run in parallel and repeatedly.
type fixture struct {
	t      testing.TB
	conn   *pgx.Conn
	schema string
	// pipeline is a pipeline name unique to the test.
	pipeline string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	conn := requireServer(t)
	name := uniqueName(t)
	f := &fixture{t: t, conn: conn, schema: name, pipeline: "p_" + name}
	f.exec("CREATE SCHEMA " + pgx.Identifier{name}.Sanitize())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, realDSN())
		if err != nil {
			t.Logf("dropping schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("dropping schema %s: %v", name, err)
		}
	})
	return f
}

// uniqueName derives a lower-case identifier from the test's name and a
// random suffix, short enough for derived table names.
func uniqueName(t testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	base := strings.TrimPrefix(b.String(), "test")
	if len(base) > 24 {
		base = base[:24]
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "it_" + base + "_" + hex.EncodeToString(rnd[:])
}

// table returns the schema-qualified name of table name in the fixture.
func (f *fixture) table(name string) string { return f.schema + "." + name }

// quoted returns the quoted qualified name of table name.
func (f *fixture) quoted(name string) string { return pgx.Identifier{f.schema, name}.Sanitize() }

// config returns a sink configuration for table name in the fixture's schema.
func (f *fixture) config(name string, mode postgres.Mode, key ...string) postgres.SinkConfig {
	return postgres.SinkConfig{DSN: realDSN(), Table: f.table(name), Mode: mode, Key: key, CreateTable: true, Pipeline: f.pipeline}
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.conn.Exec(ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// int64 runs a query returning one integer.
func (f *fixture) int64(sql string, args ...any) int64 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int64
	if err := f.conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// count returns the number of rows of table name in the fixture's schema.
func (f *fixture) count(name string) int64 {
	f.t.Helper()
	return f.int64("SELECT count(*) FROM " + f.quoted(name))
}

// item is the record most tests write: columns id, name, n.
type item struct {
	ID   int64
	Name string
	N    int64
}

var itemColumns = []postgres.Column{{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}, {Name: "n", Type: "bigint"}}

func itemValues(dst []any, v item) []any { return append(dst, v.ID, v.Name, v.N) }

func newItemSink(t testing.TB, cfg postgres.SinkConfig) *postgres.Sink[item] {
	t.Helper()
	s, err := postgres.NewSink(cfg, itemColumns, itemValues)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// items reads table name's rows ordered by id, n.
func (f *fixture) items(name string) []item {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := f.conn.Query(ctx, "SELECT id, name, n FROM "+f.quoted(name)+" ORDER BY id, n, name")
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (item, error) {
		var it item
		err := r.Scan(&it.ID, &it.Name, &it.N)
		return it, err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

const testJob = "job1"

// openWriter opens subtask subtask of sink node "out" for job.
func openWriter[T any](t testing.TB, s *postgres.Sink[T], subtask int, job string) runtime.SinkSubtask[T] {
	t.Helper()
	w := s.NewSubtask()
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "out", Subtask: subtask}, Parallelism: 2, JobID: job}
	if err := w.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// write passes values to w as one batch.
func write[T any](t testing.TB, w runtime.SinkSubtask[T], values ...T) {
	t.Helper()
	b := make(runtime.Batch[T], len(values))
	for i, v := range values {
		b[i] = runtime.Record[T]{Value: v, Time: int64(i)}
	}
	if err := w.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func snapshot[T any](t testing.TB, w runtime.SinkSubtask[T], id int64) []checkpoint.Committable {
	t.Helper()
	s, err := w.Snapshot(id)
	if err != nil {
		t.Fatalf("Snapshot(%d): %v", id, err)
	}
	if s.Inline != nil {
		t.Errorf("Snapshot(%d) returned inline state %q", id, s.Inline)
	}
	return s.Committables
}

// commitOf builds the commit of checkpoint id from the subtasks' committables
// prepared after latest (as the coordinator does).
func commitOf(id, latest int64, cs ...[]checkpoint.Committable) checkpoint.Commit {
	c := checkpoint.Commit{Checkpoint: id, Sink: "out"}
	for _, l := range cs {
		for _, x := range l {
			if x.PreparedAt > latest {
				c.Committables = append(c.Committables, x.Data)
			}
		}
	}
	return c
}

func commit(t testing.TB, cm runtime.Committer, job string, c checkpoint.Commit) {
	t.Helper()
	if err := cm.Commit(context.Background(), job, c); err != nil {
		t.Fatalf("Commit(%d): %v", c.Checkpoint, err)
	}
}
