//go:build iceberg

package iceberg_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// dsn is the PostgreSQL database that holds the tests' SQL catalog.
func dsn() string {
	if d := os.Getenv("INGEST_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

// fixture is a test's catalog and table: a namespace of its own, dropped
// when the test ends.
type fixture struct {
	cat       *sqlcat.Catalog
	uri       string // the sinks' catalog uri
	warehouse string
	ns        string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db, err := sql.Open("pgx", dsn())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL (the SQL catalog) is not reachable at %s (%v); start it, or set INGEST_POSTGRES_DSN, to run this test", dsn(), err)
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = db.Close() })
	f := &fixture{uri: dsn(), warehouse: t.TempDir(), ns: fmt.Sprintf("icetest_%d", time.Now().UnixNano())}
	f.cat, err = sqlcat.NewCatalog("ingest", db, sqlcat.Postgres, iceberg.Properties{"init_catalog_tables": "true", "warehouse": "file://" + f.warehouse})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for tbl, err := range f.cat.ListTables(ctx, catalog.ToIdentifier(f.ns)) {
			if err == nil {
				_ = f.cat.DropTable(ctx, tbl)
			}
		}
		_ = f.cat.DropNamespace(ctx, catalog.ToIdentifier(f.ns))
	})
	return f
}

// config is a sink configuration for table name of the fixture's namespace.
func (f *fixture) config(name string, schema *row.Schema) ice.SinkConfig {
	return ice.SinkConfig{
		Catalog:   ice.CatalogConfig{Type: "sql", URI: f.uri, Warehouse: f.warehouse, Name: "ingest"},
		Namespace: f.ns, Table: name, CreateTable: true, Schema: schema, Pipeline: "icetest-" + name,
		TargetFileSize: 512 << 20,
	}
}

// scan reads the table's rows, each as the values of columns cols.
func (f *fixture) scan(t *testing.T, name string, cols ...string) [][]any {
	t.Helper()
	ctx := context.Background()
	tbl, err := f.cat.LoadTable(ctx, catalog.ToIdentifier(f.ns, name))
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scanning %s: %v", name, err)
	}
	defer at.Release()
	rd := array.NewTableReader(at, 1024)
	defer rd.Release()
	var out [][]any
	for rd.Next() {
		r := rd.RecordBatch()
		arrs := make([]arrow.Array, len(cols))
		for i, c := range cols {
			idx := r.Schema().FieldIndices(c)
			if len(idx) != 1 {
				t.Fatalf("table %s has no column %q", name, c)
			}
			arrs[i] = r.Column(idx[0])
		}
		for j := 0; j < int(r.NumRows()); j++ {
			vals := make([]any, len(cols))
			for i, a := range arrs {
				if a.IsNull(j) {
					continue
				}
				vals[i] = a.GetOneForMarshal(j)
			}
			out = append(out, vals)
		}
	}
	return out
}

