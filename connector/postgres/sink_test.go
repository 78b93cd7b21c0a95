package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

func TestSinkDeclaresExactlyOnceWithCommitter(t *testing.T) {
	s, err := postgres.NewSink(postgres.SinkConfig{DSN: "postgres://u@localhost/db", Table: "t", Pipeline: "p"}, itemColumns, itemValues)
	if err != nil {
		t.Fatal(err)
	}
	if s.Descriptor().Capabilities.SinkGuarantee() != runtime.ExactlyOnce {
		t.Errorf("Guarantee = %v, want exactly-once", s.Descriptor().Capabilities.SinkGuarantee())
	}
	if s.Committer() == nil {
		t.Error("Committer is nil; a two-phase-commit sink needs one")
	}
	if s.Descriptor().Type != "postgres" {
		t.Errorf("Type = %q, want postgres", s.Descriptor().Type)
	}
	if c := s.Descriptor().Capabilities; !c.Transactional || c.CommitScope != runtime.ScopeDestination || c.Idempotent {
		t.Errorf("Capabilities = %+v, want transactional, destination-wide, not idempotent in append mode", c)
	}
	if got := s.StagingTable(); got != "t__ingest_staging" {
		t.Errorf("StagingTable = %q, want t__ingest_staging", got)
	}
}

// Rows written since the last barrier are staged, invisible in the target
// until their checkpoint commits; then all of them appear at once and the
// staging table is empty.
func TestStagedRowsInvisibleUntilCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Append))
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	write(t, w0, item{1, "a", 1}, item{2, "b", 1})
	write(t, w1, item{3, "c", 1})
	if n := f.count("out"); n != 0 {
		t.Fatalf("before the barrier the target has %d rows", n)
	}
	c0, c1 := snapshot(t, w0, 1), snapshot(t, w1, 1)
	if len(c0) != 1 || c0[0].PreparedAt != 1 || len(c1) != 1 {
		t.Fatalf("Snapshot(1) committables %+v %+v, want one prepared at 1 each", c0, c1)
	}
	// Prepared rows are durable in the staging table before Snapshot returns.
	if n := f.count("out__ingest_staging"); n != 3 {
		t.Fatalf("after prepare the staging table has %d rows, want 3", n)
	}
	if n := f.count("out"); n != 0 {
		t.Fatalf("after prepare, before commit, the target has %d rows", n)
	}
	commit(t, s.Committer(), testJob, commitOf(1, 0, c0, c1))
	if got, want := f.items("out"), []item{{1, "a", 1}, {2, "b", 1}, {3, "c", 1}}; !slices.Equal(got, want) {
		t.Fatalf("after commit the target has %v, want %v", got, want)
	}
	if n := f.count("out__ingest_staging"); n != 0 {
		t.Errorf("%d rows left in the staging table after commit", n)
	}
	if n := f.int64("SELECT rows FROM "+f.quoted(postgres.ProgressTableName)+" WHERE pipeline = $1 AND sink = 'out' AND job = $2 AND checkpoint = 1", f.pipeline, testJob); n != 3 {
		t.Errorf("progress row of checkpoint 1 counts %d rows, want 3", n)
	}
}

// Every snapshot reports all committables not yet known committed;
// NotifyComplete(id) drops those prepared at or before id. An interval with
// no rows adds none.
func TestSnapshotCarriesPendingUntilNotified(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := openWriter(t, newItemSink(t, f.config("out", postgres.Append)), 0, testJob)
	prepared := func(cs []checkpoint.Committable) []int64 {
		var ids []int64
		for _, c := range cs {
			ids = append(ids, c.PreparedAt)
		}
		return ids
	}
	write(t, w, item{ID: 1})
	if got := prepared(snapshot(t, w, 1)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("snapshot 1: %v", got)
	}
	write(t, w, item{ID: 2})
	if got := prepared(snapshot(t, w, 2)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("snapshot 2: %v, want [1 2]", got)
	}
	if got := prepared(snapshot(t, w, 3)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("snapshot 3 after an empty interval: %v, want [1 2]", got)
	}
	cs := snapshot(t, w, 4)
	cs[0].PreparedAt = 99 // the returned slice is the caller's
	if err := w.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	write(t, w, item{ID: 5})
	if got := prepared(snapshot(t, w, 5)); !slices.Equal(got, []int64{2, 5}) {
		t.Fatalf("snapshot 5 after NotifyComplete(1): %v, want [2 5]", got)
	}
	if err := w.NotifyComplete(5); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, w, 6); len(got) != 0 {
		t.Fatalf("snapshot 6 after NotifyComplete(5): %+v, want none", got)
	}
}

