package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
)

// Hostile operator actions against checkpoint storage (#12 items 1, 2, 4b).
// Each defends checkpointing.txt: "A restart must not lose accepted data,
// repeat already-visible output, or combine state from different points in
// the stream", and "Recovery always starts from a checkpoint whose required
// state was fully persisted". The pipeline is the corruption test's (paced
// source → tumbling count window → file sink), two checkpoints retained; the
// run ended normally, so the newest checkpoint F's output is published.

// Deleting the newest checkpoint, its _metadata, or every checkpoint, and
// running again, is refused: the sink already published the output of the
// checkpoint that is gone, and restoring what is left would publish it a
// second time (or, before the ledger, reuse F's id and have the file sink
// take the new output for the published one and drop it). Nothing more is
// published.
func TestHostileMissingNewestCheckpointIsRefused(t *testing.T) {
	tm := produce(t, true)
	cases := []struct {
		name    string
		damage  func(t *testing.T, c template)
		restore int64 // the checkpoint recovery would restore
	}{
		{"checkpoints delete newest --force", func(t *testing.T, c template) {
			removeAll(t, filepath.Join(c.ck, storage.CheckpointDirName(c.final)))
		}, tm.prev},
		{"newest _metadata missing", func(t *testing.T, c template) {
			removeAll(t, filepath.Join(c.ck, storage.CheckpointDirName(c.final), storage.MetadataName))
		}, tm.prev},
		{"every checkpoint deleted, ledger kept", func(t *testing.T, c template) {
			dirs, err := filepath.Glob(filepath.Join(c.ck, storage.CheckpointDirName(0)[:4]+"*"))
			if err != nil || len(dirs) < 2 {
				t.Fatalf("checkpoint directories %v: %v", dirs, err)
			}
			for _, d := range dirs { // the held ones too
				removeAll(t, d)
			}
		}, 0},
	}
	for _, k := range cases {
		t.Run(strings.ReplaceAll(k.name, " ", "_"), func(t *testing.T) {
			c := tm.copyOf(t)
			k.damage(t, c)
			before := committedOutput(t, c.out)
			_, _, err := runCopy(t, c, false)
			var pe *runtime.PublishedPastError
			if !errors.As(err, &pe) || !errors.Is(err, runtime.ErrIncompatible) {
				t.Fatalf("Run = %v, want a *PublishedPastError (ErrIncompatible)", err)
			}
			if pe.Restored != k.restore {
				t.Errorf("refusal names checkpoint %d to restore, want %d", pe.Restored, k.restore)
			}
			for _, want := range []string{fmt.Sprintf(`sink "out" already published the output of checkpoint %d`, c.final), "deleted or lost", "--allow-duplicates"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			if diff := diffMultisets(multiset(committedOutput(t, c.out)), multiset(before)); diff != "" {
				t.Errorf("the refused run changed the published output:\n%s", diff)
			}
		})
	}
}

// With --allow-duplicates the same run restores what is left and publishes
// the lost checkpoint's output again, under new checkpoint ids: no id is
// reused, so every published directory keeps its content and nothing is
// dropped. The output is every window once more for the replayed range and
// exactly once otherwise.
func TestHostileDeletedCheckpointIDIsNeverReused(t *testing.T) {
	tm := produce(t, true)
	c := tm.copyOf(t)
	removeAll(t, filepath.Join(c.ck, storage.CheckpointDirName(c.final)))
	before := committedOutput(t, c.out)
	again := before[c.final]
	if len(again) == 0 {
		t.Fatalf("checkpoint %d published nothing: the test would see no loss", c.final)
	}
	job, _, err := runCopy(t, c, true)
	if err != nil {
		t.Fatalf("Run with AllowDuplicates = %v", err)
	}
	if s := job.Stats(); s.RestoredFrom != c.prev {
		t.Errorf("restored checkpoint %d, want %d", s.RestoredFrom, c.prev)
	}
	after := committedOutput(t, c.out)
	for id, ws := range before {
		if diff := diffMultisets(multiset(map[int64][]wCount{id: after[id]}), multiset(map[int64][]wCount{id: ws})); diff != "" {
			t.Errorf("published checkpoint %d changed:\n%s", id, diff)
		}
	}
	for id := range after {
		if _, old := before[id]; !old && id <= c.final {
			t.Errorf("the new run published checkpoint %d, an id at or below the deleted checkpoint %d", id, c.final)
		}
	}
	want := expectedCounts(cCount)
	for _, w := range again {
		want[w]++
	}
	if diff := diffMultisets(multiset(after), want); diff != "" {
		t.Errorf("published output: want every window once and those of checkpoint %d twice:\n%s", c.final, diff)
	}
}

// ghostStorage makes the metadata write of checkpoint ghost land and report
// failure, with its undo failing too (storage/blob: "outcome unknown …
// deleting it failed"), and from then on fails every metadata write,
// discard and trim, so the job restarts with the ghost the newest complete checkpoint
// on disk.
type ghostStorage struct {
	storage.Storage
	ghost  int64
	landed bool
}

var errGhost = errors.New("injected: outcome unknown, and deleting it failed")

func (g *ghostStorage) WriteMetadata(ctx context.Context, id int64, data []byte) error {
	switch {
	case g.landed:
		return errGhost
	case id == g.ghost:
		g.landed = true
		if err := g.Storage.WriteMetadata(ctx, id, data); err != nil {
			return err
		}
		return errGhost
	}
	return g.Storage.WriteMetadata(ctx, id, data)
}

func (g *ghostStorage) Discard(ctx context.Context, id int64) error {
	if g.landed {
		return errGhost
	}
	return g.Storage.Discard(ctx, id)
}

func (g *ghostStorage) Trim(ctx context.Context, id int64, keep []string) error {
	if g.landed {
		return errGhost
	}
	return g.Storage.Trim(ctx, id, keep)
}

// A checkpoint reported failed whose metadata stayed in storage (#12 item
// 4b) is recorded in the ledger before any later checkpoint may complete,
// and a recovery never restores it: it restores the checkpoint before and
// deletes the ghost. The output stays exact.
func TestHostileFailedCheckpointThatLandedIsNeverRestored(t *testing.T) {
	dir := t.TempDir()
	local, err := storage.NewLocal(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	const ghost = 3
	st := &ghostStorage{Storage: local, ghost: ghost}
	o := corruptionOptions()
	o.TolerableFailures = 1
	job := newJob(t, corruptionPipeline(pacedEvents{count: cCount, per: cPer}, out), st, o, quickRestarts(0))
	if err := runBounded(t, job); !errors.Is(err, errGhost) {
		t.Fatalf("Run = %v, want the injected storage failures to stop it", err)
	}
	if _, err := local.ReadMetadata(context.Background(), ghost); err != nil {
		t.Fatalf("the ghost checkpoint %d is not complete on disk: %v", ghost, err)
	}
	data, err := local.ReadLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.DecodeLedger(data)
	if err != nil {
		t.Fatal(err)
	}
	if !l.IsFailed(ghost) {
		t.Fatalf("ledger %+v does not record checkpoint %d as failed", l, ghost)
	}

	job = newJob(t, corruptionPipeline(pacedEvents{count: cCount, per: cPer}, out), local, o, quickRestarts(0))
	if err := runBounded(t, job); err != nil {
		t.Fatalf("Run after the ghost: %v", err)
	}
	if s := job.Stats(); s.RestoredFrom >= ghost {
		t.Errorf("restored checkpoint %d, want one before the failed checkpoint %d", s.RestoredFrom, ghost)
	}
	if diff := diffMultisets(multiset(committedOutput(t, out)), expectedCounts(cCount)); diff != "" {
		t.Errorf("published output differs from every window once:\n%s", diff)
	}
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("nothing to delete at %s: %v", path, err)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}
