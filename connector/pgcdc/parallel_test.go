package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/row"
)

// TestParallelSnapshotResumedUnderConcurrentWrites: four tables read two
// at a time in chunks of 5, changes of every kind committing to all of
// them between chunks, the job failed mid-snapshot after a checkpoint
// covering some chunks and restarted. Each table's changelog, applied by
// key, equals the table, and no snapshot row is emitted twice.
func TestParallelSnapshotResumedUnderConcurrentWrites(t *testing.T) {
	f := newFixture(t)
	names := []string{"a", "b", "c", "d"}
	var quoted []string
	for _, n := range names {
		q := f.quoted(n)
		f.exec("CREATE TABLE " + q + " (id int PRIMARY KEY, v text)")
		f.exec("INSERT INTO " + q + " SELECT g, 'v' || g FROM generate_series(2, 600, 2) g")
		quoted = append(quoted, q)
	}
	writer, err := pgx.Connect(context.Background(), realDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	writeAll := func(k int) {
		for _, q := range quoted {
			hostileWrites(t, writer, q, k)
		}
	}
	var mu sync.Mutex
	var r *running
	calls, failedAt := 0, 0
	chunkHook(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		pace(r)
		switch {
		case calls == 3:
			writeAll(0)
		case failedAt == 0 && r != nil && r.sink.coveredRecords() >= paceRecords:
			failedAt = calls
			writeAll(1)
			return fmt.Errorf("mid-snapshot: %w", failpoint.ErrInjected)
		case failedAt != 0 && calls == failedAt+3:
			writeAll(2)
		}
		return nil
	})
	cfg := f.config(names...)
	cfg.ChunkRows = 5
	cfg.SnapshotParallelism = 2
	src := newSource(t, cfg)
	mu.Lock()
	r = start(t, src, t.TempDir())
	mu.Unlock()
	r.waitLog(logStreaming, 1)
	f.exec("INSERT INTO " + quoted[3] + " VALUES (100000, 'sentinel')")
	recs := r.waitFor("the sentinel", r.has("insert", "id", row.IntValue(100000)))
	mu.Lock()
	defer mu.Unlock()
	if failedAt == 0 {
		t.Fatalf("the snapshot was not failed (%d chunks)", calls)
	}
	if st := r.job.Stats(); st.Restarts != 1 || st.RestoredFrom == 0 {
		t.Errorf("stats %+v: want one restart, from a checkpoint", st)
	}
	// The changelog applied by (table, id), against the tables.
	got := map[string]string{}
	snaps := r.snapshotLSNs()
	read := map[string]bool{}
	for _, rec := range recs {
		k := r.field(rec, TableField).Str() + "|" + r.field(rec, "id").String()
		if snaps[r.field(rec, LSNField).Str()] {
			if read[k] && r.field(rec, OpField).Str() == "insert" {
				// A key read by two snapshots: the resumed one re-read a
				// chunk the first had emitted.
				t.Errorf("key %s read by two snapshots", k)
			}
			read[k] = true
		}
		switch r.field(rec, OpField).Str() {
		case "insert", "update":
			got[k] = r.field(rec, "v").String()
		case "delete":
			delete(got, k)
		}
	}
	want := map[string]string{}
	for i, q := range quoted {
		rows, err := f.conn.Query(context.Background(), "SELECT id, v FROM "+q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var v string
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			want[f.table(names[i])+"|"+row.IntValue(id).String()] = row.StringValue(v).String()
		}
		rows.Close()
	}
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			diffs = append(diffs, fmt.Sprintf("%s: got %q (present %v), want %q", k, g, ok, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, not in the table", k, g))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%d differences between the changelog and the tables:\n%s", len(diffs), strings.Join(diffs[:min(20, len(diffs))], "\n"))
	}
	t.Logf("%d rows in %d tables alike; failed at chunk %d of %d", len(want), len(names), failedAt, calls)
}
