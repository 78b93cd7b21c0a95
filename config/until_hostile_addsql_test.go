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

// reviewAddSQLUntil runs a Go pipeline whose SQL view joins two Go tables
// with upper bound upper, returning the committed rows and the plan.
func reviewAddSQLUntil(t *testing.T, upper string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	p := stream.New("mixed")
	start := datagen.DefaultStartTime.UnixNano()
	ms := int64(time.Millisecond)
	mk := func(count int64, withExp bool) stream.Stream[row.Row] {
		src, err := datagen.New(datagen.Config{Count: count, Keys: 13, StartTime: datagen.DefaultStartTime, EventInterval: time.Millisecond},
			func(id, key, value int64) row.Row {
				ts := start + id*ms
				r := row.Row{row.IntValue(id), row.IntValue(key), row.TimeValue(ts)}
				if withExp {
					exp := row.TimeValue(ts + (id%6-1)*7*ms) // from before the start to 28ms after
					if id%5 == 0 {
						exp = row.Value{} // NULL
					}
					r = append(r, exp)
				}
				return r
			})
		if err != nil {
			t.Fatal(err)
		}
		name := "b"
		if withExp {
			name = "a"
		}
		return stream.From(p, name, src, stream.Parallelism(2))
	}
	a, b := mk(800, true), mk(2000, false)
	sa := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "t", Kind: row.Time}, {Name: "exp", Kind: row.Time}}}
	sb := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "t", Kind: row.Time}}}
	views, err := config.AddSQL(p, "views.sql", `CREATE VIEW j AS SELECT a.id AS aid, b.id AS bid, b.t AS bt
  FROM a JOIN b ON a.key = b.key WHERE b.t BETWEEN a.t AND `+upper+`;`,
		map[string]config.Table{
			"a": {Stream: a, Schema: sa, EventTime: "t", NotNull: []string{"id", "key", "t"}},
			"b": {Stream: b, Schema: sb, EventTime: "t", NotNull: []string{"id", "key", "t"}},
		})
	if err != nil {
		t.Fatal(err)
	}
	v := views["j"]
	stream.To(v.Stream, "out", file.New(filepath.Join(dir, "out"), func(dst []byte, r row.Row) ([]byte, error) { return v.Schema.AppendJSON(dst, r), nil }))
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
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
	var out []string
	for _, l := range lines {
		out = append(out, string(l.Text))
	}
	slices.Sort(out)
	return out, plan.Describe()
}

// config.AddSQL (a Go program's tables, parallelism 2): the until join
// commits the reference inner join's rows (NULL and early expiries too).
func TestUntilAddSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	got, plan := reviewAddSQLUntil(t, "a.exp")
	if !strings.Contains(plan, "interval join [0s, left exp]") {
		t.Fatalf("plan:\n%s", plan)
	}
	want, ref := reviewAddSQLUntil(t, "a.exp + INTERVAL '0' SECOND")
	if !strings.Contains(ref, "inner join") {
		t.Fatalf("reference plan:\n%s", ref)
	}
	if !slices.Equal(got, want) || len(got) < 100 {
		missing, extra := diffLines(want, got)
		t.Fatalf("until %d rows, reference %d: missing %v, extra %v", len(got), len(want), head(missing, 5), head(extra, 5))
	}
	t.Logf("%d rows alike", len(got))
}
