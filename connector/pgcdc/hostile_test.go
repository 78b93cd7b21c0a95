package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// Hostile inputs run the source in a real pipeline against the real
// server: a misconfigured publication, DDL and TRUNCATE while streaming, a
// slot dropped under a checkpoint, key changes, unchanged TOASTed values.
// Each failure must stop the job at once (runtime.ErrUnrecoverable, no
// restart) with an error naming the table, column or publication and the
// fix; each change the records can express must arrive exactly.

const logStreaming = "postgres_cdc: streaming"

// items creates table name (id int primary key, v text) with rows 1..n,
// v = "v<id>".
func (f *fixture) items(name string, n int) {
	f.t.Helper()
	f.exec("CREATE TABLE " + f.quoted(name) + " (id int PRIMARY KEY, v text)")
	if n > 0 {
		f.exec(fmt.Sprintf("INSERT INTO %s SELECT g, 'v' || g FROM generate_series(1, %d) g", f.quoted(name), n))
	}
}

// streaming starts a job of cfg, waits for its snapshot's n rows and for
// it to stream.
func (f *fixture) streaming(cfg Config, n int) *running {
	f.t.Helper()
	r := start(f.t, newSource(f.t, cfg), f.t.TempDir())
	r.waitFor(fmt.Sprintf("the snapshot's %d rows", n), func(recs []row.Row) bool { return len(recs) >= n })
	r.waitLog(logStreaming, 1)
	if recs := r.sink.records(); len(recs) != n {
		f.t.Fatalf("the snapshot emitted %d records, want %d:\n%s", len(recs), n, r.dump(recs))
	}
	return r
}

// want is an expected record: op and some columns' values.
type want struct {
	op   string
	cols map[string]row.Value
}

func ins(id int64, v string) want {
	return want{"insert", map[string]row.Value{"id": row.IntValue(id), "v": row.StringValue(v)}}
}
func upd(id int64, v string) want {
	return want{"update", map[string]row.Value{"id": row.IntValue(id), "v": row.StringValue(v)}}
}

// del is a delete of a key-only old row: the other columns are NULL.
func del(id int64) want {
	return want{"delete", map[string]row.Value{"id": row.IntValue(id), "v": {}}}
}

// expect checks that recs are exactly ws, in order.
func (r *running) expect(recs []row.Row, ws ...want) {
	r.t.Helper()
	if len(recs) != len(ws) {
		r.t.Fatalf("%d records, want %d:\n%s", len(recs), len(ws), r.dump(recs))
	}
	for i, w := range ws {
		if op := r.field(recs[i], OpField).Str(); op != w.op {
			r.t.Errorf("record %d: _op %s, want %s: %s", i, op, w.op, r.dump(recs[i:i+1]))
		}
		for name, v := range w.cols {
			if got := r.field(recs[i], name); got != v {
				r.t.Errorf("record %d: %s = %v, want %v: %s", i, name, got, v, r.dump(recs[i:i+1]))
			}
		}
	}
}

// TestHostilePublicationMissingTable: an existing publication that does
// not publish a captured table would never deliver its changes. The job
// stops at once, before creating the slot, naming the publication, the
// table and the ALTER PUBLICATION that fixes it.
func TestHostilePublicationMissingTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	f.items("b", 3)
	f.exec("CREATE PUBLICATION " + f.pub + " FOR TABLE " + f.quoted("b"))
	r := start(t, newSource(t, f.config("a")), t.TempDir())
	r.failsAtOnce("publication "+f.pub, "does not publish "+f.table("a"), "ALTER PUBLICATION "+f.pub+" ADD TABLE "+f.quoted("a"))
	if n := len(r.sink.records()); n != 0 {
		t.Errorf("%d records emitted", n)
	}
	if f.slotExists() {
		t.Error("the refused job created its replication slot")
	}
}

