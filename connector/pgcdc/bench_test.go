package pgcdc_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/pgcdc"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// benchRows is the table size of the benchmarks: each iteration snapshots,
// or streams, this many rows.
const benchRows = 200_000

// The benchmarks read a table of (id bigint, owner text, balance bigint,
// note text, updated timestamptz) rows into a sink that counts them, on
// the real server (INGEST_POSTGRES_DSN or the local one). They report rows
// per wall second and per CPU second of this process (the server's CPU is
// not counted).
//
//	go test ./connector/pgcdc -run '^$' -bench . -benchtime 3x

// BenchmarkSnapshot reads benchRows rows by the chunked snapshot.
func BenchmarkSnapshot(b *testing.B) {
	conn, schema := benchSchema(b)
	benchExec(b, conn, fmt.Sprintf("INSERT INTO %s.t SELECT g, 'owner ' || g, g * 10, 'a note of some length', now() FROM generate_series(1, %d) g", schema, benchRows))
	var wall time.Duration
	var cpu float64
	for i := range b.N {
		slot := fmt.Sprintf("%s_%d", schema, i)
		// Also when the iteration fails: a slot left behind keeps WAL, and
		// keeps the server from starting with wal_level below logical.
		b.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		})
		var count atomic.Int64
		began, cpu0 := time.Now(), cpuSeconds()
		err := benchPipeline(b, schema, slot, true, &count).Run(context.Background(), stream.RunOptions{CheckpointDir: b.TempDir()})
		wall += time.Since(began)
		cpu += cpuSeconds() - cpu0
		dropSlot(b, conn, slot)
		if err != nil {
			b.Fatal(err)
		}
		if count.Load() != benchRows {
			b.Fatalf("%d rows read, want %d", count.Load(), benchRows)
		}
	}
	report(b, wall, cpu)
}

// BenchmarkSnapshotFourTables reads benchRows rows in four tables of a
// quarter each by the chunked snapshot (the default snapshot_parallelism
// reads them at once).
func BenchmarkSnapshotFourTables(b *testing.B) {
	conn, schema := benchSchema(b)
	tables := []string{schema + ".t"}
	for _, name := range []string{"t2", "t3", "t4"} {
		benchExec(b, conn, "CREATE TABLE "+schema+"."+name+" (id bigint PRIMARY KEY, owner text, balance bigint, note text, updated timestamptz)")
		tables = append(tables, schema+"."+name)
	}
	for _, t := range tables {
		benchExec(b, conn, fmt.Sprintf("INSERT INTO %s SELECT g, 'owner ' || g, g * 10, 'a note of some length', now() FROM generate_series(1, %d) g", t, benchRows/4))
	}
	var wall time.Duration
	var cpu float64
	for i := range b.N {
		slot := fmt.Sprintf("%s_%d", schema, i)
		b.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		})
		src, err := pgcdc.NewSource(context.Background(), pgcdc.Config{DSN: benchDSN(), Tables: tables, Slot: slot, Publication: schema, StopAtLatest: true})
		if err != nil {
			b.Fatal(err)
		}
		var count atomic.Int64
		p := stream.New("bench")
		stream.To(stream.From(p, "cdc", src), "count", stream.Sink[row.Row](countSink{n: &count}))
		began, cpu0 := time.Now(), cpuSeconds()
		err = p.Run(context.Background(), stream.RunOptions{CheckpointDir: b.TempDir()})
		wall += time.Since(began)
		cpu += cpuSeconds() - cpu0
		dropSlot(b, conn, slot)
		if err != nil {
			b.Fatal(err)
		}
		if count.Load() != benchRows {
			b.Fatalf("%d rows read, want %d", count.Load(), benchRows)
		}
	}
	report(b, wall, cpu)
}

