package file_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

const job = "job1"

// line is the record type most tests write: encoded as its own text.
type line string

func textSink(dir string) *file.Sink[line] {
	return file.New(dir, func(dst []byte, v line) ([]byte, error) { return append(dst, v...), nil })
}

func openWriter[T any](t *testing.T, s *file.Sink[T], subtask int) runtime.SinkSubtask[T] {
	t.Helper()
	w := s.NewSubtask()
	ctx := &runtime.Context{
		Task:        checkpoint.TaskID{Operator: "out", Subtask: subtask},
		Parallelism: 2,
		JobID:       job,
	}
	if err := w.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func write(t *testing.T, w runtime.SinkSubtask[line], values ...line) {
	t.Helper()
	b := make(runtime.Batch[line], len(values))
	for i, v := range values {
		b[i] = runtime.Record[line]{Value: v, Time: int64(i)}
	}
	if err := w.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func snapshot[T any](t *testing.T, w runtime.SinkSubtask[T], id int64) []checkpoint.Committable {
	t.Helper()
	s, err := w.Snapshot(id)
	if err != nil {
		t.Fatalf("Snapshot(%d): %v", id, err)
	}
	if s.Inline != nil {
		t.Errorf("Snapshot(%d): file sink returned inline state %q", id, s.Inline)
	}
	return s.Committables
}

// commitOf builds the commit of checkpoint id from the subtasks' committables.
func commitOf(id int64, cs ...[]checkpoint.Committable) checkpoint.Commit {
	c := checkpoint.Commit{Checkpoint: id, Sink: "out"}
	for _, l := range cs {
		for _, x := range l {
			c.Committables = append(c.Committables, x.Data)
		}
	}
	return c
}

// committed reads what a consumer sees: every line of every file under dir
// whose path components do not begin with '_' or '.', by relative file path.
func committed(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." || d.IsDir() {
			return nil
		}
		if !testkit.IsCommitted(rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = splitLines(data)
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func splitLines(data []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func allLines(files map[string][]string) []string {
	var all []string
	for _, l := range files {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

// files lists every regular file under dir, relative and slash-separated.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// topDirs lists the visible entries directly under dir.
func visibleTop(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if testkit.IsCommitted(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestSinkDeclaresExactlyOnceWithCommitter(t *testing.T) {
	s := textSink(t.TempDir())
	if s.Descriptor().Capabilities.SinkGuarantee() != runtime.ExactlyOnce {
		t.Errorf("Guarantee = %v, want exactly-once", s.Descriptor().Capabilities.SinkGuarantee())
	}
	if s.Committer() == nil {
		t.Error("Committer is nil; a two-phase-commit sink needs one")
	}
	if s.Descriptor().Type != "file" {
		t.Errorf("Type = %q, want file", s.Descriptor().Type)
	}
}

func TestCommittedDirName(t *testing.T) {
	got := file.CommittedDir("/out", "abc", 7)
	if filepath.Dir(got) != "/out" {
		t.Fatalf("CommittedDir = %q, want a directory directly under /out", got)
	}
	base := filepath.Base(got)
	var n int64
	var j string
	if _, err := fmt.Sscanf(strings.ReplaceAll(base, "-", " "), "ckpt %d %s", &n, &j); err != nil || n != 7 || j != "abc" {
		t.Fatalf("CommittedDir base = %q, want ckpt-<7>-abc", base)
	}
	if !testkit.IsCommitted(base) {
		t.Fatalf("CommittedDir %q would be hidden from readers", base)
	}
}

// Records written since the last barrier are staged under _staging and are
// invisible until their checkpoint commits; then they appear all at once.
func TestStagedOutputInvisibleUntilCommit(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w := openWriter(t, s, 0)
	write(t, w, "a", "b")
	write(t, w, "c")

	for _, f := range files(t, dir) {
		if !strings.HasPrefix(f, "_staging/") {
			t.Errorf("Write wrote %s outside _staging", f)
		}
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("before the barrier a reader sees %v", got)
	}
	cs := snapshot(t, w, 1)
	if len(cs) != 1 || cs[0].PreparedAt != 1 {
		t.Fatalf("Snapshot(1) committables = %+v, want one prepared at 1", cs)
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("after prepare, before commit, a reader sees %v", got)
	}
	if err := s.Committer().Commit(context.Background(), job, commitOf(1, cs)); err != nil {
		t.Fatal(err)
	}
	got := committed(t, dir)
	if len(got) != 1 {
		t.Fatalf("after commit a reader sees %v, want one file", got)
	}
	for f, lines := range got {
		if want := filepath.Base(file.CommittedDir(dir, job, 1)); !strings.HasPrefix(f, want+"/") {
			t.Errorf("committed file %s is not in %s", f, want)
		}
		if !slices.Equal(lines, []string{"a", "b", "c"}) {
			t.Errorf("committed lines %q, want a b c in order", lines)
		}
	}
	if vis := visibleTop(t, dir); len(vis) != 1 {
		t.Errorf("visible entries under the sink path: %v, want only the checkpoint directory", vis)
	}
}

// Snapshot flushes and closes the staging file: its content is complete on
// disk, and later records go to a new file.
func TestSnapshotPreparesFile(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w := openWriter(t, s, 0)
	write(t, w, "x1", "x2")
	cs := snapshot(t, w, 1)
	if len(cs) != 1 {
		t.Fatalf("committables %+v", cs)
	}
	staged := files(t, filepath.Join(dir, "_staging"))
	if len(staged) != 1 {
		t.Fatalf("staged files %v, want 1", staged)
	}
	data, err := os.ReadFile(filepath.Join(dir, "_staging", staged[0]))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "x1\nx2\n" {
		t.Fatalf("prepared file holds %q, want \"x1\\nx2\\n\" (not flushed?)", data)
	}
	if filepath.Base(staged[0]) != file.StagedName(cs[0].Data) {
		t.Errorf("committable names %q, staged file is %s", cs[0].Data, staged[0])
	}

	write(t, w, "y")
	cs2 := snapshot(t, w, 2)
	if len(cs2) != 2 || bytes.Equal(cs2[0].Data, cs2[1].Data) {
		t.Fatalf("second snapshot committables %+v, want two distinct files", cs2)
	}
	// A snapshot with nothing written since the last one stages no new file.
	cs3 := snapshot(t, w, 3)
	if len(cs3) != 2 {
		t.Fatalf("empty interval: committables %+v, want the 2 pending ones", cs3)
	}
	if n := len(files(t, filepath.Join(dir, "_staging"))); n != 2 {
		t.Fatalf("%d staged files after an empty interval, want 2", n)
	}
}

// Every snapshot reports all committables not yet known committed;
// NotifyComplete(id) drops those prepared at or before id.
func TestSnapshotCarriesPendingUntilNotified(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, textSink(dir), 0)
	prepared := func(cs []checkpoint.Committable) []int64 {
		var ids []int64
		for _, c := range cs {
			ids = append(ids, c.PreparedAt)
		}
		return ids
	}
	write(t, w, "1")
	if got := prepared(snapshot(t, w, 1)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("snapshot 1: %v", got)
	}
	write(t, w, "2")
	if got := prepared(snapshot(t, w, 2)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("snapshot 2 (1 not yet notified): %v, want [1 2]", got)
	}
	write(t, w, "3")
	cs3 := snapshot(t, w, 3)
	if got := prepared(cs3); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("snapshot 3: %v, want [1 2 3]", got)
	}
	// The returned slice is the caller's: changing it does not change the writer.
	cs3[0].PreparedAt = 99
	if err := w.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	write(t, w, "4")
	if got := prepared(snapshot(t, w, 4)); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("snapshot 4 after NotifyComplete(1): %v, want [2 3 4]", got)
	}
	// A late notification of a checkpoint covering several drops them all.
	if err := w.NotifyComplete(3); err != nil {
		t.Fatal(err)
	}
	if got := prepared(snapshot(t, w, 5)); !slices.Equal(got, []int64{4}) {
		t.Fatalf("snapshot 5 after NotifyComplete(3): %v, want [4]", got)
	}
	if err := w.NotifyComplete(5); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, w, 6); len(got) != 0 {
		t.Fatalf("snapshot 6 after NotifyComplete(5): %+v, want none", got)
	}
}

// Two subtasks' files of one checkpoint become visible as one directory.
func TestCommitPublishesAllSubtasksAsOneDirectory(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "a0", "b0")
	write(t, w1, "a1")
	c0, c1 := snapshot(t, w0, 4), snapshot(t, w1, 4)
	if err := s.Committer().Commit(context.Background(), job, commitOf(4, c0, c1)); err != nil {
		t.Fatal(err)
	}
	got := committed(t, dir)
	final := filepath.Base(file.CommittedDir(dir, job, 4))
	if len(got) != 2 {
		t.Fatalf("committed files %v, want 2", got)
	}
	for f := range got {
		if filepath.Dir(f) != final {
			t.Errorf("committed file %s not in %s", f, final)
		}
	}
	if all := allLines(got); !slices.Equal(all, []string{"a0", "a1", "b0"}) {
		t.Errorf("committed lines %q", all)
	}
	// Nothing is left staged.
	if staged := files(t, filepath.Join(dir, "_staging")); len(staged) != 0 {
		t.Errorf("left in staging after commit: %v", staged)
	}
	if vis := visibleTop(t, dir); !slices.Equal(vis, []string{final}) {
		t.Errorf("visible entries %v, want [%s]", vis, final)
	}
}

// A reader polling the sink directory while checkpoints commit sees each
// checkpoint with all of its files or not at all.
func TestCommitIsAtomicForConcurrentReader(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	const subtasks, checkpoints = 12, 15
	ws := make([]runtime.SinkSubtask[line], subtasks)
	for i := range ws {
		ws[i] = openWriter(t, s, i)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			ents, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if !testkit.IsCommitted(e.Name()) {
					continue
				}
				inner, err := os.ReadDir(filepath.Join(dir, e.Name()))
				inner = slices.DeleteFunc(inner, func(f os.DirEntry) bool { return !testkit.IsCommitted(f.Name()) })
				if err == nil && len(inner) != subtasks {
					bad.Store(fmt.Sprintf("%s had %d of %d files", e.Name(), len(inner), subtasks))
				}
			}
		}
	}()
	for id := int64(1); id <= checkpoints; id++ {
		var cs [][]checkpoint.Committable
		for i, w := range ws {
			write(t, w, line(fmt.Sprintf("%d-%d", id, i)))
			cs = append(cs, snapshot(t, w, id))
		}
		if err := s.Committer().Commit(context.Background(), job, commitOf(id, cs...)); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if err := w.NotifyComplete(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatalf("a reader saw a partial checkpoint: %s", msg)
	}
	if n := len(allLines(committed(t, dir))); n != subtasks*checkpoints {
		t.Fatalf("%d committed lines, want %d", n, subtasks*checkpoints)
	}
}

// Committing again is a no-op: nothing published twice, no error, also when
// the staged files are long gone.
func TestCommitIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "p")
	write(t, w1, "q")
	c := commitOf(2, snapshot(t, w0, 2), snapshot(t, w1, 2))
	cm := s.Committer()
	if err := cm.Commit(context.Background(), job, c); err != nil {
		t.Fatal(err)
	}
	before := committed(t, dir)
	for range 2 {
		if err := cm.Commit(context.Background(), job, c); err != nil {
			t.Fatalf("second Commit: %v", err)
		}
	}
	// A fresh committer (after a restart) also recognises the published checkpoint.
	if err := textSink(dir).Committer().Commit(context.Background(), job, c); err != nil {
		t.Fatalf("Commit by a new committer: %v", err)
	}
	after := committed(t, dir)
	if !equalFiles(before, after) {
		t.Fatalf("re-commit changed committed output: %v -> %v", before, after)
	}
	if all := allLines(after); !slices.Equal(all, []string{"p", "q"}) {
		t.Fatalf("committed lines %q, want p q once each", all)
	}
	if staged := files(t, filepath.Join(dir, "_staging")); len(staged) != 0 {
		t.Errorf("re-commit left staged files: %v", staged)
	}
}

