package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// TestPebbleDamagedSharedFile kills a pebble pipeline mid-stream, paused
// right after a commit, when its newest checkpoint N references an SST file
// written by an earlier checkpoint, then, on copies of what the run left:
//
//   - damages that file in checkpoint storage and removes the state
//     directory (no local copy can stand for it), or damages its local
//     copies too, or removes it from storage (fresh state directory): the
//     recovery's verification pass finds it in every checkpoint that
//     references it, and the engine does what it does with any damaged
//     checkpoint (runtime/fallback.go): when the sink published output
//     after the newest checkpoint that verifies, the run is refused (exit 1)
//     with a message naming the file and why, restoring and publishing
//     nothing, and once the file is put back the pipeline runs to its end;
//     otherwise it falls back to that checkpoint, warning with the file's
//     name, and runs to its end. Either way the output is then exactly the
//     expected windows;
//   - damages every SST file of N's local copies in place (as a failing
//     disk would), storage intact: the restore reads those files from
//     storage, without a warning, and the output is exactly the expected
//     windows.
//
// Then it kills the pipeline paused before a commit and damages an SST file
// the newest checkpoint wrote itself: the sink has published nothing of
// that checkpoint, so the recovery falls back to the one before, warning
// with the file's name, and the output is exactly the expected windows.
func TestPebbleDamagedSharedFile(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test; not in -short")
	}
	bin := pkBinary(t)
	// An SST file of an earlier checkpoint that the newest one references
	// (a checkpoint whose store compacted everything into new files
	// references none).
	earlier := func(id int64, h storage.Handle) bool { return h.Checkpoint != id }
	sc := pdKill(t, bin, "job/after-commit-before-cleanup", earlier)

	t.Run("corrupt in storage, fresh state dir", func(t *testing.T) {
		dir := pdCopy(t, sc.base)
		pdFlip(t, filepath.Join(dir, sc.rel))
		if err := os.RemoveAll(filepath.Join(dir, "data", "state")); err != nil {
			t.Fatal(err)
		}
		sc.detected(t, dir, "checksum mismatch")
	})

	t.Run("corrupt in storage and in the local copy", func(t *testing.T) {
		dir := pdCopy(t, sc.base)
		pdFlip(t, filepath.Join(dir, sc.rel))
		// Every local copy of the file: the one of checkpoint N, and any
		// other checkpoint's the kill left.
		for _, c := range pdGlob(t, filepath.Join(dir, sc.storeRel, "ckpt-*", sc.local)) {
			pdFlip(t, c)
		}
		sc.detected(t, dir, "checksum mismatch")
	})

	t.Run("missing from storage, fresh state dir", func(t *testing.T) {
		dir := pdCopy(t, sc.base)
		if err := os.Remove(filepath.Join(dir, sc.rel)); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, "data", "state")); err != nil {
			t.Fatal(err)
		}
		sc.detected(t, dir, "no such file")
	})

	t.Run("corrupt in the local copies only", func(t *testing.T) {
		dir := pdCopy(t, sc.base)
		var copies []string
		for _, c := range pdGlob(t, filepath.Join(dir, "data", "state", sc.m.JobID, "per_key", "*", fmt.Sprintf("ckpt-%d", sc.newest))) {
			copies = append(copies, pdGlob(t, filepath.Join(c, "*.sst"))...)
		}
		if len(copies) == 0 {
			t.Fatalf("checkpoint %d's local copies hold no SST file", sc.newest)
		}
		for _, c := range copies {
			pdFlipInPlace(t, c)
		}
		r, log := sc.finish(t, dir)
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Logf("damaged %d SST files of the local copies; restored checkpoints %v; %d pebble subtask restores: %d files, %d from the local copies, %d from storage",
			len(copies), r.restored, r.subtasks, r.files, r.local, r.stored)
		if len(r.restored) != 1 || r.restored[0] != sc.newest || r.subtasks != pdWindowParallelism {
			t.Fatalf("restored checkpoints %v in %d pebble subtask restores, want checkpoint %d in %d", r.restored, r.subtasks, sc.newest, pdWindowParallelism)
		}
		if r.stored != len(copies) || r.local+r.stored != r.files {
			t.Fatalf("the restores took %d files from storage and %d from the local copies (of %d); %d local files were damaged", r.stored, r.local, r.files, len(copies))
		}
		for _, l := range log {
			if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) &&
				(strings.Contains(l, "job failed") || strings.Contains(l, "damaged") || strings.Contains(l, "corrupt") || strings.Contains(l, "pebble")) {
				t.Errorf("the run complained: %s", l)
			}
		}
	})

	t.Run("unpublished checkpoint's own file corrupt", func(t *testing.T) {
		own := func(id int64, h storage.Handle) bool { return h.Checkpoint == id }
		sc := pdKill(t, bin, "job/after-metadata-before-commit", own)
		if sc.refuses {
			t.Fatalf("the recovery would refuse: the test needs a newest checkpoint %d whose output is not published (published up to %d) and a checkpoint before it that verifies (%d)", sc.newest, sc.published, sc.target)
		}
		dir := pdCopy(t, sc.base)
		pdFlip(t, filepath.Join(dir, sc.rel))
		if err := os.RemoveAll(filepath.Join(dir, "data", "state")); err != nil {
			t.Fatal(err)
		}
		sc.detected(t, dir, "checksum mismatch")
	})
}