func (f *fixture) table(t testing.TB, name string) *table.Table {
	t.Helper()
	tbl, err := f.cat.LoadTable(context.Background(), catalog.ToIdentifier(f.ns, name))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

var genSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

// failure is a failpoint that fails at the listed calls (from 1).
type failure struct {
	name, point string
	at          []int64
}

var failures = []failure{
	{name: "none"},
	{name: "prepare fails", point: "sink/iceberg/prepare", at: []int64{2, 5}},
	{name: "commit fails", point: "sink/iceberg/commit", at: []int64{1, 3}},
	{name: "after metadata before commit", point: "job/after-metadata-before-commit", at: []int64{1, 4}},
	{name: "after commit before cleanup", point: "job/after-commit-before-cleanup", at: []int64{2}},
	{name: "after snapshot before ack", point: "task/after-snapshot-before-ack", at: []int64{3, 8}},
}

func (fl failure) inject(t *testing.T) *atomic.Int64 {
	calls := &atomic.Int64{}
	if fl.point == "" {
		return calls
	}
	fail := map[int64]bool{}
	for _, n := range fl.at {
		fail[n] = true
	}
	t.Cleanup(failpoint.Enable(fl.point, func() error {
		if fail[calls.Add(1)] {
			return fmt.Errorf("failpoint %s: %w", fl.point, failpoint.ErrInjected)
		}
		return nil
	}))
	return calls
}

// run runs p with checkpoints every 15 ms and quick restarts; it returns
// the job's stats.
func run(t *testing.T, p *stream.Pipeline) runtime.Stats {
	t.Helper()
	ck := checkpoint.DefaultOptions()
	ck.Interval = 15 * time.Millisecond
	ck.TolerableFailures = 1000
	job, err := p.NewJob(stream.RunOptions{
		CheckpointDir: filepath.Join(t.TempDir(), "checkpoints"), Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	return job.Stats()
}

// TestIcebergAppendsExactlyOnce writes a bounded stream of 20,000 rows
// from two subtasks into a partitioned table while failures are injected
// at each step of the protocol; the table then holds every row exactly once.
func TestIcebergAppendsExactlyOnce(t *testing.T) {
	const n = 20000
	for _, fl := range failures {
		t.Run(fl.name, func(t *testing.T) {
			f := newFixture(t)
			calls := fl.inject(t)
			p := appendsPipeline(t, f.config("appends", genSchema), "icetest-appends", n)
			st := run(t, p)
			if fl.point != "" && calls.Load() < fl.at[0] {
				t.Fatalf("failpoint %s reached %d times, never at %v", fl.point, calls.Load(), fl.at)
			}
			if fl.point != "" && st.Restarts == 0 {
				t.Fatalf("the failure did not restart the job; stats %+v", st)
			}
			seen := make([]int, n)
			for _, r := range f.scan(t, "appends", "id", "key") {
				id := r[0].(int64)
				if id < 0 || id >= n {
					t.Fatalf("row with id %d, not in [0, %d)", id, n)
				}
				seen[id]++
			}
			lost, dup := 0, 0
			for id, c := range seen {
				switch {
				case c == 0:
					lost++
				case c > 1:
					dup++
					t.Logf("id %d written %d times", id, c)
				}
			}
			if lost > 0 || dup > 0 {
				t.Fatalf("%d of %d rows lost, %d repeated (restarts %d)", lost, n, dup, st.Restarts)
			}
			checkSummaries(t, f.table(t, "appends"), "icetest-appends")
		})
	}
}

// checkSummaries checks every snapshot records pipeline, job and checkpoint.
func checkSummaries(t *testing.T, tbl *table.Table, pipeline string) {
	t.Helper()
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) == 0 {
		t.Fatal("the table has no snapshot")
	}
	for _, s := range snaps {
		p := s.Summary.Properties
		if p["ingest.pipeline"] != pipeline || p["ingest.job-id"] == "" || p["ingest.checkpoint-id"] == "" {
			t.Errorf("snapshot %d: summary %v lacks the pipeline, job or checkpoint", s.SnapshotID, p)
		}
	}
}

// changelog is a deterministic changelog of keys changes: change id of key
// id%keys is its (id/keys)-th; every fifth change of a key deletes it, the
// change after a delete inserts it again, the others update its value.
func changelogRow(keys int64) func(id, key, value int64) row.Row {
	return func(id, _, _ int64) row.Row {
		k, m := id%keys, id/keys
		op := "update"
		switch {
		case m == 0 || m%5 == 0:
			op = "insert"
		case m%5 == 4:
			op = "delete"
		}
		return row.Row{row.IntValue(k), row.IntValue(id), row.StringValue(op)}
	}
}

var changelogSchema = &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.Int}, {Name: "v", Kind: row.Int}, {Name: "_op", Kind: row.String}}}