func equalFiles(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A commit interrupted after moving some files into
// _staging/commit-<job>-<N>/ is completed by the next Commit.
func TestCommitResumesAfterPartialMove(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "m0")
	write(t, w1, "m1", "n1")
	c := commitOf(3, snapshot(t, w0, 3), snapshot(t, w1, 3))

	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", job, 3))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	moved := file.StagedName(c.Committables[0])
	src := filepath.Join(dir, "_staging", "pending", moved)
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("staged file not where the package documents it (<path>/_staging/pending/): %v", err)
	}
	if err := os.Rename(src, filepath.Join(tmp, moved)); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("mid-commit a reader sees %v", got)
	}

	if err := s.Committer().Commit(context.Background(), job, c); err != nil {
		t.Fatalf("resumed Commit: %v", err)
	}
	got := committed(t, dir)
	if all := allLines(got); !slices.Equal(all, []string{"m0", "m1", "n1"}) {
		t.Fatalf("committed lines %q, want m0 m1 n1", all)
	}
	if len(got) != 2 {
		t.Fatalf("committed files %v, want 2", got)
	}
	if staged := files(t, filepath.Join(dir, "_staging")); len(staged) != 0 {
		t.Errorf("left in staging: %v", staged)
	}
}

// A commit interrupted after every file was moved but before the directory
// rename is completed too.
func TestCommitResumesAfterAllMoved(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w := openWriter(t, s, 0)
	write(t, w, "only")
	c := commitOf(9, snapshot(t, w, 9))
	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", job, 9))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	name := file.StagedName(c.Committables[0])
	if err := os.Rename(filepath.Join(dir, "_staging", "pending", name), filepath.Join(tmp, name)); err != nil {
		t.Fatal(err)
	}
	if err := s.Committer().Commit(context.Background(), job, c); err != nil {
		t.Fatal(err)
	}
	if all := allLines(committed(t, dir)); !slices.Equal(all, []string{"only"}) {
		t.Fatalf("committed %q", all)
	}
}

