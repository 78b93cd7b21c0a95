//go:build iceberg

package e2e

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	"github.com/ingest-engine/ingest/stream"
)

// TestIcebergSQLiteCatalogFromYAML: a pipeline whose Iceberg catalog is a
// SQLite file named relative to the pipeline file (uri: sqlite:catalog.db),
// no server at all: the file is made beside the pipeline, and the table it
// describes holds every generated row once.
func TestIcebergSQLiteCatalogFromYAML(t *testing.T) {
	const count = 5000
	work := t.TempDir()
	job := yamlJob(t, work, `pipeline: iceberg-sqlite
checkpoint:
  interval: 50ms
  dir: ckpts
sources:
  gen: {type: datagen, count: 5000, rate: 20000, keys: 7}
sinks:
  lake:
    type: iceberg
    input: gen
    parallelism: 2
    catalog:
      uri: sqlite:catalog.db
      warehouse: warehouse
    table: lake.events
    create_table: true
`, func(o *stream.RunOptions) {})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(work, "catalog.db")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the catalog file beside the pipeline: %v", err)
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(30000)"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("ingest", db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + filepath.Join(work, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier("lake", "events"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	rd := array.NewTableReader(at, 4096)
	defer rd.Release()
	seen := map[int64]int{}
	for rd.Next() {
		rec := rd.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		for j := 0; j < ids.Len(); j++ {
			seen[ids.Value(j)]++
		}
	}
	for id := range int64(count) {
		if seen[id] != 1 {
			t.Fatalf("id %d is in the table %d times (%d ids)", id, seen[id], len(seen))
		}
	}
	if len(seen) != count {
		t.Fatalf("%d ids in the table, want %d", len(seen), count)
	}
}