// TestIcebergChangelogExactlyOnce applies a changelog of inserts, updates,
// deletes and re-inserts of 50 keys, with failures injected, with and
// without a commit interval that groups checkpoints: the table then holds
// exactly each key's last row, and no deleted key.
func TestIcebergChangelogExactlyOnce(t *testing.T) {
	const n, keys = 6037, 50 // keys below 37 end inserted again, the others deleted
	gen, want := changelogRow(keys), changelogWant(n, keys)
	if len(want) != 37 {
		t.Fatalf("the oracle keeps %d keys, want 37", len(want))
	}
	for _, interval := range []time.Duration{0, 40 * time.Millisecond} {
		for _, fl := range failures {
			t.Run(fmt.Sprintf("%s/commit_interval=%v", fl.name, interval), func(t *testing.T) {
				f := newFixture(t)
				calls := fl.inject(t)
				cfg := f.config("changes", changelogSchema)
				cfg.Key, cfg.Op, cfg.CommitInterval = []string{"k"}, "_op", interval
				sink, err := ice.NewSink("lake", cfg)
				if err != nil {
					t.Fatal(err)
				}
				src, err := datagen.New(datagen.Config{Count: n, Rate: 20000}, gen)
				if err != nil {
					t.Fatal(err)
				}
				// One subtask end to end: the changes of a key stay in order.
				p := stream.New("icetest-changes", stream.DefaultParallelism(1))
				stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))
				st := run(t, p)
				if fl.point != "" && calls.Load() < fl.at[0] {
					t.Fatalf("failpoint %s reached %d times, never at %v", fl.point, calls.Load(), fl.at)
				}
				got := checkChangelog(t, f, "changes", want)
				snaps := f.table(t, "changes").Metadata().Snapshots()
				t.Logf("%d keys, %d snapshots, %d restarts", len(got), len(snaps), st.Restarts)
				checkSummaries(t, f.table(t, "changes"), "icetest-changes")
			})
		}
	}
}

// changelogWant is each key's last value after the first n changes of
// changelogRow(keys); a key whose last change deleted it is absent.
func changelogWant(n, keys int64) map[int64]int64 {
	want := map[int64]int64{}
	gen := changelogRow(keys)
	for id := int64(0); id < n; id++ {
		r := gen(id, 0, 0)
		if r[2].Str() == "delete" {
			delete(want, r[0].Int())
		} else {
			want[r[0].Int()] = r[1].Int()
		}
	}
	return want
}

// checkChangelog checks that table name of f holds exactly one row (k, v)
// per key of want, with its value, and returns what it holds.
func checkChangelog(t *testing.T, f *fixture, name string, want map[int64]int64) map[int64]int64 {
	t.Helper()
	got := map[int64]int64{}
	for _, r := range f.scan(t, name, "k", "v") {
		k, v := r[0].(int64), r[1].(int64)
		if old, dup := got[k]; dup {
			t.Errorf("key %d has two rows: v=%d and v=%d", k, old, v)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %d: v=%d in the table, want %d", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %d (v=%d) is in the table, but its last change deleted it", k, v)
		}
	}
	return got
}

// appendsPipeline writes n rows (id, key, value) from two subtasks through
// a sink of cfg into its table, partitioned by bucket(4, key).
func appendsPipeline(t *testing.T, cfg ice.SinkConfig, name string, n int64) *stream.Pipeline {
	t.Helper()
	cfg.PartitionBy = []ice.Partition{{Transform: "bucket", Param: 4, Column: "key"}}
	sink, err := ice.NewSink("lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(datagen.Config{Count: n, Rate: 40000, Keys: 10}, func(id, key, value int64) row.Row {
		return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
	})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New(name, stream.DefaultParallelism(2))
	stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))
	return p
}

// changelogPipeline applies n changes of keys keys (changelogRow) on one
// subtask, so that a key's changes stay in order, through a sink of cfg
// keyed by k, with a commit interval of 40 ms.
func changelogPipeline(t *testing.T, cfg ice.SinkConfig, name string, n, keys int64) *stream.Pipeline {
	t.Helper()
	cfg.Key, cfg.Op, cfg.CommitInterval = []string{"k"}, "_op", 40*time.Millisecond
	sink, err := ice.NewSink("lake", cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(datagen.Config{Count: n, Rate: 20000}, changelogRow(keys))
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New(name, stream.DefaultParallelism(1))
	stream.To(stream.From(p, "gen", src), "lake", stream.Sink[row.Row](sink))
	return p
}

// checkAppends checks the table appends holds each id below n once.
func checkAppends(t *testing.T, f *fixture, n int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, r := range f.scan(t, "appends", "id") {
		seen[r[0].(int64)]++
	}
	for id := range n {
		if seen[id] != 1 {
			t.Fatalf("id %d written %d times (%d distinct ids of %d)", id, seen[id], len(seen), n)
		}
	}
	if len(seen) != int(n) {
		t.Fatalf("%d distinct ids, want %d", len(seen), n)
	}
}
