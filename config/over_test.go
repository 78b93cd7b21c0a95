package config_test

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// An aggregate over a frame of an updating result's rows (its groups'
// totals ordered by the total, which moves a group at every record, and
// deleted by HAVING when they stop qualifying) gives, applied as the
// changelog it is, exactly each group's frame over the final groups: at
// parallelism 2, through a failure and a restore. applyKeyed also requires
// every update and delete to meet the key's row as the sink holds it, so a
// frame that changed without an update fails it.
func TestSQLOverFramesAnUpdatingResult(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const count = 20000
	path := writeFile(t, "frames.sql", fmt.Sprintf(`
SET checkpoint.interval = '10ms';
SET parallelism = '2';
SET restart.max_attempts = '3';
SET restart.delay = '10ms';
CREATE SOURCE events WITH (connector = 'datagen', count = '%d', keys = '7', rate = '20000', parallelism = '1');
CREATE VIEW e AS SELECT id %% 3 AS p, id %% 23 AS k, value FROM events;
CREATE VIEW g AS
  SELECT p, k, sum(value) AS total FROM e GROUP BY p, k HAVING sum(value) %% 4 <> 0;
CREATE SINK out AS
  SELECT p, k, total,
    avg(total) OVER (PARTITION BY p ORDER BY total DESC ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS mean,
    count(*) OVER (PARTITION BY p ORDER BY total DESC ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS n,
    min(k) OVER (PARTITION BY p ORDER BY total DESC ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS lo
  FROM g
  WITH (connector = 'file', path = 'out', parallelism = '3');
`, count))
	// One failure, at the first checkpoint after output was committed:
	// the restore replays the records after its checkpoint onto the
	// frames as they were.
	out := filepath.Join(filepath.Dir(path), "out")
	var failed atomic.Bool
	t.Cleanup(failpoint.Enable("sink/file/prepare", func() error {
		if failed.Load() {
			return nil
		}
		if lines, _ := testkit.ReadCommitted(out); len(lines) > 0 {
			failed.Store(true)
			return failpoint.ErrInjected
		}
		return nil
	}))
	runAndRead(t, path)
	if !failed.Load() {
		t.Fatal("the failure was not injected: no output was committed before the last checkpoint")
	}
	got, _ := applyKeyed(t, out, "p", "k")

	// The reference: the final groups, their frames by hand.
	type group struct{ p, k, total int64 }
	totals := map[[2]int64]int64{}
	for _, r := range datagenRecords(count, 7, time.Time{}, 0) {
		totals[[2]int64{r.id % 3, r.id % 23}] += r.value
	}
	parts := map[int64][]group{}
	for pk, total := range totals {
		if total%4 != 0 {
			parts[pk[0]] = append(parts[pk[0]], group{p: pk[0], k: pk[1], total: total})
		}
	}
	want := map[string]map[string]any{}
	for _, gs := range parts {
		// By the total, descending, then by the key (p, k).
		slices.SortFunc(gs, func(a, b group) int { return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.k, b.k)) })
		for i, g := range gs {
			frame := gs[max(0, i-2) : i+1]
			sum, lo := int64(0), g.k
			for _, f := range frame {
				sum, lo = sum+f.total, min(lo, f.k)
			}
			want[fmt.Sprintf("%d|%d", g.p, g.k)] = map[string]any{"p": float64(g.p), "k": float64(g.k), "total": float64(g.total),
				"mean": float64(sum) / float64(len(frame)), "n": float64(len(frame)), "lo": float64(lo)}
		}
	}
	if len(want) < 30 {
		t.Fatalf("the reference has %d rows: the test needs more", len(want))
	}
	for key, w := range want {
		if g := got[key]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: %v, want %v", key, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
}