// TestHostilePublicationWithoutTruncate: a publication that leaves out a
// kind of change (truncate, then delete) is refused, naming it and the
// ALTER PUBLICATION that publishes every kind.
func TestHostilePublicationWithoutTruncate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	f.exec("CREATE PUBLICATION " + f.pub + " FOR TABLE " + f.quoted("a") + " WITH (publish = 'insert, update, delete')")
	r := start(t, newSource(t, f.config("a")), t.TempDir())
	fix := "ALTER PUBLICATION " + f.pub + " SET (publish = 'insert, update, delete, truncate')"
	r.failsAtOnce("publication "+f.pub, "truncate false", fix)
	f.exec("ALTER PUBLICATION " + f.pub + " SET (publish = 'insert, update, truncate')")
	r = start(t, newSource(t, f.config("a")), t.TempDir())
	r.failsAtOnce("publication "+f.pub, "delete false", fix)
	if f.slotExists() {
		t.Error("the refused job created its replication slot")
	}
}

// TestHostilePublicationRowFilter: a publication with a row filter (or a
// column list, PostgreSQL 15) publishes the table yet leaves changes out:
// the rows the filter rejects would be missing from the output with
// nothing to tell. It is refused like a publication without the table.
func TestHostilePublicationRowFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	f.exec("CREATE PUBLICATION " + f.pub + " FOR TABLE " + f.quoted("a") + " WHERE (id > 10)")
	r := start(t, newSource(t, f.config("a")), t.TempDir())
	r.failsAtOnce("publication "+f.pub, "rows of "+f.table("a")+" its row filter (WHERE) keeps")
	f.exec("ALTER PUBLICATION " + f.pub + " SET TABLE " + f.quoted("a") + " (id)")
	r = start(t, newSource(t, f.config("a")), t.TempDir())
	r.failsAtOnce("publication "+f.pub, "leaves column v of "+f.table("a")+" out (a column list)")
	if f.slotExists() {
		t.Error("the refused job created its replication slot")
	}
}

// TestHostileTruncateWhileStreaming: a TRUNCATE is not a change of rows a
// sink can apply; the job stops at once naming the table.
func TestHostileTruncateWhileStreaming(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 5)
	r := f.streaming(f.config("a"), 5)
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (6, 'v6')")
	r.waitFor("the insert", r.has("insert", "id", row.IntValue(6)))
	f.exec("TRUNCATE " + f.quoted("a"))
	r.failsAtOnce("table "+f.table("a")+" was truncated", "started without its checkpoints")
	r.expect(r.sink.records()[5:], ins(6, "v6"))
}

// TestHostileColumnDroppedWhileStreaming: a planned column dropped while
// streaming stops the job with ErrIncompatibleSchema, naming the table and
// the column, at the first change after it.
func TestHostileColumnDroppedWhileStreaming(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.exec("CREATE TABLE " + f.quoted("a") + " (id int PRIMARY KEY, v text, w int)")
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (1, 'v1', 10), (2, 'v2', 20)")
	r := f.streaming(f.config("a"), 2)
	f.exec("ALTER TABLE " + f.quoted("a") + " DROP COLUMN w")
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (3, 'v3')")
	err := r.failsAtOnce("table "+f.table("a"), "column w was dropped or renamed")
	if !errors.Is(err, ErrIncompatibleSchema) {
		t.Errorf("the error does not wrap ErrIncompatibleSchema: %v", err)
	}
	if n := len(r.sink.records()); n != 2 {
		t.Errorf("%d records, want the snapshot's 2 only", n)
	}
}

// TestHostileColumnAddedWhileStreaming: a column added while streaming
// has no field in the records. The job stops at once at the first change
// after it (ErrColumnAdded), naming the table and the column and saying
// to start the pipeline again, and emits nothing of that change.
func TestHostileColumnAddedWhileStreaming(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	r := f.streaming(f.config("a"), 3)
	a := f.quoted("a")
	f.exec("UPDATE " + a + " SET v = 'before' WHERE id = 3")
	r.waitFor("the update of 3", r.has("update", "id", row.IntValue(3)))
	f.exec("ALTER TABLE " + a + " ADD COLUMN extra text")
	f.exec("INSERT INTO " + a + " VALUES (10, 'ten', 'x')")
	err := r.failsAtOnce("table "+f.table("a"), "extra", "start the pipeline again")
	if !errors.Is(err, ErrColumnAdded) {
		t.Errorf("the error does not wrap ErrColumnAdded: %v", err)
	}
	r.expect(r.sink.records()[3:], upd(3, "before"))
}

