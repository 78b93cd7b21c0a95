//go:build iceberg

package iceberg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	ice "github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
)

var tsSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "ts", Kind: row.Time}, {Name: "s", Kind: row.String}}}

// TestIcebergTimesFarAway: times before 1970 and far in the future in a
// table partitioned by a time transform; a filtered scan must find them.
func TestIcebergTimesFarAway(t *testing.T) {
	times := []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_000, time.UTC),
		time.Date(1969, 12, 31, 23, 0, 0, 1000, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1677, 9, 22, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC),
		time.Date(2200, 6, 1, 12, 0, 0, 0, time.UTC),
	}
	for _, tr := range []string{"day", "hour", "month", "year"} {
		t.Run(tr, func(t *testing.T) {
			f := newFixture(t)
			cfg := f.config("ts", tsSchema)
			cfg.PartitionBy = []ice.Partition{{Transform: tr, Column: "ts"}}
			h := newHarness(t, cfg, "job1", 1)
			for i, ts := range times {
				h.write(0, row.Row{row.IntValue(int64(i)), row.TimeValue(ts.UnixNano()), row.StringValue("x")})
			}
			if err := h.commit(context.Background(), h.barrier(1)); err != nil {
				t.Fatal(err)
			}
			tbl := f.table(t, "ts")
			for i, ts := range times {
				us := ts.UnixNano() / 1000
				if ts.UnixNano()%1000 < 0 {
					us--
				}
				at, err := tbl.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("ts"), iceberg.Timestamp(us)))).ToArrowTable(context.Background())
				if err != nil {
					t.Fatalf("scan for %v: %v", ts, err)
				}
				if at.NumRows() != 1 {
					t.Errorf("row %d (ts %v): a scan filtered on ts = %v finds %d rows, want 1", i, ts.Format(time.RFC3339Nano), ts.Format(time.RFC3339Nano), at.NumRows())
				}
				at.Release()
			}
		})
	}
}

// TestIcebergHugeStrings: a value of many MiB, and a string column whose
// values share a long prefix (bounds truncation), with equality deletes on
// a long string key.
func TestIcebergHugeStrings(t *testing.T) {
	f := newFixture(t)
	h := newHarness(t, f.config("big", tsSchema), "job1", 1)
	big := strings.Repeat("é", 24<<20) // 48 MiB
	h.write(0, row.Row{row.IntValue(1), row.TimeValue(0), row.StringValue(big)})
	if err := h.commit(context.Background(), h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	rows := f.scan(t, "big", "id", "s")
	if len(rows) != 1 || rows[0][1].(string) != big {
		t.Errorf("huge string: %d rows", len(rows))
	}

	sch := &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.String}, {Name: "v", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	cfg := f.config("longkeys", sch)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	h2 := newHarness(t, cfg, "job1", 1)
	prefix := strings.Repeat("p", 40)
	h2.write(0, row.Row{row.StringValue(prefix + "a"), row.IntValue(1), row.StringValue("insert")},
		row.Row{row.StringValue(prefix + "z"), row.IntValue(2), row.StringValue("insert")},
		row.Row{row.StringValue(prefix + "\U0010FFFF"), row.IntValue(3), row.StringValue("insert")})
	if err := h2.commit(context.Background(), h2.barrier(1)); err != nil {
		t.Fatal(err)
	}
	h2.write(0, row.Row{row.StringValue(prefix + "z"), row.IntValue(2), row.StringValue("delete")},
		row.Row{row.StringValue(prefix + "\U0010FFFF"), row.IntValue(4), row.StringValue("update")})
	if err := h2.commit(context.Background(), h2.barrier(2)); err != nil {
		t.Fatal(err)
	}
	got := f.scan(t, "longkeys", "k", "v")
	if len(got) != 2 {
		t.Errorf("long string keys after a delete and an update: %v", got)
	}
}

// TestIcebergOddStringKeys: string keys that are not valid UTF-8, or long
// with a shared prefix ending in the largest bytes, updated and deleted in
// a later checkpoint (equality deletes are matched to data files by their
// column bounds).
func TestIcebergOddStringKeys(t *testing.T) {
	sch := &row.Schema{Fields: []row.Field{{Name: "k", Kind: row.String}, {Name: "v", Kind: row.Int}, {Name: "_op", Kind: row.String}}}
	f := newFixture(t)
	cfg := f.config("oddkeys", sch)
	cfg.Key, cfg.Op = []string{"k"}, "_op"
	h := newHarness(t, cfg, "job1", 1)
	keys := []string{"\xff\xfe", strings.Repeat("\xff", 20) + "a", strings.Repeat("\xff", 20) + "b", strings.Repeat("z", 16) + "\xff", "", strings.Repeat("\U0010FFFF", 17)}
	for i, k := range keys {
		h.write(0, row.Row{row.StringValue(k), row.IntValue(int64(i)), row.StringValue("insert")})
	}
	if err := h.commit(context.Background(), h.barrier(1)); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		op := "update"
		if i%2 == 1 {
			op = "delete"
		}
		h.write(0, row.Row{row.StringValue(k), row.IntValue(100 + int64(i)), row.StringValue(op)})
	}
	if err := h.commit(context.Background(), h.barrier(2)); err != nil {
		t.Fatal(err)
	}
	got := f.scan(t, "oddkeys", "k", "v")
	if len(got) != 3 {
		t.Errorf("after updating 3 and deleting 3 odd keys: %d rows %q", len(got), got)
	}
}
