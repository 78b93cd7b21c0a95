package config_test

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
)

// Hostile queries for aggregates over a frame, found by review: each was
// refused with the planner's internals or accepted when it should not be
// before it was fixed.

// overReviewSrc is an updating result g keyed by key, with a string column s.
const overReviewSrc = "CREATE SOURCE events WITH (connector = 'datagen', count = '10');\n" +
	"CREATE VIEW e AS SELECT id, key, value, CAST(id AS VARCHAR) AS s FROM events;\n" +
	"CREATE VIEW g AS SELECT key, count(*) AS n, max(value) AS hi, max(s) AS t FROM e GROUP BY key;\n"

const overReviewFrame = "ROWS BETWEEN 3 PRECEDING AND CURRENT ROW"

func overReviewSink(items string) string {
	return overReviewSrc + "CREATE SINK s AS SELECT " + items + " FROM g WITH (connector = 'file', path = 'out');"
}

// count of a column that is never NULL over a frame counts the frame's
// rows; of one that may be NULL it is refused (count(*) says what it
// would count), at the argument.
func TestSQLOverCountOfAColumn(t *testing.T) {
	for _, items := range []string{
		"key, count(hi) OVER (ORDER BY hi " + overReviewFrame + ") AS c",
		"key, count(n) OVER (PARTITION BY key ORDER BY hi " + overReviewFrame + ") AS c",
	} {
		if _, err := config.ParseSQL("t.sql", []byte(overReviewSink(items))); err != nil {
			t.Errorf("SELECT %s: %v\nwant it accepted: count of a column over a frame is documented (docs/sql.md)", items, err)
		}
	}
	nullable := overReviewSrc + "CREATE VIEW h AS SELECT key, max(CASE WHEN value > 3 THEN value END) AS m FROM events GROUP BY key;\n" +
		"CREATE SINK s AS SELECT key, count(m) OVER (ORDER BY key " + overReviewFrame + ") AS c FROM h WITH (connector = 'file', path = 'out');"
	if _, err := config.ParseSQL("t.sql", []byte(nullable)); err == nil || !strings.Contains(err.Error(), "t.sql:5:36: count(m) OVER (…) of a column that may be NULL is not supported") {
		t.Errorf("count of a nullable column: %v", err)
	}
}

// A refusal of an aggregate over a frame speaks SQL: located at
// file:line:column, and naming neither the planner's transform
// (s-query-over) nor its hidden columns (_over_N), which the user never
// wrote. sum(*) is refused as the GROUP BY planner refuses it.
func TestSQLOverRefusalsSpeakSQL(t *testing.T) {
	located := regexp.MustCompile(`^t\.sql:\d+:\d+: `)
	for _, c := range []struct{ items, want string }{
		{"key, sum(*) OVER (ORDER BY hi " + overReviewFrame + ") AS a", "only count takes *"},
		{"key, avg(*) OVER (ORDER BY hi " + overReviewFrame + ") AS a", "only count takes *"},
		{"key, avg(t) OVER (ORDER BY hi " + overReviewFrame + ") AS a", "avg"},
		{"key, avg(hi) OVER (PARTITION BY key, key ORDER BY hi " + overReviewFrame + ") AS a", "key"},
		{"key, avg(hi) OVER (ORDER BY event_time " + overReviewFrame + ") AS a", "event_time"},
	} {
		_, err := config.ParseSQL("t.sql", []byte(overReviewSink(c.items)))
		switch {
		case err == nil:
			t.Errorf("SELECT %s: accepted", c.items)
		case !located.MatchString(err.Error()) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "_over_") || strings.Contains(err.Error(), "-query-over") || strings.Contains(err.Error(), "transforms."):
			t.Errorf("SELECT %s:\n  %v\nwant a located error containing %q, naming no hidden transform or column", c.items, err, c.want)
		}
	}
}

// An aggregate over a frame of a one-row updating result (an aggregate
// without GROUP BY, whose key is empty) frames that row alone.
func TestSQLOverOfAOneRowResult(t *testing.T) {
	src := "CREATE SOURCE events WITH (connector = 'datagen', count = '10');\n" +
		"CREATE VIEW g AS SELECT count(*) AS n, max(value) AS hi FROM events;\n" +
		"CREATE SINK s AS SELECT n, avg(hi) OVER (ORDER BY n " + overReviewFrame + ") AS a FROM g WITH (connector = 'file', path = 'out');"
	if _, err := config.ParseSQL("t.sql", []byte(src)); err != nil {
		t.Errorf("ParseSQL: %v\nwant it accepted (the frame of a one-row result is the row)", err)
	}
}

