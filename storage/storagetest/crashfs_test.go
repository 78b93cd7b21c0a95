package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

var tmpName = regexp.MustCompile(`\.tmp-_metadata-[A-Z2-7]+`)

// opLog returns c's calls since the last opLog, with temporary names made predictable.
func (c *memFS) opLog() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.log))
	for i, e := range c.log {
		out[i] = tmpName.ReplaceAllString(e, ".tmp-_metadata-*")
	}
	c.log = nil
	return out
}

func newMemLocal(t *testing.T, m *memFS) *storage.Local {
	t.Helper()
	l, err := storage.NewLocalFS("/ck", m)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The order of calls is what makes a checkpoint durable (DESIGN.md §3: "write temp, fsync, rename,
// fsync dir"); this is the whole sequence, call by call.
func TestFsyncOrder(t *testing.T) {
	ctx := context.Background()
	m := newMemFS()
	m.trace = true
	l := newMemLocal(t, m)
	if got, want := m.opLog(), []string{"mkdir /ck", "syncdir /"}; !slices.Equal(got, want) {
		t.Fatalf("NewLocal:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := l.WriteFile(ctx, 1, "kg-0", []byte("state")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mkdir /ck/chk-0000000001",
		"syncdir /ck", // the new checkpoint directory is durable in its parent
		"open /ck/chk-0000000001/kg-0",
		"write /ck/chk-0000000001/kg-0", // payload
		"write /ck/chk-0000000001/kg-0", // trailer
		"sync /ck/chk-0000000001/kg-0",
		"close /ck/chk-0000000001/kg-0",
	}
	if got := m.opLog(); !slices.Equal(got, want) {
		t.Fatalf("first WriteFile:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := l.WriteFile(ctx, 1, "kg-1", []byte("state")); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"open /ck/chk-0000000001/kg-1",
		"write /ck/chk-0000000001/kg-1",
		"write /ck/chk-0000000001/kg-1",
		"sync /ck/chk-0000000001/kg-1",
		"close /ck/chk-0000000001/kg-1",
	}
	if got := m.opLog(); !slices.Equal(got, want) {
		t.Fatalf("second WriteFile:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if err := l.WriteMetadata(ctx, 1, []byte("meta")); err != nil {
		t.Fatal(err)
	}
	tmp := "/ck/chk-0000000001/.tmp-_metadata-*"
	want = []string{
		"open " + tmp,
		"write " + tmp,
		"write " + tmp,
		"sync " + tmp, // contents durable before the name appears
		"close " + tmp,
		"rename " + tmp + " -> /ck/chk-0000000001/_metadata",
		"syncdir /ck/chk-0000000001", // the rename (and the state files' names) durable before returning
	}
	if got := m.opLog(); !slices.Equal(got, want) {
		t.Fatalf("WriteMetadata:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if err := l.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"remove /ck/chk-0000000001/_metadata", // incomplete first, so a crash cannot leave a complete checkpoint with files missing
		"syncdir /ck/chk-0000000001",
		"removeall /ck/chk-0000000001",
		"syncdir /ck",
	}
	if got := m.opLog(); !slices.Equal(got, want) {
		t.Fatalf("Discard:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A WriteMetadata that fails at any step leaves no _metadata and no temporary file, and can be
// retried.
func TestWriteMetadataFailureLeavesNoMetadata(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"stat", "open", "write", "sync", "close", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			m := newMemFS()
			l := newMemLocal(t, m)
			if _, err := l.WriteFile(ctx, 1, "kg-0", []byte("state")); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("injected")
			m.fail = func(o, path string) error {
				if o == op && strings.HasPrefix(path, "/ck/chk-0000000001") {
					return boom
				}
				return nil
			}
			if err := l.WriteMetadata(ctx, 1, []byte("meta")); !errors.Is(err, boom) {
				t.Fatalf("WriteMetadata = %v, want the injected error", err)
			}
			m.fail = nil
			if _, err := l.ReadMetadata(ctx, 1); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("ReadMetadata after failure = %v, want storage.ErrNotFound", err)
			}
			entries, err := l.List(ctx)
			if err != nil || len(entries) != 1 || entries[0].Complete {
				t.Fatalf("List after failure = %v, %v; want one incomplete checkpoint", entries, err)
			}
			des, err := m.ReadDir("/ck/chk-0000000001")
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range des {
				if strings.HasPrefix(de.Name(), tmpPrefix) {
					t.Errorf("temporary file %s left behind", de.Name())
				}
			}
			if err := l.WriteMetadata(ctx, 1, []byte("meta")); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got, err := l.ReadMetadata(ctx, 1); err != nil || string(got) != "meta" {
				t.Fatalf("ReadMetadata after retry = %q, %v", got, err)
			}
		})
	}
}

// A failed state file write leaves no partial file.
func TestWriteFileFailureRemovesFile(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"write", "sync", "close"} {
		m := newMemFS()
		l := newMemLocal(t, m)
		m.fail = func(o, path string) error {
			if o == op {
				return errors.New("injected")
			}
			return nil
		}
		if _, err := l.WriteFile(ctx, 1, "kg-0", []byte("state")); err == nil || !strings.Contains(err.Error(), "/ck/chk-0000000001/kg-0") {
			t.Fatalf("%s failure: WriteFile = %v, want an error naming the file", op, err)
		}
		m.fail = nil
		if _, err := m.Stat("/ck/chk-0000000001/kg-0"); err == nil {
			t.Errorf("%s failure left the file behind", op)
		}
	}
}

// crashRun writes checkpoint 1, then checkpoint 2, then discards 1, on a filesystem that takes a
// crash image after every call. It returns the images, the metadata of each checkpoint, and for each
// checkpoint the number of images taken before its WriteMetadata returned.
func crashRun(t *testing.T, drop func(op, path string) bool) (images []crashImage, metas map[int64][]byte, completedAt map[int64]int) {
	t.Helper()
	ctx := context.Background()
	m := newMemFS()
	m.drop = drop
	m.record = true
	l := newMemLocal(t, m)
	metas = map[int64][]byte{}
	completedAt = map[int64]int{}
	for id := int64(1); id <= 2; id++ {
		var handles []storage.Handle
		for i := range 3 {
			h, err := l.WriteFile(ctx, id, fmt.Sprintf("kg-%d", i), []byte(fmt.Sprintf("state %d of checkpoint %d", i, id)))
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, h)
		}
		meta, err := json.Marshal(handles)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.WriteMetadata(ctx, id, meta); err != nil {
			t.Fatal(err)
		}
		metas[id] = meta
		m.mu.Lock()
		completedAt[id] = len(m.images)
		m.mu.Unlock()
	}
	if _, err := storage.Retain(ctx, l, 1, -1, nil); err != nil {
		t.Fatal(err)
	}
	return m.images, metas, completedAt
}

// checkImages restarts on every crash image and returns every broken promise: a corrupt or partial
// checkpoint visible as complete, or a checkpoint lost after WriteMetadata returned.
func checkImages(t *testing.T, images []crashImage, metas map[int64][]byte, completedAt map[int64]int) []string {
	t.Helper()
	ctx := context.Background()
	var problems []string
	for i, img := range images {
		for model, m := range map[string]*memFS{"lose unsynced": img.lose, "keep names": img.keep} {
			where := fmt.Sprintf("crash after call %d (%s), %s", i, img.op, model)
			l, err := storage.NewLocalFS("/ck", m)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: reopen: %v", where, err))
				continue
			}
			id, meta, skipped, err := storage.Latest(ctx, l)
			for _, s := range skipped {
				problems = append(problems, fmt.Sprintf("%s: corrupt metadata visible: %v", where, s))
			}
			var atLeast int64
			for cid, n := range completedAt {
				if i+1 >= n && cid > atLeast {
					atLeast = cid // WriteMetadata of cid had returned when this image was taken
				}
			}
			if errors.Is(err, storage.ErrNotFound) {
				if atLeast > 0 {
					problems = append(problems, fmt.Sprintf("%s: checkpoint %d lost after it completed", where, atLeast))
				}
				continue
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			if id < atLeast {
				problems = append(problems, fmt.Sprintf("%s: restored %d, but %d had completed", where, id, atLeast))
			}
			if string(meta) != string(metas[id]) {
				problems = append(problems, fmt.Sprintf("%s: metadata of %d is %q", where, id, meta))
				continue
			}
			var handles []storage.Handle
			if err := json.Unmarshal(meta, &handles); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			for _, h := range handles {
				if _, err := l.ReadFile(ctx, h); err != nil {
					problems = append(problems, fmt.Sprintf("%s: state of restored checkpoint %d: %v", where, id, err))
				}
			}
		}
	}
	return problems
}

// Crash at every point of writing two checkpoints and retaining one: a restart always finds the last
// checkpoint whose WriteMetadata returned (or a later one), with every state file intact, and never
// sees a corrupt or partial checkpoint as complete ("Recovery always starts from a checkpoint whose
// required state was fully persisted").
func TestCrashAtEveryCall(t *testing.T) {
	images, metas, completedAt := crashRun(t, nil)
	if len(images) < 40 {
		t.Fatalf("only %d crash points", len(images))
	}
	for _, p := range checkImages(t, images, metas, completedAt) {
		t.Error(p)
	}
}

// The crash test has teeth: leave out any one of the fsyncs and it finds a broken promise.
func TestCrashTestCatchesMissingFsync(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(op, path string) bool
	}{
		{"metadata temp file not fsynced", func(op, path string) bool {
			return op == "sync" && strings.Contains(path, tmpPrefix)
		}},
		{"checkpoint directory not fsynced after rename", func(op, path string) bool {
			return op == "syncdir" && path == "/ck/chk-0000000002"
		}},
		{"new checkpoint directory not fsynced into its parent", func(op, path string) bool {
			return op == "syncdir" && path == "/ck"
		}},
		{"state file not fsynced", func(op, path string) bool {
			return op == "sync" && strings.HasSuffix(path, "/kg-1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			images, metas, completedAt := crashRun(t, tc.drop)
			problems := checkImages(t, images, metas, completedAt)
			if len(problems) == 0 {
				t.Fatal("no problem found")
			}
			t.Logf("%d problems, first: %s", len(problems), problems[0])
		})
	}
}

// CrashFS.Crash, the exported form, drops what was not synced.
func TestCrashFSCrash(t *testing.T) {
	ctx := context.Background()
	c := NewCrashFS()
	l, err := c.NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteFile(ctx, 1, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteMetadata(ctx, 1, []byte("m1")); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 2's state file is fsynced, but its name is not: nothing fsyncs the directory until
	// WriteMetadata. After a crash checkpoint 2 is incomplete and the file may be gone.
	h2, err := l.WriteFile(ctx, 2, "a", []byte("y"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Crash().NewLocal("/ck")
	if err != nil {
		t.Fatal(err)
	}
	id, meta, _, err := storage.Latest(ctx, after)
	if err != nil || id != 1 || string(meta) != "m1" {
		t.Fatalf("Latest after crash = %d, %q, %v", id, meta, err)
	}
	if _, err := after.ReadFile(ctx, h2); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unsynced name survived the crash: %v", err)
	}
	// The original is unchanged.
	if _, err := l.ReadFile(ctx, h2); err != nil {
		t.Fatal(err)
	}
}
