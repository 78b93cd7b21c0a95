//go:build iceberg

package e2e

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib"
)

var icebergKillSeed = flag.Uint64("icebergkillseed", 0, "replay TestIcebergCDCKillNine with this seed (0: random)")

// TestIcebergCDCKillNine runs PostgreSQL → postgres_cdc → Iceberg (a SQL
// catalog in PostgreSQL, a warehouse directory) as a separate process while
// the CDC kill test's load generator inserts, updates (values and primary
// keys) and deletes rows. It kills the process with SIGKILL at random
// moments, the first ones inside the snapshot, and twice while it is paused
// between a checkpoint's completion and the catalog commit of its files
// (failpoint sink/iceberg/commit: prepared, not committed). The sink
// commits at most every 500 ms while checkpoints come every 200 ms, so
// held-back files are offered again and grouped. After the load stops, a
// final run reads to the server's position. Then a scan of the table gives
// exactly the source table's rows, every snapshot the sink made carries its
// checkpoint id, and every file under the table's data directory is one a
// snapshot references: recoveries left no orphan.
func TestIcebergCDCKillNine(t *testing.T) {
	serviceKillTest(t, "icebergkillseed", *icebergKillSeed, icebergScenario)
}

func icebergScenario(t *testing.T, bin string, seed uint64) soakResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fx := newCDCFixture(t, ctx, "icekill_", "iceberg-killnine-")
	doc := func(stop string) string {
		return fmt.Sprintf(`pipeline: %s
checkpoint:
  interval: 200ms
  dir: ckpts
restart:
  max_attempts: 0
sources:
  cdc:
    type: postgres_cdc
    dsn: %s
    tables: [%s.accounts]
    slot: %s
    publication: %s
    chunk_rows: %d
%ssinks:
  lake:
    type: iceberg
    input: cdc
    parallelism: 2
    catalog:
      uri: %s
      warehouse: warehouse
    table: %s.accounts
    create_table: true
    partition_by: [bucket(4, id)]
    commit_interval: 500ms
`, fx.pipeline, pkDSN, fx.schema, fx.slot, fx.slot, cdcChunk, stop, pkDSN, fx.schema)
	}
	work, yaml := scenarioDir(t, doc(""))
	final := filepath.Join(work, "final.yaml")
	if err := os.WriteFile(final, []byte(doc("    stop_at: latest\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cat := icebergTestCatalog(t, ctx, filepath.Join(work, "warehouse"))
	ident := catalog.ToIdentifier(fx.schema, "accounts")
	t.Cleanup(func() {
		_ = cat.DropTable(context.Background(), ident)
		_ = cat.DropNamespace(context.Background(), catalog.ToIdentifier(fx.schema))
	})

	load := startCDCLoad(t, fx.schema, seed)
	s := killSchedule{
		Bin: bin, YAML: yaml, Ckpts: filepath.Join(work, "ckpts"), Seed: seed,
		Kills: 12, AimedKills: 2, Aim: "sink/iceberg/commit", Pause: 300 * time.Millisecond,
		Throttle: cdcThrottle, MinDelay: 400 * time.Millisecond, MaxDelay: 1500 * time.Millisecond,
		Budget: 90 * time.Second, FinalWait: 2 * time.Minute,
		FinalYAML: final, BeforeFinal: load.stop,
	}
	var res soakResult
	res.Kills, res.Aimed = s.run(t)
	load.stop()
	t.Logf("load: %d transactions committed, %d rolled back", load.committed, load.rolledBack)
	if load.err != nil {
		t.Fatalf("load generator: %v", load.err)
	}

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	got, dups := icebergAccounts(t, ctx, tbl)
	want := map[int64]string{}
	rows, err := fx.conn.Query(ctx, "SELECT id, owner, balance, note, updated FROM "+fx.schema+".accounts")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, balance int64
		var owner string
		var note *string
		var updated time.Time
		if err := rows.Scan(&id, &owner, &balance, &note, &updated); err != nil {
			t.Fatal(err)
		}
		want[id] = accountText(owner, balance, note, updated.UnixMicro())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			res.Lost++
			res.Examples = append(res.Examples, fmt.Sprintf("id %d: in the source (%s), not in the table", id, w))
		case g != w:
			res.Wrong++
			res.Examples = append(res.Examples, fmt.Sprintf("id %d: the table has %s, the source %s", id, g, w))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			res.Unexpected++
			res.Examples = append(res.Examples, fmt.Sprintf("id %d: in the table (%s), not in the source", id, g))
		}
	}
	res.Duplicated = dups
	if len(res.Examples) > 10 {
		res.Examples = res.Examples[:10]
	}
	t.Logf("table: %d rows, %d snapshots; source: %d rows", len(got), len(tbl.Metadata().Snapshots()), len(want))
	if len(want) < cdcRows/2 {
		t.Fatalf("the source has %d rows, fewer than half of its initial %d", len(want), cdcRows)
	}
	checkIcebergSnapshots(t, ctx, tbl, fx.pipeline)
	return res
}

