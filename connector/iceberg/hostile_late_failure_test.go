//go:build iceberg

package iceberg_test

import (
	"context"
	"strings"
	"testing"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"

	"github.com/ingest-engine/ingest/row"
)

// TestIcebergChangelogIntoV1Table: a changelog into an existing format
// version 1 table (made by another engine). Open accepts it; inserts are
// published; the first update fails every commit from then on.
func TestIcebergChangelogIntoV1Table(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cat.CreateNamespace(ctx, catalog.ToIdentifier(f.ns), nil); err != nil {
		t.Fatal(err)
	}
	sch := iceberg.NewSchemaWithIdentifiers(0, []int{1},
		iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "v", Type: iceberg.PrimitiveTypes.Int64})
	if _, err := f.cat.CreateTable(ctx, catalog.ToIdentifier(f.ns, "v1"), sch, catalog.WithProperties(iceberg.Properties{"format-version": "1"})); err != nil {
		t.Fatal(err)
	}
	cfg := f.config("v1", changelogSchema)
	cfg.Key, cfg.Op, cfg.CreateTable = []string{"k"}, "_op", false
	if err := openErr(t, cfg, "job1"); err == nil || !strings.Contains(err.Error(), "format version 1") {
		t.Fatalf("a changelog into a format version 1 table: %v; want it refused when the sink opens", err)
	}
}

// TestIcebergNullKey: a changelog record whose key is NULL must fail the
// job, not be dropped or written.
func TestIcebergNullKey(t *testing.T) {
	f := newFixture(t)
	cfg := f.config("nullkey", changelogSchema)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	s, err := newSinkForTest(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = s
	h := newHarness(t, cfg, "job1", 1)
	var b = []row.Row{{row.Value{}, row.IntValue(1), row.StringValue("insert")}}
	err = h.subs[0].Write(batchOf(b))
	if err == nil {
		t.Errorf("a NULL key was accepted")
	}
	t.Logf("NULL key: %v", err)
}
