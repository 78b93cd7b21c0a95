//go:build iceberg

package iceberg_test

import (
	"context"
	"strings"
	"testing"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
)

// TestIcebergPartitionSpecEvolution: the operator evolves the table's
// partition spec (bucket(4, k) -> bucket(8, k)) between two runs of a
// changelog pipeline. Updates and deletes of the second run, written under
// the new spec, would not replace the rows the first run wrote: the sink
// refuses to open.
func TestIcebergPartitionSpecEvolution(t *testing.T) {
	for _, evolve := range []string{"bucket8", "unpartition"} {
		t.Run(evolve, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.config("evolve", changelogSchema)
			cfg.Key, cfg.Op = []string{"k"}, "_op"
			cfg.PartitionBy = []ice.Partition{{Transform: "bucket", Param: 4, Column: "k"}}
			ctx := context.Background()
			h := newHarness(t, cfg, "job1", 1)
			for k := int64(0); k < 10; k++ {
				h.write(0, change(k, 1, "insert"))
			}
			if err := h.commit(ctx, h.barrier(1)); err != nil {
				t.Fatal(err)
			}
			// the operator evolves the spec while the pipeline is stopped
			tbl, err := f.cat.LoadTable(ctx, catalog.ToIdentifier(f.ns, "evolve"))
			if err != nil {
				t.Fatal(err)
			}
			tx := tbl.NewTransaction()
			us := tx.UpdateSpec(true)
			us.RemoveField("k_bucket")
			if evolve == "bucket8" {
				us.AddField("k", iceberg.BucketTransform{NumBuckets: 8}, "k_bucket8")
			}
			if err := us.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			// The second run is refused: its deletes, under the new spec,
			// would miss the rows of files under the old one.
			if err := openErr(t, cfg, "job1"); err == nil || !strings.Contains(err.Error(), "files of partition spec") {
				t.Fatalf("a changelog into a table whose spec changed: %v; want it refused", err)
			}
		})
	}
}