// Committing again publishes nothing twice: with the same committer, and
// with a new sink instance (after a restart).
func TestCommitIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	s := newItemSink(t, cfg)
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	write(t, w0, item{1, "p", 0})
	write(t, w1, item{2, "q", 0})
	c := commitOf(2, 0, snapshot(t, w0, 2), snapshot(t, w1, 2))
	commit(t, s.Committer(), testJob, c)
	for range 2 {
		commit(t, s.Committer(), testJob, c)
	}
	commit(t, newItemSink(t, cfg).Committer(), testJob, c)
	if got := f.items("out"); len(got) != 2 {
		t.Fatalf("after re-commits the target has %v, want p and q once each", got)
	}
	if n := f.int64("SELECT count(*) FROM "+f.quoted(postgres.ProgressTableName)+" WHERE pipeline = $1", f.pipeline); n != 1 {
		t.Errorf("%d progress rows, want 1", n)
	}
}

// A commit that fails inside its transaction, just before COMMIT, publishes
// nothing: no row, no progress; the staged rows stay, and the next attempt
// publishes them all.
func TestMidCommitFailurePublishesNothing(t *testing.T) {
	f := newFixture(t) // not parallel: failpoints are process-wide
	s := newItemSink(t, f.config("out", postgres.Append))
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	write(t, w0, item{1, "a", 0}, item{2, "b", 0})
	write(t, w1, item{3, "c", 0})
	c := commitOf(1, 0, snapshot(t, w0, 1), snapshot(t, w1, 1))

	disable := failpoint.Enable("sink/postgres/mid-commit", func() error { return failpoint.ErrInjected })
	err := s.Committer().Commit(context.Background(), testJob, c)
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Commit with the failpoint: %v, want the injected error", err)
	}
	if n := f.count("out"); n != 0 {
		t.Fatalf("a commit that failed before COMMIT published %d rows", n)
	}
	if n := f.count(postgres.ProgressTableName); n != 0 {
		t.Fatalf("a failed commit left %d progress rows", n)
	}
	if n := f.count("out__ingest_staging"); n != 3 {
		t.Fatalf("a failed commit left %d staged rows, want all 3", n)
	}
	commit(t, s.Committer(), testJob, c)
	if got := f.items("out"); len(got) != 3 {
		t.Fatalf("the retried commit published %v, want 3 rows", got)
	}
}

