package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

// `ingest run` on a checkpoint directory whose newest checkpoint has a
// damaged state file, after the sink published that checkpoint's output:
// the run is refused (exit 1) with an explanation naming the file, nothing
// is published; `--allow-duplicates` falls back to the previous checkpoint
// and publishes the damaged checkpoint's output once more — exactly that,
// nothing else (docs/reliability.md, "Failure handling").
func TestCLIDamagedCheckpoint(t *testing.T) {
	bin := knBuild(t, t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	// The run takes 3 s (rate-limited); one periodic checkpoint comes at 2 s,
	// so the final one publishes the windows that fired in the last second
	// (20 s of event time).
	const count = 60000
	src := testkit.WindowPipeline{Name: "damaged", Interval: 2 * time.Second, Retain: 2,
		Count: count, Rate: 20000, Keys: 10, Parallelism: 1}.YAML()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := ingest(t, bin, "run", path); code != 0 {
		t.Fatalf("run exit %d, stderr:\n%s", code, stderr)
	}
	checkWindows(t, dir, count, 10)

	ckpts, err := storage.NewLocal(filepath.Join(dir, "data", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ckpts.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("%d checkpoints retained, want 2", len(entries))
	}
	final := entries[1].ID
	damaged := filepath.Join(dir, "data", "checkpoints", storage.CheckpointDirName(final), "state-per_key-0")
	data, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(damaged, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "data", "out")
	before := committedLines(t, out)
	var again []string // the output the final checkpoint published
	for _, l := range readLines(t, out) {
		if strings.HasPrefix(l.File, fmt.Sprintf("ckpt-%010d-", final)) {
			again = append(again, string(l.Text))
		}
	}
	if len(again) == 0 {
		t.Fatalf("checkpoint %d published nothing: the test would not see duplicates", final)
	}

	_, stderr, code := ingest(t, bin, "run", path)
	if code != 1 {
		t.Fatalf("run on the damaged checkpoint: exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{damaged, "checksum mismatch", fmt.Sprintf(`sink "out" already published the output of checkpoint %d`, final), "--allow-duplicates"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := committedLines(t, out); !slices.Equal(got, before) {
		t.Fatalf("the refused run changed the output: %d lines, was %d", len(got), len(before))
	}

	_, stderr, code = ingest(t, bin, "run", "--allow-duplicates", path)
	if code != 0 {
		t.Fatalf("run --allow-duplicates: exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "falling back although sinks published output") {
		t.Errorf("stderr does not warn of the duplicates:\n%s", stderr)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(before), again...)))
	if got := committedLines(t, out); !slices.Equal(got, want) {
		t.Fatalf("output after --allow-duplicates: %d lines, want the %d before and the %d of checkpoint %d again", len(got), len(before), len(again), final)
	}
}

// readLines reads the committed output under dir.
func readLines(t *testing.T, dir string) []testkit.Line {
	t.Helper()
	lines, err := testkit.ReadCommitted(dir)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// committedLines returns the committed output lines under dir, sorted.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, l := range readLines(t, dir) {
		out = append(out, string(l.Text))
	}
	slices.Sort(out)
	return out
}
