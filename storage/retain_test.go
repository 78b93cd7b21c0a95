package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corruptMetadata flips a payload byte of checkpoint id's metadata.
func corruptMetadata(t *testing.T, l *Local, id int64) string {
	t.Helper()
	p := filepath.Join(l.chkDir(id), MetadataName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// setup creates checkpoints from a spec like "1c 2i 3x": complete, incomplete, complete with
// corrupt metadata.
func setup(t *testing.T, spec string) *Local {
	t.Helper()
	l := newTestLocal(t)
	for _, f := range strings.Fields(spec) {
		var id int64
		var kind rune
		if _, err := fmt.Sscanf(f, "%d%c", &id, &kind); err != nil {
			t.Fatalf("bad spec %q: %v", f, err)
		}
		mustWrite(t, l, id, "state", []byte(f))
		switch kind {
		case 'c':
			mustMeta(t, l, id, f)
		case 'x':
			mustMeta(t, l, id, f)
			corruptMetadata(t, l, id)
		case 'i':
		default:
			t.Fatalf("bad spec %q", f)
		}
	}
	return l
}

func ids(t *testing.T, s Storage) []int64 {
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

func TestRetain(t *testing.T) {
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
			l := setup(t, tc.spec)
			got, err := Retain(context.Background(), l, tc.keep, tc.protect)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.wantDiscarded) {
				t.Errorf("discarded %v, want %v", got, tc.wantDiscarded)
			}
			if left := ids(t, l); !slices.Equal(left, tc.wantLeft) {
				t.Errorf("left %v, want %v", left, tc.wantLeft)
			}
		})
	}
}

func TestRetainRejectsKeepZero(t *testing.T) {
	l := setup(t, "1c 2c")
	if _, err := Retain(context.Background(), l, 0, -1); err == nil {
		t.Fatal("Retain(keep=0) succeeded")
	}
	if left := ids(t, l); !slices.Equal(left, []int64{1, 2}) {
		t.Fatalf("left %v", left)
	}
}

func TestRetainDiscardFailure(t *testing.T) {
	f := NewFaulty(setup(t, "1c 2c 3c 4c"))
	boom := errors.New("disk on fire")
	f.FailWhen(func(op Op, id int64, _ string) error {
		if op == OpDiscard && id == 2 {
			return boom
		}
		return nil
	})
	got, err := Retain(context.Background(), f, 1, -1)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the Discard failure", err)
	}
	if !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("discarded %v, want [1 3]: a failed Discard must not stop the others", got)
	}
}

func TestRetainStopsOnReadError(t *testing.T) {
	f := NewFaulty(setup(t, "1c 2c 3c"))
	boom := errors.New("i/o timeout")
	f.FailNext(OpReadMetadata, boom)
	got, err := Retain(context.Background(), f, 1, -1)
	if !errors.Is(err, boom) || got != nil {
		t.Fatalf("Retain = %v, %v; want the read error and nothing discarded", got, err)
	}
	if left := ids(t, f); !slices.Equal(left, []int64{1, 2, 3}) {
		t.Fatalf("left %v", left)
	}
}

func TestLatest(t *testing.T) {
	ctx := context.Background()
	l := setup(t, "1c 2c 3i")
	id, meta, skipped, err := Latest(ctx, l)
	if err != nil || id != 2 || string(meta) != "2c" || len(skipped) != 0 {
		t.Fatalf("Latest = %d, %q, %v, %v; want 2, \"2c\"", id, meta, skipped, err)
	}
}

func TestLatestSkipsCorrupt(t *testing.T) {
	ctx := context.Background()
	l := setup(t, "1c 2c 3c 4i")
	path3 := corruptMetadata(t, l, 3)
	path2 := filepath.Join(l.chkDir(2), MetadataName)
	if err := os.WriteFile(path2, []byte("short"), 0o644); err != nil { // truncated
		t.Fatal(err)
	}
	id, meta, skipped, err := Latest(ctx, l)
	if err != nil || id != 1 || string(meta) != "1c" {
		t.Fatalf("Latest = %d, %q, %v; want checkpoint 1", id, meta, err)
	}
	if len(skipped) != 2 {
		t.Fatalf("skipped = %v, want 2", skipped)
	}
	for i, want := range []struct{ path, why string }{{path3, "checksum mismatch"}, {path2, "truncated: 5 bytes"}} {
		if !IsCorrupt(skipped[i]) || !strings.Contains(skipped[i].Error(), want.path) || !strings.Contains(skipped[i].Error(), want.why) {
			t.Errorf("skipped[%d] = %v, want it to name %s and say %q", i, skipped[i], want.path, want.why)
		}
	}
}

func TestLatestNone(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []string{"", "1i 2i", "1x"} {
		l := setup(t, spec)
		_, meta, skipped, err := Latest(ctx, l)
		if !errors.Is(err, ErrNotFound) || meta != nil || !strings.Contains(err.Error(), l.Location()) {
			t.Errorf("%q: Latest = %q, %v; want ErrNotFound naming the directory", spec, meta, err)
		}
		if wantSkipped := strings.Count(spec, "x"); len(skipped) != wantSkipped {
			t.Errorf("%q: skipped %v, want %d", spec, skipped, wantSkipped)
		}
	}
}

// A transient read failure must not make recovery fall back to an older checkpoint.
func TestLatestDoesNotFallBackOnIOError(t *testing.T) {
	f := NewFaulty(setup(t, "1c 2c"))
	boom := errors.New("connection reset")
	f.FailNext(OpReadMetadata, boom)
	id, _, _, err := Latest(context.Background(), f)
	if !errors.Is(err, boom) {
		t.Fatalf("Latest = %d, %v; want the read error", id, err)
	}
}