// A staged file that is neither staged nor moved is reported as lost, and
// nothing of the checkpoint becomes visible.
func TestCommitMissingStagedFile(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "kept")
	write(t, w1, "lost")
	c0, c1 := snapshot(t, w0, 5), snapshot(t, w1, 5)
	if err := os.Remove(filepath.Join(dir, "_staging", "pending", file.StagedName(c1[0].Data))); err != nil {
		t.Fatal(err)
	}
	err := s.Committer().Commit(context.Background(), job, commitOf(5, c0, c1))
	if !errors.Is(err, file.ErrStagedOutputLost) {
		t.Fatalf("Commit with a missing staged file: %v, want an error wrapping ErrStagedOutputLost", err)
	}
	if !strings.Contains(err.Error(), file.StagedName(c1[0].Data)) {
		t.Errorf("error %q does not name the lost file %s", err, file.StagedName(c1[0].Data))
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("a failed commit published %v", got)
	}
	// Retrying does not publish a partial checkpoint either.
	if err := s.Committer().Commit(context.Background(), job, commitOf(5, c0, c1)); !errors.Is(err, file.ErrStagedOutputLost) {
		t.Fatalf("retried Commit: %v, want ErrStagedOutputLost", err)
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("a retried failed commit published %v", got)
	}
}

