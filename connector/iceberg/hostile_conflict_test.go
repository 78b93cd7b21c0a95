//go:build iceberg

package iceberg_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
)

// foreignAppend appends rows (k, v) to the table as another writer would.
func (f *fixture) foreignAppend(t *testing.T, name string, keys []int64, v int64, extra ...string) error {
	ctx := context.Background()
	tbl, err := f.cat.LoadTable(ctx, catalog.ToIdentifier(f.ns, name))
	if err != nil {
		return err
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, k := range keys {
		for i := 0; i < sc.NumFields(); i++ {
			switch sc.Field(i).Name {
			case "k":
				b.Field(i).(*array.Int64Builder).Append(k)
			case "v":
				b.Field(i).(*array.Int64Builder).Append(v)
			default:
				b.Field(i).AppendNull()
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	tx := tbl.NewTransaction()
	if err := tx.AppendTable(ctx, at, 1024, iceberg.Properties{"writer": "foreign"}); err != nil {
		return err
	}
	_, err = tx.Commit(ctx)
	return err
}

// TestIcebergCommitRacesForeignWriter: another writer appends to the table
// between the committer's load of the table and its catalog commit. Both
// writers' rows must be in the table afterwards (or the commit must fail
// loudly); none may vanish.
func TestIcebergCommitRacesForeignWriter(t *testing.T) {
	for _, mode := range []string{"appends", "changelog", "changelog-grouped"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			name := "race"
			var cfg = f.config(name, kvSchema)
			if mode != "appends" {
				cfg = f.config(name, changelogSchema)
				cfg.Key, cfg.Op = []string{"k"}, "_op"
			}
			h := newHarness(t, cfg, "job1", 1)
			ctx := context.Background()
			if mode == "appends" {
				h.write(0, ints(1, 1))
			} else {
				h.write(0, change(1, 1, "insert"))
			}
			if err := h.commit(ctx, h.barrier(1)); err != nil {
				t.Fatal(err)
			}
			// Next commit: an update of key 1 (and for grouped, two
			// checkpoints in one commit), while a foreign writer appends
			// keys 100..102.
			if mode == "changelog-grouped" {
				h.cm = nil
				cfg.CommitInterval = time.Hour
			}
			var fired int
			disable := failpoint.Enable("sink/iceberg/commit", func() error {
				fired++
				if fired == 1 {
					if err := f.foreignAppend(t, name, []int64{100, 101, 102}, 7); err != nil {
						t.Errorf("foreign append: %v", err)
					}
				}
				return nil
			})
			defer disable()
			var c = h.barrier(2)
			switch mode {
			case "appends":
				h.write(0, ints(2, 2))
				c = h.barrier(3)
			case "changelog":
				h.write(0, change(1, 2, "update"), change(2, 2, "insert"))
				c = h.barrier(3)
			case "changelog-grouped":
				h.write(0, change(1, 2, "update"))
				_ = h.barrier(3)
				h.write(0, change(2, 2, "insert"))
				c = h.barrier(4)
			}
			if h.cm == nil {
				h.cm = h.sink.Committer()
			}
			err := h.commit(ctx, c)
			t.Logf("commit with a concurrent foreign append: err=%v (failpoint fired %d times)", err, fired)
			var got []string
			for _, r := range f.scan(t, name, "k", "v") {
				got = append(got, fmt.Sprint(r[0], "=", r[1]))
			}
			sort.Strings(got)
			t.Logf("table: %v", got)
			want := []string{"100=7", "101=7", "102=7"}
			if mode == "appends" {
				want = append(want, "1=1", "2=2")
			} else {
				want = append(want, "1=2", "2=2")
			}
			sort.Strings(want)
			if err == nil && fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("commit succeeded, table %v, want %v", got, want)
			}
			if err != nil {
				// a failed commit must be recoverable: a re-commit (as the
				// recovery does) publishes the sink's rows
				err = h.sink.Committer().Commit(ctx, "job1", c)
				got = nil
				for _, r := range f.scan(t, name, "k", "v") {
					got = append(got, fmt.Sprint(r[0], "=", r[1]))
				}
				sort.Strings(got)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("re-commit: err=%v, table %v, want %v", err, got, want)
				}
			}
		})
	}
}

var _ = row.Int