// A reader sampling the table while checkpoints of many subtasks commit sees
// every checkpoint whole or not at all: in one snapshot of the database the
// target holds exactly the rows the progress table says were published.
func TestCommitIsAtomicForConcurrentReader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Append))
	const subtasks, checkpoints, perCheckpoint = 8, 12, 50
	ws := make([]runtime.SinkSubtask[item], subtasks)
	for i := range ws {
		ws[i] = openWriter(t, s, i, testJob)
	}
	stop := make(chan struct{})
	var samples, partial atomic.Int64
	var bad atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		reader, err := pgx.Connect(context.Background(), realDSN())
		if err != nil {
			bad.Store(err.Error())
			return
		}
		defer reader.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, published, err := sample(reader, f.quoted("out"), f.quoted(postgres.ProgressTableName), f.pipeline)
			if err != nil {
				bad.Store(err.Error())
				return
			}
			samples.Add(1)
			if rows != published || rows%(subtasks*perCheckpoint) != 0 {
				bad.Store(fmt.Sprintf("a reader saw %d rows while %d were published (%d per checkpoint)", rows, published, subtasks*perCheckpoint))
			}
			if rows > 0 && rows < subtasks*perCheckpoint*checkpoints {
				partial.Add(1)
			}
		}
	}()
	for id := int64(1); id <= checkpoints; id++ {
		var cs [][]checkpoint.Committable
		for i, w := range ws {
			vals := make([]item, perCheckpoint)
			for k := range vals {
				vals[k] = item{ID: id, Name: fmt.Sprint(i), N: int64(k)}
			}
			write(t, w, vals...)
			cs = append(cs, snapshot(t, w, id))
		}
		commit(t, s.Committer(), testJob, commitOf(id, id-1, cs...))
		for _, w := range ws {
			if err := w.NotifyComplete(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	t.Logf("%d samples, %d between the first and the last commit", samples.Load(), partial.Load())
	if samples.Load() < 2 {
		t.Fatalf("the reader took %d samples: it did not run during the commits", samples.Load())
	}
	if n := f.count("out"); n != subtasks*perCheckpoint*checkpoints {
		t.Fatalf("%d rows committed, want %d", n, subtasks*perCheckpoint*checkpoints)
	}
}

// sample reads, in one snapshot, the target's row count and the rows the
// pipeline's progress rows say were published.
func sample(conn *pgx.Conn, target, progress, pipeline string) (rows, published int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+target).Scan(&rows); err != nil {
			return err
		}
		// The progress table is created with the first sink: before that the
		// target is empty too.
		return tx.QueryRow(ctx, "SELECT coalesce(sum(rows), 0) FROM "+progress+" WHERE pipeline = $1", pipeline).Scan(&published)
	})
	return rows, published, err
}

// Upserts apply a checkpoint's rows in (checkpoint, subtask, sequence)
// order: per key, the last row in that order wins, also when one commit
// carries the committables of two checkpoints.
func TestUpsertLastWriteWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Upsert, "id"))
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)

	// Checkpoint 1: key 1 written by both subtasks (subtask 1 wins), key 2
	// twice by subtask 0 (the later wins).
	write(t, w0, item{1, "w0-first", 1}, item{2, "w0-first", 1})
	write(t, w0, item{2, "w0-second", 2})
	write(t, w1, item{1, "w1", 1})
	c1 := commitOf(1, 0, snapshot(t, w0, 1), snapshot(t, w1, 1))
	commit(t, s.Committer(), testJob, c1)
	want := []item{{1, "w1", 1}, {2, "w0-second", 2}}
	if got := f.items("out"); !slices.Equal(got, want) {
		t.Fatalf("after checkpoint 1: %v, want %v", got, want)
	}
	for _, w := range []runtime.SinkSubtask[item]{w0, w1} {
		if err := w.NotifyComplete(1); err != nil {
			t.Fatal(err)
		}
	}

	// Checkpoint 2 fails after both prepared; checkpoint 3 completes and
	// publishes both: checkpoint 3's rows win over checkpoint 2's, whatever
	// the subtask.
	write(t, w1, item{1, "ckpt2-w1", 2}, item{3, "ckpt2-w1", 2})
	write(t, w0, item{2, "ckpt2-w0", 3})
	snapshot(t, w1, 2)
	snapshot(t, w0, 2)
	write(t, w0, item{1, "ckpt3-w0", 3}, item{3, "ckpt3-w0", 3})
	c3 := commitOf(3, 1, snapshot(t, w0, 3), snapshot(t, w1, 3))
	if len(c3.Committables) != 3 {
		t.Fatalf("commit 3 has %d committables, want 3 (two of checkpoint 2, one of 3)", len(c3.Committables))
	}
	commit(t, s.Committer(), testJob, c3)
	want = []item{{1, "ckpt3-w0", 3}, {2, "ckpt2-w0", 3}, {3, "ckpt3-w0", 3}}
	if got := f.items("out"); !slices.Equal(got, want) {
		t.Fatalf("after checkpoint 3: %v, want %v", got, want)
	}
	// Re-committing an older commit changes nothing.
	commit(t, s.Committer(), testJob, c1)
	if got := f.items("out"); !slices.Equal(got, want) {
		t.Fatalf("after re-committing checkpoint 1: %v, want %v", got, want)
	}
}

