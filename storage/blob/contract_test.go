package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// The contract of storage.Storage, as storage/storage_test.go and storage/retain_test.go check it
// for Local, run against every backend (Local included, so that a difference in behaviour shows as
// a failure of one backend). Test names follow the storage package's.

func TestContractRoundTrip(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		for _, data := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("state"), 10000)} {
			h := mustWrite(t, in, 3, "op-1.kg-7", data)
			want := storage.Handle{Name: "op-1.kg-7", Checkpoint: 3, Size: int64(len(data)), CRC: storage.Checksum(data)}
			if h != want {
				t.Fatalf("handle = %+v, want %+v", h, want)
			}
			got, err := in.ReadFile(ctx, h)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadFile = %q, %v; want %d bytes", got, err, len(data))
			}
		}
		mustMeta(t, in, 3, "meta")
		got, err := in.ReadMetadata(ctx, 3)
		if err != nil || string(got) != "meta" {
			t.Fatalf("ReadMetadata = %q, %v", got, err)
		}
		// The layout is part of the contract: operators look at these names.
		for _, p := range []string{"chk-0000000003/op-1.kg-7", "chk-0000000003/_metadata"} {
			if _, ok := in.get(t, p); !ok {
				t.Errorf("%s missing", in.where(p))
			}
		}
	})
}

func TestContractFileFormat(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		mustWrite(t, in, 1, "f", []byte("abc"))
		b, _ := in.get(t, "chk-0000000001/f")
		// payload, "IGCK", uint64le 3, uint32le crc32c("abc") = 0x364b3fb7.
		want := []byte("abcIGCK\x03\x00\x00\x00\x00\x00\x00\x00\xb7\x3f\x4b\x36")
		if !bytes.Equal(b, want) {
			t.Fatalf("file = %x\nwant   %x", b, want)
		}
		mustMeta(t, in, 1, "abc")
		if b, _ := in.get(t, "chk-0000000001/_metadata"); !bytes.Equal(b, want) {
			t.Fatalf("metadata = %x\nwant       %x", b, want)
		}
	})
}

func TestContractInvalidNames(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
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
			_, err := in.WriteFile(context.Background(), 1, name, []byte("x"))
			if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "invalid state file name") {
				t.Errorf("WriteFile(%q) = %v, want an error saying %s", name, err, why)
			}
			_, err = in.ReadFile(context.Background(), storage.Handle{Name: name, Checkpoint: 1})
			if err == nil || !strings.Contains(err.Error(), why) {
				t.Errorf("ReadFile(%q) = %v, want an error saying %s", name, err, why)
			}
		}
		if _, err := in.WriteFile(context.Background(), -1, "a", nil); err == nil {
			t.Error("WriteFile with id -1 succeeded")
		}
		entries, err := in.List(context.Background())
		if err != nil || len(entries) != 0 {
			t.Fatalf("rejected writes left %v, %v", entries, err)
		}
	})
}

func TestContractNotFound(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		_, err := in.ReadMetadata(ctx, 9)
		if !errors.Is(err, storage.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), in.where("chk-0000000009/_metadata")) {
			t.Errorf("ReadMetadata(absent) = %v, want ErrNotFound naming the file", err)
		}
		h := mustWrite(t, in, 9, "a", []byte("x"))
		h.Name = "b"
		_, err = in.ReadFile(ctx, h)
		if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), in.where("chk-0000000009/b")) {
			t.Errorf("ReadFile(absent) = %v, want ErrNotFound naming the file", err)
		}
		if storage.IsCorrupt(err) {
			t.Errorf("a missing file is reported as corrupt: %v", err)
		}
	})
}

func TestContractList(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		mustWrite(t, in, 12, "a", []byte("x"))
		mustMeta(t, in, 12, "m")
		mustWrite(t, in, 2, "a", []byte("x")) // incomplete
		mustMeta(t, in, 7, "m")
		// A crash while writing metadata may leave a temporary file: checkpoint 30 is not complete.
		in.put(t, "chk-0000000030/.tmp-_metadata-XYZ", []byte("partial"))
		// Junk that is not a checkpoint.
		for _, d := range []string{"chk-", "chk-abc", "chk-12x", "chk-5", "chk-+000000001", "lost+found", "chk-99999999999999999999"} {
			in.put(t, d+"/x", []byte("junk"))
		}
		in.put(t, "chk-0000000040", nil) // a file, not a directory

		got, err := in.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []storage.Entry{
			{ID: 2, Complete: false}, {ID: 7, Complete: true}, {ID: 12, Complete: true}, {ID: 30, Complete: false},
		}
		if len(got) != len(want) {
			t.Fatalf("List =\n%v\nwant\n%v", got, want)
		}
		for i := range want {
			if got[i].ID != want[i].ID || got[i].Complete != want[i].Complete ||
				!strings.Contains(got[i].Path, fmt.Sprintf("chk-%010d", want[i].ID)) {
				t.Fatalf("List =\n%v\nwant\n%v", got, want)
			}
		}
		if _, err := in.ReadMetadata(ctx, 30); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("ReadMetadata with only a .tmp- file = %v, want ErrNotFound", err)
		}
	})
}

