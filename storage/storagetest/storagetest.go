// Package storagetest checks that an implementation of [storage.Storage] keeps its contract. Every
// backend runs the same checks: storage.Local in package storage, the object-storage backends in
// storage/blob. [TestStorage] covers the methods of the interface, [TestRetention] the retention
// and recovery functions built on them ([storage.Retain], [storage.Latest]).
//
// The checks need raw access to what a backend stores, to corrupt it and to check its layout, so a
// backend is handed to them as an [Instance]: the Storage plus functions that read and write its
// stored bytes by key.
//
// It also holds the test doubles of checkpoint storage, kept out of the production package as
// Pebble keeps vfs/errorfs apart: [CrashFS], an in-memory filesystem that simulates power losses
// under a [storage.Local] ([storage.NewLocalFS]); [FaultFS], which fails, slows down or crashes
// chosen filesystem calls; and [Faulty], which fails whole [storage.Storage] methods.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// Instance is one storage under test and raw access to what it stores. A key (rel) is
// slash-separated and relative to the storage's root, e.g. "chk-0000000001/_metadata".
type Instance struct {
	storage.Storage
	// Where returns the location the storage's messages and entries use for rel.
	Where func(rel string) string
	// Get returns the bytes stored under rel, and false if there are none.
	Get func(t *testing.T, rel string) ([]byte, bool)
	// Put stores b under rel as is (no trailer), creating whatever rel needs.
	Put func(t *testing.T, rel string, b []byte)
}

// Opener returns a fresh, empty Instance for test t; whatever it opens should be cleaned up when t
// ends. Checks run in parallel, so it must be safe to call concurrently.
type Opener func(t *testing.T) Instance

