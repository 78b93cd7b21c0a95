package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// runInOrder runs the pipeline at path and returns its committed lines in
// the order the sink wrote them (file by file, as ReadCommitted walks
// them; files are named by checkpoint), not sorted: a changelog's order
// matters.
func runInOrder(t *testing.T, path string) []string {
	t.Helper()
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(filepath.Dir(path), "out"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l.Text))
	}
	return out
}

// applied applies a changelog's rows (with _op) keyed by key, returning
// each key's last row.
func applied(t *testing.T, lines []string, key string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprint(m[key])
		op := m["_op"]
		delete(m, "_op")
		b, _ := json.Marshal(m)
		switch op {
		case "insert", "update":
			out[k] = string(b)
		case "delete":
			delete(out, k)
		default:
			t.Fatalf("row %s: _op %v", l, op)
		}
	}
	return out
}

// Nexmark q4's shape (a GROUP BY over the join, a mean over that) at
// parallelism 2: applied, the until plan's changelog ends where the
// reference's does.
func TestUntilQ4ShapeAtParallelism2(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	q := func(upper string) string {
		return reviewNexmarkHead(2, "") + `CREATE SINK out AS
  SELECT Q.category AS id, avg(Q.final) AS final, count(*) AS n
  FROM (
    SELECT max(B.price) AS final, A.id, A.category
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
    GROUP BY A.id, A.category
  ) AS Q
  GROUP BY Q.category
  WITH (connector = 'file', path = 'out');
`
	}
	until, ref := q("A.expires"), q("A.expires + INTERVAL '0' SECOND")
	if d := planOf(t, until); !strings.Contains(d, "interval join [0s, left expires]") {
		t.Fatalf("plan:\n%s", d)
	}
	got := applied(t, runInOrder(t, writeFile(t, "until.sql", until)), "id")
	want := applied(t, runInOrder(t, writeFile(t, "ref.sql", ref)), "id")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("until %v\nreference %v", got, want)
	}
	t.Logf("%d categories alike: %v", len(got), got)
}

// q4's shape stopped twice and restored at other parallelisms (2 → 3 → 1):
// applied, its changelog ends where an uninterrupted reference run's does.
func TestUntilQ4ShapeRestored(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	q := func(par int, rate, upper string) string {
		return reviewNexmarkHead(par, rate) + `CREATE SINK out AS
  SELECT Q.category AS id, avg(Q.final) AS final, count(*) AS n
  FROM (
    SELECT max(B.price) AS final, A.id, A.category
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND ` + upper + `
    GROUP BY A.id, A.category
  ) AS Q
  GROUP BY Q.category
  WITH (connector = 'file', path = 'out');
`
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	runStages(t, path, rescaled(700*time.Millisecond, 600*time.Millisecond), func(par int) string {
		return q(par, ", rate = '12000'", "A.expires")
	})
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var inOrder []string
	for _, l := range lines {
		inOrder = append(inOrder, string(l.Text))
	}
	got := applied(t, inOrder, "id")
	want := applied(t, runInOrder(t, writeFile(t, "ref.sql", q(1, "", "A.expires + INTERVAL '0' SECOND"))), "id")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("restored until %v\nreference %v", got, want)
	}
	t.Logf("%d categories alike", len(got))
}
