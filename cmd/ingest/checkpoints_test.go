package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/storage"
)

// ranPipeline runs a bounded datagen → keyed window → file pipeline to its
// final checkpoint and returns the pipeline file and its checkpoint storage.
func ranPipeline(t *testing.T) (string, string, *storage.Local) {
	t.Helper()
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "checkpoints")
	src := fmt.Sprintf(`pipeline: inspectme
checkpoint:
  interval: 5ms
  dir: %q
  retain: 3
sources:
  events:
    type: datagen
    parallelism: 2
    count: 3000
    rate: 20000
    keys: 10
    event_interval: 1ms
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 100ms
    parallelism: 2
    aggregates:
      n: count()
sinks:
  out:
    type: file
    input: per_key
    path: %q
    parallelism: 2
`, ckDir, filepath.Join(dir, "out"))
	path := writePipeline(t, src)
	st, err := storage.NewLocal(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	// How many periodic checkpoints complete within the run depends on the
	// machine's load; every run of the finished pipeline adds its final
	// checkpoint, so a few runs leave the 3 retained checkpoints the tests
	// want, whatever the load.
	for run := 0; run == 0 || (run < 5 && len(completeIDs(t, st)) < 3); run++ {
		if _, stderr, err := runCLI(runCmd(), path); err != nil {
			t.Fatalf("run %d: %v\n%s", run+1, err, stderr)
		}
	}
	return path, ckDir, st
}