// change is an item with the changelog's delete flag.
type change struct {
	item
	del bool
}

// A sink with Deletes applies a changelog: per key the last row of a commit
// upserts the key or deletes it, whatever came before it in the commit and
// in earlier commits; a delete of a key the table lacks changes nothing.
func TestUpsertDeletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("changes", postgres.Upsert, "id")
	cfg.Deletes = true
	s, err := postgres.NewSink(cfg, itemColumns, func(dst []any, c change) []any { return append(itemValues(dst, c.item), c.del) })
	if err != nil {
		t.Fatal(err)
	}
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	// Checkpoint 1: key 1 inserted then deleted (absent), key 2 deleted then
	// inserted (present), key 3 inserted, key 4 deleted (never there).
	write(t, w0, change{item{1, "a", 1}, false}, change{item{2, "b", 1}, true}, change{item{3, "c", 1}, false})
	write(t, w0, change{item{1, "a", 1}, true}, change{item{2, "b", 2}, false})
	write(t, w1, change{item{4, "d", 1}, true})
	commit(t, s.Committer(), testJob, commitOf(1, 0, snapshot(t, w0, 1), snapshot(t, w1, 1)))
	want := []item{{2, "b", 2}, {3, "c", 1}}
	if got := f.items("changes"); !slices.Equal(got, want) {
		t.Fatalf("after checkpoint 1: %v, want %v", got, want)
	}
	_, _ = w0.NotifyComplete(1), w1.NotifyComplete(1)
	// Checkpoint 2: key 3 deleted by subtask 1, key 2 updated, key 1 back.
	write(t, w1, change{item{3, "c", 1}, true})
	write(t, w0, change{item{2, "b", 3}, false}, change{item{1, "a", 5}, false})
	c2 := commitOf(2, 1, snapshot(t, w0, 2), snapshot(t, w1, 2))
	commit(t, s.Committer(), testJob, c2)
	want = []item{{1, "a", 5}, {2, "b", 3}}
	if got := f.items("changes"); !slices.Equal(got, want) {
		t.Fatalf("after checkpoint 2: %v, want %v", got, want)
	}
	// Re-committing changes nothing.
	commit(t, s.Committer(), testJob, c2)
	if got := f.items("changes"); !slices.Equal(got, want) {
		t.Fatalf("after re-committing checkpoint 2: %v, want %v", got, want)
	}
	if n := f.count("changes__ingest_staging"); n != 0 {
		t.Fatalf("%d rows left staged, want 0", n)
	}
}

// Deletes need upsert mode, and a values function that gives the flag.
func TestDeletesNeedUpsertAndAFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("appends", postgres.Append)
	cfg.Deletes = true
	if _, err := postgres.NewSink(cfg, itemColumns, itemValues); err == nil || !strings.Contains(err.Error(), "deletes need mode upsert") {
		t.Fatalf("deletes in append mode: %v, want refused", err)
	}
	cfg = f.config("noflag", postgres.Upsert, "id")
	cfg.Deletes = true
	s := newItemSink(t, cfg)
	w := openWriter(t, s, 0, testJob)
	err := w.Write(runtime.Batch[item]{{Value: item{1, "a", 1}}})
	if err == nil || !strings.Contains(err.Error(), "delete flag") {
		t.Fatalf("a row without the flag: %v, want an error naming the delete flag", err)
	}
}

