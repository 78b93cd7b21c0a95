package file_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Hostile cases of the file sink: staged and published files changed or
// deleted outside the engine, a reused checkpoint id, a changed path, and two
// pipelines or jobs on one path (#12 items 1, 4e, 5, 6). Each defends
// checkpointing.txt: "A prepared commit can be retried, completed, or
// identified as already committed without publishing duplicates", and "A
// restart must not lose accepted data, repeat already-visible output".

// stageOne stages one file of one record with a subtask of s and returns
// its committables for checkpoint id.
func stageOne(t *testing.T, s *file.Sink[line], subtask int, id int64, v line) []checkpoint.Committable {
	t.Helper()
	w := openWriter(t, s, subtask)
	write(t, w, v)
	return snapshot(t, w, id)
}

// pending is the staged file of committable c under dir.
func pending(dir string, c checkpoint.Committable) string {
	return filepath.Join(dir, "_staging", "pending", file.StagedName(c.Data))
}

// #12 item 5: a staged file that was truncated, changed or deleted before
// its commit is never published as is, nor skipped silently: the commit
// fails naming the file and the ways on, and publishes nothing. With
// --accept-lost-output the rest is published and the loss recorded.
func TestHostileStagedFileDamaged(t *testing.T) {
	for _, k := range []struct {
		name   string
		damage func(path string) error
		want   error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 2) }, file.ErrStagedOutputDamaged},
		{"bit flipped", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[0] ^= 1
			return os.WriteFile(p, b, 0o644)
		}, file.ErrStagedOutputDamaged},
		{"deleted", os.Remove, file.ErrStagedOutputLost},
	} {
		t.Run(strings.ReplaceAll(k.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			s := textSink(dir)
			c0 := stageOne(t, s, 0, 3, "good")
			c1 := stageOne(t, s, 1, 3, "damaged")
			path := pending(dir, c1[0])
			if err := k.damage(path); err != nil {
				t.Fatal(err)
			}
			err := s.Committer().Commit(context.Background(), job, commitOf(3, c0, c1))
			if !errors.Is(err, k.want) || !errors.Is(err, runtime.ErrUnrecoverable) {
				t.Fatalf("Commit = %v, want %v and ErrUnrecoverable", err, k.want)
			}
			for _, want := range []string{path, "--allow-duplicates", "--accept-lost-output"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if got := committed(t, dir); len(got) != 0 {
				t.Fatalf("a failed commit published %v", got)
			}

			ctx := runtime.WithLostOutputAccepted(context.Background())
			if err := s.Committer().Commit(ctx, job, commitOf(3, c0, c1)); err != nil {
				t.Fatalf("Commit accepting lost output: %v", err)
			}
			got := committed(t, dir)
			if len(got) != 1 {
				t.Fatalf("published %v, want the good file only", got)
			}
			for _, lines := range got {
				if strings.Join(lines, ",") != "good" {
					t.Fatalf("published %v, want the good file only", got)
				}
			}
			m := readManifest(t, file.CommittedDir(dir, job, 3))
			if len(m.Lost) != 1 || m.Lost[0] != file.StagedName(c1[0].Data) {
				t.Errorf("manifest lost = %v, want the damaged file", m.Lost)
			}
			// Committing again recognises the commit, loss included.
			if err := s.Committer().Commit(context.Background(), job, commitOf(3, c0, c1)); err != nil {
				t.Errorf("re-commit after an accepted loss: %v", err)
			}
		})
	}
}

// #12 item 1 at the sink: a checkpoint directory that exists is the commit's
// only if its manifest lists the commit's files. The same id naming other
// output (the ledger deleted and the id used again) fails loudly instead of
// answering "already committed" and dropping the new output.
func TestHostileReusedIDIsNotAlreadyCommitted(t *testing.T) {
	dir := t.TempDir()
	s := textSink(dir)
	first := stageOne(t, s, 0, 7, "first")
	if err := s.Committer().Commit(context.Background(), job, commitOf(7, first)); err != nil {
		t.Fatal(err)
	}
	if err := s.Committer().Commit(context.Background(), job, commitOf(7, first)); err != nil {
		t.Fatalf("re-commit of the same output: %v, want recognised as committed", err)
	}
	second := stageOne(t, s, 1, 7, "second")
	err := s.Committer().Commit(context.Background(), job, commitOf(7, second))
	if !errors.Is(err, file.ErrPublishedDiffers) || !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("Commit of other output under id 7 = %v, want ErrPublishedDiffers", err)
	}
	if !strings.Contains(err.Error(), "ledger") {
		t.Errorf("the error does not name the likely cause: %v", err)
	}
	if _, err := os.Stat(pending(dir, second[0])); err != nil {
		t.Errorf("the refused commit moved or lost its staged file: %v", err)
	}
}