// TestColumnAddedThenReloaded: after a job stopped on an added column,
// loading the pipeline again (a new source, whose plan has the column) on
// the same checkpoints reads every change from there on with the column:
// nothing is lost (ErrColumnAdded's promise). The restored checkpoint is
// taken before an update that precedes the ALTER TABLE (checkpoints are
// triggered by hand), so the stream resumes before the column existed.
func TestColumnAddedThenReloaded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	dir := t.TempDir()
	r := startEvery(t, newSource(t, f.config("a")), dir, time.Hour)
	r.waitFor("the snapshot", func(recs []row.Row) bool { return len(recs) == 3 })
	r.waitLog(logStreaming, 1)
	if _, err := r.job.TriggerCheckpoint(); err != nil {
		t.Fatal(err)
	}
	r.waitFor("a checkpoint of the snapshot", func([]row.Row) bool { return r.sink.coveredRecords() == 3 })
	a := f.quoted("a")
	f.exec("UPDATE " + a + " SET v = 'before' WHERE id = 3")
	r.waitFor("the update of 3", r.has("update", "id", row.IntValue(3)))
	f.exec("ALTER TABLE " + a + " ADD COLUMN extra text")
	f.exec("INSERT INTO " + a + " VALUES (10, 'ten', 'x')")
	if err := r.wait(); !errors.Is(err, ErrColumnAdded) {
		t.Fatalf("the job ended with %v, want ErrColumnAdded", err)
	}
	f.exec("UPDATE " + a + " SET v = 'one!', extra = 'y' WHERE id = 1")
	f.exec("DELETE FROM " + a + " WHERE id = 2")
	f.exec("INSERT INTO " + a + " (id, v) VALUES (11, 'eleven')")
	again := start(t, newSource(t, f.config("a")), dir)
	if got := strings.Join(again.src.Schema().Names(), ","); got != "id,v,extra,_op,_table,_lsn,_commit_time" {
		t.Fatalf("fields %s", got)
	}
	recs := again.waitFor("the insert of 11", again.has("insert", "id", row.IntValue(11)))
	x := func(w want, extra row.Value) want { w.cols["extra"] = extra; return w }
	again.expect(recs, x(upd(3, "before"), row.Value{}), x(ins(10, "ten"), row.StringValue("x")), x(upd(1, "one!"), row.StringValue("y")),
		x(del(2), row.Value{}), x(ins(11, "eleven"), row.Value{}))
	again.sameRows("after the reload", again.model(recs), again.tableRows(f.conn))
}

// TestHostileSlotDroppedAfterCheckpoint: a checkpoint that streamed from
// the slot is restored after the slot was dropped. The changes since the
// checkpoint are gone: the job stops with ErrSlotLost, without a snapshot
// taken anew and without creating the slot again.
func TestHostileSlotDroppedAfterCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	dir := t.TempDir()
	r := start(t, newSource(t, f.config("a")), dir)
	r.waitFor("the snapshot", func(recs []row.Row) bool { return len(recs) == 3 })
	r.waitLog(logStreaming, 1)
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (4, 'v4')")
	r.waitFor("the insert", r.has("insert", "id", row.IntValue(4)))
	r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := dropSlot(ctx, f.conn, f.slot); err != nil {
		t.Fatal(err)
	}
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (6, 'v6')")
	again := start(t, newSource(t, f.config("a")), dir)
	err := again.failsAtOnce("slot "+f.slot+" does not exist", "start the pipeline without its checkpoints")
	if !errors.Is(err, ErrSlotLost) {
		t.Errorf("the error does not wrap ErrSlotLost: %v", err)
	}
	if recs := again.sink.records(); len(recs) != 0 {
		t.Errorf("the job emitted %d records:\n%s", len(recs), again.dump(recs))
	}
	if f.slotExists() {
		t.Error("the job created the lost slot again")
	}
}