// The pipeline the damaged-file tests run: the contract pipeline with its
// window's state in pebble (two subtasks), 4 s of stream at pdRate records
// a second, checkpoints every 200 ms.
const (
	pdCount = 12000
	pdRate  = 3000
	pdKeys  = 2000
	// pdWindowParallelism is the window's parallelism.
	pdWindowParallelism = 2
)

// pdScenario is what a killed pebble pipeline left, and an SST file of its
// newest checkpoint to damage.
type pdScenario struct {
	bin string
	// base is the pipeline's directory: pipeline.yaml and data/.
	base   string
	newest int64
	m      *checkpoint.Metadata
	// h is the stored file; rel its path under base, local its name in the
	// store, storeRel the path of the store's directory (kg-<range>) under
	// base.
	h               storage.Handle
	rel, local      string
	storeRel        string
	target          int64 // the checkpoint a recovery falls back to with h damaged (0: none)
	damaged         []int64
	published       int64 // the newest checkpoint whose output the sink published
	refuses         bool  // published > target: a recovery with h damaged must refuse
	committedBefore []string
}

// pdKill runs the pipeline in a new directory and kills it paused at the
// failpoint point (its third marker), again until the newest checkpoint,
// not the final one, names an SST file pick accepts.
func pdKill(t *testing.T, bin, point string, pick func(newest int64, h storage.Handle) bool) *pdScenario {
	t.Helper()
	sc := &pdScenario{bin: bin}
	var yaml string
	sc.base, yaml = scenarioDir(t, testkit.WindowPipeline{Name: "pebble-damaged", Interval: 200 * time.Millisecond, Retain: 2,
		Count: pdCount, Rate: pdRate, Keys: pdKeys, Parallelism: 1, WindowParallelism: pdWindowParallelism, StateDir: "data/state"}.YAML())
	ckpts, out := filepath.Join(sc.base, "data", "checkpoints"), filepath.Join(sc.base, "data", "out")
	var owner checkpoint.SubtaskState
	for attempt := 0; sc.h.Name == ""; attempt++ {
		// Windows fire and drop their state every second, and the
		// compactions their range deletions trigger may rewrite a
		// subtask's whole store between two checkpoints: then the newest
		// names no earlier file, and another run is killed later on.
		if attempt == 8 {
			t.Fatalf("after %d runs killed at %s, the newest checkpoint %d names no SST file to damage", attempt, point, sc.newest)
		}
		p := knStart(t, bin, yaml, point+"=pause(300ms)", attempt > 0)
		k := p.killAt(knAim{failpoint: point, nth: 3, deadline: 10 * time.Second})
		p.awaitExit(t, attempt, knExitWait)
		if !k.killed || k.marker.at == 0 {
			t.Fatalf("run %d was not killed paused at %s (killed %v, %d markers):\n%s", attempt, point, k.killed, k.markers, p.tailText())
		}
		sc.newest, sc.m = pdNewest(t, ckpts)
		if sc.m.Final {
			t.Fatalf("checkpoint %d, the newest, is the final one: the kills came too late", sc.newest)
		}
		t.Logf("run %d: killed %v after the start, paused at %s; newest checkpoint %d", attempt, k.at.Round(time.Millisecond), point, sc.newest)
		for _, s := range sc.m.Tasks {
			for _, h := range s.Shared {
				if strings.HasSuffix(h.Name, ".sst") && pick(sc.newest, h) && sc.h.Name == "" {
					sc.h, owner = h, s
				}
			}
		}
	}
	// The stored file, and its name in the store (state-per_key-0-000015.sst
	// is 000015.sst: the state file's name, a dash and the store's name).
	sc.rel = filepath.Join("data", "checkpoints", storage.CheckpointDirName(sc.h.Checkpoint), sc.h.Name)
	sc.local = strings.TrimPrefix(sc.h.Name, owner.State.Name+"-")
	kgs := state.KeyGroupRangeFor(state.DefaultMaxParallelism, pdWindowParallelism, owner.Task.Subtask)
	sc.storeRel = filepath.Join("data", "state", sc.m.JobID, "per_key", fmt.Sprintf("kg-%d-%d", kgs.Start, kgs.End))
	localRel := filepath.Join(sc.storeRel, fmt.Sprintf("ckpt-%d", sc.newest), sc.local)
	if _, err := os.Stat(filepath.Join(sc.base, localRel)); err != nil {
		var b strings.Builder
		knTrees(&b, filepath.Join(sc.base, "data", "state"))
		t.Fatalf("the local copy of %s: %v\n%s", sc.rel, err, b.String())
	}
	// What the engine does when the file is damaged (runtime/fallback.go):
	// it skips the complete checkpoints that fail verification, down to
	// the newest that verifies (target, 0 for none), if the sink published
	// nothing after that one (it published up to the newest checkpoint
	// with output: a directory ckpt-<id>-<job>); else it refuses.
	sc.target, sc.damaged = pdFallback(t, ckpts, sc.h)
	sc.published = pdPublished(t, out)
	sc.refuses = sc.published > sc.target
	sc.committedBefore = committedLines(t, out)
	t.Logf("checkpoint %d names %s, written by checkpoint %d; its local copy is %s. Damaged, checkpoints %v fail verification; the fallback is checkpoint %d, the sink published up to %d: a recovery must %s",
		sc.newest, sc.rel, sc.h.Checkpoint, localRel, sc.damaged, sc.target, sc.published, map[bool]string{true: "refuse", false: "fall back"}[sc.refuses])
	return sc
}