// BenchmarkStream streams benchRows inserted rows, in transactions of 1000,
// from a running source: the time from the first insert to the last row
// counted (the inserts overlap with the reading).
func BenchmarkStream(b *testing.B) {
	conn, schema := benchSchema(b)
	var wall time.Duration
	var cpu float64
	for i := range b.N {
		// Each iteration's source snapshots an empty table (before its
		// slot exists, so the truncate is not in its stream).
		benchExec(b, conn, "TRUNCATE "+schema+".t")
		slot := fmt.Sprintf("%s_%d", schema, i)
		// Also when the iteration fails: a slot left behind keeps WAL, and
		// keeps the server from starting with wal_level below logical.
		b.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		})
		var count atomic.Int64
		streaming := make(chan struct{})
		var once atomic.Bool
		log := slog.New(watchHandler{on: func(msg string) {
			if msg == "postgres_cdc: streaming" && once.CompareAndSwap(false, true) {
				close(streaming)
			}
		}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- benchPipeline(b, schema, slot, false, &count).Run(ctx, stream.RunOptions{CheckpointDir: b.TempDir(), Log: log})
		}()
		select {
		case <-streaming:
		case err := <-done:
			b.Fatalf("the pipeline ended before streaming: %v", err)
		}
		began, cpu0 := time.Now(), cpuSeconds()
		for from := int64(0); from < benchRows; from += 1000 {
			benchExec(b, conn, fmt.Sprintf("INSERT INTO %s.t SELECT g, 'owner ' || g, g * 10, 'a note of some length', now() FROM generate_series(%d, %d) g",
				schema, int64(i)*benchRows+from+1, int64(i)*benchRows+from+1000))
		}
		for deadline := time.Now().Add(5 * time.Minute); count.Load() < benchRows; {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d rows after 5 minutes", count.Load(), benchRows)
			}
			time.Sleep(time.Millisecond)
		}
		wall += time.Since(began)
		cpu += cpuSeconds() - cpu0
		cancel()
		<-done
		dropSlot(b, conn, slot)
		if count.Load() != benchRows {
			b.Fatalf("%d rows read, want %d", count.Load(), benchRows)
		}
	}
	report(b, wall, cpu)
}

func report(b *testing.B, wall time.Duration, cpu float64) {
	rows := float64(b.N) * benchRows
	b.ReportMetric(rows/wall.Seconds(), "rows/s")
	b.ReportMetric(rows/cpu, "rows/CPU-s")
	b.ReportMetric(0, "ns/op")
}

// benchPipeline is schema.t → postgres_cdc (slot) → a sink counting rows.
func benchPipeline(b *testing.B, schema, slot string, stop bool, count *atomic.Int64) *stream.Pipeline {
	src, err := pgcdc.NewSource(context.Background(), pgcdc.Config{DSN: benchDSN(), Tables: []string{schema + ".t"}, Slot: slot, Publication: schema, StopAtLatest: stop})
	if err != nil {
		b.Fatal(err)
	}
	p := stream.New("bench")
	stream.To(stream.From(p, "cdc", src), "count", stream.Sink[row.Row](countSink{n: count}))
	return p
}

// benchDSN is the server the benchmarks use; INGEST_POSTGRES_DSN
// overrides it.
func benchDSN() string {
	if d := os.Getenv("INGEST_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

// benchSchema creates a schema with an empty table t and its publication.
func benchSchema(b *testing.B) (*pgx.Conn, string) {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), benchDSN())
	if err != nil {
		b.Skipf("PostgreSQL is not reachable (%v): start it with wal_level = logical to run the benchmarks", err)
	}
	b.Cleanup(func() { _ = conn.Close(context.Background()) })
	schema := fmt.Sprintf("bench_%d", time.Now().UnixNano()%1_000_000_000)
	benchExec(b, conn, "CREATE SCHEMA "+schema)
	benchExec(b, conn, "CREATE TABLE "+schema+".t (id bigint PRIMARY KEY, owner text, balance bigint, note text, updated timestamptz)")
	b.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP PUBLICATION IF EXISTS "+schema)
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	return conn, schema
}

func benchExec(b *testing.B, conn *pgx.Conn, sql string) {
	b.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// dropSlot drops a slot, waiting for its connection to let go of it.
func dropSlot(b *testing.B, conn *pgx.Conn, slot string) {
	b.Helper()
	var err error
	for range 100 {
		if _, err = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("dropping slot %s: %v", slot, err)
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}

// countSink counts the records it is given.
type countSink struct{ n *atomic.Int64 }

func (s countSink) Descriptor() connector.Descriptor         { return connector.Descriptor{Type: "count"} }
func (s countSink) Describe() string                         { return "count" }
func (s countSink) Committer() runtime.Committer             { return nil }
func (s countSink) NewSubtask() runtime.SinkSubtask[row.Row] { return s }
func (s countSink) Open(*runtime.Context) error              { return nil }
func (s countSink) Write(b runtime.Batch[row.Row]) error {
	s.n.Add(int64(len(b)))
	return nil
}
func (s countSink) ProcessWatermark(int64) error             { return nil }
func (s countSink) Snapshot(int64) (runtime.Snapshot, error) { return runtime.Snapshot{}, nil }
func (s countSink) NotifyComplete(int64) error               { return nil }
func (s countSink) Close() error                             { return nil }

// watchHandler hands every log message to on.
type watchHandler struct{ on func(msg string) }

func (h watchHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h watchHandler) Handle(_ context.Context, r slog.Record) error {
	h.on(strings.TrimSpace(r.Message))
	return nil
}
func (h watchHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h watchHandler) WithGroup(string) slog.Handler      { return h }