// TestHostilePrimaryKeyUpdate: an update that changes the primary key is a
// delete of the old key and an insert of the new one, in the order of the
// transaction's statements (a swap of two keys through a third included),
// so that a sink applying the changelog by key in order ends equal to the
// table.
func TestHostilePrimaryKeyUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 3)
	r := f.streaming(f.config("a"), 3)
	a := f.quoted("a")
	f.exec("UPDATE " + a + " SET id = 101 WHERE id = 1")
	f.exec("BEGIN; UPDATE " + a + " SET id = 1000 WHERE id = 2; UPDATE " + a + " SET id = 2 WHERE id = 3; UPDATE " + a + " SET id = 3 WHERE id = 1000; COMMIT")
	f.exec("UPDATE " + a + " SET v = 'same key' WHERE id = 101")
	f.exec("UPDATE " + a + " SET id = id + 10, v = 'shifted ' || id WHERE id IN (2, 3)")
	f.exec("INSERT INTO " + a + " VALUES (999, 'end')")
	recs := r.waitFor("the last insert", r.has("insert", "id", row.IntValue(999)))
	snap := recs[:3]
	r.expect(snap, ins(1, "v1"), ins(2, "v2"), ins(3, "v3"))
	// The statement shifting 2 and 3 updates them in an order PostgreSQL
	// picks: only its end state is fixed.
	r.expect(recs[3:11], del(1), ins(101, "v1"), del(2), ins(1000, "v2"), del(3), ins(2, "v3"), del(1000), ins(3, "v2"))
	if r.field(recs[3], LSNField) != r.field(recs[4], LSNField) || r.field(recs[5], LSNField) != r.field(recs[10], LSNField) ||
		r.field(recs[3], LSNField) == r.field(recs[5], LSNField) {
		t.Errorf("the delete and insert of one transaction have other LSNs:\n%s", r.dump(recs[3:11]))
	}
	r.expect(recs[11:12], upd(101, "same key"))
	if len(recs) != 17 {
		t.Fatalf("%d records, want 17:\n%s", len(recs), r.dump(recs))
	}
	r.expect(recs[16:], ins(999, "end"))
	r.sameRows("after the key updates", r.model(recs), r.tableRows(f.conn))
}

// toastTable creates table a (id, small, big) whose big values are stored
// out of line uncompressed, with row 1's big of 10000 bytes (TOASTed) and
// row 2's of 3.
func (f *fixture) toastTable() string {
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, small text, big text)")
	f.exec("ALTER TABLE " + a + " ALTER COLUMN big SET STORAGE EXTERNAL")
	f.exec("INSERT INTO " + a + " VALUES (1, 's1', repeat('x', 10000)), (2, 's2', 'abc')")
	// The value is in the table's TOAST relation, not in the row.
	var toast string
	if err := f.conn.QueryRow(context.Background(), "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = $1::regclass", a).Scan(&toast); err != nil {
		f.t.Fatal(err)
	}
	var chunks int
	if err := f.conn.QueryRow(context.Background(), "SELECT count(*) FROM "+toast).Scan(&chunks); err != nil || chunks == 0 {
		f.t.Fatalf("row 1's big value is not out of line: %d chunks in %s (%v)", chunks, toast, err)
	}
	return a
}

// TestHostileUnchangedToastDefaultIdentity: under REPLICA IDENTITY
// DEFAULT an update that leaves a TOASTed value unchanged does not send
// it. The job stops at once naming the table and column and saying to set
// REPLICA IDENTITY FULL, rather than emit a wrong value.
func TestHostileUnchangedToastDefaultIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.toastTable()
	r := f.streaming(f.config("a"), 2)
	if got := r.field(r.sink.records()[0], "big"); got != row.StringValue(strings.Repeat("x", 10000)) {
		t.Errorf("the snapshot read big of %d bytes", len(got.Str()))
	}
	f.exec("UPDATE " + a + " SET small = 'changed' WHERE id = 2")
	recs := r.waitFor("the update of 2", r.has("update", "id", row.IntValue(2)))
	if got := r.field(recs[2], "big"); got != row.StringValue("abc") {
		t.Errorf("the update of 2 has big %v", got)
	}
	f.exec("UPDATE " + a + " SET small = 'changed' WHERE id = 1")
	r.failsAtOnce("table "+f.table("a"), "column big", "REPLICA IDENTITY FULL")
	if n := len(r.sink.records()); n != 3 {
		t.Errorf("%d records, want 3", n)
	}
}