// An upsert sink whose columns are all key columns inserts new keys and
// leaves existing ones.
func TestUpsertAllKeyColumns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cols := []postgres.Column{{Name: "id", Type: "bigint"}}
	s, err := postgres.NewSink(f.config("keys", postgres.Upsert, "id"), cols, func(dst []any, v int64) []any { return append(dst, v) })
	if err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, testJob)
	write(t, w, int64(1), int64(2), int64(1))
	commit(t, s.Committer(), testJob, commitOf(1, 0, snapshot(t, w, 1)))
	_ = w.NotifyComplete(1)
	write(t, w, int64(2), int64(3))
	commit(t, s.Committer(), testJob, commitOf(2, 1, snapshot(t, w, 2)))
	if n := f.count("keys"); n != 3 {
		t.Fatalf("%d keys, want 3", n)
	}
}

// Rows are copied in chunks of FlushRows while records arrive; the barrier
// copies the rest. Every row is published once.
func TestChunkedStaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.FlushRows = 3
	s := newItemSink(t, cfg)
	w := openWriter(t, s, 0, testJob)
	var all []item
	for b := range 5 {
		var vals []item
		for k := range 4 {
			vals = append(vals, item{ID: int64(b), Name: "x", N: int64(k)})
		}
		write(t, w, vals...)
		all = append(all, vals...)
	}
	// Chunks are copied in the background: the first ones arrive before the barrier.
	deadline := time.Now().Add(10 * time.Second)
	for f.count("out__ingest_staging") < 15 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 20 rows staged before the barrier; want the 6 full chunks of 3", f.count("out__ingest_staging"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	commit(t, s.Committer(), testJob, commitOf(1, 0, snapshot(t, w, 1)))
	if got := f.items("out"); !slices.Equal(got, all) {
		t.Fatalf("published %v, want %v", got, all)
	}
}

// A staged row deleted outside the protocol fails the commit with
// ErrStagedOutputLost, which stops the job, and nothing of the checkpoint
// is published.
func TestStagedRowsLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Append))
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	write(t, w0, item{ID: 1}, item{ID: 2})
	write(t, w1, item{ID: 3})
	c := commitOf(1, 0, snapshot(t, w0, 1), snapshot(t, w1, 1))
	f.exec("DELETE FROM " + f.quoted("out__ingest_staging") + " WHERE id = 2")
	for range 2 {
		err := s.Committer().Commit(context.Background(), testJob, c)
		if !errors.Is(err, postgres.ErrStagedOutputLost) || !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
			t.Fatalf("Commit with a lost row: %v, want ErrStagedOutputLost and runtime.ErrUnrecoverable (not the checkpoint's fault)", err)
		}
		if n := f.count("out"); n != 0 {
			t.Fatalf("a commit with a lost row published %d rows", n)
		}
	}
}

// Abandon deletes every staged row of the job (prepared for a checkpoint
// that never completed, or copied before any barrier), rows of writers of
// other jobs of the pipeline silent for StaleAfter and rows of unregistered
// writers; it keeps a live other job's rows and published rows, and counts
// what it deleted.
func TestAbandon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.FlushRows = 2
	s := newItemSink(t, cfg)
	cm := s.Committer()

	w := openWriter(t, s, 0, testJob)
	write(t, w, item{ID: 1, Name: "published"})
	commit(t, cm, testJob, commitOf(1, 0, snapshot(t, w, 1)))
	_ = w.NotifyComplete(1)
	write(t, w, item{ID: 2, Name: "prepared"}, item{ID: 3, Name: "prepared"})
	snapshot(t, w, 2)
	write(t, w, item{ID: 4, Name: "copied before a barrier"}, item{ID: 5, Name: "copied before a barrier"}, item{ID: 6, Name: "in memory"})
	_ = w.Close() // waits for the copy of 4 and 5 or aborts it

	liveCommit := stageOtherJobs(t, f, s)

	staged := f.count("out__ingest_staging")
	n, err := cm.Abandon(context.Background(), testJob)
	if err != nil {
		t.Fatal(err)
	}
	left := f.count("out__ingest_staging")
	if int64(n) != staged-left {
		t.Errorf("Abandon returned %d, but %d rows were deleted", n, staged-left)
	}
	if left != 1 {
		t.Errorf("%d staged rows left, want only the live job's", left)
	}
	if int64(n) < 4 {
		t.Errorf("Abandon deleted %d rows, want at least 2 prepared + 1 stale + 1 unregistered", n)
	}
	if got := f.items("out"); len(got) != 1 || got[0].Name != "published" {
		t.Errorf("Abandon changed the target: %v", got)
	}
	if n, err := cm.Abandon(context.Background(), testJob); err != nil || n != 0 {
		t.Errorf("second Abandon = %d, %v; want 0, nil", n, err)
	}
	// The live job still publishes its checkpoint.
	commit(t, cm, "live-job", liveCommit)
	if got := f.items("out"); len(got) != 2 || got[1].Name != "live job" {
		t.Errorf("after the live job's commit: %v", got)
	}
}

