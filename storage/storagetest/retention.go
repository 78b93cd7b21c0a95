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
// the Instance in a Faulty).
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
		{"RetainTrimmedCheckpoint", testRetainTrimmedCheckpoint},
		{"RetainTrimFailure", testRetainTrimFailure},
		{"RetainFailedDiscardKeepsItsReferences", retainFailedDeletionKeepsItsReferences(OpDiscard)},
		{"RetainFailedTrimKeepsItsReferences", retainFailedDeletionKeepsItsReferences(OpTrim)},
		{"Latest", testLatest},
		{"LatestSkipsCorrupt", testLatestSkipsCorrupt},
		{"LatestDoesNotFallBackOnIOError", testLatestDoesNotFallBackOnIOError},
	})
}

// setup creates checkpoints in in from a spec like "1c 2i 3x 4c>1+3/extra": complete, incomplete,
// complete with corrupt metadata, complete and referencing file "state" of 1 and file "extra" of 3
// (see specRefs). Each has two state files, "state" and "extra", holding its spec word, and a
// complete one has that word as metadata.
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
		MustWrite(t, in, id, "extra", []byte(f))
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

// specRefs is the refs function of Retain for metadata written by setup: the files after ">",
// separated by "+", each "M/name" (file name of checkpoint M) or "M" (file "state" of M).
// Metadata "bad>" is undecodable.
func specRefs(meta []byte) ([]storage.FileRef, error) {
	_, list, ok := strings.Cut(string(meta), ">")
	if !ok || list == "" {
		if strings.HasPrefix(string(meta), "bad") {
			return nil, errors.New("undecodable metadata")
		}
		return nil, nil
	}
	var refs []storage.FileRef
	for _, w := range strings.Split(list, "+") {
		id, name, named := strings.Cut(w, "/")
		r := storage.FileRef{Name: "state"}
		if named {
			r.Name = name
		}
		if _, err := fmt.Sscanf(id, "%d", &r.Checkpoint); err != nil {
			return nil, fmt.Errorf("bad reference %q", w)
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// trimmedFiles describes every checkpoint of in without metadata (trimmed, or never complete) as
// "id=file+file", with its files among setup's, separated by spaces, increasing.
func trimmedFiles(t *testing.T, in Instance) string {
	t.Helper()
	var out []string
	for _, id := range IDs(t, in) {
		dir := storage.CheckpointDirName(id) + "/"
		if _, ok := in.Get(t, dir+storage.MetadataName); ok {
			continue
		}
		var files []string
		for _, n := range []string{"extra", "state"} {
			if _, ok := in.Get(t, dir+n); ok {
				files = append(files, n)
			}
		}
		out = append(out, fmt.Sprintf("%d=%s", id, strings.Join(files, "+")))
	}
	return strings.Join(out, " ")
}

// Retain with references (incremental snapshots) keeps every file a kept one builds on, and only
// those: a checkpoint kept only for some of its files is trimmed to them (no metadata: it is no
// recovery point). A checkpoint's references name every earlier file it reads (an incremental
// chain is flattened: 3 on 2 and 1 references both), so only the references of the kept
// checkpoints and of protect count, not those of the checkpoints they reference: a checkpoint kept
// only for its files is no recovery point, and following its references would keep chains of files
// that nothing kept reads. trimmed lists every checkpoint left without metadata and its files.
func testRetainReferences(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name          string
		spec          string
		keep          int
		protect       int64
		wantDiscarded []int64
		wantLeft      []int64
		trimmed       string
	}{
		{"no references: as without refs", "1c 2c 3c 4c", 2, -1, []int64{1, 2}, []int64{3, 4}, ""},
		{"a chain is kept, the files it reads only", "1c 2c>1 3c>2+1 4c>3+2+1", 1, -1, nil, []int64{1, 2, 3, 4}, "1=state 2=state 3=state"},
		{"not transitive: what the newest does not reference goes", "1c 2c>1 3c>2 4c>3", 1, -1, []int64{1, 2}, []int64{3, 4}, "3=state"},
		{"a full snapshot ends the chain", "1c 2c>1 3c>2+1 4c 5c>4", 2, -1, []int64{1, 2, 3}, []int64{4, 5}, ""},
		{"only what the kept ones reference", "1c 2c 3c>1 4c>3+1 5c", 2, -1, []int64{2}, []int64{1, 3, 4, 5}, "1=state 3=state"},
		{"every file referenced, by one kept checkpoint or another", "1c 2c 3c>1/extra 4c>2+1", 2, -1, nil, []int64{1, 2, 3, 4}, "1=extra+state 2=state"},
		{"references of older, discarded checkpoints do not count", "1c 2c>1 3c 4c>3", 1, -1, []int64{1, 2}, []int64{3, 4}, "3=state"},
		{"what the protected checkpoint references stays", "1c 2c>1 3c 4c", 1, 2, []int64{3}, []int64{1, 2, 4}, "1=state"},
		{"not transitive from protect either", "1c 2c>1 3c>2 4c", 1, 3, []int64{1}, []int64{2, 3, 4}, "2=state"},
		{"a referenced incomplete checkpoint is trimmed", "1i 2c>1 3c>2+1", 1, -1, nil, []int64{1, 2, 3}, "1=state 2=state"},
		{"a referenced corrupt checkpoint is trimmed and references nothing", "1c 2x>1 3c>2", 1, -1, []int64{1}, []int64{2, 3}, "2=state"},
		{"a corrupt newest checkpoint's references do not count", "1c 2c 3x>1", 1, -1, []int64{1}, []int64{2, 3}, ""},
		{"references to missing checkpoints are ignored", "2c 3c>1", 1, -1, []int64{2}, []int64{3}, ""},
		{"a reference cycle is not followed", "1c>2 2c>1 3c>2", 1, -1, []int64{1}, []int64{2, 3}, "2=state"},
		{"a kept checkpoint's references count, though a kept one references it", "1c 2c>1 3c>2", 2, -1, nil, []int64{1, 2, 3}, "1=state"},
		{"newer checkpoints in flight are left alone", "1c 2c>1 3i 4i", 1, -1, nil, []int64{1, 2, 3, 4}, "1=state 3=extra+state 4=extra+state"},
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
			if got := trimmedFiles(t, in); got != tc.trimmed {
				t.Errorf("without metadata: %q, want %q", got, tc.trimmed)
			}
			// A second pass (the next recovery's) finds the trimmed checkpoints still referenced:
			// it deletes nothing more and never takes one for a recovery point.
			before := trimmedFiles(t, in)
			if got, err := storage.Retain(context.Background(), in, tc.keep, tc.protect, specRefs); err != nil || len(got) > 0 {
				t.Errorf("second Retain = %v, %v; want nothing discarded", got, err)
			}
			if left := IDs(t, in); !slices.Equal(left, tc.wantLeft) {
				t.Errorf("after a second Retain: left %v, want %v", left, tc.wantLeft)
			}
			if after := trimmedFiles(t, in); after != before {
				t.Errorf("a second Retain trimmed %q to %q", before, after)
			}
		})
	}
}