// OpenLocal is an Opener of storage.Local, in a new directory under t.TempDir, with raw access
// through the filesystem.
func OpenLocal(t *testing.T) Instance {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checkpoints")
	l, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	return Instance{
		Storage: l,
		Where:   path,
		Get: func(t *testing.T, rel string) ([]byte, bool) {
			b, err := os.ReadFile(path(rel))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		},
		Put: func(t *testing.T, rel string, b []byte) {
			p := path(rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// check is one named contract check; it gets a fresh Instance.
type check struct {
	name string
	run  func(t *testing.T, in Instance)
}

// runChecks runs each check as a parallel subtest of t named after it, on its own Instance.
func runChecks(t *testing.T, open Opener, checks []check) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
}

// TestStorage checks the methods of storage.Storage on Instances from open, each check a parallel
// subtest of t: round trip, the stored file format and layout, name and id validation, missing
// files, List, detection of truncated and corrupted files and of a handle that does not match its
// file, metadata written once, Discard, Trim, a cancelled context, concurrent writers, and the
// ledger.
func TestStorage(t *testing.T, open Opener) {
	runChecks(t, open, []check{
		{"RoundTrip", testRoundTrip},
		{"FileFormat", testFileFormat},
		{"InvalidNames", testInvalidNames},
		{"NotFound", testNotFound},
		{"StatFile", testStatFile},
		{"List", testList},
		{"ListIDsBeyondTenDigits", testListIDsBeyondTenDigits},
		{"TruncationDetected", testTruncationDetected},
		{"FlippedByteDetected", testFlippedByteDetected},
		{"ReadFileChecksHandle", testReadFileChecksHandle},
		{"WriteMetadataRefusesComplete", testWriteMetadataRefusesComplete},
		{"Discard", testDiscard},
		{"Trim", testTrim},
		{"TrimKeepingNothingDiscards", testTrimKeepingNothing},
		{"TrimRejectsInvalidNames", testTrimRejectsInvalidNames},
		{"TrimAbsent", testTrimAbsent},
		{"CancelledContext", testCancelledContext},
		{"ConcurrentWriteFile", testConcurrentWriteFile},
		{"Ledger", testLedger},
	})
}

// MustWrite writes file name of checkpoint id, failing the test on an error.
func MustWrite(t *testing.T, s storage.Storage, id int64, name string, data []byte) storage.Handle {
	t.Helper()
	h, err := s.WriteFile(context.Background(), id, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// MustMeta writes the metadata of checkpoint id, failing the test on an error.
func MustMeta(t *testing.T, s storage.Storage, id int64, data string) {
	t.Helper()
	if err := s.WriteMetadata(context.Background(), id, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// IDs returns the ids of the checkpoints s lists, in List's order. It fails t if List fails.
func IDs(t *testing.T, s storage.Storage) []int64 {
	t.Helper()
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

func testRoundTrip(t *testing.T, in Instance) {
	ctx := context.Background()
	for _, data := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("state"), 10000)} {
		h := MustWrite(t, in, 3, "op-1.kg-7", data)
		want := storage.Handle{Name: "op-1.kg-7", Checkpoint: 3, Size: int64(len(data)), CRC: storage.Checksum(data)}
		if h != want {
			t.Fatalf("handle = %+v, want %+v", h, want)
		}
		got, err := in.ReadFile(ctx, h)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadFile = %q, %v; want %d bytes", got, err, len(data))
		}
	}
	MustMeta(t, in, 3, "meta")
	got, err := in.ReadMetadata(ctx, 3)
	if err != nil || string(got) != "meta" {
		t.Fatalf("ReadMetadata = %q, %v", got, err)
	}
	// The layout is part of the contract: operators look at these names.
	for _, rel := range []string{"chk-0000000003/op-1.kg-7", "chk-0000000003/_metadata"} {
		if _, ok := in.Get(t, rel); !ok {
			t.Errorf("%s missing", in.Where(rel))
		}
	}
}

func testFileFormat(t *testing.T, in Instance) {
	MustWrite(t, in, 1, "f", []byte("abc"))
	b, _ := in.Get(t, "chk-0000000001/f")
	// payload, "IGCK", uint64le 3, uint32le crc32c("abc") = 0x364b3fb7.
	want := []byte("abcIGCK\x03\x00\x00\x00\x00\x00\x00\x00\xb7\x3f\x4b\x36")
	if !bytes.Equal(b, want) {
		t.Fatalf("file = %x\nwant   %x", b, want)
	}
	MustMeta(t, in, 1, "abc")
	if b, _ := in.Get(t, "chk-0000000001/_metadata"); !bytes.Equal(b, want) {
		t.Fatalf("metadata = %x\nwant       %x", b, want)
	}
}

func testInvalidNames(t *testing.T, in Instance) {
	ctx := context.Background()
	for name, why := range map[string]string{
		"":                       "empty",
		"a/b":                    "path separator",
		`a\b`:                    "path separator",
		"..":                     `".."`,
		"a..b":                   `".."`,
		".hidden":                `starts with "."`,
		".tmp-x":                 `starts with "."`,
		"_metadata":              `starts with "_"`,
		"nul\x00byte":            "NUL",
		strings.Repeat("n", 256): "longer than 255",
	} {
		_, err := in.WriteFile(ctx, 1, name, []byte("x"))
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "invalid state file name") {
			t.Errorf("WriteFile(%q) = %v, want an error saying %s", name, err, why)
		}
		_, err = in.ReadFile(ctx, storage.Handle{Name: name, Checkpoint: 1})
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ReadFile(%q) = %v, want an error saying %s", name, err, why)
		}
	}
	if _, err := in.WriteFile(ctx, -1, "a", nil); err == nil {
		t.Error("WriteFile with id -1 succeeded")
	}
	entries, err := in.List(ctx)
	if err != nil || len(entries) != 0 {
		t.Fatalf("rejected writes left %v, %v", entries, err)
	}
}

func testNotFound(t *testing.T, in Instance) {
	ctx := context.Background()
	_, err := in.ReadMetadata(ctx, 9)
	if !errors.Is(err, storage.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), in.Where("chk-0000000009/_metadata")) {
		t.Errorf("ReadMetadata(absent) = %v, want ErrNotFound naming the file", err)
	}
	h := MustWrite(t, in, 9, "a", []byte("x"))
	h.Name = "b"
	_, err = in.ReadFile(ctx, h)
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), in.Where("chk-0000000009/b")) {
		t.Errorf("ReadFile(absent) = %v, want ErrNotFound naming the file", err)
	}
	if storage.IsCorrupt(err) {
		t.Errorf("a missing file is reported as corrupt: %v", err)
	}
}