// Sweep, which runs after completed checkpoints while the job runs, deletes
// the rows of other jobs' writers silent for StaleAfter, and keeps every row
// of the running job — prepared, copied before a barrier, even of a writer
// silent as long — so the job still publishes them; a live other job's rows;
// and rows whose writer it does not know (registered under another control
// schema sharing the staging table, or left to the recovery's Abandon).
func TestSweep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.FlushRows = 2
	s := newItemSink(t, cfg)
	cm := s.Committer()
	sweeper, ok := cm.(runtime.StagingSweeper)
	if !ok {
		t.Fatalf("the committer %T does not sweep", cm)
	}

	w := openWriter(t, s, 0, testJob)
	write(t, w, item{ID: 1, Name: "prepared"}, item{ID: 2, Name: "prepared"})
	prepared := commitOf(1, 0, snapshot(t, w, 1))
	write(t, w, item{ID: 3, Name: "copied before a barrier"}, item{ID: 4, Name: "copied before a barrier"})
	// The running job's writer looks as silent as a stale one.
	f.exec("UPDATE "+f.quoted(postgres.WritersTableName)+" SET active_at = now() - interval '2 days' WHERE job = $1", testJob)

	stageOtherJobs(t, f, s)

	staged := f.count("out__ingest_staging")
	n, err := sweeper.Sweep(context.Background(), testJob, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	left := f.count("out__ingest_staging")
	if n != 1 || int64(n) != staged-left {
		t.Errorf("Sweep returned %d and deleted %d rows, want 1 (the stale job's)", n, staged-left)
	}
	if left != 6 {
		t.Errorf("%d staged rows left, want the running job's 4, the live job's 1 and the unknown writer's 1", left)
	}
	// The running job publishes what it prepared, and the rest after its
	// next barrier.
	commit(t, cm, testJob, prepared)
	_ = w.NotifyComplete(1)
	commit(t, cm, testJob, commitOf(2, 0, snapshot(t, w, 2)))
	var names []string
	for _, it := range f.items("out") {
		names = append(names, it.Name)
	}
	if want := []string{"prepared", "prepared", "copied before a barrier", "copied before a barrier"}; !slices.Equal(names, want) {
		t.Errorf("published %q after a sweep, want %q", names, want)
	}
	_ = w.Close()
}

// stageOtherJobs stages, next to the test job's rows, one row of each kind
// of other writer: a live job's (prepared for its checkpoint 1, whose
// commit it returns), a stale job's (silent for two days) and one of a
// writer not registered. Abandon and Sweep tests tell which they delete.
func stageOtherJobs(t *testing.T, f *fixture, s *postgres.Sink[item]) checkpoint.Commit {
	t.Helper()
	live := openWriter(t, s, 0, "live-job")
	write(t, live, item{ID: 10, Name: "live job"})
	liveCommit := commitOf(1, 0, snapshot(t, live, 1))

	stale := openWriter(t, s, 0, "stale-job")
	write(t, stale, item{ID: 20, Name: "stale job"})
	snapshot(t, stale, 1)
	f.exec("UPDATE "+f.quoted(postgres.WritersTableName)+" SET active_at = now() - interval '2 days' WHERE job = $1", "stale-job")

	f.exec("INSERT INTO " + f.quoted("out__ingest_staging") + " (ingest_writer, ingest_seq, id, name, n) VALUES (42, 0, 30, 'unregistered', 0)")
	return liveCommit
}