// accountText is one accounts row as the comparison reads it.
func accountText(owner string, balance int64, note *string, updatedMicros int64) string {
	n := "NULL"
	if note != nil {
		n = fmt.Sprintf("%q", *note)
	}
	return fmt.Sprintf("owner=%q balance=%d note=%s updated=%d", owner, balance, n, updatedMicros)
}

// icebergTestCatalog opens the SQL catalog the test's pipelines use.
func icebergTestCatalog(t *testing.T, ctx context.Context, warehouse string) *sqlcat.Catalog {
	t.Helper()
	db, err := sql.Open("pgx", pkDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cat, err := sqlcat.NewCatalog("ingest", db, sqlcat.Postgres, iceberg.Properties{"init_catalog_tables": "true", "warehouse": "file://" + warehouse})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// icebergAccounts scans the table: its rows by id, and how many ids it
// holds more than once.
func icebergAccounts(t *testing.T, ctx context.Context, tbl *table.Table) (map[int64]string, int) {
	t.Helper()
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scanning the table: %v", err)
	}
	defer at.Release()
	rd := array.NewTableReader(at, 4096)
	defer rd.Release()
	col := func(r arrow.RecordBatch, name string) arrow.Array {
		idx := r.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("the table has no column %q: %v", name, r.Schema())
		}
		return r.Column(idx[0])
	}
	out, dups := map[int64]string{}, 0
	for rd.Next() {
		r := rd.RecordBatch()
		ids := col(r, "id").(*array.Int64)
		owners := col(r, "owner").(*array.String)
		balances := col(r, "balance").(*array.Int64)
		notes := col(r, "note").(*array.String)
		updated := col(r, "updated").(*array.Timestamp)
		for i := 0; i < int(r.NumRows()); i++ {
			var note *string
			if notes.IsValid(i) {
				n := notes.Value(i)
				note = &n
			}
			id := ids.Value(i)
			if _, ok := out[id]; ok {
				dups++
			}
			out[id] = accountText(owners.Value(i), balances.Value(i), note, int64(updated.Value(i)))
		}
	}
	return out, dups
}

// checkIcebergSnapshots checks that every snapshot of the table is the
// sink's and records its checkpoint, and that every file under the table's
// data directory is one a snapshot references.
func checkIcebergSnapshots(t *testing.T, ctx context.Context, tbl *table.Table, pipeline string) {
	t.Helper()
	iofs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, snap := range tbl.Metadata().Snapshots() {
		p := snap.Summary.Properties
		if p["ingest.pipeline"] != pipeline || p["ingest.sink"] != "lake" || p["ingest.job-id"] == "" || p["ingest.checkpoint-id"] == "" {
			t.Errorf("snapshot %d (%s) does not record the pipeline, sink, job and checkpoint: %v", snap.SnapshotID, snap.Summary.Operation, p)
		}
		mans, err := snap.Manifests(iofs)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			for e, err := range m.Entries(iofs, false) {
				if err != nil {
					t.Fatal(err)
				}
				referenced[e.DataFile().FilePath()] = true
			}
		}
	}
	loc, err := url.Parse(tbl.Location())
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	files := 0
	err = filepath.WalkDir(filepath.Join(loc.Path, "data"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		if !referenced["file://"+path] {
			orphans = append(orphans, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(orphans)
	t.Logf("%d data and delete files, all referenced by the %d snapshots but %d", files, len(tbl.Metadata().Snapshots()), len(orphans))
	if len(orphans) > 0 {
		t.Errorf("%d files under the table's data directory are in no snapshot (orphans):\n%s", len(orphans), strings.Join(orphans, "\n"))
	}
}
