package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// TestRetention checks storage.Retain and storage.Latest on Instances from open, each check (and
// each case of a table) a parallel subtest of t: which checkpoints Retain keeps and discards,
// that Latest picks the newest complete checkpoint whose metadata verifies and reports the corrupt
// ones it skips, and that neither falls back or goes on past an I/O error (injected by wrapping
// the Instance in a storage.Faulty).
func TestRetention(t *testing.T, open Opener) {
	t.Run("Retain", func(t *testing.T) {
		t.Parallel()
		testRetain(t, open)
	})
	t.Run("RetainReferences", func(t *testing.T) {
		t.Parallel()
		testRetainReferences(t, open)
	})
	t.Run("LatestNone", func(t *testing.T) {
		t.Parallel()
		testLatestNone(t, open)
	})
	runChecks(t, open, []check{
		{"RetainRejectsKeepZero", testRetainRejectsKeepZero},
		{"RetainDiscardFailure", testRetainDiscardFailure},
		{"RetainStopsOnReadError", testRetainStopsOnReadError},
		{"RetainStopsOnReferenceError", testRetainStopsOnReferenceError},
		{"RetainReferencesReadError", testRetainReferencesReadError},
		{"RetainSkipsReferencedMetadata", testRetainSkipsReferencedMetadata},
		{"Latest", testLatest},
		{"LatestSkipsCorrupt", testLatestSkipsCorrupt},
		{"LatestDoesNotFallBackOnIOError", testLatestDoesNotFallBackOnIOError},
	})
}

// setup creates checkpoints in in from a spec like "1c 2i 3x 4c>1+3": complete, incomplete,
// complete with corrupt metadata, complete and referencing 1 and 3 (see specRefs). Each has a state
// file "state" holding its spec word, and a complete one has that word as metadata.
func setup(t *testing.T, in Instance, spec string) {
	t.Helper()
	for _, f := range strings.Fields(spec) {
		var id int64
		var kind rune
		head, _, _ := strings.Cut(f, ">")
		if _, err := fmt.Sscanf(head, "%d%c", &id, &kind); err != nil {
			t.Fatalf("bad spec %q: %v", f, err)
		}
		MustWrite(t, in, id, "state", []byte(f))
		switch kind {
		case 'c':
			MustMeta(t, in, id, f)
		case 'x':
			MustMeta(t, in, id, f)
			corruptMetadata(t, in, id)
		case 'i':
		default:
			t.Fatalf("bad spec %q", f)
		}
	}
}

// corruptMetadata flips a payload byte of checkpoint id's metadata and returns its location.
func corruptMetadata(t *testing.T, in Instance, id int64) string {
	t.Helper()
	rel := storage.CheckpointDirName(id) + "/" + storage.MetadataName
	b, ok := in.Get(t, rel)
	if !ok {
		t.Fatalf("%s missing", in.Where(rel))
	}
	b[0] ^= 0xff
	in.Put(t, rel, b)
	return in.Where(rel)
}

func testRetain(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name          string
		spec          string
		keep          int
		protect       int64
		wantDiscarded []int64
		wantLeft      []int64
	}{
		{"keep newest two", "1c 2c 3c 4c 5c", 2, -1, []int64{1, 2, 3}, []int64{4, 5}},
		{"incomplete older than newest complete go, newer stay (in flight)",
			"1c 2i 3c 4i 5c 6i 7i", 1, -1, []int64{1, 2, 3, 4}, []int64{5, 6, 7}},
		{"protected complete checkpoint stays", "1c 2c 3c 4c", 2, 1, []int64{2}, []int64{1, 3, 4}},
		{"protected incomplete checkpoint stays", "6i 7c 8c", 1, 6, []int64{7}, []int64{6, 8}},
		{"protect of an in-flight id changes nothing", "1c 2c 3i", 1, 3, []int64{1}, []int64{2, 3}},
		{"nothing complete: nothing deleted", "1i 2i 3i", 1, -1, nil, []int64{1, 2, 3}},
		{"keep more than exist", "0i 1c 2c", 5, -1, []int64{0}, []int64{1, 2}},
		{"corrupt newest does not count: the good one before it is kept",
			"1c 2c 3x", 1, -1, []int64{1}, []int64{2, 3}},
		{"corrupt between good ones is deleted, not kept", "1c 2x 3c", 2, -1, []int64{2}, []int64{1, 3}},
		{"only corrupt complete: nothing deleted", "1x 2x 3i", 1, -1, nil, []int64{1, 2, 3}},
		{"empty storage", "", 3, -1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := open(t)
			setup(t, in, tc.spec)
			got, err := storage.Retain(context.Background(), in, tc.keep, tc.protect, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.wantDiscarded) {
				t.Errorf("discarded %v, want %v", got, tc.wantDiscarded)
			}
			if left := IDs(t, in); !slices.Equal(left, tc.wantLeft) {
				t.Errorf("left %v, want %v", left, tc.wantLeft)
			}
		})
	}
}

