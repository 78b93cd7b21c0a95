//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
)

// newRESTFixture is a SQLite fixture (newSQLiteFixture) with a REST catalog
// server in front of its SQL catalog: sinks reach the catalog through the
// server (restConfig); the test reads it directly (f.cat, f.scan).
func newRESTFixture(t *testing.T) (*fixture, *restServer) {
	t.Helper()
	f := newSQLiteFixture(t)
	return f, newRESTServer(t, f.cat, (&url.URL{Scheme: "file", Path: f.warehouse}).String())
}

// restConfig is f.config(name, schema) with the REST server as the catalog.
func restConfig(f *fixture, srv *restServer, name string, schema *row.Schema) ice.SinkConfig {
	cfg := f.config(name, schema)
	// A REST catalog takes the warehouse as it is given: its location here
	// (TestIcebergRESTWarehouseName gives its name).
	cfg.Catalog = ice.CatalogConfig{Type: "rest", URI: srv.URL, Warehouse: "file://" + f.warehouse, Name: "ingest"}
	return cfg
}

// restCommit is the REST endpoint of a commit to a table.
const restCommit = "POST /v1/namespaces/{namespace}/tables/{table}"

// checkServed checks that the server was asked for nothing it does not
// implement and that the sink committed through it.
func checkServed(t *testing.T, srv *restServer) {
	t.Helper()
	t.Logf("REST answers: %s", srv.summary())
	if ni := srv.outsideServed(); len(ni) > 0 {
		t.Errorf("requests the server does not implement: %v", ni)
	}
	if srv.count(restCommit, http.StatusOK) == 0 {
		t.Error("no commit went through the REST server")
	}
}

// TestIcebergRESTCatalog is TestIcebergSQLiteCatalog with the sink talking
// to an Iceberg REST catalog server (iceberg-go's REST client against
// restServer, in front of the SQLite catalog): appends from two subtasks
// and a changelog with a commit interval, with failures injected between
// prepare and commit and after a checkpoint completed; the tables then hold
// exactly the input, and every snapshot records its checkpoint. The server
// then also loses the answers to commits it took (a 504 from a proxy): the
// sink must find them in the table rather than publish their files again.
func TestIcebergRESTCatalog(t *testing.T) {
	lost := failure{name: "commit answers lost"}
	for _, fl := range []failure{failures[0], failures[2], failures[3], lost} {
		// loseAnswers makes the server lose the answers to the second and
		// fourth commits it takes.
		loseAnswers := func(srv *restServer) {
			if fl.name == lost.name {
				srv.setLoseAnswer(func(n int) bool { return n == 2 || n == 4 })
			}
		}
		t.Run("appends/"+fl.name, func(t *testing.T) {
			const n = 20000
			f, srv := newRESTFixture(t)
			calls := fl.inject(t)
			loseAnswers(srv)
			st := run(t, appendsPipeline(t, restConfig(f, srv, "appends", genSchema), "icetest-rest", n))
			if fl.point != "" && (calls.Load() < fl.at[0] || st.Restarts == 0) {
				t.Fatalf("failpoint %s reached %d times, %d restarts", fl.point, calls.Load(), st.Restarts)
			}
			if fl.name == lost.name && srv.count(restCommit, http.StatusGatewayTimeout) == 0 {
				t.Fatalf("no commit answer was lost: %s", srv.summary())
			}
			checkAppends(t, f, n)
			checkSummaries(t, f.table(t, "appends"), "icetest-appends")
			checkServed(t, srv)
			t.Logf("%d snapshots, %d restarts", len(f.table(t, "appends").Metadata().Snapshots()), st.Restarts)
		})
		t.Run("changelog/"+fl.name, func(t *testing.T) {
			const n, keys = 6037, 50
			f, srv := newRESTFixture(t)
			calls := fl.inject(t)
			loseAnswers(srv)
			st := run(t, changelogPipeline(t, restConfig(f, srv, "changes", changelogSchema), "icetest-rest-changes", n, keys))
			if fl.point != "" && calls.Load() < fl.at[0] {
				t.Fatalf("failpoint %s reached %d times", fl.point, calls.Load())
			}
			if fl.name == lost.name && srv.count(restCommit, http.StatusGatewayTimeout) == 0 {
				t.Fatalf("no commit answer was lost: %s", srv.summary())
			}
			got := checkChangelog(t, f, "changes", changelogWant(n, keys))
			checkSummaries(t, f.table(t, "changes"), "icetest-changes")
			checkServed(t, srv)
			t.Logf("%d keys, %d snapshots, %d restarts", len(got), len(f.table(t, "changes").Metadata().Snapshots()), st.Restarts)
		})
	}
}

