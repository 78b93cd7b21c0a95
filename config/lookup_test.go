package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// lookupFixture writes bids.jsonl (n bids: id, auction id*7 % 40, price id,
// ts) and side.jsonl (the table: keys 0 to 11, key 3 twice, key 5 missing,
// a row without key) into a new directory.
func lookupFixture(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	var bids strings.Builder
	for i := range n {
		fmt.Fprintf(&bids, `{"id": %d, "auction": %d, "price": %d, "ts": "%s"}`+"\n", i, i*7%40, i,
			time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
	}
	var side strings.Builder
	for k := range 12 {
		if k == 5 {
			continue
		}
		fmt.Fprintf(&side, `{"key": %d, "value": "v%d"}`+"\n", k, k)
	}
	side.WriteString(`{"key": 3, "value": "v3-again"}` + "\n\n" + `{"value": "no key"}` + "\n")
	for name, text := range map[string]string{"bids.jsonl": bids.String(), "side.jsonl": side.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lookupWant is what a lookup of side.jsonl by auction % 12 gives bids
// with ids in [0, n) passing keep: one row per matching table row, none
// for key 5 (absent) or a NULL key.
func lookupWant(n int, keep func(id, auction int, value string) bool) []string {
	var want []string
	for i := range n {
		auction := i * 7 % 40
		var values []string
		switch k := auction % 12; k {
		case 5:
		case 3:
			values = []string{"v3", "v3-again"}
		default:
			values = []string{fmt.Sprintf("v%d", k)}
		}
		for _, v := range values {
			if keep(i, auction, v) {
				want = append(want, fmt.Sprintf(`{"id":%d,"auction":%d,"value":%q}`, i, auction, v))
			}
		}
	}
	slices.Sort(want)
	return want
}

// A lookup join in SQL commits, per bid, one row for each table row of its
// key, whichever side of JOIN the table stands on, with conditions on
// either side applied: repeated keys give a row each, a missing key or a
// table row without a key none.
func TestSQLLookupJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	const n = 300
	head := `SET checkpoint.dir = 'ckpts';
SET checkpoint.interval = '20ms';
CREATE SOURCE bids (id BIGINT, auction BIGINT, price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (connector = 'file', path = 'bids.jsonl', stop_at = 'latest') FORMAT PLAIN ENCODE JSON;
CREATE TABLE side (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'side.jsonl');
`
	for _, c := range []struct {
		name, query string
		keep        func(id, auction int, value string) bool
	}{
		{"stream on the left", `SELECT b.id, b.auction, s.value FROM bids AS b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() AS s ON mod(b.auction, 12) = s.key`,
			func(int, int, string) bool { return true }},
		{"table on the left", `SELECT b.id, b.auction, s.value FROM side FOR SYSTEM_TIME AS OF PROCTIME() s JOIN bids b ON s.key = b.auction % 12`,
			func(int, int, string) bool { return true }},
		{"conditions on both sides", `SELECT b.id, b.auction, s.value FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s
  ON b.auction % 12 = s.key AND b.price > 100 WHERE s.value <> 'v3' AND length(s.value) + b.id > 110`,
			func(id, _ int, v string) bool { return id > 100 && v != "v3" && len(v)+id > 110 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := lookupFixture(t, n)
			path := filepath.Join(dir, "q.sql")
			script := head + "CREATE SINK out AS " + c.query + " WITH (connector = 'file', path = 'out');\n"
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			got, want := runAndRead(t, path), lookupWant(n, c.keep)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("committed %d rows, want %d\n got %.600s\nwant %.600s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// What an operator may get wrong with a table is refused with a message
// naming the place: reading it as a stream, joining it without FOR
// SYSTEM_TIME, looking up a source, the clause in a string, a missing file,
// a float key, a watermark or a primary key on a table.
func TestSQLLookupErrors(t *testing.T) {
	head := `CREATE SOURCE bids (id BIGINT, auction BIGINT, score DOUBLE PRECISION, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (connector = 'file', path = 'bids.jsonl') FORMAT PLAIN ENCODE JSON;
CREATE TABLE side (key BIGINT, value VARCHAR, f DOUBLE PRECISION) WITH (connector = 'file', path = 'side.jsonl');
`
	for _, c := range []struct{ tail, want string }{
		{"CREATE SINK o AS SELECT key FROM side WITH (connector = 'stdout');",
			"q.sql:4:34: side is a table, which only lookup joins read"},
		{"CREATE SINK o AS SELECT b.id FROM bids b JOIN side s ON b.auction = s.key WITH (connector = 'stdout');",
			"q.sql:4:47: side is a table: join it as a lookup, side FOR SYSTEM_TIME AS OF PROCTIME() AS …"},
		{"CREATE SINK o AS SELECT b.id FROM side s JOIN bids FOR SYSTEM_TIME AS OF PROCTIME() b ON b.auction = s.key WITH (connector = 'stdout');",
			"q.sql:4:47: FOR SYSTEM_TIME AS OF PROCTIME() looks up a table"},
		{"CREATE SINK o AS SELECT b.id, 'x FOR SYSTEM_TIME AS OF PROCTIME()' AS t FROM bids b WITH (connector = 'stdout');",
			"q.sql:4:34: FOR SYSTEM_TIME AS OF PROCTIME() follows a table on one side of a join"},
		{"CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id > s.key WITH (connector = 'stdout');",
			"a lookup join needs an equality of a column of table side and an expression of the other side"},
		{"CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.score = s.f WITH (connector = 'stdout');",
			"a float key is refused"},
		{"CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id = s.value WITH (connector = 'stdout');",
			"the input's key is int and the table's field value is string"},
		{"CREATE TABLE t2 (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 'side.jsonl');",
			"table t2: a table has no event time"},
		{"CREATE TABLE t2 (k BIGINT PRIMARY KEY) WITH (connector = 'file', path = 'side.jsonl');",
			"table t2: PRIMARY KEY is not supported on a lookup table"},
		{"CREATE TABLE t2 (k BIGINT) WITH (connector = 'file', path = 'side.jsonl', stop_at = 'latest');",
			"table t2: option stop_at: a table of connector 'file' takes path only"},
		{"CREATE TABLE t2 (k BIGINT) WITH (connector = 'file', path = 'nowhere.jsonl');\nCREATE SINK o AS SELECT b.id FROM bids b JOIN t2 FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id = s.k WITH (connector = 'stdout');",
			"nowhere.jsonl: no such file or directory"},
	} {
		dir := lookupFixture(t, 1)
		path := filepath.Join(dir, "q.sql")
		if err := os.WriteFile(path, []byte(head+c.tail), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error: %v\n  want it to contain %q", c.tail, err, c.want)
		}
	}
}

// A table line that is not a JSON object of the table's fields stops the
// job when the table is read, naming the file and line; nothing is
// committed.
func TestLookupTableBadLine(t *testing.T) {
	dir := lookupFixture(t, 10)
	if err := os.WriteFile(filepath.Join(dir, "side.jsonl"), []byte("{\"key\": 1, \"value\": \"a\"}\n{\"key\": \"two\", \"value\": \"b\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.yaml")
	if err := os.WriteFile(path, []byte(`pipeline: bad-table
checkpoint: {interval: 20ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  bids: {type: file, path: bids.jsonl, stop_at: latest, event_time: {field: ts}, fields: {id: int, auction: int, ts: time}}
transforms:
  j:
    type: lookup_join
    input: bids
    table: {path: side.jsonl, fields: {key: int, value: string}}
    on: {left: auction, right: key}
    select: [left.id, right.value]
sinks:
  out: {type: file, input: j, path: out}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.Stream.Run(ctx, p.RunOptions())
	if err == nil || !strings.Contains(err.Error(), "side.jsonl:2: ") {
		t.Fatalf("Run: %v, want an error naming side.jsonl:2", err)
	}
	lines, _ := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if len(lines) != 0 {
		t.Fatalf("committed %d lines from a job whose table could not be read", len(lines))
	}
}

// The table is edited while the job runs, and the job then fails and
// restores in process: every bid is committed exactly once, those before
// the restore point with the old table's value, those after it with the
// new one (the restored subtask read the table again), never a mixture
// out of order.
func TestLookupTableEditedBeforeARestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const n = 20000
	dir := lookupFixture(t, 0)
	side := filepath.Join(dir, "side.jsonl")
	write := func(prefix string) {
		var b strings.Builder
		for k := range 12 {
			fmt.Fprintf(&b, `{"key": %d, "value": "%s%d"}`+"\n", k, prefix, k)
		}
		if err := os.WriteFile(side, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	write("old")
	path := filepath.Join(dir, "q.sql")
	if err := os.WriteFile(path, []byte(`SET checkpoint.dir = 'ckpts';
SET checkpoint.interval = '10ms';
CREATE SOURCE bids WITH (connector = 'datagen', count = 20000, keys = 40, rate = 20000);
CREATE TABLE side (key BIGINT, value VARCHAR) WITH (connector = 'file', path = 'side.jsonl');
CREATE SINK out AS SELECT b.id, s.value FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.key % 12 = s.key
  WITH (connector = 'file', path = 'out');
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The failure comes at the first checkpoint after one committed output
	// with the old table.
	var failed atomic.Bool
	t.Cleanup(failpoint.Enable("sink/file/prepare", func() error {
		if failed.Load() {
			return nil
		}
		if lines, _ := testkit.ReadCommitted(filepath.Join(dir, "out")); len(lines) > 0 {
			failed.Store(true)
			write("new")
			return failpoint.ErrInjected
		}
		return nil
	}))
	p, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Stream.Run(ctx, p.RunOptions()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	value := map[int]string{}
	for _, l := range lines {
		var r struct {
			ID    int
			Value string
		}
		if err := json.Unmarshal(l.Text, &r); err != nil {
			t.Fatal(err)
		}
		if prev, dup := value[r.ID]; dup {
			t.Fatalf("bid %d committed twice (%s, then %s)", r.ID, prev, r.Value)
		}
		value[r.ID] = r.Value
	}
	if len(value) != n {
		t.Fatalf("committed %d bids, want %d", len(value), n)
	}
	// Old values for a prefix of the ids, new ones after it.
	cut := n
	for id := range n {
		want := fmt.Sprint(id % 40 % 12)
		v := value[id]
		switch {
		case v == "old"+want && id < cut:
		case v == "new"+want:
			cut = min(cut, id)
		default:
			t.Fatalf("bid %d: value %q (new values from bid %d on), want old%s before the restore and new%s after it", id, v, cut, want, want)
		}
	}
	if !failed.Load() || cut == 0 || cut == n {
		t.Fatalf("the failure did not split the run (failed %v, new values from bid %d of %d)", failed.Load(), cut, n)
	}
	t.Logf("old values for bids 0 to %d, new ones from there", cut-1)
}
