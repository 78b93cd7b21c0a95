package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/internal/testkit"
)

var cdcKillSeed = flag.Uint64("cdckillseed", 0, "replay TestPostgresCDCKillNine with this seed (0: random)")

// The CDC kill test's sizes: cdcRows rows before the first start, read in
// chunks of cdcChunk rows, each chunk slowed by the throttle so that the
// first runs die inside the snapshot.
const (
	cdcRows     = 20000
	cdcChunk    = 500
	cdcThrottle = "source/postgres_cdc/snapshot-chunk=sleep(100ms)"
)

// TestPostgresCDCKillNine runs PostgreSQL → postgres_cdc → PostgreSQL upsert
// sink as a separate process while a load generator inserts, updates
// (values and primary keys) and deletes rows of the source table in
// transactions of one to five statements (some rolled back). It kills the
// process with SIGKILL at random moments, the first ones inside the
// chunked snapshot (the first two runs are never aimed ones, whose failpoint
// comes only after the snapshot), and twice while it is paused between a checkpoint's
// completion and the slot's confirmation (failpoint
// source/postgres_cdc/confirm). Each restart checks that the slot was not
// confirmed past the restored checkpoint (the source refuses to start,
// failing the run, if it was). After the kills the load stops and a final
// run reads to the server's position: the target table then equals the
// source table exactly, compared with EXCEPT both ways.
func TestPostgresCDCKillNine(t *testing.T) {
	serviceKillTest(t, "cdckillseed", *cdcKillSeed, cdcScenario)
}

func cdcScenario(t *testing.T, bin string, seed uint64) soakResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fx := newCDCFixture(t, ctx, "cdckill_", "cdc-killnine-")
	conn, schema, slot, pipeline := fx.conn, fx.schema, fx.slot, fx.pipeline
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_progress WHERE pipeline = $1", pipeline)
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_writers WHERE pipeline = $1", pipeline)
	})

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
  replica:
    type: postgres
    input: cdc
    parallelism: 2
    dsn: %s
    table: %s.replica
    mode: upsert
    key: [id]
    create_table: true
  changes:
    type: file
    input: cdc
    parallelism: 2
    path: changes
