//go:build iceberg

package iceberg_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"testing"
)

// TestIcebergMissingStagedFile: a data file a committable names is gone
// before the commit (deleted by an operator cleaning the warehouse, lost by
// the object store). The commit must fail (or, with lost output accepted,
// leave the file out); it must not publish a reference to a missing file,
// which makes every scan of the table fail.
func TestIcebergMissingStagedFile(t *testing.T) {
	f := newFixture(t)
	h := newHarness(t, f.config("lost", kvSchema), "job1", 1)
	ctx := context.Background()
	h.write(0, ints(1, 1), ints(2, 2))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	h.write(0, ints(3, 3))
	c := h.barrier(2)
	var cm struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal(c.Committables[0], &cm); err != nil || len(cm.Files) == 0 {
		t.Fatalf("committable: %v %s", err, c.Committables[0])
	}
	u, err := url.Parse(cm.Files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(u.Path); err != nil {
		t.Fatal(err)
	}
	err = h.commit(ctx, c)
	t.Logf("commit of a checkpoint whose data file is gone: err=%v", err)
	tbl := f.table(t, "lost")
	at, serr := tbl.Scan().ToArrowTable(ctx)
	if serr == nil {
		t.Logf("scan: %d rows", at.NumRows())
		at.Release()
	}
	if err == nil && serr != nil {
		t.Errorf("the commit succeeded and published a missing file: every scan of the table now fails: %v", serr)
	}
}