// StatFile finds a stored file without reading it and reports a missing
// one as not found, naming it.
func testStatFile(t *testing.T, in Instance) {
	ctx := context.Background()
	h := MustWrite(t, in, 4, "s", []byte("payload"))
	if err := in.StatFile(ctx, h); err != nil {
		t.Fatalf("StatFile(stored) = %v", err)
	}
	gone := h
	gone.Name = "t"
	err := in.StatFile(ctx, gone)
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "chk-0000000004") {
		t.Errorf("StatFile(absent) = %v, want ErrNotFound naming the checkpoint", err)
	}
	if err := in.Discard(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := in.StatFile(ctx, h); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("StatFile(discarded) = %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, in Instance) {
	ctx := context.Background()
	MustWrite(t, in, 12, "a", []byte("x"))
	MustMeta(t, in, 12, "m")
	MustWrite(t, in, 2, "a", []byte("x")) // incomplete
	MustMeta(t, in, 7, "m")
	// A crash while writing metadata may leave a temporary file: checkpoint 30 is not complete.
	in.Put(t, "chk-0000000030/.tmp-_metadata-XYZ", []byte("partial"))
	// Junk that is not a checkpoint.
	for _, d := range []string{"chk-", "chk-abc", "chk-12x", "chk-5", "chk-+000000001", "lost+found", "chk-99999999999999999999"} {
		in.Put(t, d+"/x", []byte("junk"))
	}
	in.Put(t, "chk-0000000040", nil) // a file, not a directory

	got, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []storage.Entry
	for _, e := range []struct {
		id       int64
		complete bool
	}{{2, false}, {7, true}, {12, true}, {30, false}} {
		want = append(want, storage.Entry{ID: e.id, Complete: e.complete, Path: in.Where(storage.CheckpointDirName(e.id))})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List =\n%v\nwant\n%v", got, want)
	}
	if _, err := in.ReadMetadata(ctx, 30); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ReadMetadata with only a .tmp- file = %v, want ErrNotFound", err)
	}
}

func testListIDsBeyondTenDigits(t *testing.T, in Instance) {
	MustMeta(t, in, 123456789012, "big")
	MustMeta(t, in, 9, "small")
	got, err := in.List(context.Background())
	if err != nil || len(got) != 2 || got[0].ID != 9 || got[1].ID != 123456789012 {
		t.Fatalf("List = %v, %v", got, err)
	}
}

// corruption is one stored file of checkpoint 1 and how to read it.
type corruption struct {
	rel  string
	read func() error
}

// corruptibles writes payload as state file kg-7 of checkpoint 1 and completes the checkpoint, and
// returns both files.
func corruptibles(t *testing.T, in Instance, payload []byte) []corruption {
	ctx := context.Background()
	h := MustWrite(t, in, 1, "kg-7", payload)
	MustMeta(t, in, 1, "metadata payload")
	return []corruption{
		{"chk-0000000001/kg-7", func() error { _, err := in.ReadFile(ctx, h); return err }},
		{"chk-0000000001/_metadata", func() error { _, err := in.ReadMetadata(ctx, 1); return err }},
	}
}

func testTruncationDetected(t *testing.T, in Instance) {
	for _, tc := range corruptibles(t, in, []byte("operator state of key group 7, 42 bytes..")) {
		full, _ := in.Get(t, tc.rel)
		path := in.Where(tc.rel)
		for n := 0; n < len(full); n++ {
			in.Put(t, tc.rel, full[:n])
			err := tc.read()
			if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("%s cut to %d of %d bytes: err = %v, want a truncation error naming the file", path, n, len(full), err)
			}
			if n < storage.TrailerSize && !strings.Contains(err.Error(), fmt.Sprintf("truncated: %d bytes, expected at least 16", n)) {
				t.Fatalf("cut to %d bytes: err = %v", n, err)
			}
			var ce *storage.CorruptError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("err = %#v, want *CorruptError with Path %s", err, path)
			}
		}
		in.Put(t, tc.rel, full)
		if err := tc.read(); err != nil {
			t.Fatalf("restored file: %v", err)
		}
	}
}