// completeIDs lists the complete checkpoints of st, increasing.
func completeIDs(t *testing.T, st storage.Storage) []int64 {
	t.Helper()
	entries, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range entries {
		if e.Complete {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func readMeta(t *testing.T, st storage.Storage, id int64) *checkpoint.Metadata {
	t.Helper()
	b, err := st.ReadMetadata(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := checkpoint.DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// inspect shows the status, topology, per-operator state sizes (the sum of
// the subtasks' state files), the sources' positions and pending
// committables of a checkpoint.
func TestCheckpointsInspect(t *testing.T) {
	path, _, st := ranPipeline(t)
	ids := completeIDs(t, st)
	if len(ids) < 2 {
		t.Fatalf("want at least 2 retained checkpoints, have %v", ids)
	}
	newest := ids[len(ids)-1]
	m := readMeta(t, st, newest)

	out, stderr, err := runCLI(checkpointsCmd(), "inspect", path, fmt.Sprint(newest))
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("checkpoint %d in ", newest),
		"status: complete (final), newest: the recovery point",
		"completed: " + m.CompletedAt.UTC().Format("2006-01-02T15:04:05"),
		"duration: ",
		"source positions:\n  events[0]: ",
		"  events[1]: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	// The window's state schemas, with the codecs that carry its size.
	for _, want := range []string{`  per_key "aligned-windows" (value state, codecs [`, `size=100ms`} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks the state schema %q:\n%s", want, out)
		}
	}
	if m.Topology != nil && !strings.Contains(out, "topology: max parallelism") {
		t.Errorf("topology recorded but not shown:\n%s", out)
	}
	// Per operator: subtasks and the sum of its state files' sizes.
	sizes, subtasks := map[string]int64{}, map[string]int{}
	for _, task := range m.Tasks {
		subtasks[task.Task.Operator]++
		if task.State != nil {
			sizes[task.Task.Operator] += task.State.Size
		}
	}
	if sizes["per_key"] == 0 {
		t.Fatalf("the window has no state in checkpoint %d; the test cannot check sizes", newest)
	}
	for op, n := range subtasks {
		want := []string{op, fmt.Sprint(n), fmt.Sprint(sizes[op]), "B"}
		if !hasRow(out, want) {
			t.Errorf("inspect output lacks operator row %q:\n%s", want, out)
		}
	}
	// Pending committables: the final checkpoint's commits, by sink.
	for _, c := range m.Commits {
		if !strings.Contains(out, fmt.Sprintf("  %s: ", c.Sink)) || !strings.Contains(out, fmt.Sprint(c.Checkpoint)) {
			t.Errorf("inspect output lacks the commit of sink %s for checkpoint %d:\n%s", c.Sink, c.Checkpoint, out)
		}
	}

	// An older one is complete but not the recovery point.
	out, _, err = runCLI(checkpointsCmd(), "inspect", path, fmt.Sprint(ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "status: complete\n") {
		t.Errorf("older checkpoint %d: want plain complete status:\n%s", ids[0], out)
	}

	if _, _, err := runCLI(checkpointsCmd(), "inspect", path, "999999"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("inspect of an absent id: err %v, want not found", err)
	}
}

// hasRow reports whether a line of out starts with the fields want
// (columns split on blanks).
func hasRow(out string, want []string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(want) && slices.Equal(f[:len(want)], want) {
			return true
		}
	}
	return false
}

// delete refuses the newest complete checkpoint without --force, deletes an
// older one, refuses while the storage is locked, and deletes the newest
// with --force.
func TestCheckpointsDelete(t *testing.T) {
	path, ckDir, st := ranPipeline(t)
	dropReferences(t, st)
	ids := completeIDs(t, st)
	if len(ids) < 2 {
		t.Fatalf("want at least 2 retained checkpoints, have %v", ids)
	}
	newest, oldest := ids[len(ids)-1], ids[0]

	_, _, err := runCLI(checkpointsCmd(), "delete", path, fmt.Sprint(newest))
	if err == nil || !strings.Contains(err.Error(), "newest complete checkpoint") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("delete newest without --force: err %v, want a refusal naming --force", err)
	}
	if got := completeIDs(t, st); len(got) != len(ids) {
		t.Fatalf("a refused delete removed something: %v -> %v", ids, got)
	}

	out, _, err := runCLI(checkpointsCmd(), "delete", path, fmt.Sprint(oldest))
	if err != nil {
		t.Fatalf("delete %d: %v", oldest, err)
	}
	if !strings.Contains(out, fmt.Sprintf("deleted checkpoint %d", oldest)) {
		t.Errorf("delete output: %q", out)
	}
	if _, err := os.Stat(filepath.Join(ckDir, storage.CheckpointDirName(oldest))); !os.IsNotExist(err) {
		t.Errorf("checkpoint %d directory still there after delete: %v", oldest, err)
	}

	// A running process holds the lock: nothing is deleted.
	release, err := st.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(checkpointsCmd(), "delete", path, "--force", fmt.Sprint(newest))
	release()
	if err == nil || !strings.Contains(err.Error(), "a process running this pipeline") {
		t.Fatalf("delete while locked: err %v, want a refusal", err)
	}
	if got := completeIDs(t, st); got[len(got)-1] != newest {
		t.Fatalf("delete while locked removed the newest: %v", got)
	}

	if _, _, err := runCLI(checkpointsCmd(), "delete", path, "--force", fmt.Sprint(newest)); err != nil {
		t.Fatalf("delete --force newest: %v", err)
	}
	got := completeIDs(t, st)
	if len(got) != len(ids)-2 || (len(got) > 0 && got[len(got)-1] == newest) {
		t.Fatalf("after deleting %d and %d: %v (had %v)", oldest, newest, got, ids)
	}
}

// A checkpoint whose files a newer complete checkpoint builds on
// (incremental snapshots, Metadata.References) is never deleted, not even
// with --force, and the refusal names the checkpoints that reference it.
func TestCheckpointsDeleteRefusesReferenced(t *testing.T) {
	path, _, st := ranPipeline(t)
	dropReferences(t, st)
	ids := completeIDs(t, st)
	if len(ids) < 3 {
		t.Fatalf("want at least 3 retained checkpoints, have %v", ids)
	}
	oldest, middle, newest := ids[0], ids[1], ids[len(ids)-1]
	// Make middle and newest build on a file of oldest, as incremental
	// snapshots would.
	for _, id := range []int64{middle, newest} {
		m := readMeta(t, st, id)
		m.Tasks[0].Shared = append(m.Tasks[0].Shared, storage.Handle{Name: "kg-0", Checkpoint: oldest})
		replaceMeta(t, st, id, m)
	}
	for _, args := range [][]string{{"delete", path, fmt.Sprint(oldest)}, {"delete", path, "--force", fmt.Sprint(oldest)}} {
		_, _, err := runCLI(checkpointsCmd(), args...)
		want := fmt.Sprintf("complete checkpoint(s) %d, %d build on its files", middle, newest)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("not deleting checkpoint %d", oldest)) {
			t.Fatalf("%v: err %v, want a refusal saying %q", args, err, want)
		}
		if got := completeIDs(t, st); !slices.Equal(got, ids) {
			t.Fatalf("%v: a refused delete removed something: %v -> %v", args, ids, got)
		}
	}
	// The referencing checkpoint itself may go (it is not the newest), and
	// then only newest references oldest.
	if _, _, err := runCLI(checkpointsCmd(), "delete", path, fmt.Sprint(middle)); err != nil {
		t.Fatalf("delete %d: %v", middle, err)
	}
	_, _, err := runCLI(checkpointsCmd(), "delete", path, "--force", fmt.Sprint(oldest))
	if want := fmt.Sprintf("complete checkpoint(s) %d build on its files", newest); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("delete --force %d: err %v, want a refusal saying %q", oldest, err, want)
	}
}