// finish runs the pipeline in dir (a copy of base) to its end and checks
// its output; it returns the restores the run logged and its log lines.
func (sc *pdScenario) finish(t *testing.T, dir string) (*pkRestores, []string) {
	t.Helper()
	r := newPkRestores(filepath.Join(dir, "data", "checkpoints"))
	var (
		mu  sync.Mutex
		log []string
	)
	p := knStartWatch(t, sc.bin, filepath.Join(dir, "pipeline.yaml"), "", true, func(line string) {
		r.line(line)
		if strings.Contains(line, "level=") {
			mu.Lock()
			log = append(log, line)
			mu.Unlock()
		}
	})
	knFinalRun(t, 1, p, 60*time.Second, func() string { return p.restoredText() + ";" })
	checkWindows(t, dir, pdCount, pdKeys)
	mu.Lock()
	defer mu.Unlock()
	return r, log
}

// detected runs the pipeline in dir, a copy of base with the file damaged,
// and checks that the engine names the file and says why (each of why),
// and does what it must: refuses, restoring and publishing nothing (then it
// puts the stored file back and finishes the pipeline), or falls back to
// target and runs to the end.
func (sc *pdScenario) detected(t *testing.T, dir string, why ...string) {
	t.Helper()
	stored := filepath.Join(dir, sc.rel)
	if !sc.refuses {
		r, log := sc.finish(t, dir)
		var said []string
		for _, l := range log {
			if strings.Contains(l, "falling back") {
				said = append(said, l)
			}
		}
		all := strings.Join(said, "\n")
		for _, want := range append([]string{"level=WARN", "skipping a damaged checkpoint", stored, "falling back is exactly-once"}, why...) {
			if !strings.Contains(all, want) {
				t.Errorf("the log does not say %q:\n%s", want, strings.Join(log, "\n"))
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if sc.target == 0 && len(r.restored) > 0 || sc.target > 0 && !slices.Equal(r.restored, []int64{sc.target}) {
			t.Fatalf("restored checkpoints %v, want the fallback %d", r.restored, sc.target)
		}
		t.Logf("fell back to checkpoint %d as expected:\n%s", sc.target, all)
		return
	}
	_, stderr, code := ingest(t, sc.bin, "run", filepath.Join(dir, "pipeline.yaml"))
	if code != 1 {
		t.Fatalf("run on the damaged checkpoint: exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range append([]string{stored, fmt.Sprintf(`sink "out" already published the output of checkpoint %d`, sc.published), "--allow-duplicates"}, why...) {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, `msg="restored from checkpoint"`) || strings.Contains(stderr, `msg="restored pebble state"`) {
		t.Errorf("a checkpoint was restored:\n%s", stderr)
	}
	if got := committedLines(t, filepath.Join(dir, "data", "out")); !slices.Equal(got, sc.committedBefore) {
		t.Fatalf("the refused run changed the output: %d lines, was %d", len(got), len(sc.committedBefore))
	}
	t.Logf("refused as expected:\n%s", pdLastLines(stderr, 1))
	pdCopyFile(t, filepath.Join(sc.base, sc.rel), stored)
	r, _ := sc.finish(t, dir)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.restored, []int64{sc.newest}) {
		t.Fatalf("after the file was put back, the run restored checkpoints %v, want %d", r.restored, sc.newest)
	}
}

// pdFallback returns the newest complete checkpoint in ckpts that neither
// references the stored file h nor misses a file it references (0 for none)
// and, newest first, the newer ones, which the recovery finds damaged. (A
// checkpoint outside the retained ones, held in storage only because a
// retained one references its files, may have lost the files it references
// itself: the retention discards them once nothing retained references them.)
func pdFallback(t *testing.T, ckpts string, h storage.Handle) (target int64, damaged []int64) {
	t.Helper()
	st, err := storage.NewLocal(ckpts)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if !entries[i].Complete {
			continue
		}
		data, err := st.ReadMetadata(t.Context(), entries[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			t.Fatal(err)
		}
		bad := false
		for _, s := range m.Tasks {
			files := slices.Clone(s.Shared)
			if s.State != nil {
				files = append(files, *s.State)
			}
			for _, f := range files {
				_, err := os.Stat(filepath.Join(ckpts, storage.CheckpointDirName(f.Checkpoint), f.Name))
				bad = bad || f == h || err != nil
			}
		}
		if !bad {
			return m.ID, damaged
		}
		damaged = append(damaged, m.ID)
	}
	return 0, damaged
}

// pdPublished returns the newest checkpoint whose output the file sink
// committed under out (its directories are named ckpt-<id>-<job>), 0 for
// none.
func pdPublished(t *testing.T, out string) int64 {
	t.Helper()
	des, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var newest int64
	for _, de := range des {
		digits, ok := strings.CutPrefix(de.Name(), "ckpt-")
		if !ok || !testkit.IsCommitted(de.Name()) {
			continue
		}
		digits, _, _ = strings.Cut(digits, "-")
		if id, err := strconv.ParseInt(digits, 10, 64); err == nil {
			newest = max(newest, id)
		}
	}
	return newest
}

// pdLastLines returns the last n lines of s.
func pdLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pdNewest returns the newest complete checkpoint in ckpts and its metadata.
func pdNewest(t *testing.T, ckpts string) (int64, *checkpoint.Metadata) {
	t.Helper()
	st, err := storage.NewLocal(ckpts)
	if err != nil {
		t.Fatal(err)
	}
	id, data, _, err := storage.Latest(t.Context(), st)
	if err != nil {
		t.Fatalf("the newest checkpoint in %s: %v", ckpts, err)
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	return id, m
}

func pdGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pdFlip replaces the file at path by a copy with one byte in the middle
// changed (a new file: other hard links to the old one stay intact).
func pdFlip(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pdFlipInPlace changes one byte in the middle of the file at path, through
// every hard link to it.
func pdFlipInPlace(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// pdCopy copies the pipeline directory base (files and directories; hard
// links become separate files) into a new temporary directory.
func pdCopy(t *testing.T, base string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		pdCopyFile(t, path, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func pdCopyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