// specRefs is the refs function of Retain for metadata written by setup: the ids after ">",
// separated by "+". Metadata "bad>" is undecodable.
func specRefs(meta []byte) ([]int64, error) {
	_, list, ok := strings.Cut(string(meta), ">")
	if !ok || list == "" {
		if strings.HasPrefix(string(meta), "bad") {
			return nil, errors.New("undecodable metadata")
		}
		return nil, nil
	}
	var ids []int64
	for _, w := range strings.Split(list, "+") {
		var id int64
		if _, err := fmt.Sscanf(w, "%d", &id); err != nil {
			return nil, fmt.Errorf("bad reference %q", w)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Retain with references (incremental snapshots) keeps every checkpoint a kept one builds on, and
// only those. A checkpoint's references name every earlier checkpoint whose files it reads (an
// incremental chain is flattened: 3 on 2 and 1 references both), so only the references of the
// kept checkpoints and of protect count, not those of the checkpoints they reference: a checkpoint
// kept only for its files is no recovery point, and following its references would keep chains of
// files that nothing kept reads.
func testRetainReferences(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name          string
		spec          string
		keep          int
		protect       int64
		wantDiscarded []int64
		wantLeft      []int64
	}{
		{"no references: as without refs", "1c 2c 3c 4c", 2, -1, []int64{1, 2}, []int64{3, 4}},
		{"a chain is kept whole", "1c 2c>1 3c>2+1 4c>3+2+1", 1, -1, nil, []int64{1, 2, 3, 4}},
		{"not transitive: what the newest does not reference goes", "1c 2c>1 3c>2 4c>3", 1, -1, []int64{1, 2}, []int64{3, 4}},
		{"a full snapshot ends the chain", "1c 2c>1 3c>2+1 4c 5c>4", 2, -1, []int64{1, 2, 3}, []int64{4, 5}},
		{"only what the kept ones reference", "1c 2c 3c>1 4c>3+1 5c", 2, -1, []int64{2}, []int64{1, 3, 4, 5}},
		{"references of older, discarded checkpoints do not count", "1c 2c>1 3c 4c>3", 1, -1, []int64{1, 2}, []int64{3, 4}},
		{"what the protected checkpoint references stays", "1c 2c>1 3c 4c", 1, 2, []int64{3}, []int64{1, 2, 4}},
		{"not transitive from protect either", "1c 2c>1 3c>2 4c", 1, 3, []int64{1}, []int64{2, 3, 4}},
		{"a referenced incomplete checkpoint stays", "1i 2c>1 3c>2+1", 1, -1, nil, []int64{1, 2, 3}},
		{"a referenced corrupt checkpoint stays and references nothing", "1c 2x 3c>2", 1, -1, []int64{1}, []int64{2, 3}},
		{"a corrupt newest checkpoint's references do not count", "1c 2c 3x>1", 1, -1, []int64{1}, []int64{2, 3}},
		{"references to missing checkpoints are ignored", "2c 3c>1", 1, -1, []int64{2}, []int64{3}},
		{"a reference cycle is not followed", "1c>2 2c>1 3c>2", 1, -1, []int64{1}, []int64{2, 3}},
		{"a kept checkpoint's references count, though a kept one references it", "1c 2c>1 3c>2", 2, -1, nil, []int64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := open(t)
			setup(t, in, tc.spec)
			got, err := storage.Retain(context.Background(), in, tc.keep, tc.protect, specRefs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.wantDiscarded) {
				t.Errorf("discarded %v, want %v", got, tc.wantDiscarded)
			}
			if left := IDs(t, in); !slices.Equal(left, tc.wantLeft) {
				t.Errorf("left %v, want %v", left, tc.wantLeft)
			}
		})
	}
}

// Metadata whose references cannot be decoded: Retain deletes nothing, since it cannot know what
// the checkpoint builds on, and says which checkpoint.
func testRetainStopsOnReferenceError(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3i")
	MustMeta(t, in, 3, "bad")
	_, err := storage.Retain(context.Background(), in, 1, -1, specRefs)
	if err == nil || !strings.Contains(err.Error(), "checkpoint 3") {
		t.Fatalf("Retain = %v, want an error naming checkpoint 3", err)
	}
	if left := IDs(t, in); !slices.Equal(left, []int64{1, 2, 3}) {
		t.Fatalf("left %v", left)
	}
}

// An I/O error reading the metadata of the protected checkpoint, whose references count: Retain
// deletes nothing.
func testRetainReferencesReadError(t *testing.T, in Instance) {
	setup(t, in, "1c 2c>1 3c 4c>3")
	boom := errors.New("i/o timeout")
	got, err := storage.Retain(context.Background(), failOn(in, storage.OpReadMetadata, 2, boom), 1, 2, specRefs)
	if !errors.Is(err, boom) || got != nil {
		t.Fatalf("Retain = %v, %v; want the read error and nothing discarded", got, err)
	}
	if left := IDs(t, in); !slices.Equal(left, []int64{1, 2, 3, 4}) {
		t.Fatalf("left %v", left)
	}
}

// The references of a checkpoint kept only because a kept one references it do not count, so
// Retain does not read its metadata: a read error there changes nothing.
func testRetainSkipsReferencedMetadata(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c>2 4c>3")
	got, err := storage.Retain(context.Background(), failOn(in, storage.OpReadMetadata, 3, errors.New("i/o timeout")), 1, -1, specRefs)
	if err != nil || !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("Retain = %v, %v; want [1 2] discarded", got, err)
	}
	if left := IDs(t, in); !slices.Equal(left, []int64{3, 4}) {
		t.Fatalf("left %v, want [3 4]", left)
	}
}