func TestContractListIDsBeyondTenDigits(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		mustMeta(t, in, 123456789012, "big")
		mustMeta(t, in, 9, "small")
		got, err := in.List(context.Background())
		if err != nil || len(got) != 2 || got[0].ID != 9 || got[1].ID != 123456789012 {
			t.Fatalf("List = %v, %v", got, err)
		}
	})
}

// corruption is one stored file of checkpoint 1 and how to read it.
type corruption struct {
	rel  string
	read func() error
}

func corruptibles(t *testing.T, in instance, payload []byte) []corruption {
	ctx := context.Background()
	h := mustWrite(t, in, 1, "kg-7", payload)
	mustMeta(t, in, 1, "metadata payload")
	return []corruption{
		{"chk-0000000001/kg-7", func() error { _, err := in.ReadFile(ctx, h); return err }},
		{"chk-0000000001/_metadata", func() error { _, err := in.ReadMetadata(ctx, 1); return err }},
	}
}

func TestContractTruncationDetected(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		for _, tc := range corruptibles(t, in, []byte("operator state of key group 7, 42 bytes..")) {
			full, _ := in.get(t, tc.rel)
			path := in.where(tc.rel)
			for n := 0; n < len(full); n++ {
				in.put(t, tc.rel, full[:n])
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
			in.put(t, tc.rel, full)
			if err := tc.read(); err != nil {
				t.Fatalf("restored file: %v", err)
			}
		}
	})
}

func TestContractFlippedByteDetected(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		for _, tc := range corruptibles(t, in, []byte("some operator state")) {
			full, _ := in.get(t, tc.rel)
			path := in.where(tc.rel)
			for i := range full {
				for _, mask := range []byte{0x01, 0x80, 0xff} {
					b := bytes.Clone(full)
					b[i] ^= mask
					in.put(t, tc.rel, b)
					err := tc.read()
					if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), path) {
						t.Fatalf("byte %d of %s ^= %#x: err = %v, want corruption naming the file", i, path, mask, err)
					}
					if i < len(full)-storage.TrailerSize && !strings.Contains(err.Error(), "checksum mismatch: stored 0x") {
						t.Fatalf("payload byte %d flipped: err = %v, want a checksum mismatch", i, err)
					}
				}
			}
			in.put(t, tc.rel, full)
		}
	})
}

func TestContractReadFileChecksHandle(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		h := mustWrite(t, in, 1, "a", []byte("version 1"))
		wrongSize, wrongCRC := h, h
		wrongSize.Size++
		wrongCRC.CRC ^= 1
		for _, bad := range []storage.Handle{wrongSize, wrongCRC} {
			_, err := in.ReadFile(ctx, bad)
			if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), "does not match its handle") || !strings.Contains(err.Error(), in.where("chk-0000000001/a")) {
				t.Errorf("ReadFile(%+v) = %v, want a handle mismatch naming the file", bad, err)
			}
		}
		// A well-formed file that was replaced after the handle was taken is not the file the handle names.
		mustWrite(t, in, 1, "a", []byte("version 2"))
		if _, err := in.ReadFile(ctx, h); !storage.IsCorrupt(err) {
			t.Errorf("ReadFile(old handle of a replaced file) = %v, want corruption", err)
		}
	})
}

func TestContractWriteMetadataRefusesComplete(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		mustMeta(t, in, 4, "first")
		err := in.WriteMetadata(ctx, 4, []byte("second"))
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already complete") {
			t.Fatalf("second WriteMetadata = %v, want already complete", err)
		}
		if got, _ := in.ReadMetadata(ctx, 4); string(got) != "first" {
			t.Fatalf("metadata = %q, want the first", got)
		}
	})
}

func TestContractDiscard(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		ctx := context.Background()
		mustWrite(t, in, 1, "a", []byte("x"))
		for i := range 40 { // more than the deletes Discard runs at once
			mustWrite(t, in, 1, fmt.Sprintf("kg-%d", i), []byte("x"))
		}
		mustMeta(t, in, 1, "m")
		mustWrite(t, in, 2, "a", []byte("x"))
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
			if _, ok := in.get(t, rel); ok {
				t.Fatalf("%s still there", in.where(rel))
			}
		}
		// The checkpoint can be written again after a discard.
		h := mustWrite(t, in, 1, "b", []byte("again"))
		if _, err := in.ReadFile(ctx, h); err != nil {
			t.Fatal(err)
		}
	})
}

