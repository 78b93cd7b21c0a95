package postgres_test

import (
	"testing"

	"github.com/ingest-engine/ingest/connector/postgres"
)

// Progress rows more than ProgressHistory checkpoint ids behind the newest
// are pruned; re-committing a checkpoint that old is taken as published
// (its staged rows are long gone) instead of failing as lost.
func TestProgressPruning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.ProgressHistory = 2
	s := newItemSink(t, cfg)
	w := openWriter(t, s, 0, testJob)
	first := commitOf(0, 0)
	for id := int64(1); id <= 6; id++ {
		write(t, w, item{ID: id})
		c := commitOf(id, id-1, snapshot(t, w, id))
		if id == 1 {
			first = c
		}
		commit(t, s.Committer(), testJob, c)
		_ = w.NotifyComplete(id)
	}
	if n := f.int64("SELECT min(checkpoint) FROM "+f.quoted(postgres.ProgressTableName)+" WHERE pipeline = $1", f.pipeline); n != 4 {
		t.Errorf("oldest progress row is checkpoint %d, want 4 (6 - 2)", n)
	}
	commit(t, s.Committer(), testJob, first)
	if n := f.count("out"); n != 6 {
		t.Errorf("%d rows after re-committing a pruned checkpoint, want 6", n)
	}
}

// A writer whose connection the server closed reconnects and copies again;
// a committer whose idle connection was closed commits on a new one. Nothing
// is lost or duplicated.
func TestConnectionLossIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.FlushRows = 2
	s := newItemSink(t, cfg)
	w := openWriter(t, s, 0, testJob)
	terminate := func() int64 {
		t.Helper()
		return f.int64("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()", "ingest "+f.pipeline)
	}
	write(t, w, item{ID: 1}, item{ID: 2})
	c1 := commitOf(1, 0, snapshot(t, w, 1))
	commit(t, s.Committer(), testJob, c1) // the committer keeps its connection while w is open
	_ = w.NotifyComplete(1)
	if n := terminate(); n < 2 {
		t.Fatalf("terminated %d of the sink's connections, want the writer's and the committer's", n)
	}
	write(t, w, item{ID: 3}, item{ID: 4}, item{ID: 5})
	c2 := commitOf(2, 1, snapshot(t, w, 2))
	commit(t, s.Committer(), testJob, c2)
	if got := f.items("out"); len(got) != 5 {
		t.Fatalf("after connection loss: %v, want 5 rows", got)
	}
}