// TestHostileUnchangedToastFullIdentity: under REPLICA IDENTITY FULL the
// old row carries the unchanged TOASTed value, and the update keeps it;
// also when the update changes the key (delete, then insert with it).
func TestHostileUnchangedToastFullIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.toastTable()
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY FULL")
	r := f.streaming(f.config("a"), 2)
	big := row.StringValue(strings.Repeat("x", 10000))
	f.exec("UPDATE " + a + " SET small = 'changed' WHERE id = 1")
	f.exec("UPDATE " + a + " SET id = 10 WHERE id = 1")
	f.exec("DELETE FROM " + a + " WHERE id = 10")
	recs := r.waitFor("the delete of 10", r.has("delete", "id", row.IntValue(10)))
	bigOf := map[string]row.Value{"id": row.IntValue(10), "big": big}
	r.expect(recs[2:],
		want{"update", map[string]row.Value{"id": row.IntValue(1), "small": row.StringValue("changed"), "big": big}},
		want{"delete", map[string]row.Value{"id": row.IntValue(1), "small": row.StringValue("changed"), "big": big}},
		want{"insert", map[string]row.Value{"id": row.IntValue(10), "small": row.StringValue("changed"), "big": big}},
		want{"delete", bigOf})
	r.sameRows("after the updates", r.model(recs), r.tableRows(f.conn))
}

// TestHostileReplicaIdentityIndex: under REPLICA IDENTITY USING INDEX on
// another unique column, a delete's old row carries that column and not
// the primary key, and an update changing the key but not that column
// carries no old row at all: a delete with a NULL key, or a key change
// without its delete, would leave rows in the sink that the table no
// longer has. Such a table is refused when the pipeline is loaded, and a
// table switched to it while streaming stops the job at its next change.
func TestHostileReplicaIdentityIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, email text NOT NULL, v text)")
	f.exec("CREATE UNIQUE INDEX a_email ON " + a + " (email)")
	f.exec("INSERT INTO " + a + " SELECT g, 'e' || g, 'v' || g FROM generate_series(1, 3) g")
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY USING INDEX a_email")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, err := NewSource(ctx, f.config("a"))
	if err == nil || !strings.Contains(err.Error(), f.table("a")) || !strings.Contains(err.Error(), "REPLICA IDENTITY DEFAULT") {
		t.Errorf("loading a table of REPLICA IDENTITY USING INDEX: %v; want a refusal naming the table and REPLICA IDENTITY DEFAULT", err)
	}
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY DEFAULT")
	r := f.streaming(f.config("a"), 3)
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY USING INDEX a_email")
	f.exec("DELETE FROM " + a + " WHERE id = 2")
	err = r.failsAtOnce("table "+f.table("a"), "REPLICA IDENTITY")
	if !errors.Is(err, ErrIncompatibleSchema) {
		t.Errorf("the error does not wrap ErrIncompatibleSchema: %v", err)
	}
	if n := len(r.sink.records()); n != 3 {
		t.Errorf("%d records, want the snapshot's 3", n)
	}
}

// TestHostilePartitionedTable: a partitioned table's changes are published
// as its partitions' (unless publish_via_partition_root): capturing it as
// one table would snapshot its rows and then drop its changes. It is
// refused when the pipeline is loaded, naming the table and the way out.
func TestHostilePartitionedTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.quoted("p")
	f.exec("CREATE TABLE " + p + " (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
	f.exec("CREATE TABLE " + f.quoted("p1") + " PARTITION OF " + p + " FOR VALUES FROM (0) TO (100)")
	f.exec("INSERT INTO " + p + " VALUES (1, 'p1')")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, err := NewSource(ctx, f.config("p"))
	if err == nil || !strings.Contains(err.Error(), f.table("p")+" is a partitioned table") || !strings.Contains(err.Error(), "partitions") {
		t.Errorf("loading a partitioned table: %v; want a refusal naming the table and its partitions", err)
	}
}

