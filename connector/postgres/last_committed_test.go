package postgres_test

import (
	"context"
	"testing"

	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/runtime"
)

// LastCommitted (runtime.CommitTracker) reports the newest checkpoint the
// sink published for a job, from ingest_sink_progress: 0 before any commit,
// then the newest commit (an empty commit publishes nothing and does not
// count), per job and per sink, also after pruning and for a new process's
// committer.
func TestLastCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config("out", postgres.Append)
	cfg.ProgressHistory = 2
	s := newItemSink(t, cfg)
	tracker, ok := s.Committer().(runtime.CommitTracker)
	if !ok {
		t.Fatal("the postgres committer does not implement runtime.CommitTracker")
	}
	last := func(tr runtime.CommitTracker, job, sink string) int64 {
		t.Helper()
		n, err := tr.LastCommitted(context.Background(), job, sink)
		if err != nil {
			t.Fatalf("LastCommitted(%s, %s): %v", job, sink, err)
		}
		return n
	}
	if n := last(tracker, testJob, "out"); n != 0 {
		t.Fatalf("before any commit: %d, want 0", n)
	}
	w := openWriter(t, s, 0, testJob)
	for id := int64(1); id <= 5; id++ {
		write(t, w, item{ID: id})
		commit(t, s.Committer(), testJob, commitOf(id, id-1, snapshot(t, w, id)))
		_ = w.NotifyComplete(id)
		if n := last(tracker, testJob, "out"); n != id {
			t.Fatalf("after publishing checkpoint %d: %d", id, n)
		}
	}
	commit(t, s.Committer(), testJob, commitOf(6, 5)) // nothing staged: publishes nothing
	if n := last(tracker, testJob, "out"); n != 5 {
		t.Errorf("after an empty commit of 6: %d, want 5", n)
	}
	if n := last(tracker, "another-job", "out"); n != 0 {
		t.Errorf("another job: %d, want 0", n)
	}
	if n := last(tracker, testJob, "other-sink"); n != 0 {
		t.Errorf("another sink: %d, want 0", n)
	}
	fresh := newItemSink(t, cfg).Committer().(runtime.CommitTracker)
	if n := last(fresh, testJob, "out"); n != 5 {
		t.Errorf("a new process's committer: %d, want 5", n)
	}
}