// The hidden columns that carry the frame-aggregates to the projection
// are not columns of the query: naming _over_2, which g does not have, is
// refused rather than selecting the aggregate of item 2.
func TestSQLOverHiddenColumnsAreNotColumns(t *testing.T) {
	items := "key, _over_2 AS x, avg(hi) OVER (ORDER BY hi " + overReviewFrame + ") AS a"
	if _, err := config.ParseSQL("t.sql", []byte(overReviewSink(items))); err == nil {
		t.Errorf("SELECT %s: accepted; want g has no column _over_2", items)
	}
}

// _op is the operation of an updating result's rows, not one of its
// columns: ordering or aggregating by it would make the frames depend on
// whether a row was last inserted or updated.
func TestSQLOverOperationIsNotAColumn(t *testing.T) {
	for _, items := range []string{
		"key, avg(hi) OVER (ORDER BY _op " + overReviewFrame + ") AS a",
		"key, min(_op) OVER (ORDER BY hi " + overReviewFrame + ") AS a",
	} {
		if _, err := config.ParseSQL("t.sql", []byte(overReviewSink(items))); err == nil {
			t.Errorf("SELECT %s: accepted; want _op refused as no column of g", items)
		}
	}
}

// NULLs in ORDER BY … DESC (first) and in the aggregated column (skipped),
// with rows moving from NULL to values, at parallelism 2: the changelog
// applied gives the frames of the final groups.
func TestSQLOverNullsInTheOrderAndTheAggregate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const count = 6000
	path := writeFile(t, "nulls.sql", fmt.Sprintf(`
SET checkpoint.interval = '10ms';
SET parallelism = '2';
CREATE SOURCE events WITH (connector = 'datagen', count = '%d', keys = '7', rate = '50000', parallelism = '2');
CREATE VIEW e AS SELECT id %% 5 AS p, id %% 37 AS k, value FROM events;
CREATE VIEW g AS
  SELECT p, k, max(CASE WHEN value %% 7 = 0 AND value < 500 THEN value END) AS o,
         min(CASE WHEN value %% 3 = 0 AND value > 100 THEN value END) AS x
  FROM e GROUP BY p, k;
CREATE SINK out AS
  SELECT p, k, o, x,
    avg(x) OVER (PARTITION BY p ORDER BY o DESC ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS a,
    count(*) OVER (PARTITION BY p ORDER BY o DESC ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS cx,
    max(o) OVER (PARTITION BY p ORDER BY o DESC ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS mo
  FROM g
  WITH (connector = 'file', path = 'out', parallelism = '2');
`, count))
	runAndRead(t, path)
	got, _ := applyKeyed(t, filepath.Join(filepath.Dir(path), "out"), "p", "k")
	type grp struct {
		p, k int64
		o, x *int64
	}
	groups := map[[2]int64]*grp{}
	for _, r := range datagenRecords(count, 7, time.Time{}, 0) {
		pk := [2]int64{r.id % 5, r.id % 37}
		g := groups[pk]
		if g == nil {
			g = &grp{p: pk[0], k: pk[1]}
			groups[pk] = g
		}
		if r.value%7 == 0 && r.value < 500 && (g.o == nil || r.value > *g.o) {
			v := r.value
			g.o = &v
		}
		if r.value%3 == 0 && r.value > 100 && (g.x == nil || r.value < *g.x) {
			v := r.value
			g.x = &v
		}
	}
	parts := map[int64][]*grp{}
	for _, g := range groups {
		parts[g.p] = append(parts[g.p], g)
	}
	nullable := func(v *int64) any {
		if v == nil {
			return nil
		}
		return float64(*v)
	}
	want := map[string]map[string]any{}
	for _, gs := range parts {
		// o DESC, NULLs first, then the key ascending.
		slices.SortFunc(gs, func(a, b *grp) int {
			switch {
			case a.o == nil && b.o != nil:
				return -1
			case a.o != nil && b.o == nil:
				return 1
			case a.o != nil && *a.o != *b.o:
				return cmp.Compare(*b.o, *a.o)
			}
			return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.k, b.k))
		})
		for i, g := range gs {
			var sum, n int64
			var mo *int64
			frame := gs[max(0, i-3) : i+1]
			for _, f := range frame {
				if f.x != nil {
					sum, n = sum+*f.x, n+1
				}
				if f.o != nil && (mo == nil || *f.o > *mo) {
					mo = f.o
				}
			}
			var a any
			if n > 0 {
				a = float64(sum) / float64(n)
			}
			want[fmt.Sprintf("%d|%d", g.p, g.k)] = map[string]any{"p": float64(g.p), "k": float64(g.k), "o": nullable(g.o), "x": nullable(g.x),
				"a": a, "cx": float64(len(frame)), "mo": nullable(mo)}
		}
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