func testFlippedByteDetected(t *testing.T, in Instance) {
	for _, tc := range corruptibles(t, in, []byte("some operator state")) {
		full, _ := in.Get(t, tc.rel)
		path := in.Where(tc.rel)
		for i := range full {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				b := bytes.Clone(full)
				b[i] ^= mask
				in.Put(t, tc.rel, b)
				err := tc.read()
				if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("byte %d of %s ^= %#x: err = %v, want corruption naming the file", i, path, mask, err)
				}
				if i < len(full)-storage.TrailerSize && !strings.Contains(err.Error(), "checksum mismatch: stored 0x") {
					t.Fatalf("payload byte %d flipped: err = %v, want a checksum mismatch", i, err)
				}
			}
		}
		in.Put(t, tc.rel, full)
	}
}

func testReadFileChecksHandle(t *testing.T, in Instance) {
	ctx := context.Background()
	h := MustWrite(t, in, 1, "a", []byte("version 1"))
	wrongSize, wrongCRC := h, h
	wrongSize.Size++
	wrongCRC.CRC ^= 1
	for _, bad := range []storage.Handle{wrongSize, wrongCRC} {
		_, err := in.ReadFile(ctx, bad)
		if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), "does not match its handle") || !strings.Contains(err.Error(), in.Where("chk-0000000001/a")) {
			t.Errorf("ReadFile(%+v) = %v, want a handle mismatch naming the file", bad, err)
		}
	}
	// A well-formed file that was replaced after the handle was taken is not the file the handle names.
	MustWrite(t, in, 1, "a", []byte("version 2"))
	if _, err := in.ReadFile(ctx, h); !storage.IsCorrupt(err) {
		t.Errorf("ReadFile(old handle of a replaced file) = %v, want corruption", err)
	}
}

func testWriteMetadataRefusesComplete(t *testing.T, in Instance) {
	ctx := context.Background()
	MustMeta(t, in, 4, "first")
	err := in.WriteMetadata(ctx, 4, []byte("second"))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already complete") {
		t.Fatalf("second WriteMetadata = %v, want already complete", err)
	}
	if got, _ := in.ReadMetadata(ctx, 4); string(got) != "first" {
		t.Fatalf("metadata = %q, want the first", got)
	}
}

func testDiscard(t *testing.T, in Instance) {
	ctx := context.Background()
	MustWrite(t, in, 1, "a", []byte("x"))
	for i := range 40 { // more than the deletes a backend may run at once
		MustWrite(t, in, 1, fmt.Sprintf("kg-%d", i), []byte("x"))
	}
	MustMeta(t, in, 1, "m")
	MustWrite(t, in, 2, "a", []byte("x"))
	if err := in.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := in.Discard(ctx, 1); err != nil {
		t.Fatalf("discarding an absent id: %v", err)
	}
	if err := in.Discard(ctx, 77); err != nil {
		t.Fatalf("discarding a never-written id: %v", err)
	}
	got, err := in.List(ctx)
	if err != nil || len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("List after Discard = %v, %v", got, err)
	}
	for _, rel := range []string{"chk-0000000001/a", "chk-0000000001/kg-39", "chk-0000000001/_metadata"} {
		if _, ok := in.Get(t, rel); ok {
			t.Fatalf("%s still there", in.Where(rel))
		}
	}
	// The checkpoint can be written again after a discard.
	h := MustWrite(t, in, 1, "b", []byte("again"))
	if _, err := in.ReadFile(ctx, h); err != nil {
		t.Fatal(err)
	}
}

// present returns which of the files names of checkpoint id are stored.
func present(t *testing.T, in Instance, id int64, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		if _, ok := in.Get(t, storage.CheckpointDirName(id)+"/"+n); ok {
			out = append(out, n)
		}
	}
	return out
}

