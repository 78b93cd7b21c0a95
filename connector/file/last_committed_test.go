package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingest-engine/ingest/runtime"
)

// LastCommitted (runtime.CommitTracker) reports the newest checkpoint whose
// output the sink published for a job: the newest committed directory of
// that job, 0 when there is none (or no directory at all). Staged output,
// empty commits, other jobs' directories and look-alike names do not count.
func TestLastCommitted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	s := textSink(dir)
	tracker, ok := s.Committer().(runtime.CommitTracker)
	if !ok {
		t.Fatal("the file sink's committer does not implement runtime.CommitTracker")
	}
	last := func(job string) int64 {
		t.Helper()
		n, err := tracker.LastCommitted(context.Background(), job, "out")
		if err != nil {
			t.Fatalf("LastCommitted(%s): %v", job, err)
		}
		return n
	}
	if n := last(job); n != 0 {
		t.Fatalf("before the directory exists: %d, want 0", n)
	}
	w := openWriter(t, s, 0)
	for _, id := range []int64{3, 12} {
		write(t, w, "a")
		if err := s.Committer().Commit(context.Background(), job, commitOf(id, snapshot(t, w, id))); err != nil {
			t.Fatal(err)
		}
		_ = w.NotifyComplete(id)
		if n := last(job); n != id {
			t.Fatalf("after publishing checkpoint %d: %d", id, n)
		}
	}
	write(t, w, "staged, not published")
	snapshot(t, w, 13)
	if err := s.Committer().Commit(context.Background(), job, commitOf(14)); err != nil { // empty: no directory
		t.Fatal(err)
	}
	write(t, w, "b")
	if err := s.Committer().Commit(context.Background(), "job2", commitOf(20, snapshot(t, w, 20))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ckpt-0000000099-job1x", "ckpt-99-job1", "ckpt-+000000099-job1"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ckpt-0000000098-job1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := last(job); n != 12 {
		t.Errorf("job1: %d, want 12 (13 is only staged, 14 was empty)", n)
	}
	if n := last("job2"); n != 20 {
		t.Errorf("job2: %d, want 20", n)
	}
	if n := last("job3"); n != 0 {
		t.Errorf("job3: %d, want 0", n)
	}
}
