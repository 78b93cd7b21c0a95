//go:build iceberg

package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog"

	"github.com/ingest-engine/ingest/stream"
)

// TestIcebergAggregateRescale: an aggregate's changelog (with HAVING,
// so groups are deleted and inserted again) into an Iceberg table, run three
// times on one checkpoint directory: interrupted at parallelism 2 with a
// commit interval, interrupted at parallelism 3 without one, then to the
// end at parallelism 1 with a long one. The table must hold each group's
// final result once.
func TestIcebergAggregateRescale(t *testing.T) {
	const count, keys = 30000, 40
	work := t.TempDir()
	ns := fmt.Sprintf("rescale_%d", time.Now().UnixNano())
	cat := icebergTestCatalog(t, context.Background(), filepath.Join(work, "warehouse"))
	t.Cleanup(func() {
		_ = cat.DropTable(context.Background(), catalog.ToIdentifier(ns, "totals"))
		_ = cat.DropNamespace(context.Background(), catalog.ToIdentifier(ns))
	})
	doc := func(par int, interval string) string {
		return fmt.Sprintf(`pipeline: iceberg-rescale
checkpoint:
  interval: 50ms
  dir: ckpts
sources:
  gen:
    type: datagen
    count: %d
    rate: 12000
    keys: %d
    parallelism: 2
transforms:
  totals:
    type: aggregate
    input: gen
    key: [key]
    parallelism: %d
    aggregates:
      n: count()
      s: sum(value)
    having: n %% 4 != 0
sinks:
  lake:
    type: iceberg
    input: totals
    parallelism: %d
    catalog:
      uri: %s
      warehouse: warehouse
    table: %s.totals
    create_table: true
    commit_interval: %s
`, count, keys, par, par, pkDSN, ns, interval)
	}
	runs := []struct {
		par      int
		interval string
		stop     time.Duration
	}{{2, "300ms", 1200 * time.Millisecond}, {3, "0s", 900 * time.Millisecond}, {1, "1h", 0}}
	for i, r := range runs {
		job := yamlJob(t, work, doc(r.par, r.interval), func(o *stream.RunOptions) {})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if r.stop > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), r.stop)
		}
		err := job.Run(ctx)
		cancel()
		t.Logf("run %d (parallelism %d, commit_interval %s): err=%v stats=%+v", i, r.par, r.interval, err, job.Stats())
		if err != nil && !(r.stop > 0 && errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	want := map[int64][2]int64{}
	for k := int64(0); k < keys; k++ {
		var n, s int64
		for id := k; id < count; id += keys {
			n++
			s += id % 1000
		}
		if n%4 != 0 {
			want[k] = [2]int64{n, s}
		}
	}
	tbl, err := cat.LoadTable(context.Background(), catalog.ToIdentifier(ns, "totals"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	rd := array.NewTableReader(at, 1024)
	defer rd.Release()
	got := map[int64][2]int64{}
	dups := 0
	for rd.Next() {
		rec := rd.RecordBatch()
		col := func(name string) *array.Int64 { return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.Int64) }
		ks, ns, ss := col("key"), col("n"), col("s")
		for j := 0; j < int(rec.NumRows()); j++ {
			if _, ok := got[ks.Value(j)]; ok {
				dups++
			}
			got[ks.Value(j)] = [2]int64{ns.Value(j), ss.Value(j)}
		}
	}
	bad := 0
	for k, w := range want {
		if got[k] != w {
			bad++
			t.Errorf("key %d: table %v, want %v", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			bad++
			t.Errorf("key %d: table %v, want no row (HAVING)", k, g)
		}
	}
	t.Logf("%d keys in table, %d wanted, %d duplicate, %d snapshots", len(got), len(want), dups, len(tbl.Metadata().Snapshots()))
	if dups > 0 {
		t.Errorf("%d keys held more than once", dups)
	}
}
