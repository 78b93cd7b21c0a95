package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// trimCrashImages writes checkpoint 1 (state files kg-0..kg-3 and metadata listing them) on a
// memFS, then runs trim on it keeping kg-1 and kg-3, with a crash image taken after every call,
// and returns the problems a restart finds in each image, under both crash models (see
// crashImage), and the number of images. A problem is a checkpoint that is complete with a state
// file missing (a restart would take it for a recovery point and fail to restore it, or restore
// it without its state), or a kept file that is missing or damaged. At the end, without a crash,
// only the kept files may be left.
func trimCrashImages(t *testing.T, trim func(l *storage.Local, fsys storage.FS, id int64, keep []string) error) (problems []string, images int) {
	t.Helper()
	ctx := context.Background()
	m := newMemFS()
	l := newMemLocal(t, m)
	handles := map[string]storage.Handle{}
	var all []storage.Handle
	for i := range 4 {
		name := fmt.Sprintf("kg-%d", i)
		h, err := l.WriteFile(ctx, 1, name, []byte("state of "+name))
		if err != nil {
			t.Fatal(err)
		}
		handles[name] = h
		all = append(all, h)
	}
	meta, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteMetadata(ctx, 1, meta); err != nil {
		t.Fatal(err)
	}
	keep := []string{"kg-1", "kg-3"}
	m.mu.Lock()
	m.record = true
	m.mu.Unlock()
	if err := trim(l, m, 1, keep); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	imgs := slices.Clone(m.images)
	m.mu.Unlock()
	for i, img := range imgs {
		for model, fsys := range map[string]*memFS{"lose unsynced": img.lose, "keep names": img.keep} {
			where := fmt.Sprintf("crash after call %d (%s), %s", i, img.op, model)
			after, err := storage.NewLocalFS("/ck", fsys)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := after.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) == 1 && entries[0].Complete {
				got, err := after.ReadMetadata(ctx, 1)
				if err != nil || string(got) != string(meta) {
					problems = append(problems, fmt.Sprintf("%s: complete checkpoint's metadata: %q, %v", where, got, err))
				}
				for _, h := range all {
					if _, err := after.ReadFile(ctx, h); err != nil {
						problems = append(problems, fmt.Sprintf("%s: checkpoint 1 is complete without state file %s: %v", where, h.Name, err))
					}
				}
			}
			for _, n := range keep {
				if _, err := after.ReadFile(ctx, handles[n]); err != nil {
					problems = append(problems, fmt.Sprintf("%s: kept file %s lost: %v", where, n, err))
				}
			}
		}
	}
	if len(imgs) > 0 {
		des, err := imgs[len(imgs)-1].lose.ReadDir(chkDir(1))
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, de := range des {
			left = append(left, de.Name())
		}
		if !slices.Equal(left, keep) {
			problems = append(problems, fmt.Sprintf("after the trim, a crash leaves %q, want only %q", left, keep))
		}
	}
	return problems, len(imgs)
}

// A crash at any filesystem call of Trim leaves checkpoint 1 either complete with every state
// file, or incomplete: never complete with a file missing ("An incomplete checkpoint never
// replaces the last successful one"), and every kept file is there whatever happens (retention
// "never deletes a file that a retained checkpoint still references"). Once Trim returned, only
// the kept files survive a crash.
func TestTrimCrashAtEveryCall(t *testing.T) {
	problems, n := trimCrashImages(t, func(l *storage.Local, _ storage.FS, id int64, keep []string) error {
		return l.Trim(context.Background(), id, keep)
	})
	for _, p := range problems {
		t.Error(p)
	}
	if n < 5 {
		t.Fatalf("Trim made only %d filesystem calls: the crash points cover nothing", n)
	}
	t.Logf("crashed Trim after each of its %d calls", n)

	// The check has teeth: a trim that deletes state files before the metadata leaves a complete
	// checkpoint without them, which the check catches.
	problems, _ = trimCrashImages(t, func(_ *storage.Local, fsys storage.FS, id int64, keep []string) error {
		dir := chkDir(id)
		for _, n := range []string{"kg-0", "kg-2"} {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
		if err := fsys.Remove(filepath.Join(dir, storage.MetadataName)); err != nil {
			return err
		}
		return fsys.SyncDir(dir)
	})
	if len(problems) == 0 {
		t.Fatal("a trim that deletes files before the metadata passed: the check cannot fail")
	}
}

// Trim's calls, in order: the metadata's removal is made durable before any state file is
// removed, and the removals after it are made durable before Trim returns.
func TestTrimFsyncOrder(t *testing.T) {
	ctx := context.Background()
	m := newMemFS()
	l := newMemLocal(t, m)
	for _, n := range []string{"a", "b"} {
		if _, err := l.WriteFile(ctx, 1, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WriteMetadata(ctx, 1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	m.trace = true
	if err := l.Trim(ctx, 1, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"remove /ck/chk-0000000001/_metadata",
		"syncdir /ck/chk-0000000001", // incomplete, durably, before anything else goes
		"removeall /ck/chk-0000000001/a",
		"syncdir /ck/chk-0000000001",
	}
	if got := m.opLog(); !slices.Equal(got, want) {
		t.Fatalf("Trim:\n%q\nwant\n%q", got, want)
	}
	// Again: nothing left to remove, but the metadata's removal is made durable once more, in case
	// the first Trim failed to sync it.
	if err := l.Trim(ctx, 1, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if got, want := m.opLog(), []string{"syncdir /ck/chk-0000000001"}; !slices.Equal(got, want) {
		t.Fatalf("second Trim:\n%q\nwant\n%q", got, want)
	}
}

// A Trim that fails at any filesystem call can be retried: the retry succeeds and leaves exactly
// the kept files, without metadata.
func TestTrimRetriesAfterFailure(t *testing.T) {
	ctx := context.Background()
	for _, op := range []FSOp{FSStat, FSRemove, FSSyncDir, FSReadDir, FSRemoveAll} {
		t.Run(op.String(), func(t *testing.T) {
			f, l := newFaultLocal(t)
			for _, n := range []string{"a", "b", "c"} {
				if _, err := l.WriteFile(ctx, 1, n, []byte(n)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.WriteMetadata(ctx, 1, []byte("m")); err != nil {
				t.Fatal(err)
			}
			boom := fmt.Errorf("injected %v failure", op)
			f.FailNext(op, boom)
			if err := l.Trim(ctx, 1, []string{"b"}); err == nil {
				t.Fatalf("Trim with a failing %v succeeded", op)
			}
			if err := l.Trim(ctx, 1, []string{"b"}); err != nil {
				t.Fatalf("retried Trim: %v", err)
			}
			des, err := f.inner.ReadDir(chkDir(1))
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, de := range des {
				left = append(left, de.Name())
			}
			if !slices.Equal(left, []string{"b"}) {
				t.Fatalf("after the retry: %q, want [b]", left)
			}
		})
	}
}
