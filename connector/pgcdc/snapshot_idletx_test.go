package pgcdc

import (
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/row"
)

// TestSnapshotNotIdleInTransaction: under the server's
// idle_in_transaction_session_timeout (set per session through the DSN, as
// managed servers often set it globally), a snapshot longer than the
// timeout completes without a restart: no connection stays idle in the
// snapshot's transaction (found in review: the regular connection did,
// from its import of the snapshot to the end of the snapshot).
func TestSnapshotNotIdleInTransaction(t *testing.T) {
	f := newFixture(t)
	a := f.quoted("a")
	f.exec("CREATE TABLE " + a + " (id int PRIMARY KEY, v text)")
	f.exec("INSERT INTO " + a + " SELECT g, 'v' || g FROM generate_series(1, 120) g")
	chunkHook(t, func() error {
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	cfg := f.config("a")
	cfg.ChunkRows = 3 // 40 chunks: about 4 s of snapshot
	cfg.SnapshotParallelism = 1
	sep := "?"
	if strings.Contains(cfg.DSN, "?") {
		sep = "&"
	}
	cfg.DSN += sep + "idle_in_transaction_session_timeout=1000"
	src := newSource(t, cfg)
	r := start(t, src, t.TempDir())
	r.waitLog(logStreaming, 1)
	f.exec("INSERT INTO " + a + " VALUES (100000, 'sentinel')")
	r.waitFor("the sentinel", r.has("insert", "id", row.IntValue(100000)))
	if st := r.job.Stats(); st.Restarts != 0 {
		r.logs.mu.Lock()
		var errs []string
		for _, m := range r.logs.msgs {
			if strings.Contains(m, "idle") || strings.Contains(m, "restart") || strings.Contains(m, "fail") {
				errs = append(errs, m)
			}
		}
		r.logs.mu.Unlock()
		t.Fatalf("the job restarted %d times during a snapshot no connection of which should idle 1 s:\n%s", st.Restarts, strings.Join(errs, "\n"))
	}
}