`, pipeline, pkDSN, schema, slot, slot, cdcChunk, stop, pkDSN, schema)
	}
	work, yaml := scenarioDir(t, doc(""))
	// The final run's file sits beside the killed runs', so that its
	// checkpoint directory is theirs.
	final := filepath.Join(work, "final.yaml")
	if err := os.WriteFile(final, []byte(doc("    stop_at: latest\n")), 0o644); err != nil {
		t.Fatal(err)
	}

	load := startCDCLoad(t, schema, seed)
	var mu sync.Mutex
	snapshots := 0
	s := killSchedule{
		OnLine: func(line string) {
			if strings.Contains(line, "postgres_cdc: snapshot") {
				mu.Lock()
				snapshots++
				mu.Unlock()
			}
		},
		Bin: bin, YAML: yaml, Ckpts: filepath.Join(work, "ckpts"), Seed: seed,
		Kills: 12, AimedKills: 2, RandomFirst: 2, Aim: "source/postgres_cdc/confirm", Pause: 300 * time.Millisecond,
		Throttle: cdcThrottle, MinDelay: 400 * time.Millisecond, MaxDelay: 1500 * time.Millisecond,
		Budget: 90 * time.Second, FinalWait: 2 * time.Minute,
		FinalYAML: final, BeforeFinal: load.stop,
	}
	var res soakResult
	res.Kills, res.Aimed = s.run(t)
	load.stop()
	t.Logf("load: %d transactions committed, %d rolled back; %d runs began a snapshot", load.committed, load.rolledBack, snapshots)
	if snapshots < 2 {
		t.Errorf("only %d runs began a snapshot: no kill landed inside the snapshot (seed %d)", snapshots, seed)
	}
	if load.err != nil {
		t.Fatalf("load generator: %v", load.err)
	}

	cols := "id, owner, balance, note, updated"
	diff := func(a, b string) (int, []string) {
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s FROM %s.%s EXCEPT SELECT %s FROM %s.%s ORDER BY id", cols, schema, a, cols, schema, b))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n, ex := 0, []string(nil)
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			if n < 5 {
				ex = append(ex, fmt.Sprintf("in %s, not in %s: %v", a, b, vals))
			}
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n, ex
	}
	lost, ex1 := diff("accounts", "replica")
	unexpected, ex2 := diff("replica", "accounts")
	res.Lost, res.Unexpected = lost, unexpected
	res.Examples = append(ex1, ex2...)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".replica").Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("target: %d rows; %d missing, %d not in the source", n, lost, unexpected)
	checkCDCChangelog(t, conn, schema, filepath.Join(work, "changes"), &res)
	if n < cdcRows/2 {
		t.Fatalf("the target has %d rows, fewer than half of the source's initial %d: the test did not replicate", n, cdcRows)
	}
	return res
}

// cdcFixture is a CDC kill test's source: schema.accounts with cdcRows
// rows, and the names of its slot (also its publication) and pipeline.
type cdcFixture struct {
	conn                   *pgx.Conn
	schema, slot, pipeline string
}

// newCDCFixture connects to PostgreSQL (failing or skipping the test
// without it, or without wal_level = logical), creates the source table and
// drops it with the slot and publication when the test ends.
func newCDCFixture(t *testing.T, ctx context.Context, prefix, pipelinePrefix string) *cdcFixture {
	t.Helper()
	conn, err := pgx.Connect(ctx, pkDSN)
	nkNeedService(t, "PostgreSQL", err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		nkNeedService(t, "PostgreSQL with wal_level = logical", fmt.Errorf("wal_level is %q (%v): ALTER SYSTEM SET wal_level = logical and restart the server", level, err))
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	fx := &cdcFixture{conn: conn, schema: prefix + suffix, slot: prefix + suffix, pipeline: pipelinePrefix + suffix}
	for _, q := range []string{
		"CREATE SCHEMA " + fx.schema,
		"CREATE TABLE " + fx.schema + ".accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL, note text, updated timestamptz NOT NULL DEFAULT now())",
		fmt.Sprintf("INSERT INTO %s.accounts SELECT g, 'owner ' || g, g * 10, NULL, now() FROM generate_series(1, %d) g", fx.schema, cdcRows),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The slot stays active for a moment after its process dies.
		for i := 0; i < 50; i++ {
			_, err := conn.Exec(c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", fx.slot)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = conn.Exec(c, "DROP PUBLICATION IF EXISTS "+fx.slot)
		_, _ = conn.Exec(c, "DROP SCHEMA "+fx.schema+" CASCADE")
	})
	return fx
}

// cdcLoad changes the source table until stopped.
type cdcLoad struct {
	once                  sync.Once
	quit                  chan struct{}
	done                  chan struct{}
	committed, rolledBack int
	err                   error
}

func (l *cdcLoad) stop() {
	l.once.Do(func() { close(l.quit) })
	<-l.done
}

// startCDCLoad runs transactions of one to five random statements on
// schema.accounts: inserts of new ids, updates of values, updates of the
// primary key, deletes; one in ten is rolled back.
func startCDCLoad(t *testing.T, schema string, seed uint64) *cdcLoad {
	l := &cdcLoad{quit: make(chan struct{}), done: make(chan struct{})}
	conn, err := pgx.Connect(context.Background(), pkDSN)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x636463))
	go func() {
		defer close(l.done)
		defer conn.Close(context.Background())
		next, notes := int64(1_000_000), 0
		for {
			select {
			case <-l.quit:
				return
			case <-time.After(2 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				for range 1 + rng.IntN(5) {
					id := 1 + rng.Int64N(cdcRows)
					var q string
					var args []any
					switch op := rng.IntN(10); {
					case op < 3:
						next++
						q, args = "INSERT INTO "+schema+".accounts (id, owner, balance, note) VALUES ($1, $2, $3, $4)", []any{next, fmt.Sprintf("new %d", next), rng.Int64N(1000), "inserted"}
					case op < 7:
						// Every note is new: two equal change records are one
						// change emitted twice.
						notes++
						q, args = "UPDATE "+schema+".accounts SET balance = balance + $2, note = $3, updated = now() WHERE id = $1", []any{id, rng.Int64N(100) - 50, fmt.Sprintf("update %d", notes)}
					case op < 8:
						next++
						q, args = "UPDATE "+schema+".accounts SET id = $2 WHERE id = $1", []any{id, next}
					default:
						q, args = "DELETE FROM "+schema+".accounts WHERE id = $1", []any{id}
					}
					if _, err := tx.Exec(ctx, q, args...); err != nil {
						return err
					}
				}
				if rng.IntN(10) == 0 {
					return errRollback
				}
				return nil
			})
			cancel()
			switch {
			case err == nil:
				l.committed++
			case errors.Is(err, errRollback):
				l.rolledBack++
			default:
				l.err = err
				return
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

// errRollback rolls a load transaction back on purpose.
var errRollback = errors.New("rolled back on purpose")

// checkCDCChangelog checks the committed changelog under dir (a file sink
// fed by the CDC source) against the source table: applied in order by key
// it gives the table exactly; no record appears twice (every change the
// load makes is unique); and each key's records are in commit order, so no
// change older than the snapshot that read its key follows it.
func checkCDCChangelog(t *testing.T, conn *pgx.Conn, schema, dir string, res *soakResult) {
	t.Helper()
	lines, err := testkit.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		ID      int64   `json:"id"`
		Owner   string  `json:"owner"`
		Balance int64   `json:"balance"`
		Note    *string `json:"note"`
		Updated string  `json:"updated"`
		Op      string  `json:"_op"`
		LSN     string  `json:"_lsn"`
	}
	seen := map[string]bool{}
	table := map[int64]rec{}
	lastLSN := map[int64]pglogrepl.LSN{}
	bad := func(format string, args ...any) {
		if len(res.Examples) < 10 {
			res.Examples = append(res.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, l := range lines {
		if seen[string(l.Text)] {
			res.Duplicated++
			bad("%s:%d repeats a change: %s", l.File, l.Number, l.Text)
			continue
		}
		seen[string(l.Text)] = true
		var r rec
		if err := json.Unmarshal(l.Text, &r); err != nil {
			t.Fatalf("%s:%d: %v", l.File, l.Number, err)
		}
		lsn, err := pglogrepl.ParseLSN(r.LSN)
		if err != nil {
			t.Fatalf("%s:%d: _lsn: %v", l.File, l.Number, err)
		}
		if lsn < lastLSN[r.ID] {
			res.Wrong++
			bad("%s:%d: key %d: a change of %v after one of %v", l.File, l.Number, r.ID, lsn, lastLSN[r.ID])
		}
		lastLSN[r.ID] = lsn
		_, present := table[r.ID]
		switch {
		case r.Op == "delete" && present:
			delete(table, r.ID)
		case r.Op == "insert" && !present, r.Op == "update" && present:
			table[r.ID] = r
		default:
			res.Wrong++
			bad("%s:%d: %s of key %d, present %v", l.File, l.Number, r.Op, r.ID, present)
		}
	}
	rows, err := conn.Query(context.Background(), "SELECT id, owner, balance, note, updated FROM "+schema+".accounts")
	if err != nil {
		t.Fatal(err)
	}
	source := map[int64]bool{}
	for rows.Next() {
		var r rec
		var at time.Time
		if err := rows.Scan(&r.ID, &r.Owner, &r.Balance, &r.Note, &at); err != nil {
			t.Fatal(err)
		}
		source[r.ID] = true
		got, ok := table[r.ID]
		if !ok {
			res.Lost++
			bad("changelog: key %d missing", r.ID)
			continue
		}
		gotAt, err := time.Parse(time.RFC3339Nano, got.Updated)
		if got.Owner != r.Owner || got.Balance != r.Balance || !reflect.DeepEqual(got.Note, r.Note) || err != nil || !gotAt.Equal(at) {
			res.Wrong++
			bad("changelog: key %d is %+v, the source's %+v at %v", r.ID, got, r, at)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range table {
		if !source[id] {
			res.Unexpected++
			bad("changelog: key %d is not in the source", id)
		}
	}
	t.Logf("changelog: %d records, %d keys", len(lines), len(table))
}