// TestHostileTableRecreatedWhileStreaming: a captured table dropped and
// created again under its name while streaming leaves the publication (its
// FOR TABLE list held the old table), so the new table's changes never
// arrive, and the drop itself deleted rows the sink keeps. The job stops
// at once naming the publication and the table (the publication is checked
// again as checkpoints complete).
func TestHostileTableRecreatedWhileStreaming(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 2)
	f.items("b", 1)
	r := f.streaming(f.config("a", "b"), 3)
	f.exec("DROP TABLE " + f.quoted("a"))
	f.items("a", 0)
	f.exec("INSERT INTO " + f.quoted("a") + " VALUES (7, 'new')")
	f.exec("INSERT INTO " + f.quoted("b") + " VALUES (2, 'b2')")
	r.failsAtOnce("publication "+f.pub, f.table("a"))
}

// TestCancelEndsIdleJob: cancelling Run's context ends a job whose source
// streams and has nothing to read.
func TestCancelEndsIdleJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 1)
	r := f.streaming(f.config("a"), 1)
	r.cancel()
	if err := r.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

// TestSnapshotTextEqualsStreamedText: a row read by the snapshot and the
// same row streamed must be the same record. The snapshot selects
// col::text, which for boolean, inet and character(n) is a cast other than
// the type's output function that pgoutput uses ("true" for "t", a /32
// suffix, trailing blanks removed).
func TestSnapshotTextEqualsStreamedText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, b bool, ip inet, c char(5), net cidr)")
	vals := ", true, '192.168.0.1', 'ab', '10.0.0.0/8')"
	f.exec("INSERT INTO " + a + " VALUES (1" + vals)
	r := f.streaming(f.config("a"), 1)
	f.exec("INSERT INTO " + a + " VALUES (2" + vals)
	recs := r.waitFor("the streamed row", r.has("insert", "id", row.IntValue(2)))
	for _, c := range []string{"b", "ip", "c", "net"} {
		if s, st := r.field(recs[0], c), r.field(recs[1], c); s != st {
			t.Errorf("column %s: the snapshot read %v, the stream %v", c, s, st)
		}
	}
	if got := r.field(recs[0], "b"); got != row.BoolValue(true) {
		t.Errorf("b = %v", got)
	}
}

// chunkHook runs at each snapshot chunk (failpoint
// source/postgres_cdc/snapshot-chunk) of every source in the process: the
// tests using it do not run in parallel.
func chunkHook(t *testing.T, hook func() error) {
	disable := failpoint.Enable("source/postgres_cdc/snapshot-chunk", hook)
	t.Cleanup(disable)
}

// hostileWrites commits, on conn, changes of every kind around the keys
// of a table of even ids 2..600 whose snapshot is in progress: an update,
// a delete, an insert between keys and a key change both in the low keys
// (read) and the high ones (not read yet), and key changes from one range
// to the other. Batch k touches its own keys.
func hostileWrites(t *testing.T, conn *pgx.Conn, table string, k int) {
	lo, hi := 4+6*k, 598-6*k
	for _, q := range []string{
		fmt.Sprintf("UPDATE %s SET v = 'upd%d' WHERE id = %d", table, k, lo),
		fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, lo+2),
		fmt.Sprintf("INSERT INTO %s VALUES (%d, 'gap%d')", table, lo+1, k),
		fmt.Sprintf("BEGIN; UPDATE %s SET id = %d WHERE id = %d; UPDATE %s SET id = %d WHERE id = %d; COMMIT", table, hi+1, lo+4, table, lo+3, hi-4),
		fmt.Sprintf("UPDATE %s SET v = 'upd%d' WHERE id = %d", table, k, hi),
		fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, hi-2),
		fmt.Sprintf("INSERT INTO %s VALUES (%d, 'end%d')", table, 700+k, k),
	} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// paceRecords is how many records a completed checkpoint must cover
// before a hook fails the snapshot: two chunks of 5.
const paceRecords = 10

