package config_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// the aggregate view the rewritten join absorbs is
// also read by another sink (and the side relation is a view with a WHERE):
// dropAbsorbedViews keeps it, the second sink commits the view's rows, and
// the rewritten join commits what the join commits.
func TestWindowTopAbsorbedViewReadElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	views := `CREATE VIEW odd AS SELECT id, key, value FROM events WHERE id % 2 = 1;
CREATE VIEW best AS SELECT max(key) AS mk, window_end AS e FROM TUMBLE(odd, event_time, INTERVAL '30 milliseconds') GROUP BY window_end;
CREATE SINK other AS SELECT mk, e FROM best WITH (connector = 'file', path = 'other');
`
	q := `CREATE SINK out AS SELECT c.id, c.key, b.e FROM odd AS c JOIN best AS b ON c.key = b.mk
  WHERE c.event_time BETWEEN b.e - INTERVAL '30 milliseconds' AND b.e`
	top := reviewHead + views + q + reviewSink
	ref := reviewHead + views + q + " AND c.id >= 0" + reviewSink
	reviewCompare(t, top, ref)
	path := writeFile(t, "top.sql", top)
	runAndRead(t, path)
	other := committedLines(t, filepath.Dir(path), "other")
	if len(other) != 100 {
		t.Fatalf("the other sink of the absorbed view committed %d rows, want 100 (one per window)", len(other))
	}
}

// EXPLAIN of the rewritten sink shows window_top and
// the absorbed view's window does not run.
func TestWindowTopExplain(t *testing.T) {
	script := reviewHead + `CREATE VIEW best AS SELECT max(key) AS mk, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end;
EXPLAIN CREATE SINK out AS SELECT c.id, c.key, b.e FROM events AS c JOIN best AS b ON c.key = b.mk
  WHERE c.event_time BETWEEN b.e - INTERVAL '30 milliseconds' AND b.e
  WITH (connector = 'file', path = 'out');
`
	d := planOf(t, script)
	if !strings.Contains(d, "rows at the highest key") || strings.Contains(d, "best-window") {
		t.Fatalf("plan:\n%s", d)
	}
}

// in a Go program (config.AddSQL) the absorbed view is
// still built and returned (the program may read it), and the rewritten
// view commits the rows at each window's highest key.
func TestWindowTopAddSQLKeepsAbsorbedView(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	dir := t.TempDir()
	p := stream.New("emb")
	src, err := datagen.New(datagen.Config{Count: 3000, Keys: 7, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
		func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
		})
	if err != nil {
		t.Fatal(err)
	}
	events := stream.From(p, "events", src, stream.Parallelism(2))
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}
	views, err := config.AddSQL(p, "v.sql", `
CREATE VIEW best AS SELECT max(key) AS mk, window_end AS e FROM TUMBLE(events, event_time, INTERVAL '30 milliseconds') GROUP BY window_end;
CREATE VIEW top AS SELECT c.id, c.key, b.e FROM events AS c JOIN best AS b ON c.key = b.mk
  WHERE c.event_time >= b.e - INTERVAL '30 milliseconds' AND c.event_time < b.e;`,
		map[string]config.Table{"events": {Stream: events, Schema: schema, EventTime: "event_time", NotNull: []string{"id", "key", "value"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"best", "top"} {
		v := views[name]
		stream.To(v.Stream, name+"-sink", file.New(filepath.Join(dir, name), func(dst []byte, r row.Row) ([]byte, error) { return v.Schema.AppendJSON(dst, r), nil }))
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Run(ctx, stream.RunOptions{CheckpointDir: filepath.Join(dir, "ck"), Checkpoint: ck, Restart: runtime.RestartOptions{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	count := func(name string) int {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return 0
		}
		lines, err := testkit.ReadCommitted(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return len(lines)
	}
	// 100 windows of 30 ids: key 6 is at 4 or 5 ids of each (3000/7 in all).
	if b, n := count("best"), count("top"); b != 100 || n != (3000+1)/7 {
		t.Fatalf("best committed %d rows (want 100), top %d (want %d)", b, n, (3000+1)/7)
	}
}
