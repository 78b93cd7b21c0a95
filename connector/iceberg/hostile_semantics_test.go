//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/row"
)

var kvSchema = &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.Int}, {Name: "v", Kind: row.Int}}}

// TestIcebergAbandonKeepsPublishedFiles: a pipeline whose name holds
// characters that url.PathEscape changes. After a commit, Abandon (what a
// recovery runs) must delete none of the files the table references.
func TestIcebergAbandonKeepsPublishedFiles(t *testing.T) {
	for _, name := range []string{"plain", "my pipeline", "orders/v2", "100%", "café"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			tbl := fmt.Sprintf("t%d", time.Now().UnixNano())
			cfg := f.config(tbl, kvSchema)
			cfg.Pipeline = name
			h := newHarness(t, cfg, "job1", 1)
			h.write(0, ints(1, 10), ints(2, 20))
			ctx := context.Background()
			if err := h.commit(ctx, h.barrier(1)); err != nil {
				t.Fatal(err)
			}
			if got := len(f.scan(t, tbl, "k", "v")); got != 2 {
				t.Fatalf("before Abandon: %d rows, want 2", got)
			}
			n, err := h.cm.Abandon(ctx, "job1")
			if err != nil {
				t.Fatalf("Abandon: %v", err)
			}
			if n != 0 {
				t.Errorf("Abandon deleted %d files, but every file the job wrote is published", n)
			}
			rows := f.scan(t, tbl, "k", "v")
			if len(rows) != 2 {
				t.Fatalf("after Abandon: %d rows, want 2", len(rows))
			}
		})
	}
}

// TestIcebergChangelogGroupedCommit: one commit publishes the files of
// several checkpoints (commit_interval grouping: the earlier commits were
// held back). Each checkpoint's changes must apply in order.
func TestIcebergChangelogGroupedCommit(t *testing.T) {
	type step []row.Row // the changes of one checkpoint
	cases := []struct {
		name  string
		steps []step
		want  map[int64]int64
	}{
		{"insert/delete/reinsert", []step{{change(1, 1, "insert")}, {change(1, 1, "delete")}, {change(1, 3, "insert")}}, map[int64]int64{1: 3}},
		{"insert/update/update", []step{{change(1, 1, "insert")}, {change(1, 2, "update")}, {change(1, 3, "update")}}, map[int64]int64{1: 3}},
		{"insert/delete", []step{{change(1, 1, "insert"), change(2, 2, "insert")}, {change(1, 1, "delete")}}, map[int64]int64{2: 2}},
		{"same checkpoint delete+insert", []step{{change(1, 1, "insert")}, {change(1, 1, "delete"), change(1, 5, "insert")}}, map[int64]int64{1: 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.config("changes", changelogSchema)
			cfg.Key, cfg.Op = []string{"k"}, "_op"
			cfg.CommitInterval = time.Hour
			h := newHarness(t, cfg, "job1", 1)
			ctx := context.Background()
			var last = int64(len(tc.steps))
			for i, st := range tc.steps {
				id := int64(i + 1)
				h.write(0, st...)
				c := h.barrier(id)
				if id == last {
					// a fresh committer has no last commit: it publishes
					// at once (as the final checkpoint's would)
					h.cm = h.sink.Committer()
				}
				if err := h.commit(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			got := map[int64]int64{}
			dups := 0
			for _, r := range f.scan(t, "changes", "k", "v") {
				if _, ok := got[r[0].(int64)]; ok {
					dups++
				}
				got[r[0].(int64)] = r[1].(int64)
			}
			if dups > 0 || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("table %v (%d duplicate keys), want %v; %d snapshots", got, dups, tc.want, len(f.table(t, "changes").Metadata().Snapshots()))
			}
		})
	}
}

// TestIcebergFloatKeys: a changelog keyed by a float column (NaN, signed
// zeros) is refused when the sink is made: Iceberg takes no float
// equality delete key.
func TestIcebergFloatKeys(t *testing.T) {
	sch := &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.Float}, {Name: "v", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	f := newFixture(t)
	cfg := f.config("fk", sch)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	if err := openErr(t, cfg, "job1"); err == nil || !strings.Contains(err.Error(), "is a float") {
		t.Fatalf("a float key: %v; want it refused", err)
	}
}

// TestIcebergTimeKeySubMicro: keys that differ below a microsecond are two
// keys to the sink, one to the table (microseconds): such a key stops the
// job, naming it, rather than merge two keys.
func TestIcebergTimeKeySubMicro(t *testing.T) {
	sch := &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.Time}, {Name: "v", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	tc := func(ns int64, v int64, op string) row.Row {
		return row.Row{row.TimeValue(ns), row.IntValue(v), row.StringValue(op)}
	}
	f := newFixture(t)
	cfg := f.config("tk", sch)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	h := newHarness(t, cfg, "job1", 1)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	h.write(0, tc(base+1000, 1, "insert")) // whole microseconds pass
	err := h.writeErr(0, tc(base+100, 1, "insert"))
	if err == nil || !strings.Contains(err.Error(), "finer than the microseconds") {
		t.Fatalf("a key with nanoseconds below a microsecond: %v; want it refused", err)
	}
}

// TestIcebergAbandonOddWarehouse: a warehouse directory whose path holds a
// space or a percent sign.
func TestIcebergAbandonOddWarehouse(t *testing.T) {
	for _, sub := range []string{"my wh", "100%wh", "a#b"} {
		t.Run(sub, func(t *testing.T) {
			f := newFixture(t)
			tbl := fmt.Sprintf("t%d", time.Now().UnixNano())
			cfg := f.config(tbl, kvSchema)
			cfg.Catalog.Warehouse = t.TempDir() + "/" + sub
			h := newHarness(t, cfg, "job1", 1)
			h.write(0, ints(1, 10), ints(2, 20))
			ctx := context.Background()
			if err := h.commit(ctx, h.barrier(1)); err != nil {
				t.Fatal(err)
			}
			n, err := h.cm.Abandon(ctx, "job1")
			rows := f.scan(t, tbl, "k", "v")
			if err != nil || n != 0 || len(rows) != 2 {
				t.Errorf("Abandon: deleted %d, err %v; table then %d rows, want 2", n, err, len(rows))
			}
		})
	}
}

// TestIcebergAbandonDeletesOnlyOrphans: a changelog job publishes two
// checkpoints (data and equality delete files), stages a third that never
// completes; Abandon deletes the third's files only, and a second job's
// Abandon touches nothing of the first's.
func TestIcebergAbandonDeletesOnlyOrphans(t *testing.T) {
	f := newFixture(t)
	cfg := f.config("orph", changelogSchema)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	ctx := context.Background()
	h := newHarness(t, cfg, "job1", 2)
	h.write(0, change(1, 1, "insert"))
	h.write(1, change(2, 1, "insert"))
	if err := h.commit(ctx, h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	h.write(0, change(1, 2, "update"))
	h.write(1, change(2, 1, "delete"))
	if err := h.commit(ctx, h.barrier(2)); err != nil {
		t.Fatal(err)
	}
	h.write(0, change(1, 3, "update"))
	_ = h.barrier(3) // never completes
	n, err := h.cm.Abandon(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Abandon deleted %d files, want the 2 of checkpoint 3", n)
	}
	n2, err := h.sink.Committer().Abandon(ctx, "job2")
	if err != nil || n2 != 0 {
		t.Errorf("another job's Abandon: %d, %v", n2, err)
	}
	rows := f.scan(t, "orph", "k", "v")
	if len(rows) != 1 || rows[0][1].(int64) != 2 {
		t.Errorf("table %v, want [[1 2]]", rows)
	}
}
