package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/storage"
)

// refMeta is the metadata of the checkpoints of TestRetainCrashKeepsReferencedFiles: the files the
// checkpoint's state is made of (its own and those of earlier checkpoints it builds on, as an
// incremental snapshot's).
type refMeta struct {
	ID    int64            `json:"id"`
	Files []storage.Handle `json:"files"`
}

// refMetaRefs is Retain's refs for refMeta: the files of earlier checkpoints.
func refMetaRefs(b []byte) ([]storage.FileRef, error) {
	var m refMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var refs []storage.FileRef
	for _, h := range m.Files {
		if h.Checkpoint != m.ID {
			refs = append(refs, h.Ref())
		}
	}
	return refs, nil
}

// A crash at any filesystem call of Retain never leaves a kept checkpoint (one of the newest keep,
// or protect) with a file it references missing, nor a checkpoint Retain was deleting, if it is
// still complete: Retain resolves every reference before it deletes anything, never deletes a
// checkpoint a kept one references, and deletes the others newest first (DESIGN.md §7: retention
// "never deletes a file that a retained checkpoint still references"). A checkpoint kept only
// because a kept one references it is no recovery point and may lose what it referenced itself: a
// checkpoint's references name every file it reads. The same run with refs nil, which deletes
// referenced checkpoints, must be caught: the check can fail.
func TestRetainCrashKeepsReferencedFiles(t *testing.T) {
	ctx := context.Background()
	// 1 full, 2 on 1, 3 on 2 and 1, 4 on 3, 5 on 4 (no longer on 3: its state does not read
	// 3's file), 6 on 5 and 4. Each has two files, and later ones build on the first ("state")
	// only. Keeping 2: 5 and 6, and 4's state file, which they build on; 4 loses 3's file, its
	// metadata and its other file. Protecting 2 as well: 2 and 1's state file, which 2 builds on,
	// stay too.
	builds := map[int64][]int64{1: nil, 2: {1}, 3: {2, 1}, 4: {3}, 5: {4}, 6: {5, 4}}
	setup := func(t *testing.T) *CrashFS {
		base := NewCrashFS()
		l, err := base.NewLocal("/ck")
		if err != nil {
			t.Fatal(err)
		}
		own := map[int64]storage.Handle{}
		for id := int64(1); id <= 6; id++ {
			h, err := l.WriteFile(ctx, id, "state", []byte(fmt.Sprintf("state of checkpoint %d", id)))
			if err != nil {
				t.Fatal(err)
			}
			x, err := l.WriteFile(ctx, id, "extra", []byte(fmt.Sprintf("more state of checkpoint %d", id)))
			if err != nil {
				t.Fatal(err)
			}
			own[id] = h
			m := refMeta{ID: id, Files: []storage.Handle{h, x}}
			for _, r := range builds[id] {
				m.Files = append(m.Files, own[r])
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.WriteMetadata(ctx, id, b); err != nil {
				t.Fatal(err)
			}
		}
		return base
	}
	for _, tc := range []struct {
		name    string
		protect int64
		gone    []int64 // what storage.Retain discards without a crash
		trimmed []int64 // what it trims to their state file
	}{
		{"keep 2", -1, []int64{1, 2, 3}, []int64{4}},
		{"keep 2 and protect 2", 2, []int64{3}, []int64{1, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// checked are the checkpoints that must never lose a file while they are complete: the
			// kept ones and those Retain deletes (newest first, so never one a survivor reads).
			checked := map[int64]bool{5: true, 6: true}
			if tc.protect >= 0 {
				checked[tc.protect] = true
			}
			for _, id := range tc.gone {
				checked[id] = true
			}
			// run crashes Retain at its n-th filesystem call (n 0: never) and returns the problems
			// the survivor shows, and whether the crash happened.
			run := func(t *testing.T, n int, refs func([]byte) ([]storage.FileRef, error)) (problems []string, crashed bool) {
				f := NewFaultFS(setup(t))
				l, err := f.NewLocal("/ck")
				if err != nil {
					t.Fatal(err)
				}
				calls := 0 // storage.Retain's calls only
				f.CrashWhen(func(op FSOp, path string) bool {
					calls++
					return n > 0 && calls == n
				})
				gone, err := storage.Retain(ctx, l, 2, tc.protect, refs)
				survivor := f.Survivor()
				if survivor == nil {
					if err != nil {
						t.Fatalf("Retain without a crash: %v", err)
					}
					if refs != nil && !slices.Equal(gone, tc.gone) {
						t.Fatalf("Retain discarded %v, want %v", gone, tc.gone)
					}
					if refs != nil {
						// The trimmed ones keep exactly their referenced file, durably.
						image := f.Crash()
						for _, id := range tc.trimmed {
							des, err := image.m.ReadDir(chkDir(id))
							if err != nil {
								t.Fatal(err)
							}
							if len(des) != 1 || des[0].Name() != "state" {
								t.Fatalf("trimmed checkpoint %d holds %v, want only its state file", id, des)
							}
						}
					}
					survivor = f.Crash() // what a crash right after storage.Retain leaves
				} else {
					crashed = true
					if !errors.Is(err, ErrCrashed) {
						t.Fatalf("crash at call %d: storage.Retain = %v, want ErrCrashed", n, err)
					}
				}
				after, err := survivor.NewLocal("/ck")
				if err != nil {
					t.Fatal(err)
				}
				entries, err := after.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				left := map[int64]bool{}
				for _, e := range entries {
					left[e.ID] = true
					if !e.Complete || !checked[e.ID] {
						continue
					}
					b, err := after.ReadMetadata(ctx, e.ID)
					if err != nil {
						problems = append(problems, fmt.Sprintf("checkpoint %d: metadata: %v", e.ID, err))
						continue
					}
					var m refMeta
					if err := json.Unmarshal(b, &m); err != nil {
						t.Fatal(err)
					}
					for _, h := range m.Files {
						if _, err := after.ReadFile(ctx, h); err != nil {
							problems = append(problems, fmt.Sprintf("complete checkpoint %d lost file %s of checkpoint %d: %v", e.ID, h.Name, h.Checkpoint, err))
						}
					}
				}
				for id := range checked {
					if !slices.Contains(tc.gone, id) && !left[id] {
						problems = append(problems, fmt.Sprintf("kept checkpoint %d is gone", id))
					}
				}
				return problems, crashed
			}
			n := 1
			for ; ; n++ {
				problems, crashed := run(t, n, refMetaRefs)
				for _, p := range problems {
					t.Errorf("crash at call %d of storage.Retain: %s", n, p)
				}
				if !crashed {
					break
				}
			}
			if n < 10 {
				t.Fatalf("Retain made only %d filesystem calls: the crash points cover nothing", n-1)
			}
			t.Logf("crashed storage.Retain at each of its %d filesystem calls", n-1)

			// The control: ignoring references deletes 4, which 5 and 6 build on.
			if problems, _ := run(t, 0, nil); len(problems) == 0 {
				t.Fatal("Retain without refs left every referenced file: the check cannot fail")
			}
		})
	}
}