// A checkpoint that retention trimmed (no metadata, only the files newer
// checkpoints build on) is listed as trimmed, with what it is kept for, not
// as incomplete; inspect says so and names its files; and delete refuses it,
// even with --force, naming the checkpoints that build on it.
func TestCheckpointsTrimmed(t *testing.T) {
	path, _, st := ranPipeline(t)
	dropReferences(t, st)
	ids := completeIDs(t, st)
	if len(ids) < 3 {
		t.Fatalf("want at least 3 retained checkpoints, have %v", ids)
	}
	oldest, middle, newest := ids[0], ids[1], ids[len(ids)-1]
	m := readMeta(t, st, newest)
	m.Tasks[0].Shared = append(m.Tasks[0].Shared, storage.Handle{Name: "state-a", Checkpoint: oldest}, storage.Handle{Name: "state-b", Checkpoint: oldest})
	replaceMeta(t, st, newest, m)
	m = readMeta(t, st, middle)
	m.Tasks[0].Shared = append(m.Tasks[0].Shared, storage.Handle{Name: "state-a", Checkpoint: oldest})
	replaceMeta(t, st, middle, m)
	if err := st.Trim(context.Background(), oldest, []string{"state-a", "state-b"}); err != nil {
		t.Fatal(err)
	}

	out, _, err := runCLI(checkpointsCmd(), "list", path)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("trimmed: kept for 2 files referenced by checkpoints %d, %d", middle, newest)
	if !hasRow(out, []string{fmt.Sprint(oldest), "trimmed:"}) || !strings.Contains(out, want) {
		t.Errorf("list does not show checkpoint %d as %q:\n%s", oldest, want, out)
	}

	out, _, err = runCLI(checkpointsCmd(), "inspect", path, fmt.Sprint(oldest))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"status: trimmed", "not a recovery point", strings.TrimPrefix(want, "trimmed: "), "  state-a\n", "  state-b\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("inspect of trimmed checkpoint %d does not say %q:\n%s", oldest, w, out)
		}
	}

	_, _, err = runCLI(checkpointsCmd(), "delete", path, "--force", fmt.Sprint(oldest))
	if w := fmt.Sprintf("complete checkpoint(s) %d, %d build on its files", middle, newest); err == nil || !strings.Contains(err.Error(), w) {
		t.Fatalf("delete --force of trimmed checkpoint %d: err %v, want a refusal saying %q", oldest, err, w)
	}
}

// dropReferences rewrites every complete checkpoint's metadata without the
// earlier files its incremental snapshots build on, so that a test decides
// which checkpoints reference which (the state files do not matter to
// delete, which reads only metadata).
func dropReferences(t *testing.T, st *storage.Local) {
	t.Helper()
	for _, id := range completeIDs(t, st) {
		m := readMeta(t, st, id)
		if len(m.References()) == 0 {
			continue
		}
		for i := range m.Tasks {
			m.Tasks[i].Shared = nil
		}
		replaceMeta(t, st, id, m)
	}
}

// replaceMeta makes m checkpoint id's metadata. Metadata is written once,
// so the checkpoint is replaced: its state files go (they do not matter to
// the tests that rewrite metadata, which read only metadata).
func replaceMeta(t *testing.T, st *storage.Local, id int64, m *checkpoint.Metadata) {
	t.Helper()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Discard(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteMetadata(context.Background(), id, b); err != nil {
		t.Fatal(err)
	}
}
