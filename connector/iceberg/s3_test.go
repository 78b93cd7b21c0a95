//go:build iceberg

package iceberg_test

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/storage/blob"
)

// s3Fixture is a SQLite catalog whose warehouse is s3://lake/wh on an
// in-process S3 server (gofakes3), and the catalog properties that reach
// it.
type s3Fixture struct {
	*fixture
	props   map[string]string
	objects *blob.Objects
}

func newS3Fixture(t *testing.T) *s3Fixture {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("lake"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	props := map[string]string{
		"s3.endpoint": srv.URL, "s3.region": "us-east-1", "s3.path-style-access": "true",
		"s3.access-key-id": "test-key", "s3.secret-access-key": "test-secret",
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(30000)"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	f := &fixture{uri: ice.SQLitePrefix + path, warehouse: "s3://lake/wh", ns: "icetest"}
	catProps := iceberg.Properties{"init_catalog_tables": "true", "warehouse": f.warehouse}
	for k, v := range props {
		catProps[k] = v
	}
	if f.cat, err = sqlcat.NewCatalog("ingest", db, sqlcat.SQLite, catProps); err != nil {
		t.Fatal(err)
	}
	objects, err := blob.OpenObjects(context.Background(), "s3://test-key:test-secret@lake?endpoint="+url.QueryEscape(srv.URL)+"&region=us-east-1&use_path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = objects.Close() })
	return &s3Fixture{fixture: f, props: props, objects: objects}
}

func (f *s3Fixture) config(name string, schema *row.Schema) ice.SinkConfig {
	cfg := f.fixture.config(name, schema)
	cfg.Catalog.Properties = f.props
	return cfg
}

// unreferenced lists the table's objects under its data directory that no
// manifest of its current snapshot names.
func (f *s3Fixture) unreferenced(t *testing.T, name string) (files, data int) {
	t.Helper()
	tbl := f.table(t, name)
	ctx := context.Background()
	fsys, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		mans, err := snap.Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			for e, err := range m.Entries(fsys, true) {
				if err != nil {
					t.Fatal(err)
				}
				referenced[e.DataFile().FilePath()] = true
			}
		}
	}
	loc := strings.TrimPrefix(tbl.Location(), "s3://lake/")
	keys, err := f.objects.List(ctx, loc+"/data/")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	for _, k := range keys {
		data++
		if !referenced["s3://lake/"+k] {
			t.Errorf("object %s is under the table's data directory but in no manifest of its current snapshot", k)
			files++
		}
	}
	return files, data
}

// An Iceberg table in an S3 warehouse (an in-process S3 server), through
// the engine's own s3 file IO: appends from two subtasks and a changelog
// with a commit interval, with failures injected between prepare and
// commit, before the catalog commit and after a checkpoint completed. The
// tables then hold exactly the input, every snapshot names its checkpoint,
// and no data object is left that the table does not reference.
func TestIcebergS3Warehouse(t *testing.T) {
	for _, fl := range []failure{failures[0], failures[1], failures[2], failures[3]} {
		t.Run("appends/"+fl.name, func(t *testing.T) {
			const n = 20000
			f := newS3Fixture(t)
			calls := fl.inject(t)
			st := run(t, appendsPipeline(t, f.config("appends", genSchema), "icetest-s3", n))
			if fl.point != "" && (calls.Load() < fl.at[0] || st.Restarts == 0) {
				t.Fatalf("failpoint %s reached %d times, %d restarts", fl.point, calls.Load(), st.Restarts)
			}
			checkAppends(t, f.fixture, n)
			checkSummaries(t, f.table(t, "appends"), "icetest-appends")
			if stray, data := f.unreferenced(t, "appends"); data == 0 || stray > 0 {
				t.Fatalf("%d data objects, %d of them unreferenced", data, stray)
			}
		})
	}
	t.Run("changelog", func(t *testing.T) {
		const n, keys = 6037, 50
		want := changelogWant(n, keys)
		f := newS3Fixture(t)
		calls := failures[2].inject(t)
		st := run(t, changelogPipeline(t, f.config("changes", changelogSchema), "icetest-s3-changes", n, keys))
		if calls.Load() == 0 || st.Restarts == 0 {
			t.Fatalf("the commit failure was not injected (%d calls, %d restarts)", calls.Load(), st.Restarts)
		}
		checkChangelog(t, f.fixture, "changes", want)
		checkSummaries(t, f.table(t, "changes"), "icetest-changes")
		if stray, _ := f.unreferenced(t, "changes"); stray > 0 {
			t.Fatalf("%d unreferenced data objects", stray)
		}
	})
}