// #12 item 6: a sink whose path changed between runs recognises output
// published under the old path, publishes output whose directory was moved
// with its staging where it now is, and for output still staged under the
// old path says so, naming both paths and the ways on, instead of reporting
// staged output lost.
func TestHostileChangedSinkPath(t *testing.T) {
	root := t.TempDir()
	oldDir, newDir := filepath.Join(root, "old"), filepath.Join(root, "new")
	published := stageOne(t, textSink(oldDir), 0, 4, "published")
	if err := textSink(oldDir).Committer().Commit(context.Background(), job, commitOf(4, published)); err != nil {
		t.Fatal(err)
	}
	staged := stageOne(t, textSink(oldDir), 0, 5, "staged")
	moved := textSink(newDir).Committer()
	if err := moved.Commit(context.Background(), job, commitOf(4, published)); err != nil {
		t.Fatalf("re-commit of checkpoint 4 after the path changed: %v", err)
	}
	err := moved.Commit(context.Background(), job, commitOf(5, staged))
	if errors.Is(err, file.ErrStagedOutputLost) || !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("commit of checkpoint 5, staged before the path changed: %v, want a refusal that is not 'lost'", err)
	}
	for _, want := range []string{oldDir, newDir, "nothing is lost", "Set the path back"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if got := committed(t, newDir); len(got) != 0 {
		t.Fatalf("under the new path: %v, want nothing", got)
	}
	// The remedy: the old path for one commit.
	if err := textSink(oldDir).Committer().Commit(context.Background(), job, commitOf(5, staged)); err != nil {
		t.Fatalf("commit of checkpoint 5 under its old path: %v", err)
	}
	if got := committed(t, oldDir); len(got) != 2 {
		t.Fatalf("under the old path: %v, want checkpoints 4 and 5", got)
	}

	// A directory moved with its staging is published where it now is.
	again := stageOne(t, textSink(oldDir), 0, 6, "again")
	movedDir := filepath.Join(root, "moved")
	if err := os.Rename(oldDir, movedDir); err != nil {
		t.Fatal(err)
	}
	if err := textSink(movedDir).Committer().Commit(context.Background(), job, commitOf(6, again)); err != nil {
		t.Fatalf("commit of checkpoint 6 after moving the directory: %v", err)
	}
	if got := committed(t, movedDir); len(got) != 3 {
		t.Fatalf("under the moved path: %v, want checkpoints 4, 5 and 6", got)
	}
}

// hostilePipeline is datagen (bounded) → file sink "out" under dir, for
// pipeline name.
func hostilePipeline(t *testing.T, name, dir string) *stream.Pipeline {
	t.Helper()
	src, err := datagen.Events(datagen.Config{Count: 2000, Keys: 4})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New(name)
	stream.To(stream.From[datagen.Event](p, "events", src), "out", stream.Sink[datagen.Event](file.JSONLines[datagen.Event](dir)))
	return p
}

// #12 item 4e: a sink path belongs to one pipeline's sink. A second pipeline
// on it is refused before its recovery abandons anything, so the first's
// staged output survives; a fresh job of the same pipeline (its checkpoints
// and ledger deleted) that would publish everything again is refused too,
// and --allow-duplicates lets it take over.
func TestHostileSharedSinkPath(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "out")
	runJob(t, newJob(t, hostilePipeline(t, "first", out), memStorage(t), 0))
	inFlight := filepath.Join(out, "_staging", "pending", "part-0-otherjob-00000000-000000.jsonl")
	if err := os.WriteFile(inFlight, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	err := newJob(t, hostilePipeline(t, "second", out), memStorage(t), 0).Run(context.Background())
	if !errors.Is(err, runtime.ErrUnrecoverable) || !strings.Contains(err.Error(), `pipeline "first"`) {
		t.Fatalf("second pipeline on the same path: Run = %v, want a refusal naming pipeline first", err)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("the refused pipeline deleted the first's staged output: %v", err)
	}

	before := committed(t, out)
	err = newJob(t, hostilePipeline(t, "first", out), memStorage(t), 0).Run(context.Background())
	if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "would publish that output again") {
		t.Fatalf("a fresh job of the same pipeline: Run = %v, want a refusal", err)
	}
	if got := committed(t, out); len(got) != len(before) {
		t.Fatalf("the refused job published: %d files, before %d", len(got), len(before))
	}
	job, err := hostilePipeline(t, "first", out).NewJob(stream.RunOptions{Storage: memStorage(t), AllowDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, job)
	if got := committed(t, out); len(got) != 2*len(before) {
		t.Fatalf("after taking over with --allow-duplicates: %d files, want %d (the output again)", len(got), 2*len(before))
	}
}

// manifestOf is the part of a committed directory's manifest tests read.
type manifestOf struct {
	Lost []string `json:"lost"`
}

func readManifest(t *testing.T, dir string) manifestOf {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "_manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifestOf
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