// CreateTable creates the target with the columns' types, with the key as
// primary key in upsert mode and no primary key in append mode.
func TestCreateTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, c := range []struct {
		mode postgres.Mode
		key  []string
	}{{postgres.Append, nil}, {postgres.Upsert, []string{"id", "name"}}} {
		name := "created_" + c.mode.String()
		s := newItemSink(t, f.config(name, c.mode, c.key...))
		if _, err := s.Committer().Abandon(ctx, testJob); err != nil { // sets the tables up
			t.Fatal(err)
		}
		rows, _ := f.conn.Query(ctx, "SELECT column_name || ' ' || data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position", f.schema, name)
		types, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"id bigint", "name text", "n bigint"}; !slices.Equal(types, want) {
			t.Errorf("%s: columns %q, want %q", name, types, want)
		}
		rows, _ = f.conn.Query(ctx, "SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY a.attnum", f.quoted(name))
		pk, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pk, c.key) {
			t.Errorf("%s: primary key %q, want %q", name, pk, c.key)
		}
	}
}

// Without CreateTable a missing table, a missing column or (upsert) a
// missing unique index on the key fail at start with a sentence naming the
// table.
func TestTableChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cfg := f.config("missing", postgres.Append)
	cfg.CreateTable = false
	_, err := newItemSink(t, cfg).Committer().Abandon(ctx, testJob)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "create_table") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing table: %v", err)
	}

	f.exec("CREATE TABLE " + f.quoted("nocol") + " (id bigint, name text)")
	cfg = f.config("nocol", postgres.Append)
	cfg.CreateTable = false
	if _, err := newItemSink(t, cfg).Committer().Abandon(ctx, testJob); err == nil || !strings.Contains(err.Error(), "lacks a column") {
		t.Errorf("missing column: %v", err)
	}

	f.exec("CREATE TABLE " + f.quoted("nokey") + " (id bigint, name text, n bigint)")
	cfg = f.config("nokey", postgres.Upsert, "id")
	cfg.CreateTable = false
	_, err = newItemSink(t, cfg).Committer().Abandon(ctx, testJob)
	if err == nil || !strings.Contains(err.Error(), "unique index") || !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
		t.Errorf("upsert without a unique index: %v", err)
	}
	// With one, it works.
	f.exec("CREATE UNIQUE INDEX ON " + f.quoted("nokey") + " (id)")
	if _, err := newItemSink(t, cfg).Committer().Abandon(ctx, testJob); err != nil {
		t.Errorf("upsert with a unique index: %v", err)
	}
}

// A record with a NULL key, or with another number of values than columns,
// fails the subtask with a message naming the column.
func TestBadRecordsFailTheSubtask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cols := []postgres.Column{{Name: "id", Type: "bigint"}, {Name: "v", Type: "text"}}
	s, err := postgres.NewSink(f.config("out", postgres.Upsert, "id"), cols, func(dst []any, v []any) []any { return append(dst, v...) })
	if err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, testJob)
	err = w.Write(runtime.Batch[[]any]{{Value: []any{nil, "x"}}})
	if err == nil || !strings.Contains(err.Error(), `NULL key column "id"`) {
		t.Errorf("NULL key: %v", err)
	}
	w = openWriter(t, s, 1, testJob)
	err = w.Write(runtime.Batch[[]any]{{Value: []any{int64(1)}}})
	if err == nil || !strings.Contains(err.Error(), "1 values for the 2 columns") {
		t.Errorf("too few values: %v", err)
	}
}