// testTrim: Trim deletes the metadata (the checkpoint lists as incomplete and has no metadata to
// read), every state file not kept and leftover temporary files, keeps the kept ones readable and
// leaves other checkpoints alone; it is idempotent, a name in keep that is not stored is
// ignored, and a second Trim with fewer names trims further.
func testTrim(t *testing.T, in Instance) {
	ctx := context.Background()
	handles := map[string]storage.Handle{}
	var all []string
	for i := range 40 { // more than the deletes a backend may run at once
		name := fmt.Sprintf("state-op-0-%d", i)
		handles[name] = MustWrite(t, in, 1, name, []byte(name))
		all = append(all, name)
	}
	MustMeta(t, in, 1, "m1")
	in.Put(t, "chk-0000000001/.tmp-_metadata-XYZ", []byte("left by a crash"))
	MustWrite(t, in, 2, "state-op-0-3", []byte("x"))
	MustMeta(t, in, 2, "m2")

	keep := []string{"state-op-0-3", "state-op-0-17", "state-op-0-never-written"}
	for range 2 { // idempotent
		if err := in.Trim(ctx, 1, keep); err != nil {
			t.Fatal(err)
		}
		got, err := in.List(ctx)
		if err != nil || len(got) != 2 || got[0].ID != 1 || got[0].Complete || got[1].ID != 2 || !got[1].Complete {
			t.Fatalf("List after Trim = %v, %v; want 1 incomplete and 2 complete", got, err)
		}
		if _, err := in.ReadMetadata(ctx, 1); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("ReadMetadata of a trimmed checkpoint = %v, want ErrNotFound", err)
		}
		if left := present(t, in, 1, append(slices.Clone(all), "_metadata", ".tmp-_metadata-XYZ", "state-op-0-never-written")...); !slices.Equal(left, []string{"state-op-0-3", "state-op-0-17"}) {
			t.Fatalf("files left after Trim(%q): %q", keep, left)
		}
		for _, n := range keep[:2] {
			if got, err := in.ReadFile(ctx, handles[n]); err != nil || string(got) != n {
				t.Fatalf("ReadFile(%s) after Trim = %q, %v", n, got, err)
			}
		}
		if got, err := in.ReadMetadata(ctx, 2); err != nil || string(got) != "m2" {
			t.Fatalf("checkpoint 2 after trimming 1: ReadMetadata = %q, %v", got, err)
		}
	}
	if err := in.Trim(ctx, 1, []string{"state-op-0-17"}); err != nil {
		t.Fatal(err)
	}
	if left := present(t, in, 1, all...); !slices.Equal(left, []string{"state-op-0-17"}) {
		t.Fatalf("files left after trimming further: %q", left)
	}
	if ids := IDs(t, in); !slices.Equal(ids, []int64{1, 2}) {
		t.Fatalf("List = %v, want [1 2]", ids)
	}
}

// testTrimKeepingNothing: Trim with nothing to keep is Discard, on a complete, a trimmed and an
// incomplete checkpoint alike: the checkpoint is no longer listed.
func testTrimKeepingNothing(t *testing.T, in Instance) {
	ctx := context.Background()
	for id := int64(1); id <= 3; id++ {
		MustWrite(t, in, id, "a", []byte("x"))
		MustWrite(t, in, id, "b", []byte("x"))
	}
	MustMeta(t, in, 1, "m")
	MustMeta(t, in, 2, "m")
	if err := in.Trim(ctx, 2, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		if err := in.Trim(ctx, id, nil); err != nil {
			t.Fatalf("Trim(%d, nil): %v", id, err)
		}
		if left := present(t, in, id, "a", "b", "_metadata"); len(left) > 0 {
			t.Fatalf("Trim(%d, nil) left %q", id, left)
		}
	}
	if ids := IDs(t, in); len(ids) > 0 {
		t.Fatalf("List after trimming everything = %v", ids)
	}
}

// testTrimRejectsInvalidNames: a name in keep that cannot be a state file name (the metadata's,
// a temporary file's, a path) fails Trim before it deletes anything.
func testTrimRejectsInvalidNames(t *testing.T, in Instance) {
	ctx := context.Background()
	MustWrite(t, in, 1, "a", []byte("x"))
	MustMeta(t, in, 1, "m")
	for _, bad := range []string{storage.MetadataName, ".tmp-x", "../chk-0000000002/a", ""} {
		err := in.Trim(ctx, 1, []string{"a", bad})
		if err == nil || !strings.Contains(err.Error(), "invalid state file name") || !strings.Contains(err.Error(), "checkpoint 1") {
			t.Errorf("Trim(1, [a %q]) = %v, want an error naming the checkpoint and the invalid name", bad, err)
		}
	}
	if got, err := in.ReadMetadata(ctx, 1); err != nil || string(got) != "m" {
		t.Fatalf("a rejected Trim deleted the metadata: %q, %v", got, err)
	}
	if err := in.Trim(ctx, -1, []string{"a"}); err == nil {
		t.Error("Trim with id -1 succeeded")
	}
}