// What an aggregate over a frame cannot mean, or would compute wrong, is
// refused at load, naming the line and column and what to write.
func TestSQLOverRefusals(t *testing.T) {
	const src = "CREATE SOURCE events WITH (connector = 'datagen', count = '10');\n" +
		"CREATE VIEW g AS SELECT key, count(*) AS n, max(value) AS hi FROM events GROUP BY key;\n"
	over := func(agg, window string) string {
		return src + "CREATE SINK s AS SELECT key, " + agg + " OVER (" + window + ") AS a FROM g WITH (connector = 'file', path = 'out');"
	}
	const frame = "ROWS BETWEEN 3 PRECEDING AND CURRENT ROW"
	for _, c := range []struct{ name, sql, want string }{
		{"append-only input", src + "CREATE SINK s AS SELECT id, avg(value) OVER (PARTITION BY key ORDER BY id " + frame + ") AS a FROM events WITH (connector = 'stdout');",
			"t.sql:3:29: events is not an updating result: an aggregate OVER (…) frames the rows of one"},
		{"partition off the key", over("avg(hi)", "PARTITION BY n ORDER BY hi "+frame),
			"t.sql:3:57: PARTITION BY n: partition by columns of g's key (key)"},
		{"no frame", over("avg(hi)", "ORDER BY hi"), "needs its frame: ROWS BETWEEN n PRECEDING AND CURRENT ROW"},
		{"no order", over("avg(hi)", frame), "needs ORDER BY"},
		{"a range frame", over("avg(hi)", "ORDER BY hi RANGE BETWEEN 3 PRECEDING AND CURRENT ROW"), "RANGE and GROUPS frames are not supported"},
		{"unbounded", over("avg(hi)", "ORDER BY hi ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"), "UNBOUNDED and FOLLOWING bounds are not"},
		{"following", over("avg(hi)", "ORDER BY hi ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING"), "UNBOUNDED and FOLLOWING bounds are not"},
		{"exclude", over("avg(hi)", "ORDER BY hi ROWS BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW"), "EXCLUDE in a frame is not supported"},
		{"too many rows", over("avg(hi)", "ORDER BY hi ROWS BETWEEN 5000 PRECEDING AND CURRENT ROW"), "5000 PRECEDING: at most 1000"},
		{"an expression bound", over("avg(hi)", "ORDER BY hi ROWS BETWEEN 1 + 1 PRECEDING AND CURRENT ROW"), "takes a whole number"},
		{"distinct", over("count(DISTINCT hi)", "ORDER BY hi "+frame), "without DISTINCT and FILTER"},
		{"another function", over("stddev(hi)", "ORDER BY hi "+frame), "stddev(…) OVER (…): of the aggregates, count, sum, min, max and avg take a frame"},
		{"an expression argument", over("avg(hi + 1)", "ORDER BY hi "+frame), "avg(…) OVER (…): a column of g"},
		{"two windows", src + "CREATE SINK s AS SELECT key, avg(hi) OVER (ORDER BY hi " + frame + ") AS a, avg(n) OVER (ORDER BY n " + frame + ") AS b FROM g WITH (connector = 'file', path = 'out');",
			"every aggregate OVER (…) of a query has the same OVER clause"},
		{"inside an expression", src + "CREATE SINK s AS SELECT key, 1 + avg(hi) OVER (ORDER BY hi " + frame + ") AS a FROM g WITH (connector = 'file', path = 'out');",
			"is selected as it is, not inside an expression"},
		{"where", src + "CREATE SINK s AS SELECT key, avg(hi) OVER (ORDER BY hi " + frame + ") AS a FROM g WHERE n > 1 WITH (connector = 'file', path = 'out');",
			"WHERE with an aggregate OVER (…) is not supported"},
		{"key not selected", src + "CREATE SINK s AS SELECT n, avg(hi) OVER (ORDER BY hi " + frame + ") AS a FROM g WITH (connector = 'file', path = 'out');",
			"key key: select key too"},
		{"to a sink that cannot apply it", src + "CREATE SINK s AS SELECT key, avg(hi) OVER (ORDER BY hi " + frame + ") AS a FROM g WITH (connector = 'postgres', dsn = 'postgres://x@127.0.0.1/test', table = 't');",
			"so a postgres sink must apply its updates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseSQL("t.sql", []byte(c.sql))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSQL: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	// What is accepted: the short frame, 0 PRECEDING, no partition, every
	// aggregate, and * beside them.
	for _, ok := range []string{
		over("avg(hi)", "PARTITION BY key ORDER BY hi ROWS 3 PRECEDING"),
		over("sum(hi)", "ORDER BY hi DESC, n ROWS BETWEEN 0 PRECEDING AND CURRENT ROW"),
		src + "CREATE SINK s AS SELECT *, count(*) OVER (ORDER BY hi " + frame + ") AS c, min(n) OVER (ORDER BY hi " + frame + ") AS lo, max(n) OVER (ORDER BY hi " + frame + ") AS up FROM g WITH (connector = 'file', path = 'out');",
	} {
		if _, err := config.ParseSQL("t.sql", []byte(ok)); err != nil {
			t.Errorf("ParseSQL(%q): %v", ok, err)
		}
	}
}

// The over transform in YAML refuses what it cannot frame: an input that
// is not a changelog, a partition off the changelog's key, a missing or
// out-of-range preceding.
func TestOverTransformRefusals(t *testing.T) {
	head := "pipeline: o\nsources:\n  events: {type: datagen, count: 10}\ntransforms:\n  g: {type: aggregate, input: events, key: [key], aggregates: {n: count(), hi: max(value)}}\n  o: "
	tail := "\nsinks:\n  out: {type: file, input: o, path: out}\n"
	for _, c := range []struct{ o, want string }{
		{"{type: over, input: events, partition_by: [key], order_by: [id], preceding: 2, aggregates: {a: avg(value)}}", "events is not a changelog"},
		{"{type: over, input: g, partition_by: [n], order_by: [hi], preceding: 2, aggregates: {a: avg(hi)}}", "n is not a key field of changelog g (its key: [key])"},
		{"{type: over, input: g, partition_by: [key], order_by: [hi], aggregates: {a: avg(hi)}}", "preceding: is required"},
		{"{type: over, input: g, partition_by: [key], order_by: [hi], preceding: 1001, aggregates: {a: avg(hi)}}", "1001: want 0 to 1000"},
		{"{type: over, input: g, partition_by: [key], order_by: [hi up], preceding: 1, aggregates: {a: avg(hi)}}", `"hi up": want a field of input g and asc or desc`},
		{"{type: over, input: g, partition_by: [key], order_by: [hi], preceding: 1, aggregates: {hi: avg(hi)}}", `"hi" is a field of the result already`},
		{"{type: over, input: g, partition_by: [key], order_by: [_op], preceding: 1, aggregates: {a: avg(hi)}}", "_op is the operation of the changelog's rows"},
		{"{type: over, input: g, partition_by: [key], order_by: [hi], preceding: 1, aggregates: {a: max(_op)}}", "_op is the operation of the changelog's rows"},
	} {
		_, err := config.Load(writeFile(t, "p.yaml", head+c.o+tail))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.o, err, c.want)
		}
	}
}