// pace slows each chunk by 10 ms until a checkpoint covering paceRecords
// completed, so that one completes before the snapshot of 60 chunks ends.
// Only the test's coverage depends on it, never its verdict: a test whose
// hook found no such checkpoint says so.
func pace(r *running) {
	if r == nil || r.sink.coveredRecords() < paceRecords {
		time.Sleep(10 * time.Millisecond)
	}
}

// snapshotTable creates table a of 300 rows, ids 2, 4 … 600.
func (f *fixture) snapshotTable() string {
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, v text)")
	f.exec("INSERT INTO " + a + " SELECT g, 'v' || g FROM generate_series(2, 600, 2) g")
	return a
}

// TestSnapshotResumedUnderConcurrentWrites fails the job in the middle of
// a snapshot read in chunks of 5, after a checkpoint covering some chunks
// completed, while changes of every kind commit between chunks (before,
// at and after the failure). The restarted job resumes the table with a
// second snapshot; the segments must route each change to exactly one of
// the snapshot and the stream: the changelog, applied by key, equals the
// table.
func TestSnapshotResumedUnderConcurrentWrites(t *testing.T) {
	f := newFixture(t)
	a := f.snapshotTable()
	writer, err := pgx.Connect(context.Background(), realDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	var mu sync.Mutex
	var r *running
	calls, failedAt := 0, 0
	chunkHook(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		pace(r)
		switch {
		case calls == 3:
			hostileWrites(t, writer, a, 0)
		case failedAt == 0 && r != nil && r.sink.coveredRecords() >= paceRecords:
			failedAt = calls
			hostileWrites(t, writer, a, 1)
			return fmt.Errorf("mid-snapshot: %w", failpoint.ErrInjected)
		case failedAt != 0 && calls == failedAt+3:
			hostileWrites(t, writer, a, 2)
		}
		return nil
	})
	cfg := f.config("a")
	cfg.ChunkRows = 5
	src := newSource(t, cfg)
	mu.Lock()
	r = start(t, src, t.TempDir())
	mu.Unlock()
	r.waitLog(logStreaming, 1)
	f.exec("INSERT INTO " + a + " VALUES (100000, 'sentinel')")
	recs := r.waitFor("the sentinel", r.has("insert", "id", row.IntValue(100000)))
	mu.Lock()
	defer mu.Unlock()
	if failedAt == 0 {
		t.Fatalf("the snapshot was not failed (%d chunks)", calls)
	}
	if st := r.job.Stats(); st.Restarts != 1 || st.RestoredFrom == 0 {
		t.Errorf("stats %+v: want one restart, from a checkpoint", st)
	}
	if n := r.logs.count("postgres_cdc: snapshot "); n != 2 {
		t.Errorf("%d snapshots taken, want 2 (the first and the resumed one)", n)
	}
	r.sameRows("after a resumed snapshot", r.model(recs), r.tableRows(f.conn))
	r.exactlyOnce(recs)
}

// TestHostileSlotDroppedDuringSnapshot: the slot is dropped while the
// snapshot is in progress, after a checkpoint covering some chunks, and a
// row those chunks read is updated; then the job fails and restores the
// checkpoint. The update committed after the first snapshot, and only the
// dropped slot held it: the job must stop with ErrSlotLost (or read the
// table anew), never go on without the update.
func TestHostileSlotDroppedDuringSnapshot(t *testing.T) {
	f := newFixture(t)
	a := f.snapshotTable()
	admin, err := pgx.Connect(context.Background(), realDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var mu sync.Mutex
	var r *running
	failed := false
	chunkHook(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		pace(r)
		if failed || r == nil || r.sink.coveredRecords() < paceRecords {
			return nil
		}
		failed = true
		if _, err := admin.Exec(context.Background(), "UPDATE "+a+" SET v = 'lost?' WHERE id = 2"); err != nil {
			t.Error(err)
		}
		if err := dropSlot(context.Background(), admin, f.slot); err != nil {
			t.Error(err)
		}
		return fmt.Errorf("after dropping the slot: %w", failpoint.ErrInjected)
	})
	cfg := f.config("a")
	cfg.ChunkRows = 5
	src := newSource(t, cfg)
	mu.Lock()
	r = start(t, src, t.TempDir())
	mu.Unlock()
	r.waitFor("the failure", func([]row.Row) bool {
		mu.Lock()
		defer mu.Unlock()
		return failed
	})
	r.waitFor("the end of the job or the stream", func([]row.Row) bool { return r.ended() || r.logs.count(logStreaming) > 0 })
	if r.ended() {
		err := r.wait()
		if !errors.Is(err, ErrSlotLost) || !errors.Is(err, runtime.ErrUnrecoverable) {
			t.Fatalf("the job ended with %v, want ErrSlotLost", err)
		}
		return
	}
	f.exec("INSERT INTO " + a + " VALUES (100000, 'sentinel')")
	recs := r.waitFor("the sentinel", r.has("insert", "id", row.IntValue(100000)))
	r.sameRows("after the slot was dropped mid-snapshot", r.model(recs), r.tableRows(f.conn))
}