func testRetainRejectsKeepZero(t *testing.T, in Instance) {
	setup(t, in, "1c 2c")
	if _, err := storage.Retain(context.Background(), in, 0, -1, nil); err == nil {
		t.Fatal("Retain(keep=0) succeeded")
	}
	if left := IDs(t, in); !slices.Equal(left, []int64{1, 2}) {
		t.Fatalf("left %v", left)
	}
}

func testRetainDiscardFailure(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c 4c")
	boom := errors.New("disk on fire")
	got, err := storage.Retain(context.Background(), failOn(in, storage.OpDiscard, 2, boom), 1, -1, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the Discard failure", err)
	}
	if !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("discarded %v, want [1 3]: a failed Discard must not stop the others", got)
	}
}

func testRetainStopsOnReadError(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c")
	f := storage.NewFaulty(in)
	boom := errors.New("i/o timeout")
	f.FailNext(storage.OpReadMetadata, boom)
	got, err := storage.Retain(context.Background(), f, 1, -1, nil)
	if !errors.Is(err, boom) || got != nil {
		t.Fatalf("Retain = %v, %v; want the read error and nothing discarded", got, err)
	}
	if left := IDs(t, f); !slices.Equal(left, []int64{1, 2, 3}) {
		t.Fatalf("left %v", left)
	}
}

func testLatest(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3i")
	id, meta, skipped, err := storage.Latest(context.Background(), in)
	if err != nil || id != 2 || string(meta) != "2c" || len(skipped) != 0 {
		t.Fatalf("Latest = %d, %q, %v, %v; want 2, \"2c\"", id, meta, skipped, err)
	}
}

// Corrupt and truncated metadata is skipped in favour of the previous checkpoint, each reported
// with the file and the reason.
func testLatestSkipsCorrupt(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c 4i")
	path3 := corruptMetadata(t, in, 3)
	in.Put(t, "chk-0000000002/_metadata", []byte("short")) // truncated
	path2 := in.Where("chk-0000000002/_metadata")
	id, meta, skipped, err := storage.Latest(context.Background(), in)
	if err != nil || id != 1 || string(meta) != "1c" {
		t.Fatalf("Latest = %d, %q, %v; want checkpoint 1", id, meta, err)
	}
	if len(skipped) != 2 {
		t.Fatalf("skipped = %v, want 2", skipped)
	}
	for i, want := range []struct{ path, why string }{{path3, "checksum mismatch"}, {path2, "truncated: 5 bytes"}} {
		if !storage.IsCorrupt(skipped[i]) || !strings.Contains(skipped[i].Error(), want.path) || !strings.Contains(skipped[i].Error(), want.why) {
			t.Errorf("skipped[%d] = %v, want it to name %s and say %q", i, skipped[i], want.path, want.why)
		}
	}
}

func testLatestNone(t *testing.T, open Opener) {
	for _, spec := range []string{"", "1i 2i", "1x"} {
		t.Run(fmt.Sprintf("%q", spec), func(t *testing.T) {
			t.Parallel()
			in := open(t)
			setup(t, in, spec)
			_, meta, skipped, err := storage.Latest(context.Background(), in)
			if !errors.Is(err, storage.ErrNotFound) || meta != nil || !strings.Contains(err.Error(), in.Location()) {
				t.Errorf("Latest = %q, %v; want ErrNotFound naming the location", meta, err)
			}
			if wantSkipped := strings.Count(spec, "x"); len(skipped) != wantSkipped {
				t.Errorf("skipped %v, want %d", skipped, wantSkipped)
			}
		})
	}
}

// A transient read failure must not make recovery fall back to an older checkpoint.
func testLatestDoesNotFallBackOnIOError(t *testing.T, in Instance) {
	setup(t, in, "1c 2c")
	f := storage.NewFaulty(in)
	boom := errors.New("connection reset")
	f.FailNext(storage.OpReadMetadata, boom)
	id, _, _, err := storage.Latest(context.Background(), f)
	if !errors.Is(err, boom) {
		t.Fatalf("Latest = %d, %v; want the read error", id, err)
	}
}

// failOn returns in behind a storage.Faulty whose operation op on checkpoint id fails with err.
func failOn(in Instance, op storage.Op, id int64, err error) *storage.Faulty {
	f := storage.NewFaulty(in)
	f.FailWhen(func(o storage.Op, i int64, _ string) error {
		if o == op && i == id {
			return err
		}
		return nil
	})
	return f
}