// A checkpoint trimmed before (a running job's coordinator, an earlier Retain) is still referenced
// at the next recovery: Retain keeps its referenced files, deletes the others it still has (a
// trim a crash interrupted), and discards it once nothing kept references it any more.
func testRetainTrimmedCheckpoint(t *testing.T, in Instance) {
	ctx := context.Background()
	setup(t, in, "1c 2c>1 3c>1+2")
	MustWrite(t, in, 1, "orphan", []byte("left by an interrupted trim"))
	if err := in.Trim(ctx, 1, []string{"state", "orphan"}); err != nil {
		t.Fatal(err)
	}
	got, err := storage.Retain(ctx, in, 1, 3, specRefs)
	if err != nil || len(got) > 0 {
		t.Fatalf("Retain = %v, %v; want nothing discarded", got, err)
	}
	if got := trimmedFiles(t, in); got != "1=state 2=state" {
		t.Fatalf("without metadata: %q, want 1 and 2 trimmed to state", got)
	}
	if _, ok := in.Get(t, "chk-0000000001/orphan"); ok {
		t.Fatal("the file no kept checkpoint references is still there")
	}
	// Checkpoint 4 builds on nothing: 3 goes, and what only 3 referenced with it.
	setup(t, in, "4c")
	got, err = storage.Retain(ctx, in, 1, 4, specRefs)
	if err != nil || !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("Retain = %v, %v; want [1 2 3] discarded", got, err)
	}
}