func TestEmptyCommitDoesNothing(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	openWriter(t, s, 0) // creates the staging directory
	before := files(t, dir)
	for _, c := range []checkpoint.Commit{{Checkpoint: 1, Sink: "out"}, {Checkpoint: 2, Sink: "out", Committables: [][]byte{}}} {
		if err := s.Committer().Commit(context.Background(), job, c); err != nil {
			t.Fatal(err)
		}
	}
	if vis := visibleTop(t, dir); len(vis) != 0 {
		t.Fatalf("an empty commit created %v", vis)
	}
	if after := files(t, dir); !slices.Equal(before, after) {
		t.Fatalf("files changed: %v -> %v", before, after)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "_staging"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "commit-") {
			t.Errorf("an empty commit left %s", e.Name())
		}
	}
}

// Abandon deletes everything staged (open files, prepared files, partial
// commits) and leaves committed output alone.
func TestAbandon(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "committed")
	if err := s.Committer().Commit(context.Background(), job, commitOf(1, snapshot(t, w0, 1))); err != nil {
		t.Fatal(err)
	}
	if err := w0.NotifyComplete(1); err != nil {
		t.Fatal(err)
	}
	write(t, w0, "prepared-not-committed")
	c2 := snapshot(t, w0, 2)
	write(t, w1, "open-file")
	write(t, w0, "open-file-too")
	// A partial commit of another checkpoint.
	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", job, 2))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	name := file.StagedName(c2[0].Data)
	if err := os.Rename(filepath.Join(dir, "_staging", "pending", name), filepath.Join(tmp, name)); err != nil {
		t.Fatal(err)
	}
	_ = w0.Close()
	_ = w1.Close()
	want := len(files(t, filepath.Join(dir, "_staging")))
	if want != 3 {
		t.Fatalf("setup: %d staged files, want 3", want)
	}
	before := committed(t, dir)

	n, err := s.Committer().Abandon(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("Abandon returned %d, want %d", n, want)
	}
	if left := files(t, filepath.Join(dir, "_staging")); len(left) != 0 {
		t.Errorf("left after Abandon: %v", left)
	}
	if after := committed(t, dir); !equalFiles(before, after) {
		t.Errorf("Abandon changed committed output: %v -> %v", before, after)
	}

	// Nothing left: Abandon again deletes nothing.
	if n, err := s.Committer().Abandon(context.Background(), job); err != nil || n != 0 {
		t.Errorf("second Abandon = %d, %v; want 0, nil", n, err)
	}
	// A sink directory that does not exist yet has nothing to abandon.
	if n, err := textSink(filepath.Join(dir, "nope")).Committer().Abandon(context.Background(), job); err != nil || n != 0 {
		t.Errorf("Abandon of a missing directory = %d, %v; want 0, nil", n, err)
	}

	// A writer opened after Abandon stages and commits normally.
	w := openWriter(t, s, 0)
	write(t, w, "after")
	if err := s.Committer().Commit(context.Background(), job, commitOf(3, snapshot(t, w, 3))); err != nil {
		t.Fatal(err)
	}
	if all := allLines(committed(t, dir)); !slices.Equal(all, []string{"after", "committed"}) {
		t.Errorf("committed %q", all)
	}
}

