//go:build iceberg

package iceberg_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// TestIcebergEmptyKeyChangelog: an aggregate with key: [] (one group of
// everything) is a changelog with an empty key, which equality deletes
// cannot apply: the sink refuses it when it is made, not at the first
// update.
func TestIcebergEmptyKeyChangelog(t *testing.T) {
	sch := &row.Schema{Fields: []row.Field{{Name: "n", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	f := newFixture(t)
	cfg := f.config("total", sch)
	cfg.Key, cfg.Op = []string{}, "_op"
	if err := openErr(t, cfg, "job1"); err == nil || !strings.Contains(err.Error(), "has no key") {
		t.Fatalf("a changelog without key: %v; want it refused", err)
	}
}
