package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// LastCommitted (runtime.CommitTracker) reads the newest checkpoint whose
// transaction committed from the marker topic: prepared-but-uncommitted and
// aborted transactions do not count, nor other jobs' or sinks' markers, and
// an open transaction whose marker comes before a committed one does not
// hide it (a read-committed read would stop there). Without the marker topic
// it cannot tell.
func TestSinkLastCommitted(t *testing.T) {
	k := newSinkCluster(t, 2)
	cfg := k.config("lastc")
	s := newTextSink(t, cfg)
	tracker, ok := s.Committer().(runtime.CommitTracker)
	if !ok {
		t.Fatal("the kafka committer does not implement runtime.CommitTracker")
	}
	last := func(job, sink string) int64 {
		t.Helper()
		n, err := tracker.LastCommitted(context.Background(), job, sink)
		if err != nil {
			t.Fatalf("LastCommitted(%s, %s): %v", job, sink, err)
		}
		return n
	}
	if _, err := tracker.LastCommitted(context.Background(), sinkJob, "out"); !errors.Is(err, runtime.ErrCommitUnknown) {
		t.Fatalf("before the marker topic exists: %v, want ErrCommitUnknown", err)
	}

	w0, w1 := openSinkWriter(t, s, 0), openSinkWriter(t, s, 1)
	if n := last(sinkJob, "out"); n != 0 {
		t.Fatalf("before any commit: %d, want 0", n)
	}
	sinkWrite(t, w0, "a")
	commitTxns(t, s, sinkCommitOf(3, sinkSnapshot(t, w0, 3)))
	if n := last(sinkJob, "out"); n != 3 {
		t.Fatalf("after committing checkpoint 3: %d", n)
	}
	sinkWrite(t, w0, "b")
	sinkWrite(t, w1, "c")
	commitTxns(t, s, sinkCommitOf(5, sinkSnapshot(t, w0, 5), sinkSnapshot(t, w1, 5)))
	if n := last(sinkJob, "out"); n != 5 {
		t.Fatalf("after committing checkpoint 5: %d", n)
	}

	// w1 prepares 7, which is never committed; w0 prepares 8 after it, which
	// is: 7's open transaction holds back the marker topic's last stable
	// offset, before 8's marker.
	sinkWrite(t, w1, "prepared only")
	sinkSnapshot(t, w1, 7)
	if n := last(sinkJob, "out"); n != 5 {
		t.Fatalf("with 7 prepared, not committed: %d, want 5", n)
	}
	sinkWrite(t, w0, "d")
	commitTxns(t, s, sinkCommitOf(8, sinkSnapshot(t, w0, 8)))
	if !k.stuck(t, s.sh.cfg.MarkerTopic) {
		t.Fatal("the marker topic's last stable offset is not held back: the test does not cover an open transaction")
	}
	if n := last(sinkJob, "out"); n != 8 {
		t.Fatalf("after committing 8 behind the open 7: %d, want 8", n)
	}
	// The recovery aborts 7: still 8.
	if _, err := newTextSink(t, cfg).Committer().Abandon(context.Background(), sinkJob); err != nil {
		t.Fatal(err)
	}
	if n := last(sinkJob, "out"); n != 8 {
		t.Fatalf("after aborting 7: %d, want 8", n)
	}
	if n := last("another-job", "out"); n != 0 {
		t.Errorf("another job: %d, want 0", n)
	}
	if n := last(sinkJob, "another-sink"); n != 0 {
		t.Errorf("another sink: %d, want 0", n)
	}
}

func commitTxns(t *testing.T, s *Sink[string], c checkpoint.Commit) {
	t.Helper()
	if err := s.Committer().Commit(context.Background(), sinkJob, c); err != nil {
		t.Fatalf("Commit(%d): %v", c.Checkpoint, err)
	}
}