// TestStreamResumedAfterFailure fails the job once while it streams a
// stream of small transactions of every kind (failpoint
// source/postgres_cdc/confirm: a checkpoint completed, before the slot is
// confirmed to it), committing two more transactions at that moment. The
// restarted job resumes from the checkpoint: no transaction is lost or
// emitted twice, and the changelog applied by key equals the table.
func TestStreamResumedAfterFailure(t *testing.T) {
	f := newFixture(t)
	f.items("a", 20)
	a := f.quoted("a")
	admin, err := pgx.Connect(context.Background(), realDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var mu sync.Mutex
	var r *running
	failed := false
	disable := failpoint.Enable("source/postgres_cdc/confirm", func() error {
		mu.Lock()
		defer mu.Unlock()
		if failed || r == nil || len(r.sink.records()) < 30 {
			return nil
		}
		failed = true
		for _, q := range []string{
			"UPDATE " + a + " SET v = 'at the failure' WHERE id = 1",
			"BEGIN; DELETE FROM " + a + " WHERE id = 3; UPDATE " + a + " SET id = 300 WHERE id = 4; COMMIT",
		} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Error(err)
			}
		}
		return fmt.Errorf("before confirming: %w", failpoint.ErrInjected)
	})
	t.Cleanup(disable)
	src := newSource(t, f.config("a"))
	mu.Lock()
	r = start(t, src, t.TempDir())
	mu.Unlock()
	r.waitFor("the snapshot", func(recs []row.Row) bool { return len(recs) >= 20 })
	r.waitLog(logStreaming, 1)
	for i := range 100 {
		id := 5 + i%15
		var q string
		switch i % 5 {
		case 0:
			q = fmt.Sprintf("UPDATE %s SET v = 'u%d' WHERE id = %d", a, i, id)
		case 1:
			q = fmt.Sprintf("INSERT INTO %s VALUES (%d, 'i%d')", a, 1000+i, i)
		case 2:
			q = fmt.Sprintf("DELETE FROM %s WHERE id = %d", a, 1000+i-1)
		case 3:
			q = fmt.Sprintf("BEGIN; UPDATE %s SET id = %d WHERE id = %d; UPDATE %s SET v = 'moved' WHERE id = %d; COMMIT", a, 2000+i, id, a, 2000+i)
		case 4:
			q = fmt.Sprintf("INSERT INTO %s VALUES (%d, 'back%d') ON CONFLICT (id) DO UPDATE SET v = 'again'", a, id, i)
		}
		f.exec(q)
		if i == 50 {
			r.waitFor("the failure", func([]row.Row) bool {
				mu.Lock()
				defer mu.Unlock()
				return failed
			})
		}
	}
	f.exec("INSERT INTO " + a + " VALUES (100000, 'sentinel')")
	recs := r.waitFor("the sentinel", r.has("insert", "id", row.IntValue(100000)))
	if st := r.job.Stats(); st.Restarts != 1 || st.RestoredFrom == 0 {
		t.Errorf("stats %+v: want one restart, from a checkpoint", st)
	}
	r.sameRows("after a failure while streaming", r.model(recs), r.tableRows(f.conn))
	r.exactlyOnce(recs)
}