// Sweep, which runs after a completed checkpoint's commit while the job
// runs, deletes staged files another job left, last written before the
// cutoff — a crashed process's prepared and open files, a partial commit —
// and keeps what the running job's writers staged, even when its
// timestamps read older: a prepared file of a later checkpoint and an open
// file, which are then committed as usual.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	sweeper, ok := s.Committer().(runtime.StagingSweeper)
	if !ok {
		t.Fatalf("the committer %T does not sweep", s.Committer())
	}
	// A crashed process's leftovers: a prepared file, an open one and a
	// partial commit, all last written an hour ago.
	old := s.NewSubtask()
	if err := old.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "out"}, Parallelism: 2, JobID: "crashed"}); err != nil {
		t.Fatal(err)
	}
	write(t, old, "abandoned-prepared")
	abandoned := snapshot(t, old, 1)
	write(t, old, "abandoned-open")
	_ = old.Close()
	tmp := filepath.Join(dir, "_staging", fmt.Sprintf("commit-%s-%d", "gone", 7))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	name := file.StagedName(abandoned[0].Data)
	if err := os.Rename(filepath.Join(dir, "_staging", "pending", name), filepath.Join(tmp, name)); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour)
	paths := []string{tmp}
	for _, f := range files(t, filepath.Join(dir, "_staging")) {
		paths = append(paths, filepath.Join(dir, "_staging", f))
	}
	for _, f := range paths {
		if err := os.Chtimes(f, hourAgo, hourAgo); err != nil {
			t.Fatal(err)
		}
	}

	// The running job: checkpoint 1 was triggered, then its writers staged.
	cutoff := time.Now().Add(-time.Minute)
	w0, w1 := openWriter(t, s, 0), openWriter(t, s, 1)
	write(t, w0, "prepared-for-2")
	c2 := snapshot(t, w0, 2)
	write(t, w1, "open")
	staged := len(files(t, filepath.Join(dir, "_staging")))
	// The running job's prepared file looks as old as the leftovers (a
	// clock step, a coarse timestamp): it is still kept.
	if err := os.Chtimes(filepath.Join(dir, "_staging", "pending", file.StagedName(c2[0].Data)), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}

	n, err := sweeper.Sweep(context.Background(), job, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Sweep deleted %d files, want the 2 abandoned ones", n)
	}
	if left := len(files(t, filepath.Join(dir, "_staging"))); left != staged-2 {
		t.Errorf("%d staged files left, want %d", left, staged-2)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied commit directory %s is still there (%v)", tmp, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "_staging", "pending")); err != nil {
		t.Errorf("the pending directory the writers stage into is gone: %v", err)
	}
	// What the running writers staged is published whole.
	c3 := snapshot(t, w1, 3)
	if err := s.Committer().Commit(context.Background(), job, commitOf(3, c2, c3)); err != nil {
		t.Fatal(err)
	}
	if all := allLines(committed(t, dir)); !slices.Equal(all, []string{"open", "prepared-for-2"}) {
		t.Errorf("committed %q after a sweep, want the running writers' lines", all)
	}
	// Nothing abandoned is left; a missing directory has nothing to sweep.
	if n, err := sweeper.Sweep(context.Background(), job, time.Now()); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", n, err)
	}
	if n, err := textSink(filepath.Join(dir, "nope")).Committer().(runtime.StagingSweeper).Sweep(context.Background(), job, time.Now()); err != nil || n != 0 {
		t.Errorf("Sweep of a missing directory = %d, %v; want 0, nil", n, err)
	}
}