// testTrimAbsent: trimming a checkpoint that was never written, or was discarded, is not an
// error and creates nothing.
func testTrimAbsent(t *testing.T, in Instance) {
	ctx := context.Background()
	MustWrite(t, in, 1, "a", []byte("x"))
	if err := in.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 77} {
		if err := in.Trim(ctx, id, []string{"a"}); err != nil {
			t.Fatalf("Trim(%d) of an absent checkpoint: %v", id, err)
		}
	}
	if ids := IDs(t, in); len(ids) > 0 {
		t.Fatalf("List after trimming absent checkpoints = %v, want none", ids)
	}
}

func testCancelledContext(t *testing.T, in Instance) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := in.WriteFile(ctx, 1, "a", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteFile = %v", err)
	}
	if err := in.WriteMetadata(ctx, 1, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteMetadata = %v", err)
	}
	if _, err := in.List(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v", err)
	}
	if _, err := in.ReadMetadata(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadMetadata = %v", err)
	}
	if err := in.Discard(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Discard = %v", err)
	}
	if err := in.Trim(ctx, 1, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Trim = %v", err)
	}
}

func testConcurrentWriteFile(t *testing.T, in Instance) {
	ctx := context.Background()
	const writers, files = 16, 20
	var wg sync.WaitGroup
	handles := make([][]storage.Handle, writers)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				id := int64(1 + i%3) // several goroutines create each checkpoint
				data := []byte(fmt.Sprintf("writer %d file %d", w, i))
				h, err := in.WriteFile(ctx, id, fmt.Sprintf("w%d-f%d", w, i), data)
				if err != nil {
					errs <- err
					return
				}
				handles[w] = append(handles[w], h)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		for i, h := range handles[w] {
			got, err := in.ReadFile(ctx, h)
			if want := fmt.Sprintf("writer %d file %d", w, i); err != nil || string(got) != want {
				t.Fatalf("ReadFile(%+v) = %q, %v; want %q", h, got, err, want)
			}
		}
	}
	entries, err := in.List(ctx)
	if err != nil || len(entries) != 3 {
		t.Fatalf("List = %v, %v", entries, err)
	}
}

// testLedger: no ledger reads as ErrNotFound; a written ledger reads back and is replaced whole;
// it is no checkpoint (List ignores it) and survives the discard of every checkpoint; a damaged
// one reads as ErrCorrupt.
func testLedger(t *testing.T, in Instance) {
	ctx := context.Background()
	if _, err := in.ReadLedger(ctx); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("ReadLedger of a fresh storage: %v, want ErrNotFound", err)
	}
	for _, want := range []string{`{"reserved":16}`, `{"reserved":32,"failed":[7]}`} {
		if err := in.WriteLedger(ctx, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := in.ReadLedger(ctx)
		if err != nil || string(got) != want {
			t.Fatalf("ReadLedger = %q, %v; want %q", got, err, want)
		}
	}
	MustWrite(t, in, 1, "state", []byte("s"))
	MustMeta(t, in, 1, "m")
	if ids := IDs(t, in); !slices.Equal(ids, []int64{1}) {
		t.Fatalf("List = %v, want [1]: the ledger is no checkpoint", ids)
	}
	if err := in.Discard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := in.ReadLedger(ctx); err != nil {
		t.Fatalf("ReadLedger after discarding every checkpoint: %v", err)
	}
	raw, ok := in.Get(t, storage.LedgerName)
	if !ok {
		t.Fatalf("no %s stored", storage.LedgerName)
	}
	raw[0] ^= 0xff
	in.Put(t, storage.LedgerName, raw)
	if _, err := in.ReadLedger(ctx); !storage.IsCorrupt(err) {
		t.Fatalf("ReadLedger of a damaged ledger: %v, want ErrCorrupt", err)
	}
}
