package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingest-engine/ingest/internal/testkit"
)

const pkDSN = "postgres://postgres@127.0.0.1:5432/test"

// TestKafkaPostgresKillNine runs the YAML pipeline Kafka → tumbling window →
// PostgreSQL (destination-wide atomic sink, two staging subtasks, append
// mode) as a separate process against an in-process kfake cluster and the
// real PostgreSQL server, kills it with SIGKILL at random moments and while
// the committer's publishing transaction is open (failpoint
// sink/postgres/mid-commit: the checkpoint is complete, its rows staged and
// copied to the target, the progress row written, not yet committed),
// restarts it until it exits 0, and checks that the table holds exactly the
// windows the input implies, with no staged rows left. During the runs a
// reader takes repeatable-read snapshots and checks that the target never
// shows part of a checkpoint: its row count equals the rows the progress
// table says were published, no window twice, and no checkpoint newer than
// the newest complete one.
func TestKafkaPostgresKillNine(t *testing.T) {
	serviceKillTest(t, "kafkakillseed", *kafkaKillSeed, kafkaPostgresScenario)
}

// kafkaPostgresScenario is one kill cycle of Kafka → window → PostgreSQL on
// a new kfake cluster and a new table.
func kafkaPostgresScenario(t *testing.T, bin string, seed uint64) soakResult {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pkDSN)
	nkNeedService(t, "PostgreSQL", err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	k, want := kkStart(t)

	suffix := time.Now().UnixNano()
	pipeline, table := fmt.Sprintf("pg-killnine-%d", suffix), fmt.Sprintf("killnine_%d", suffix)
	t.Cleanup(func() {
		c := context.Background()
		_, _ = conn.Exec(c, "DROP TABLE IF EXISTS "+table+", "+table+"__ingest_staging")
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_progress WHERE pipeline = $1", pipeline)
		_, _ = conn.Exec(c, "DELETE FROM ingest_sink_writers WHERE pipeline = $1", pipeline)
	})

	doc := kkSourceYAML(pipeline, k.broker) + fmt.Sprintf(`  out:
    type: postgres
    input: w
    parallelism: 2
    dsn: %s
    table: %s
    mode: append
    create_table: true
`, pkDSN, table)
	work, yaml := scenarioDir(t, doc)
	ckpts := filepath.Join(work, "ckpts")
	rd := newPKReader(t, pipeline, table, ckpts)

	var res soakResult
	res.Kills, res.Aimed = kkSchedule(bin, yaml, ckpts, seed, "sink/postgres/mid-commit").run(t)

	rd.stop()
	if rd.err != nil {
		t.Fatalf("reader: %v", rd.err)
	}
	t.Logf("reader: %d snapshots, %d between empty and full, up to checkpoint %d", rd.snapshots, rd.midRun, rd.newest)
	res.Samples = rd.snapshots
	res.Partial += rd.bad
	res.Examples = append(res.Examples, rd.examples...)
	if rd.midRun < 5 {
		t.Errorf("the reader saw the table between empty and full only %d times: it did not watch the runs", rd.midRun)
	}

	rows, err := conn.Query(ctx, "SELECT key, window_start, window_end, count, sum FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	var lines []testkit.Line
	for rows.Next() {
		var key, count, sum int64
		var start, end time.Time
		if err := rows.Scan(&key, &start, &end, &count, &sum); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, testkit.Line{File: table, Number: len(lines) + 1, Text: fmt.Appendf(nil,
			`{"key":%d,"window_start":%q,"window_end":%q,"count":%d,"sum":%d}`,
			key, start.UTC().Format(time.RFC3339Nano), end.UTC().Format(time.RFC3339Nano), count, sum)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	res.addReport(testkit.CheckWindows(lines, want, time.Second))
	var staged int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+"__ingest_staging").Scan(&staged); err != nil {
		t.Fatal(err)
	}
	if staged != 0 {
		t.Errorf("%d rows left staged after the final commit", staged)
	}
	t.Logf("cycle %v", time.Since(began).Round(time.Millisecond))
	return res
}

// pkReader samples the target table in repeatable-read snapshots while the
// pipeline runs and dies.
type pkReader struct {
	pipeline, table, ckpts string

	snapshots, midRun int
	newest            int64
	// bad counts snapshots that showed part of a checkpoint, twice-visible
	// windows or a checkpoint published before it was complete.
	bad           int
	examples      []string
	err           error
	done, stopped chan struct{}
	once          sync.Once
}

func newPKReader(t *testing.T, pipeline, table, ckpts string) *pkReader {
	conn, err := pgx.Connect(context.Background(), pkDSN)
	if err != nil {
		t.Fatal(err)
	}
	r := &pkReader{pipeline: pipeline, table: table, ckpts: ckpts, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(r.stopped)
		defer conn.Close(context.Background())
		for {
			select {
			case <-r.done:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if err := r.sample(conn); err != nil {
				r.err = err
				return
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *pkReader) stop() {
	r.once.Do(func() { close(r.done) })
	<-r.stopped
}

// sample takes one snapshot. The newest complete checkpoint is read after
// it: a publish follows its checkpoint's completion.
func (r *pkReader) sample(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rows, dups, published, newest int64
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "SELECT count(*), count(*) - count(DISTINCT (key, window_start)) FROM "+r.table).Scan(&rows, &dups)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT coalesce(sum(rows), 0), coalesce(max(checkpoint), 0) FROM ingest_sink_progress WHERE pipeline = $1", r.pipeline).Scan(&published, &newest)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return nil // the sink has not created its tables yet
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	latest, err := nkLatest(r.ckpts)
	if err != nil {
		return err
	}
	r.snapshots++
	var bad string
	switch {
	case rows != published:
		bad = fmt.Sprintf("snapshot %d: %d rows visible while the progress table says %d were published: part of a checkpoint", r.snapshots, rows, published)
	case dups != 0:
		bad = fmt.Sprintf("snapshot %d: %d windows visible twice", r.snapshots, dups)
	case newest > latest:
		bad = fmt.Sprintf("snapshot %d: checkpoint %d is published while the newest complete checkpoint is %d", r.snapshots, newest, latest)
	}
	if bad != "" {
		if r.bad++; r.bad <= 5 {
			r.examples = append(r.examples, bad)
		}
	}
	if rows > 0 && rows < int64(kkMessages/1000*kkKeys) {
		r.midRun++
	}
	r.newest = max(r.newest, newest)
	return nil
}
