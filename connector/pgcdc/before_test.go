package pgcdc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// TestBeforeImages: with BeforeImages on a REPLICA IDENTITY FULL table,
// every update carries the row as it was in _before_<column> — a NULL
// that became a value, a value that became NULL, TOASTed values that did
// not change, several updates of one row in one transaction — and the
// insert an update of the key becomes carries the old row too; snapshot
// rows, inserts and deletes have NULL before-images.
func TestBeforeImages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, v text, n bigint, big text)")
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY FULL")
	f.exec("INSERT INTO " + a + " VALUES (1, 'one', NULL, repeat('x', 100000)), (2, 'two', 20, 'small')")
	cfg := f.config("a")
	cfg.BeforeImages = true
	r := f.streaming(cfg, 2)
	names := r.src.Schema().Names()
	if got := strings.Join(names, ","); got != "id,v,n,big,_before_id,_before_v,_before_n,_before_big,_op,_table,_lsn,_commit_time" {
		t.Fatalf("fields %s", got)
	}
	f.exec("UPDATE " + a + " SET n = 10 WHERE id = 1") // big is TOASTed and unchanged
	f.exec("BEGIN; UPDATE " + a + " SET v = NULL WHERE id = 2; UPDATE " + a + " SET v = 'again' WHERE id = 2; COMMIT")
	f.exec("UPDATE " + a + " SET id = 3 WHERE id = 2")
	f.exec("INSERT INTO " + a + " VALUES (4, 'four', 4, 'b')")
	f.exec("DELETE FROM " + a + " WHERE id = 4")
	recs := r.waitFor("the changes", func(recs []row.Row) bool { return len(recs) >= 2+7 })
	show := func(rec row.Row) string {
		var parts []string
		for _, name := range []string{OpField, "id", "v", "n", "_before_id", "_before_v", "_before_n"} {
			parts = append(parts, fmt.Sprintf("%s=%s", name, r.field(rec, name)))
		}
		b, bb := r.field(rec, "big"), r.field(rec, "_before_big")
		parts = append(parts, fmt.Sprintf("big=%d _before_big=%d", len(b.Str()), len(bb.Str())))
		if bb.Kind() == row.Null {
			parts[len(parts)-1] = fmt.Sprintf("big=%d _before_big=null", len(b.Str()))
		}
		return strings.Join(parts, " ")
	}
	want := []string{
		"_op=\"insert\" id=1 v=\"one\" n=null _before_id=null _before_v=null _before_n=null big=100000 _before_big=null",
		"_op=\"insert\" id=2 v=\"two\" n=20 _before_id=null _before_v=null _before_n=null big=5 _before_big=null",
		"_op=\"update\" id=1 v=\"one\" n=10 _before_id=1 _before_v=\"one\" _before_n=null big=100000 _before_big=100000",
		"_op=\"update\" id=2 v=null n=20 _before_id=2 _before_v=\"two\" _before_n=20 big=5 _before_big=5",
		"_op=\"update\" id=2 v=\"again\" n=20 _before_id=2 _before_v=null _before_n=20 big=5 _before_big=5",
		"_op=\"delete\" id=2 v=\"again\" n=20 _before_id=null _before_v=null _before_n=null big=5 _before_big=null",
		"_op=\"insert\" id=3 v=\"again\" n=20 _before_id=2 _before_v=\"again\" _before_n=20 big=5 _before_big=5",
		"_op=\"insert\" id=4 v=\"four\" n=4 _before_id=null _before_v=null _before_n=null big=1 _before_big=null",
		"_op=\"delete\" id=4 v=\"four\" n=4 _before_id=null _before_v=null _before_n=null big=1 _before_big=null",
	}
	var got []string
	for _, rec := range recs {
		got = append(got, show(rec))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.field(recs[2], "_before_big").Str() != strings.Repeat("x", 100000) {
		t.Fatal("the TOASTed value's before-image differs from the value")
	}
}

// TestBeforeImagesNeedFullIdentity: BeforeImages on a table with the
// default replica identity is refused when the source is made; and a
// table altered to the default identity while streaming stops the job at
// its next update, naming the table, instead of emitting NULL
// before-images.
func TestBeforeImagesNeedFullIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.items("a", 2)
	cfg := f.config("a")
	cfg.BeforeImages = true
	if _, err := NewSource(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") || !strings.Contains(err.Error(), f.table("a")) {
		t.Fatalf("NewSource on a DEFAULT identity table: %v, want a refusal naming the table and REPLICA IDENTITY FULL", err)
	}
	a := f.quoted("a")
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY FULL")
	r := f.streaming(cfg, 2)
	f.exec("UPDATE " + a + " SET v = 'w1' WHERE id = 1")
	r.waitFor("the first update", r.has("update", "v", row.StringValue("w1")))
	f.exec("ALTER TABLE " + a + " REPLICA IDENTITY DEFAULT")
	f.exec("UPDATE " + a + " SET v = 'w2' WHERE id = 1")
	r.failsAtOnce("table "+f.table("a"), "without its whole old row", "REPLICA IDENTITY")
	for _, rec := range r.sink.records() {
		if r.field(rec, "v") == row.StringValue("w2") {
			t.Fatalf("the update without a before-image was emitted: %s", r.dump([]row.Row{rec}))
		}
	}
}