func TestContractCancelledContext(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
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
	})
}

func TestContractConcurrentWriteFile(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
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
	})
}

// setup creates checkpoints from a spec like "1c 2i 3x": complete, incomplete, complete with
// corrupt metadata (as storage/retain_test.go).
func setup(t *testing.T, in instance, spec string) {
	t.Helper()
	for _, f := range strings.Fields(spec) {
		var id int64
		var kind rune
		if _, err := fmt.Sscanf(f, "%d%c", &id, &kind); err != nil {
			t.Fatalf("bad spec %q: %v", f, err)
		}
		mustWrite(t, in, id, "state", []byte(f))
		switch kind {
		case 'c':
			mustMeta(t, in, id, f)
		case 'x':
			mustMeta(t, in, id, f)
			corruptMetadata(t, in, id)
		case 'i':
		default:
			t.Fatalf("bad spec %q", f)
		}
	}
}

// corruptMetadata flips a payload byte of checkpoint id's metadata and returns its location.
func corruptMetadata(t *testing.T, in instance, id int64) string {
	t.Helper()
	rel := fmt.Sprintf("chk-%010d/_metadata", id)
	b, ok := in.get(t, rel)
	if !ok {
		t.Fatalf("%s missing", in.where(rel))
	}
	b[0] ^= 0xff
	in.put(t, rel, b)
	return in.where(rel)
}

func ids(t *testing.T, s storage.Storage) []int64 {
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

func TestContractRetain(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spec          string
		keep          int
		protect       int64
		wantDiscarded []int64
		wantLeft      []int64
	}{
		{"keep newest two", "1c 2c 3c 4c 5c", 2, -1, []int64{1, 2, 3}, []int64{4, 5}},
		{"incomplete older than newest complete go, newer stay", "1c 2i 3c 4i 5c 6i 7i", 1, -1, []int64{1, 2, 3, 4}, []int64{5, 6, 7}},
		{"protected complete checkpoint stays", "1c 2c 3c 4c", 2, 1, []int64{2}, []int64{1, 3, 4}},
		{"corrupt newest does not count", "1c 2c 3x", 1, -1, []int64{1}, []int64{2, 3}},
		{"corrupt between good ones is deleted", "1c 2x 3c", 2, -1, []int64{2}, []int64{1, 3}},
		{"only corrupt complete: nothing deleted", "1x 2x 3i", 1, -1, nil, []int64{1, 2, 3}},
		{"empty storage", "", 3, -1, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, in instance) {
				setup(t, in, tc.spec)
				got, err := storage.Retain(context.Background(), in, tc.keep, tc.protect)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tc.wantDiscarded) {
					t.Errorf("discarded %v, want %v", got, tc.wantDiscarded)
				}
				if left := ids(t, in); !slices.Equal(left, tc.wantLeft) {
					t.Errorf("left %v, want %v", left, tc.wantLeft)
				}
			})
		})
	}
}

func TestContractLatest(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		setup(t, in, "1c 2c 3i")
		id, meta, skipped, err := storage.Latest(context.Background(), in)
		if err != nil || id != 2 || string(meta) != "2c" || len(skipped) != 0 {
			t.Fatalf("Latest = %d, %q, %v, %v; want 2, \"2c\"", id, meta, skipped, err)
		}
	})
}

// Corrupt and truncated metadata is skipped in favour of the previous checkpoint, each reported
// with the object and the reason.
func TestContractLatestSkipsCorrupt(t *testing.T) {
	forEach(t, func(t *testing.T, in instance) {
		setup(t, in, "1c 2c 3c 4i")
		path3 := corruptMetadata(t, in, 3)
		in.put(t, "chk-0000000002/_metadata", []byte("short")) // truncated
		path2 := in.where("chk-0000000002/_metadata")
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
	})
}

func TestContractLatestNone(t *testing.T) {
	for _, spec := range []string{"", "1i 2i", "1x"} {
		t.Run(fmt.Sprintf("%q", spec), func(t *testing.T) {
			forEach(t, func(t *testing.T, in instance) {
				setup(t, in, spec)
				_, meta, skipped, err := storage.Latest(context.Background(), in)
				if !errors.Is(err, storage.ErrNotFound) || meta != nil || !strings.Contains(err.Error(), in.Location()) {
					t.Errorf("Latest = %q, %v; want ErrNotFound naming the location", meta, err)
				}
				if wantSkipped := strings.Count(spec, "x"); len(skipped) != wantSkipped {
					t.Errorf("skipped %v, want %d", skipped, wantSkipped)
				}
			})
		})
	}
}