// A failed Trim does not stop Retain: the other checkpoints are discarded or trimmed, and the
// failure is returned.
func testRetainTrimFailure(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c>1+2")
	boom := errors.New("disk on fire")
	got, err := storage.Retain(context.Background(), failOn(in, OpTrim, 2, boom), 1, -1, specRefs)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the Trim failure", err)
	}
	if len(got) > 0 {
		t.Fatalf("discarded %v, want nothing", got)
	}
	if got := trimmedFiles(t, in); got != "1=state" {
		t.Fatalf("without metadata: %q, want 1 trimmed (2's trim failed)", got)
	}
}

// A checkpoint whose Discard or Trim failed keeps its metadata: it is still complete, so the older
// checkpoints deleted after it keep the files it references (a trim instead of a discard), and no
// complete checkpoint is left with a referenced file missing.
func retainFailedDeletionKeepsItsReferences(op Op) func(t *testing.T, in Instance) {
	return func(t *testing.T, in Instance) {
		if op == OpDiscard {
			setup(t, in, "1c 2c>1 3c 4c")
		} else {
			// 4 references 2's extra file: 2 is trimmed to it, and that fails.
			setup(t, in, "1c 2c>1 3c 4c>2/extra")
		}
		boom := errors.New("disk on fire")
		got, err := storage.Retain(context.Background(), failOn(in, op, 2, boom), 1, -1, specRefs)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the %v failure", err, op)
		}
		if !slices.Equal(got, []int64{3}) {
			t.Fatalf("discarded %v, want [3]", got)
		}
		if _, ok := in.Get(t, storage.CheckpointDirName(2)+"/"+storage.MetadataName); !ok {
			t.Fatal("checkpoint 2's metadata is gone: the injected failure did not keep it")
		}
		if got := trimmedFiles(t, in); got != "1=state" {
			t.Fatalf("without metadata: %q, want 1 trimmed to the file complete checkpoint 2 references", got)
		}
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
	got, err := storage.Retain(context.Background(), failOn(in, OpReadMetadata, 2, boom), 1, 2, specRefs)
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
	got, err := storage.Retain(context.Background(), failOn(in, OpReadMetadata, 3, errors.New("i/o timeout")), 1, -1, specRefs)
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
	got, err := storage.Retain(context.Background(), failOn(in, OpDiscard, 2, boom), 1, -1, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the Discard failure", err)
	}
	if !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("discarded %v, want [1 3]: a failed Discard must not stop the others", got)
	}
}

func testRetainStopsOnReadError(t *testing.T, in Instance) {
	setup(t, in, "1c 2c 3c")
	f := NewFaulty(in)
	boom := errors.New("i/o timeout")
	f.FailNext(OpReadMetadata, boom)
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
	f := NewFaulty(in)
	boom := errors.New("connection reset")
	f.FailNext(OpReadMetadata, boom)
	id, _, _, err := storage.Latest(context.Background(), f)
	if !errors.Is(err, boom) {
		t.Fatalf("Latest = %d, %v; want the read error", id, err)
	}
}

// failOn returns in behind a Faulty whose operation op on checkpoint id fails with err.
func failOn(in Instance, op Op, id int64, err error) *Faulty {
	f := NewFaulty(in)
	f.FailWhen(func(o Op, i int64, _ string) error {
		if o == op && i == id {
			return err
		}
		return nil
	})
	return f
}
