//go:build iceberg

package iceberg_test

import (
	"database/sql"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
)

// newSQLiteFixture is a fixture whose SQL catalog is a SQLite file of the
// test's own: no server needed.
func newSQLiteFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(30000)"}
	db, err := sql.Open("sqlite3", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	f := &fixture{uri: ice.SQLitePrefix + path, warehouse: filepath.Join(dir, "warehouse"), ns: "icetest"}
	f.cat, err = sqlcat.NewCatalog("ingest", db, sqlcat.SQLite, iceberg.Properties{"init_catalog_tables": "true", "warehouse": "file://" + f.warehouse})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A SQL catalog in a SQLite file: appends from two subtasks and a
// changelog with a commit interval, with failures injected between prepare
// and commit and after a checkpoint completed; the tables then hold exactly
// the input. The subtasks and the committer share the file's one
// connection.
func TestIcebergSQLiteCatalog(t *testing.T) {
	for _, fl := range []failure{failures[0], failures[2], failures[3]} {
		t.Run("appends/"+fl.name, func(t *testing.T) {
			const n = 20000
			f := newSQLiteFixture(t)
			calls := fl.inject(t)
			st := run(t, appendsPipeline(t, f.config("appends", genSchema), "icetest-sqlite", n))
			if fl.point != "" && (calls.Load() < fl.at[0] || st.Restarts == 0) {
				t.Fatalf("failpoint %s reached %d times, %d restarts", fl.point, calls.Load(), st.Restarts)
			}
			checkAppends(t, f, n)
			checkSummaries(t, f.table(t, "appends"), "icetest-appends")
		})
		t.Run("changelog/"+fl.name, func(t *testing.T) {
			const n, keys = 6037, 50
			f := newSQLiteFixture(t)
			calls := fl.inject(t)
			st := run(t, changelogPipeline(t, f.config("changes", changelogSchema), "icetest-sqlite-changes", n, keys))
			if fl.point != "" && calls.Load() < fl.at[0] {
				t.Fatalf("failpoint %s reached %d times", fl.point, calls.Load())
			}
			got := checkChangelog(t, f, "changes", changelogWant(n, keys))
			t.Logf("%d keys, %d restarts", len(got), st.Restarts)
		})
	}
}

// A sqlite: uri without a path is refused when the sink opens, naming the
// form it wants.
func TestIcebergSQLiteURIWithoutPath(t *testing.T) {
	f := &fixture{uri: ice.SQLitePrefix, warehouse: t.TempDir(), ns: "x"}
	err := openErr(t, f.config("t", genSchema), "job1")
	if err == nil || !strings.Contains(err.Error(), `"sqlite:" names no file: want sqlite:<path`) {
		t.Fatalf("error %v", err)
	}
}