// appendKV appends rows (k, v) to table ident of cat, as another writer
// would: through the REST server, or the SQL catalog behind it.
func appendKV(ctx context.Context, cat catalog.Catalog, ident table.Identifier, keys []int64, v int64) error {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, k := range keys {
		for i := 0; i < sc.NumFields(); i++ {
			switch sc.Field(i).Name {
			case "k":
				b.Field(i).(*array.Int64Builder).Append(k)
			case "v":
				b.Field(i).(*array.Int64Builder).Append(v)
			default:
				b.Field(i).AppendNull()
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	tx := tbl.NewTransaction()
	if err := tx.AppendTable(ctx, at, 1024, iceberg.Properties{"writer": "foreign"}); err != nil {
		return err
	}
	_, err = tx.Commit(ctx)
	return err
}

// TestIcebergRESTForeignWriter is TestIcebergCommitRacesForeignWriter
// through the REST catalog: another writer appends keys 100..102 to the
// table between two of the sink's commits, either before the sink's next
// commit starts (between) or after the sink loaded the table and staged its
// commit (racing: the sink's commit then fails its requirements and the
// server answers 409). The other writer goes through the REST server too,
// or straight to the SQL catalog behind it. Its rows must stay in the
// table beside the sink's.
func TestIcebergRESTForeignWriter(t *testing.T) {
	for _, mode := range []string{"appends", "changelog", "changelog-grouped"} {
		for _, when := range []string{"between", "racing"} {
			for _, via := range []string{"rest", "sql"} {
				t.Run(mode+"/"+when+"/"+via, func(t *testing.T) {
					testRESTForeignWriter(t, mode, when, via)
				})
			}
		}
	}
}

func testRESTForeignWriter(t *testing.T, mode, when, via string) {
	f, srv := newRESTFixture(t)
	ctx := context.Background()
	name := "race"
	ident := catalog.ToIdentifier(f.ns, name)
	var other catalog.Catalog = f.cat
	if via == "rest" {
		rc, err := rest.NewCatalog(ctx, "foreign", srv.URL, rest.WithWarehouseLocation(srv.warehouse))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.Close() })
		other = rc
	}
	foreign := func() {
		if err := appendKV(ctx, other, ident, []int64{100, 101, 102}, 7); err != nil {
			t.Errorf("foreign append: %v", err)
		}
	}
	cfg := restConfig(f, srv, name, kvSchema)
	if mode != "appends" {
		cfg = restConfig(f, srv, name, changelogSchema)
		cfg.Key, cfg.Op = []string{"k"}, "_op"
	}
	h := newHarness(t, cfg, "job1", 1)
	if mode == "appends" {
		h.write(0, ints(1, 1))
	} else {
		h.write(0, change(1, 1, "insert"))
	}
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	// Next commit: an update of key 1 (and for grouped, two checkpoints in
	// one commit), while the other writer appends keys 100..102.
	if mode == "changelog-grouped" {
		h.cm = nil
	}
	conflicts := srv.count(restCommit, http.StatusConflict)
	var fired int
	if when == "racing" {
		t.Cleanup(failpoint.Enable("sink/iceberg/commit", func() error {
			if fired++; fired == 1 {
				foreign()
			}
			return nil
		}))
	}
	var c = h.barrier(2)
	switch mode {
	case "appends":
		h.write(0, ints(2, 2))
		c = h.barrier(3)
	case "changelog":
		h.write(0, change(1, 2, "update"), change(2, 2, "insert"))
		c = h.barrier(3)
	case "changelog-grouped":
		h.write(0, change(1, 2, "update"))
		_ = h.barrier(3)
		h.write(0, change(2, 2, "insert"))
		c = h.barrier(4)
	}
	if h.cm == nil {
		h.cm = h.sink.Committer()
	}
	if when == "between" {
		foreign()
	}
	err := h.commit(ctx, c)
	t.Logf("commit with a foreign append %s: err=%v; REST answers: %s", when, err, srv.summary())
	rows := func() []string {
		var got []string
		for _, r := range f.scan(t, name, "k", "v") {
			got = append(got, fmt.Sprint(r[0], "=", r[1]))
		}
		sort.Strings(got)
		return got
	}
	want := []string{"100=7", "101=7", "102=7", "1=1", "2=2"}
	if mode != "appends" {
		want = []string{"100=7", "101=7", "102=7", "1=2", "2=2"}
	}
	sort.Strings(want)
	if got := rows(); err == nil && !slices.Equal(got, want) {
		t.Errorf("commit succeeded, table %v, want %v", got, want)
	}
	if err != nil {
		// a failed commit must be recoverable: a re-commit (as the
		// recovery does) publishes the sink's rows
		err = h.sink.Committer().Commit(ctx, "job1", c)
		if got := rows(); err != nil || !slices.Equal(got, want) {
			t.Errorf("re-commit: err=%v, table %v, want %v", err, got, want)
		}
	}
	if when == "racing" && srv.count(restCommit, http.StatusConflict) == conflicts {
		t.Errorf("the sink's commit never conflicted with the foreign append (failpoint fired %d times)", fired)
	}
	var foreignSnaps, sinkSnaps int
	for _, s := range f.table(t, name).Metadata().Snapshots() {
		switch {
		case s.Summary != nil && s.Summary.Properties["writer"] == "foreign":
			foreignSnaps++
		case s.Summary != nil && s.Summary.Properties["ingest.checkpoint-id"] != "":
			sinkSnaps++
		default:
			t.Errorf("snapshot %d records neither writer: %v", s.SnapshotID, s.Summary)
		}
	}
	if foreignSnaps != 1 || sinkSnaps == 0 {
		t.Errorf("%d foreign snapshots, %d of the sink's", foreignSnaps, sinkSnaps)
	}
	if ni := srv.outsideServed(); len(ni) > 0 {
		t.Errorf("requests the server does not implement: %v", ni)
	}
}

// TestIcebergRESTWarehouseName: REST catalogs such as Polaris and Lakekeeper
// know a warehouse by its name, which iceberg-go's client sends as the
// config request's warehouse parameter (the spec's "warehouse location or
// identifier"). A sink whose warehouse is that name must reach the catalog
// with it. It fails while the sink makes every warehouse a file:// URL
// (sink.go, warehouseURL): the server is asked for warehouse file://lake.
func TestIcebergRESTWarehouseName(t *testing.T) {
	f, srv := newRESTFixture(t)
	cfg := restConfig(f, srv, "named", kvSchema)
	cfg.Catalog.Warehouse = srv.warehouseName
	err := openErr(t, cfg, "job1")
	if err != nil {
		t.Errorf("a sink with warehouse %q: %v\nthe config requests asked for warehouse %q",
			cfg.Catalog.Warehouse, err, strings.Join(srv.requestedWarehouses(), ", "))
	}
}
