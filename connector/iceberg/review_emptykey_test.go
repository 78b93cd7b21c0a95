//go:build iceberg

package iceberg_test

import (
	"context"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// TestReviewEmptyKeyChangelog: an aggregate with key: [] (one group of
// everything) is a changelog with an empty key. Its table must hold one
// row, the latest result.
func TestReviewEmptyKeyChangelog(t *testing.T) {
	sch := &row.Schema{Fields: []row.Field{{Name: "n", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	f := newFixture(t)
	cfg := f.config("total", sch)
	cfg.Key, cfg.Op = []string{}, "_op"
	h := newHarness(t, cfg, "job1", 1)
	ctx := context.Background()
	h.write(0, row.Row{row.IntValue(1), row.StringValue("insert")}, row.Row{row.IntValue(2), row.StringValue("update")})
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	h.write(0, row.Row{row.IntValue(3), row.StringValue("update")})
	err := h.commit(ctx, h.barrier(2))
	h.write(0, row.Row{row.IntValue(4), row.StringValue("update")})
	if err == nil {
		err = h.commit(ctx, h.barrier(3))
	}
	rows := f.scan(t, "total", "n")
	t.Logf("err=%v table=%v", err, rows)
	if err == nil && len(rows) != 1 {
		t.Errorf("one group's changelog: the table holds %d rows %v, want one (n=4)", len(rows), rows)
	}
}
