package config_test

import (
	"context"
	"path/filepath"
	"slices"
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

// A Go program mixes SQL into its pipeline: its stream is a table a SQL
// view windows, and a Go operator filters the view's rows. The output is
// what the same pipeline written in YAML commits.
func TestAddSQLMixesViewsWithGoOperators(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pipelines")
	}
	want := runAndRead(t, writeFile(t, "p.yaml", `pipeline: w
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  events: {type: datagen, count: 3000, keys: 5, parallelism: 2}
transforms:
  per_key:
    type: window
    input: events
    key: key
    kind: sliding
    size: 200ms
    slide: 100ms
    aggregates: {n: count(), total: sum(value)}
  big: {type: filter, input: per_key, where: n > 30}
sinks:
  out: {type: file, input: big, path: out}
`))

	dir := t.TempDir()
	p := stream.New("mixed")
	src, err := datagen.New(datagen.Config{Count: 3000, Keys: 5, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
		func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
		})
	if err != nil {
		t.Fatal(err)
	}
	events := stream.From(p, "events", src, stream.Parallelism(2))
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}
	views, err := config.AddSQL(p, "views.sql", `
CREATE VIEW per_key AS
  SELECT key, window_start, window_end, count(*) AS n, sum(value) AS total
  FROM HOP(events, event_time, INTERVAL '100 milliseconds', INTERVAL '0.2' SECOND)
  GROUP BY key, window_start;`,
		map[string]config.Table{"events": {Stream: events, Schema: schema, EventTime: "event_time", NotNull: []string{"id", "key", "value"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := views["per_key"]
	if got := strings.Join(v.Schema.Names(), ","); got != "key,window_start,window_end,n,total" || !slices.Equal(v.NotNull, []string{"key", "window_start", "window_end", "n", "total"}) {
		t.Fatalf("view schema %s, not null %v", got, v.NotNull)
	}
	n := v.Schema.Index("n")
	big := stream.Filter(v.Stream, "big", func(r row.Row) bool { return r[n].Int() > 30 })
	stream.To(big, "out", file.New(filepath.Join(dir, "out"), func(dst []byte, r row.Row) ([]byte, error) { return v.Schema.AppendJSON(dst, r), nil }))
	ck := checkpoint.DefaultOptions()
	ck.Interval = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Run(ctx, stream.RunOptions{CheckpointDir: filepath.Join(dir, "ck"), Checkpoint: ck, Restart: runtime.RestartOptions{MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, string(l.Text))
	}
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("committed %d rows, the YAML pipeline %d; first %q, want %q", len(got), len(want), first(got), first(want))
	}
}

// SQL added to a Go program names its problems by the name given, line and
// column, and refuses SET and a view named like a table.
func TestAddSQLErrors(t *testing.T) {
	p := stream.New("mixed")
	src, err := datagen.New(datagen.Config{Count: 10, Keys: 1, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
		func(id, key, value int64) row.Row { return row.Row{row.IntValue(id)} })
	if err != nil {
		t.Fatal(err)
	}
	events := stream.From(p, "events", src)
	tables := map[string]config.Table{"events": {Stream: events, Schema: &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}}}}}
	for _, c := range []struct{ text, want string }{
		{"CREATE VIEW v AS SELECT nope FROM events;", "q.sql:1:25: events has no column nope (columns: id)"},
		{"SET parallelism = 2;", "q.sql:1:1: SET has no meaning in a Go program's pipeline"},
		{"CREATE VIEW events AS SELECT id FROM events;", "q.sql:1:1: view events has the name of a table the program gives"},
		{"CREATE SOURCE events WITH (connector = 'datagen');", "q.sql:1:1: source events has the name of a table the program gives"},
		{"CREATE VIEW v AS SELECT count(*) FROM TUMBLE(events, event_time, INTERVAL '1' SECOND) GROUP BY window_start;", "windows are over the event time"},
	} {
		if _, err := config.AddSQL(p, "q.sql", c.text, tables); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error %v\n  want it to contain %q", c.text, err, c.want)
		}
	}
}

// A table's event-time column must be one of its columns (or the record's
// own, event_time).
func TestAddSQLChecksTheTables(t *testing.T) {
	p := stream.New("mixed")
	src, err := datagen.New(datagen.Config{Count: 10, Keys: 1, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
		func(id, key, value int64) row.Row { return row.Row{row.IntValue(id)} })
	if err != nil {
		t.Fatal(err)
	}
	events := stream.From(p, "events", src)
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}}}
	_, err = config.AddSQL(p, "q.sql", "CREATE VIEW v AS SELECT id FROM events;", map[string]config.Table{"events": {Stream: events, Schema: schema, EventTime: "ts"}})
	if err == nil || !strings.Contains(err.Error(), "its event-time column ts is not one of its columns (id)") {
		t.Errorf("error %v", err)
	}
}

// An updating view comes back to the program marked as a changelog keyed by
// its GROUP BY columns, and SQL given it back as a table refuses to query it
// as if its rows were records.
func TestAddSQLMarksUpdatingViews(t *testing.T) {
	p := stream.New("updating")
	src, err := datagen.New(datagen.Config{Count: 10, Keys: 2, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
		func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
		})
	if err != nil {
		t.Fatal(err)
	}
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}
	events := config.Table{Stream: stream.From(p, "events", src), Schema: schema, EventTime: "event_time"}
	views, err := config.AddSQL(p, "a.sql", "CREATE VIEW totals AS SELECT key AS k, sum(value) AS total FROM events GROUP BY key;",
		map[string]config.Table{"events": events})
	if err != nil {
		t.Fatal(err)
	}
	totals := views["totals"]
	if !slices.Equal(totals.Changelog, []string{"k"}) || totals.Schema.Index("_op") < 0 {
		t.Fatalf("view totals: changelog %q, fields %q; want a changelog keyed by [k] with _op", totals.Changelog, totals.Schema.Names())
	}
	_, err = config.AddSQL(p, "b.sql", "CREATE VIEW big AS SELECT k FROM totals WHERE total > 10;", map[string]config.Table{"totals": totals})
	if err == nil || !strings.Contains(err.Error(), "totals is an updating result") {
		t.Fatalf("a query over the updating view: %v, want refused", err)
	}
}