// Close abandons the open file: it stays invisible.
func TestCloseLeavesOpenFileInvisible(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, textSink(dir), 0)
	write(t, w, "unfinished")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, dir); len(got) != 0 {
		t.Fatalf("after Close a reader sees %v", got)
	}
}

type typed struct {
	ID    int64             `json:"id"`
	Name  string            `json:"name"`
	Score float64           `json:"score"`
	At    time.Time         `json:"at"`
	Tags  []string          `json:"tags"`
	Attrs map[string]bool   `json:"attrs"`
	Inner struct{ N uint8 } `json:"inner"`
}

func TestJSONLinesEncodesTypedValues(t *testing.T) {
	dir := t.TempDir()
	s := file.JSONLines[typed](dir)
	w := openWriter(t, s, 0)
	in := []typed{
		{ID: 1, Name: "plain", Score: 1.5, At: time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC), Tags: []string{"a"}, Attrs: map[string]bool{"x": true}},
		{ID: -2, Name: "quote \" newline \n tab \t unicode é ☃", Score: -0.25, At: time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)},
		{ID: 1 << 60, Name: "", Score: 1e300},
	}
	in[2].Inner.N = 7
	b := make(runtime.Batch[typed], len(in))
	for i, v := range in {
		b[i] = runtime.Record[typed]{Value: v}
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Committer().Commit(context.Background(), job, commitOf(1, snapshot(t, w, 1))); err != nil {
		t.Fatal(err)
	}
	got := committed(t, dir)
	if len(got) != 1 {
		t.Fatalf("committed %v", got)
	}
	for _, lines := range got {
		if len(lines) != len(in) {
			t.Fatalf("%d lines, want %d: %q", len(lines), len(in), lines)
		}
		for i, l := range lines {
			var v typed
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %d %q is not JSON: %v", i, l, err)
			}
			want, _ := json.Marshal(in[i])
			have, _ := json.Marshal(v)
			if !bytes.Equal(want, have) {
				t.Errorf("line %d decodes to %s, want %s", i, have, want)
			}
			if !strings.Contains(l, `"id":`) || !strings.Contains(l, `"name":`) {
				t.Errorf("line %d %q lacks the json field names", i, l)
			}
		}
	}
}
