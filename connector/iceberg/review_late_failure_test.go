//go:build iceberg

package iceberg_test

import (
	"context"
	"testing"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"

	"github.com/ingest-engine/ingest/row"
)

// TestReviewChangelogIntoV1Table: a changelog into an existing format
// version 1 table (made by another engine). Open accepts it; inserts are
// published; the first update fails every commit from then on.
func TestReviewChangelogIntoV1Table(t *testing.T) {
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
	h := newHarness(t, cfg, "job1", 1) // Open accepts the table
	h.write(0, change(1, 1, "insert"))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	h.write(0, change(1, 2, "update"))
	err := h.commit(ctx, h.barrier(2))
	if err != nil {
		t.Errorf("a changelog the sink accepted at Open fails at its first update: %v", err)
	}
}

// TestReviewNullKey: a changelog record whose key is NULL must fail the
// job, not be dropped or written.
func TestReviewNullKey(t *testing.T) {
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
