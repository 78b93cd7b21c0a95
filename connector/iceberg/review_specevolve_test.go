//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
)

// TestReviewPartitionSpecEvolution: the operator evolves the table's
// partition spec (bucket(4, k) -> bucket(8, k)) between two runs of a
// changelog pipeline. Updates and deletes of the second run must still
// replace the rows the first run wrote.
func TestReviewPartitionSpecEvolution(t *testing.T) {
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
			// second run (same job: recovery of checkpoint 1, then on)
			h2 := newHarness(t, cfg, "job1", 1)
			for k := int64(0); k < 10; k++ {
				if k%2 == 0 {
					h2.write(0, change(k, 2, "update"))
				} else {
					h2.write(0, change(k, 1, "delete"))
				}
			}
			if err := h2.commit(ctx, h2.barrier(2)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range f.scan(t, "evolve", "k", "v") {
				got = append(got, fmt.Sprint(r[0], "=", r[1]))
			}
			sort.Strings(got)
			want := []string{"0=2", "2=2", "4=2", "6=2", "8=2"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after a partition spec change, updates of 0,2,4,6,8 and deletes of the odd keys leave %v, want %v", got, want)
			}
		})
	}
}