// A value the column's type refuses fails staging with an error naming the
// staging table, marked as one a restart cannot cure.
func TestRefusedValueFailsStaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cols := []postgres.Column{{Name: "code", Type: "varchar(3)"}}
	s, err := postgres.NewSink(f.config("out", postgres.Append), cols, func(dst []any, v string) []any { return append(dst, v) })
	if err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s, 0, testJob)
	write(t, w, "abc", "too long")
	_, err = w.Snapshot(1)
	if err == nil || !strings.Contains(err.Error(), "out__ingest_staging") || !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
		t.Fatalf("Snapshot after a refused value: %v, want an error naming the staging table, marked unrecoverable", err)
	}
	t.Log(err)
}

// A writer refreshes its mark on a timer, not only at barriers, so a job
// whose checkpoints are far apart does not look stale to another job's
// cleanup; and a writer whose registration another job's cleanup deleted
// (its staged rows with it) fails at its next barrier instead of preparing
// rows that are gone.
func TestWriterHeartbeat(t *testing.T) {
	defer postgres.SetHeartbeatEvery(50 * time.Millisecond)()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Append))
	w := openWriter(t, s, 0, testJob)
	write(t, w, item{ID: 1, Name: "staged"})
	writers := f.quoted(postgres.WritersTableName)
	f.exec("UPDATE "+writers+" SET active_at = now() - interval '2 days' WHERE job = $1", testJob)
	fresh := func() bool {
		var ok bool
		if err := f.conn.QueryRow(context.Background(), "SELECT active_at > now() - interval '1 minute' FROM "+writers+" WHERE job = $1", testJob).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for deadline := time.Now().Add(10 * time.Second); !fresh(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not refresh active_at between barriers")
		}
	}

	f.exec("DELETE FROM "+writers+" WHERE job = $1", testJob)
	time.Sleep(200 * time.Millisecond) // a few heartbeats
	_, err := w.Snapshot(1)
	if !errors.Is(err, postgres.ErrStagedOutputLost) || !strings.Contains(err.Error(), "no longer registered") {
		t.Fatalf("Snapshot of an unregistered writer: %v, want ErrStagedOutputLost naming the lost registration", err)
	}
}

// Two sinks that register their writers in different control schemas may
// not share a staging table: each one's recovery would take the other's
// staged rows for abandoned. The second is refused at setup, naming the
// table and both writers tables; sinks sharing the control schema share the
// staging table as before.
func TestStagingTableBelongsToOneControlSchema(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := newItemSink(t, f.config("out", postgres.Append))
	if _, err := first.Committer().Abandon(ctx, testJob); err != nil { // sets the tables up
		t.Fatal(err)
	}
	same := newItemSink(t, f.config("out", postgres.Append))
	if _, err := same.Committer().Abandon(ctx, testJob); err != nil {
		t.Fatalf("a second sink with the same control schema: %v", err)
	}

	other := f.schema + "_ctl"
	f.exec("CREATE SCHEMA " + pgx.Identifier{other}.Sanitize())
	t.Cleanup(func() { f.exec("DROP SCHEMA " + pgx.Identifier{other}.Sanitize() + " CASCADE") })
	cfg := f.config("out", postgres.Append)
	cfg.ControlSchema = other
	_, err := newItemSink(t, cfg).Committer().Abandon(ctx, testJob)
	if err == nil || !errors.Is(err, runtime.ErrUnrecoverable) || errors.Is(err, runtime.ErrIncompatible) {
		t.Fatalf("a sink with another control schema on the same staging table: %v, want a refusal wrapping runtime.ErrUnrecoverable", err)
	}
	for _, want := range []string{"out__ingest_staging", other, "set staging_table"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	t.Log(err)
	// With a staging table of its own it works.
	cfg.StagingTable = f.table("out_staging_other")
	if _, err := newItemSink(t, cfg).Committer().Abandon(ctx, testJob); err != nil {
		t.Errorf("with its own staging table: %v", err)
	}
}
