package config_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

// q4Shape is Nexmark q4 over reviewNexmarkHead's sources, the auction's id
// declared unique when key is set.
func q4Shape(par int, rate string, key bool) string {
	head := reviewNexmarkHead(par, rate)
	if key {
		head = strings.Replace(head, "category BIGINT,\n", "category BIGINT, PRIMARY KEY (id) NOT ENFORCED,\n", 1)
	}
	return head + `CREATE SINK out AS
  SELECT Q.category AS id, avg(Q.final) AS final, count(*) AS n
  FROM (
    SELECT max(B.price) AS final, A.id, A.category
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
  ) AS Q
  GROUP BY Q.category
  WITH (connector = 'file', path = 'out');
`
}

// With the auction's id declared unique, q4's join keeps no bid its auction
// has seen and its GROUP BY closes each auction at its expiry: the plan says
// so, and the changelog of means, applied, ends where the query without the
// declaration ends, with one row per closed auction instead of one per rise
// of a maximum (and the retractions between).
func TestSQLDeclaredKeyClosesQ4sGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	keyed := q4Shape(2, "", true)
	plan := planOf(t, keyed)
	for _, want := range []string{"interval join [0s, left expires], left unique by key (declared)",
		"aggregate by [left__id, left__category, left__expires], each group once, when the watermark passes its left__expires"} {
		if !strings.Contains(plan, want) {
			t.Fatalf("plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "normalize") {
		t.Fatalf("the mean reads final rows, which need no retractions:\n%s", plan)
	}
	gotLines := runInOrder(t, writeFile(t, "keyed.sql", keyed))
	wantLines := runInOrder(t, writeFile(t, "ref.sql", q4Shape(2, "", false)))
	got, want := applied(t, gotLines, "id"), applied(t, wantLines, "id")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("declared key %v\nwithout %v", got, want)
	}
	if len(gotLines) >= len(wantLines) {
		t.Fatalf("%d changelog rows with the declared key, %d without: closed groups should change each mean once per auction", len(gotLines), len(wantLines))
	}
	t.Logf("%d categories alike; %d rows against %d", len(got), len(gotLines), len(wantLines))
}

