package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// Hostile cases of the window_top rewrite (from a review): each runs a query
// the planner rewrites into window_top and a reference that means the same
// rows but is planned as an ordinary join, and compares what they commit.

const reviewHead = `SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'ckpts';
CREATE SOURCE events WITH (connector = 'datagen', count = 3000, keys = 7, parallelism = 1);
`

const reviewSink = "\n  WITH (connector = 'file', path = 'out');\n"

// reviewCompare plans top (which must be window_top) and ref (which must be
// a join), runs both and compares their committed rows.
func reviewCompare(t *testing.T, top, ref string) {
	t.Helper()
	if d := planOf(t, top); !strings.Contains(d, "rows at the") || strings.Contains(d, "join") {
		t.Fatalf("top's plan is not window_top:\n%s", d)
	}
	if d := planOf(t, ref); !strings.Contains(d, "join") || strings.Contains(d, "rows at the") {
		t.Fatalf("the reference's plan is not a join:\n%s", d)
	}
	got := runAndRead(t, writeFile(t, "top.sql", top))
	want := runAndRead(t, writeFile(t, "ref.sql", ref))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		missing, extra := diffLines(want, got)
		t.Fatalf("window_top committed %d rows, the join %d\nonly in the join (%d): %v\nonly in window_top (%d): %v",
			len(got), len(want), len(missing), head(missing, 6), len(extra), head(extra, 6))
	}
	if len(got) == 0 {
		t.Fatalf("no rows at all: the test proves nothing")
	}
	t.Logf("%d rows alike", len(got))
}

// diffLines returns the lines of a not in b and those of b not in a (as
// multisets).
func diffLines(a, b []string) (onlyA, onlyB []string) {
	n := map[string]int{}
	for _, l := range b {
		n[l]++
	}
	for _, l := range a {
		if n[l] > 0 {
			n[l]--
			continue
		}
		onlyA = append(onlyA, l)
	}
	m := map[string]int{}
	for _, l := range a {
		m[l]++
	}
	for _, l := range b {
		if m[l] > 0 {
			m[l]--
			continue
		}
		onlyB = append(onlyB, l)
	}
	return onlyA, onlyB
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// The rewrite leaves to the join what window_top would answer otherwise:
//   - `r.c >= w.m` (or `<=` of a minimum) with BETWEEN, which includes the
//     window's end instant: a row there belongs to the next window, may be
//     above this window's maximum and then joins it, where window_top keeps
//     the rows at the maximum;
//   - a float column: the window aggregates skip a NaN unless it comes
//     first, and the join's key compares a zero's sign, where window_top
//     orders numbers (NaN first, -0 = +0).
func TestWindowTopLeavesOtherAnswersToTheJoin(t *testing.T) {
	view := "CREATE VIEW v AS SELECT id, key, value, 999 - value AS dv, value / 1.0 AS x FROM events;\n"
	bound := "\n  WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e"
	agg := func(f, col string) string {
		return " JOIN (SELECT " + f + "(" + col + ") AS m, window_end AS e FROM TUMBLE(v, event_time, INTERVAL '30 milliseconds') GROUP BY window_end) AS w"
	}
	for _, q := range []string{
		"SELECT c.id FROM v AS c" + agg("max", "value") + " ON c.key = w.m AND c.value >= w.m" + bound,
		"SELECT c.id FROM v AS c" + agg("min", "dv") + " ON c.key = w.m AND c.dv <= w.m" + bound,
		"SELECT c.id FROM v AS c" + agg("max", "x") + " ON c.x = w.m" + bound,
		"SELECT c.id FROM v AS c" + agg("min", "x") + " ON c.x = w.m" + bound,
	} {
		p, err := config.Load(writeFile(t, "q.sql", reviewHead+view+"CREATE SINK out AS "+q+reviewSink))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		plan, err := p.Stream.Plan()
		if err != nil {
			t.Fatal(err)
		}
		if d := plan.Describe(); strings.Contains(d, "rows at the") || !strings.Contains(d, "join") {
			t.Fatalf("%s\nplanned as window_top:\n%s", q, d)
		}
	}
}

// The aggregate subquery of a rewritten join is not planned, so its checks
// would not run: max over a BOOLEAN, which the window aggregate refuses
// ("max needs an ordered field"), is left to the join and refused.
func TestWindowTopMaxOfBoolRefusedLikeTheJoin(t *testing.T) {
	view := "CREATE VIEW b AS SELECT id, key, key > 3 AS big FROM events;\n"
	q := `CREATE SINK out AS SELECT c.id, c.big FROM b AS c JOIN (
    SELECT max(big) AS m, window_end AS e FROM TUMBLE(b, event_time, INTERVAL '30 milliseconds') GROUP BY window_end
  ) AS w ON c.big = w.m
  WHERE c.event_time BETWEEN w.e - INTERVAL '30 milliseconds' AND w.e`
	_, refErr := config.Load(writeFile(t, "ref.sql", reviewHead+view+q+" AND c.id >= 0"+reviewSink))
	if refErr == nil {
		t.Fatalf("the join form loads; this test assumes it is refused")
	}
	t.Logf("the join form is refused: %v", refErr)
	if _, err := config.Load(writeFile(t, "top.sql", reviewHead+view+q+reviewSink)); err == nil {
		t.Fatalf("the window_top form loads, though the same query planned as a join is refused (%v)", refErr)
	}
}