// q4 with the declared key stopped twice and restored at other
// parallelisms (2 → 3 → 1), so that open groups, their timers and the
// joined auctions move between subtasks: applied, its changelog ends where
// an uninterrupted run of the query without the declaration ends.
func TestSQLDeclaredKeyQ4Restored(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sql")
	runStages(t, path, rescaled(700*time.Millisecond, 600*time.Millisecond), func(par int) string {
		return q4Shape(par, ", rate = '12000'", true)
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
	want := applied(t, runInOrder(t, writeFile(t, "ref.sql", q4Shape(1, "", false))), "id")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("restored %v\nreference %v", got, want)
	}
}

// A declared key that the records break while the join still holds the
// first one fails the job, unrecoverably (a restart replays the same
// records), naming the key: the result without the declaration would
// differ, so nothing is committed as if it held.
func TestSQLDeclaredKeyDuplicateFailsTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"auctions.jsonl": `{"id": 7, "date_time": "2026-01-01T00:00:00Z", "expires": "2026-01-01T00:00:10Z", "category": 1}
{"id": 7, "date_time": "2026-01-01T00:00:02Z", "expires": "2026-01-01T00:00:12Z", "category": 2}
`,
		"bids.jsonl": `{"auction": 7, "price": 5, "date_time": "2026-01-01T00:00:03Z"}
`,
		"q.sql": `SET checkpoint.dir = 'ckpts';
SET restart.max_attempts = 3;
SET restart.delay = '1ms';
CREATE SOURCE auction (id BIGINT, date_time TIMESTAMP, expires TIMESTAMP, category BIGINT, PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'file', path = 'auctions.jsonl') FORMAT PLAIN ENCODE JSON;
CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH (connector = 'file', path = 'bids.jsonl') FORMAT PLAIN ENCODE JSON;
CREATE SINK out AS
  SELECT A.id, max(B.price) AS final
  FROM auction AS A JOIN bid AS B ON A.id = B.auction
  WHERE B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id
  WITH (connector = 'file', path = 'out');
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := config.Load(filepath.Join(dir, "q.sql"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = p.Stream.Run(ctx, p.RunOptions())
	if err == nil || !errors.Is(err, runtime.ErrUnrecoverable) || !strings.Contains(err.Error(), "two left records share key 7") {
		t.Fatalf("Run: %v\nwant an unrecoverable error naming key 7", err)
	}
	lines, _ := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if len(lines) != 0 {
		t.Fatalf("committed %d rows of a job whose declared key was false", len(lines))
	}
}

// A PRIMARY KEY on a source that reads records must say NOT ENFORCED, name
// its columns once each, and is no change-data-capture source's option; a
// GROUP BY that does not hold the whole key stays an updating result, and
// only an interval join bounded by the left side's column uses the key.
func TestSQLDeclaredKeyRefusalsAndLimits(t *testing.T) {
	const src = "CREATE SOURCE a (id BIGINT, k BIGINT, ts TIMESTAMP, %s WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'a.jsonl');\n"
	for _, c := range []struct{ name, sql, want string }{
		{"enforced", strings.Replace(src, "%s", "PRIMARY KEY (id),", 1),
			"t.sql:1:53: source a: connector file reads records, not a table's changes, so the engine cannot enforce a PRIMARY KEY"},
		{"column enforced", "CREATE SOURCE a (id BIGINT PRIMARY KEY, ts TIMESTAMP) WITH (connector = 'file', path = 'a.jsonl');",
			"write PRIMARY KEY (id) NOT ENFORCED"},
		{"no such column", strings.Replace(src, "%s", "PRIMARY KEY (idd) NOT ENFORCED,", 1),
			"PRIMARY KEY (idd): source a has no column idd (columns: id, k, ts)"},
		{"twice", strings.Replace(src, "%s", "PRIMARY KEY (id, id) NOT ENFORCED,", 1), "PRIMARY KEY (id, id): id is listed twice"},
		{"cdc", "CREATE SOURCE c (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'postgres-cdc', dsn = 'postgres://x@127.0.0.1/test', table = 't');",
			"a change-data-capture source's PRIMARY KEY is its table's, which PostgreSQL enforces: drop NOT ENFORCED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.ParseSQL("t.sql", []byte(c.sql))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSQL: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
	keyed := strings.Replace(src, "%s", "PRIMARY KEY (id) NOT ENFORCED,", 1) +
		"CREATE SOURCE b (a_id BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'b.jsonl');\n"
	for _, c := range []struct{ name, query, want, not string }{
		{"the key grouped", "SELECT a.id, max(b.v) AS m FROM a JOIN b ON a.id = b.a_id WHERE b.ts BETWEEN a.ts AND a.ts2 GROUP BY a.id",
			"each group once, when the watermark passes its left__ts2", ""},
		{"not the key", "SELECT a.k, max(b.v) AS m FROM a JOIN b ON a.id = b.a_id WHERE b.ts BETWEEN a.ts AND a.ts2 GROUP BY a.k",
			"left unique by key (declared)", "each group once"},
		{"a negative lower bound", "SELECT a.id, max(b.v) AS m FROM a JOIN b ON a.id = b.a_id WHERE b.ts BETWEEN a.ts - INTERVAL '10' SECOND AND a.ts2 GROUP BY a.id",
			"aggregate by [left__id], updating", "each group once"},
		{"a fixed interval", "SELECT a.id, count(*) AS n FROM a JOIN b ON a.id = b.a_id WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.id",
			"aggregate by [left__id], updating", "unique"},
		{"another key", "SELECT a.id, max(b.v) AS m FROM a JOIN b ON a.k = b.a_id WHERE b.ts BETWEEN a.ts AND a.ts2 GROUP BY a.id",
			"aggregate by [left__id], updating", "unique"},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := strings.Replace(keyed, "ts TIMESTAMP, PRIMARY", "ts TIMESTAMP, ts2 TIMESTAMP, PRIMARY", 1) +
				"CREATE SINK s AS " + c.query + " WITH (connector = 'file', path = 'out');\n"
			plan := planOf(t, script)
			if !strings.Contains(plan, c.want) || c.not != "" && strings.Contains(plan, c.not) {
				t.Fatalf("plan:\n%s\nwant %q, not %q", plan, c.want, c.not)
			}
		})
	}
}
