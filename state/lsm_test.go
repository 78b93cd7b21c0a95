package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

// lsmEnv returns an LSM environment in a test directory, closed with the
// test.
func lsmEnv(t testing.TB) *LSMEnv {
	t.Helper()
	env, err := NewLSMEnv(LSMOptions{Dir: t.TempDir(), CacheBytes: 8 << 20}, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env
}

// lsmBackend returns an LSM backend in env, closed with the test.
func lsmBackend(t testing.TB, env *LSMEnv, op string, maxP int, r KeyGroupRange) *Backend {
	t.Helper()
	b := NewLSMBackend(context.Background(), env, op, maxP, r)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// countingFiles is checkpoint storage that counts the data files read.
type countingFiles struct {
	storage.Storage
	reads atomic.Int64
}

func (c *countingFiles) ReadFile(ctx context.Context, h storage.Handle) ([]byte, error) {
	c.reads.Add(1)
	return c.Storage.ReadFile(ctx, h)
}

func testFiles(t testing.TB) *countingFiles {
	t.Helper()
	s, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &countingFiles{Storage: s}
}

// forBackends runs f with a constructor of memory backends, then of LSM
// backends: every behaviour of the state API holds on both.
func forBackends(t *testing.T, f func(t *testing.T, newBackend func(op string) *Backend)) {
	t.Run("memory", func(t *testing.T) { f(t, fullBackend) })
	t.Run("lsm", func(t *testing.T) {
		env := lsmEnv(t)
		f(t, func(op string) *Backend {
			return lsmBackend(t, env, op, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
		})
	})
}

// apiContents reads a workload's states through the public API (what an
// operator sees), on keys drawn from [0, keys) as workload.step draws them.
// Timers are read without firing them: by firing a copy is not possible, so
// it registers each model timer again and checks Len did not change.
func (w *workload) apiContents(t testing.TB, keys int, timers map[timerKey]bool) *model {
	t.Helper()
	m := newModel()
	w.values.All(func(k string, v int64) bool { m.values[k] = v; return true })
	w.lists.All(func(k string, vs []int64) bool { m.lists[k] = slices.Clone(vs); return true })
	for ik := range int64(keys) {
		if !w.owns(HashKey(ik)) {
			continue
		}
		if um := maps.Collect(w.maps.All(ik)); len(um) > 0 {
			m.maps[ik] = um
			if w.maps.Len(ik) != len(um) {
				t.Fatalf("map %d: Len %d, All yields %d", ik, w.maps.Len(ik), len(um))
			}
		}
	}
	n := w.timers.Len()
	for tk := range timers {
		w.timers.Register(tk.key, tk.ns, tk.ts) // pending: no change
	}
	if w.timers.Len() != n {
		t.Fatalf("registering the model's timers again changed Len from %d to %d: the state lacks some", n, w.timers.Len())
	}
	if n != len(timers) {
		t.Fatalf("timers: Len %d, the model has %d", n, len(timers))
	}
	m.timers = maps.Clone(timers)
	return m
}

// TestLSMModel drives the standard workload on an LSM backend with random
// operations mirrored into a model, takes checkpoints along the way whose
// uploads run on other goroutines while writes go on, completes some and
// aborts others, and restores every uploaded checkpoint into a new backend:
// each must hold the model as of its barrier (a consistent cut), and later
// checkpoints reference the files of earlier complete ones instead of
// uploading them again. Under the race detector one seed runs (its uploads
// on other goroutines are what -race checks).
func TestLSMModel(t *testing.T) {
	seeds := uint64(3)
	if testkit.RaceEnabled {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			const keys = 200
			r := rand.New(rand.NewPCG(seed, 11))
			env := lsmEnv(t)
			files := testFiles(t)
			full := KeyGroupRange{0, DefaultMaxParallelism}
			b := lsmBackend(t, env, "op", DefaultMaxParallelism, full)
			w := mustWorkload(t, b)
			m := newModel()
			type done struct {
				id   int64
				want *model
				up   *Uploaded
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				results []done
				id      int64
			)
			reused := int64(0)
			for step := range 6000 {
				w.step(r, m, keys)
				if err := b.Err(); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if step%500 != 499 {
					continue
				}
				if d := diff(w.apiContents(t, keys, m.timers), m); d != "" {
					t.Fatalf("step %d: state differs from the model: %s", step, d)
				}
				wg.Wait() // the previous upload is done: complete or abort it
				if id > 0 {
					if (id+int64(seed))%3 == 0 {
						b.Abort(id)
					} else {
						b.Complete(id)
					}
				}
				id++
				snap := b.CheckpointSnapshot(id, false)
				want := m.clone()
				cid := id
				wg.Go(func() {
					up, err := snap.Upload(context.Background(), files, "state-op-0")
					if err != nil {
						t.Errorf("checkpoint %d: %v", cid, err)
						return
					}
					mu.Lock()
					results = append(results, done{cid, want, up})
					mu.Unlock()
				})
			}
			wg.Wait()
			for _, d := range results {
				reused += d.up.Reused
				rb := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, full)
				if err := rb.RestoreLSM(context.Background(), files, d.up.Manifest); err != nil {
					t.Fatalf("restoring checkpoint %d: %v", d.id, err)
				}
				rw := mustWorkload(t, rb)
				if d2 := diff(rw.apiContents(t, keys, d.want.timers), d.want); d2 != "" {
					t.Fatalf("checkpoint %d restores other state than the model's at its barrier: %s", d.id, d2)
				}
			}
			if reused == 0 {
				t.Fatal("no checkpoint referenced a file of an earlier one")
			}
		})
	}
}

// TestLSMIncrementalUpload: after a complete checkpoint, a checkpoint
// following a small change uploads only the new files, and a restore from
// it, on the same machine, reads nothing but what is not in the local copy.
func TestLSMIncrementalUpload(t *testing.T) {
	env := lsmEnv(t)
	env.noCompactions = true // each checkpoint's flush adds one file, nothing else changes
	files := testFiles(t)
	full := KeyGroupRange{0, 16}
	b := lsmBackend(t, env, "op", 16, full)
	v := must(NewValueState(b, "v", Int64Codec{}, StringCodec{}))
	for k := range int64(20000) {
		v.Update(k, strings.Repeat("x", 40))
	}
	up1, err := b.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(1)
	v.Update(7, "changed")
	up2, err := b.CheckpointSnapshot(2, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(2)
	if up1.Written == 0 || up1.Reused != 0 {
		t.Fatalf("first checkpoint wrote %d and reused %d bytes", up1.Written, up1.Reused)
	}
	if up2.Reused != up1.Written || up2.Written >= up1.Written/10 {
		t.Fatalf("second checkpoint wrote %d and reused %d bytes; the first wrote %d", up2.Written, up2.Reused, up1.Written)
	}
	var own, earlier int
	for _, h := range up2.Files {
		if h.Checkpoint == 2 {
			own++
		} else {
			earlier++
		}
	}
	if own == 0 || earlier == 0 {
		t.Fatalf("second checkpoint names %d files of its own and %d earlier ones", own, earlier)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Local recovery: a backend of the same range in the same environment
	// finds checkpoint 2's local copy and reads no data file from storage.
	rb := lsmBackend(t, env, "op", 16, full)
	if err := rb.RestoreLSM(context.Background(), files, up2.Manifest); err != nil {
		t.Fatal(err)
	}
	if n := files.reads.Load(); n != 0 {
		t.Fatalf("local recovery read %d files from storage", n)
	}
	rv := must(NewValueState(rb, "v", Int64Codec{}, StringCodec{}))
	if got, _ := rv.Get(7); got != "changed" {
		t.Fatalf("restored value 7 = %q", got)
	}
	if rv.Len() != 20000 {
		t.Fatalf("restored %d values", rv.Len())
	}
	// The next checkpoint builds on the restored files.
	rv.Update(8, "again")
	up3, err := rb.CheckpointSnapshot(3, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	// Every file it shares with the restored checkpoint (the store may have
	// compacted some away when it opened) is referenced, not uploaded again.
	m2, err := decodeLSMManifest(up2.Manifest, "2")
	if err != nil {
		t.Fatal(err)
	}
	m3, err := decodeLSMManifest(up3.Manifest, "3")
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, f3 := range m3.files {
		for _, f2 := range m2.files {
			if f2.local == f3.local {
				shared++
				if f3.handle != f2.handle {
					t.Fatalf("file %s: the checkpoint after the restore stored it again (%+v, restored %+v)", f3.local, f3.handle, f2.handle)
				}
			}
		}
	}
	if up3.Written == 0 || up3.Reused == 0 && shared > 0 {
		t.Fatalf("the first checkpoint after the restore wrote %d and reused %d bytes, sharing %d files", up3.Written, up3.Reused, shared)
	}
}

// TestLSMLocalCopyDamaged: a local copy whose file was changed is not used:
// the restore reads that file from storage, and the state is the
// checkpoint's.
func TestLSMLocalCopyDamaged(t *testing.T) {
	env := lsmEnv(t)
	files := testFiles(t)
	full := KeyGroupRange{0, 8}
	b := lsmBackend(t, env, "op", 8, full)
	v := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	for k := range int64(5000) {
		v.Update(k, k*3)
	}
	up, err := b.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(b.lsm.dir, "ckpt-1")
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, e := range ents {
		if isDataFile(e.Name()) {
			p := filepath.Join(local, e.Name())
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xff
			// A new file, not a write through the link: the working store's
			// file must not be the one damaged (it is gone anyway).
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatal("the local copy holds no data file")
	}
	rb := lsmBackend(t, env, "op", 8, full)
	if err := rb.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
		t.Fatal(err)
	}
	if n := files.reads.Load(); n != int64(damaged) {
		t.Fatalf("read %d files from storage; %d local files were damaged", n, damaged)
	}
	rv := must(NewValueState(rb, "v", Int64Codec{}, Int64Codec{}))
	for k := range int64(5000) {
		if got, ok := rv.Get(k); !ok || got != k*3 {
			t.Fatalf("restored %d = %d, %v", k, got, ok)
		}
	}
}

// TestLSMStoredFileMissingOrCorrupt: a data file gone from storage, or
// damaged there, fails the restore with an error naming it; nothing is
// skipped silently.
func TestLSMStoredFileMissingOrCorrupt(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8})
	v := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	for k := range int64(1000) {
		v.Update(k, k)
	}
	up, err := b.CheckpointSnapshot(1, false).Upload(context.Background(), st, "s")
	if err != nil {
		t.Fatal(err)
	}
	h := up.Files[0]
	path := filepath.Join(dir, fmt.Sprintf("chk-%010d", h.Checkpoint), h.Name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the stored file is not where the test expects it: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[10] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8}).RestoreLSM(context.Background(), st, up.Manifest)
	if !storage.IsCorrupt(err) || !strings.Contains(err.Error(), h.Name) {
		t.Fatalf("restore with a damaged file: %v; want a corruption error naming %s", err, h.Name)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	err = lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8}).RestoreLSM(context.Background(), st, up.Manifest)
	if err == nil || !strings.Contains(err.Error(), h.Name) {
		t.Fatalf("restore with a missing file: %v; want an error naming %s", err, h.Name)
	}
}

// TestLSMRescale restores the checkpoint of two subtasks into one and of
// one into three: each new subtask holds exactly the entries of its key
// groups, timers included, and fires them in the same order.
func TestLSMRescale(t *testing.T) {
	const maxP, keys = 32, 400
	files := testFiles(t)
	env := lsmEnv(t)
	r := rand.New(rand.NewPCG(5, 5))
	checkpoint := func(id int64, par int) ([][]byte, []*model) {
		var out [][]byte
		var wants []*model
		for sub := range par {
			kgs := KeyGroupRangeFor(maxP, par, sub)
			b := lsmBackend(t, env, "op", maxP, kgs)
			w := mustWorkload(t, b)
			m := newModel()
			for range 3000 {
				w.step(r, m, keys)
			}
			up, err := b.CheckpointSnapshot(id, false).Upload(context.Background(), files, fmt.Sprintf("s%d", sub))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, up.Manifest)
			wants = append(wants, m)
		}
		return out, wants
	}
	manifests, wants := checkpoint(1, 2)
	all := newModel()
	for _, m := range wants {
		all.merge(m)
	}
	for _, par := range []int{1, 3} {
		got := newModel()
		for sub := range par {
			kgs := KeyGroupRangeFor(maxP, par, sub)
			b := lsmBackend(t, lsmEnv(t), "op", maxP, kgs)
			if err := b.RestoreLSM(context.Background(), files, manifests...); err != nil {
				t.Fatalf("parallelism %d subtask %d: %v", par, sub, err)
			}
			w := mustWorkload(t, b)
			mine := newModel()
			for k, v := range all.values {
				if kgs.Contains(KeyGroupFor(HashKey(k), maxP)) {
					mine.values[k] = v
				}
			}
			for k, v := range all.maps {
				if kgs.Contains(KeyGroupFor(HashKey(k), maxP)) {
					mine.maps[k] = v
				}
			}
			for k, v := range all.lists {
				if kgs.Contains(KeyGroupFor(HashKey(k), maxP)) {
					mine.lists[k] = v
				}
			}
			for k := range all.timers {
				if kgs.Contains(KeyGroupFor(HashKey(k.key), maxP)) {
					mine.timers[k] = true
				}
			}
			if d := diff(w.apiContents(t, keys, mine.timers), mine); d != "" {
				t.Fatalf("parallelism %d subtask %d holds other state than its key groups': %s", par, sub, d)
			}
			got.merge(mine)
		}
		if got.size() != all.size() {
			t.Fatalf("parallelism %d: restored %d entries, the checkpoint held %d", par, got.size(), all.size())
		}
	}
	// Manifests that leave a key group uncovered, or cover one twice.
	b := lsmBackend(t, lsmEnv(t), "op", maxP, KeyGroupRange{0, maxP})
	if err := b.RestoreLSM(context.Background(), files, manifests[0]); err == nil || !strings.Contains(err.Error(), "covers key group") {
		t.Fatalf("restore from half the subtasks: %v", err)
	}
	b = lsmBackend(t, lsmEnv(t), "op", maxP, KeyGroupRange{0, maxP})
	if err := b.RestoreLSM(context.Background(), files, manifests[0], manifests[1], manifests[0]); err == nil || !strings.Contains(err.Error(), "two subtasks") {
		t.Fatalf("restore from overlapping manifests: %v", err)
	}
}

// TestLSMBackendMismatch: a checkpoint of one backend kind restored into
// the other fails with ErrStateMismatch and says what to do.
func TestLSMBackendMismatch(t *testing.T) {
	files := testFiles(t)
	b := lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8})
	must(NewValueState(b, "v", Int64Codec{}, Int64Codec{})).Update(1, 1)
	up, err := b.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	mem := NewBackend("op", 8, KeyGroupRange{0, 8})
	if err := mem.RestoreLSM(context.Background(), files, up.Manifest); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), "pebble") {
		t.Fatalf("memory backend restoring an LSM manifest: %v", err)
	}
	if err := mem.Restore(up.Manifest); err == nil {
		t.Fatal("memory backend restored an LSM manifest as a snapshot")
	}
	other := lsmBackend(t, lsmEnv(t), "other", 8, KeyGroupRange{0, 8})
	if err := other.RestoreLSM(context.Background(), files, up.Manifest); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("restoring another operator's manifest: %v", err)
	}
	wrongKind := lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8})
	if err := wrongKind.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
		t.Fatal(err)
	}
	if _, err := NewListState(wrongKind, "v", Int64Codec{}, Int64Codec{}); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("registering a restored value state as a list: %v", err)
	}
	damaged := slices.Clone(up.Manifest)
	damaged[len(damaged)/2] ^= 1
	if err := lsmBackend(t, lsmEnv(t), "op", 8, KeyGroupRange{0, 8}).RestoreLSM(context.Background(), files, damaged); !IsCorrupt(err) {
		t.Fatalf("restoring a damaged manifest: %v", err)
	}
}

// TestLSMTimersOrderMatchesMemory: the same registrations and deletions on
// both backends fire the same timers in the same order, across key groups,
// with ties in registration order, also after a checkpoint and restore of
// the LSM one.
func TestLSMTimersOrderMatchesMemory(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	mem := must(NewTimers(fullBackend("op"), "t", Int64Codec{}))
	lb := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	lsm := must(NewTimers(lb, "t", Int64Codec{}))
	for range 5000 {
		k, ns, ts := r.Int64N(300), r.Int64N(3), r.Int64N(40)
		if r.IntN(5) == 0 {
			mem.Delete(k, ns, ts)
			lsm.Delete(k, ns, ts)
		} else {
			mem.Register(k, ns, ts)
			lsm.Register(k, ns, ts)
		}
	}
	files := testFiles(t)
	up, err := lb.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	rb := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	if err := rb.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
		t.Fatal(err)
	}
	restored := must(NewTimers(rb, "t", Int64Codec{}))
	type f struct{ k, ns, ts int64 }
	fire := func(tm *Timers[int64], wm int64) []f {
		var out []f
		if err := tm.Advance(wm, func(k, ns, ts int64) error { out = append(out, f{k, ns, ts}); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, wm := range []int64{5, 5, 20, math.MaxInt64} {
		want := fire(mem, wm)
		if got := fire(lsm, wm); !slices.Equal(got, want) {
			t.Fatalf("watermark %d: the LSM backend fired %d timers, the memory one %d, or in another order", wm, len(got), len(want))
		}
		if got := fire(restored, wm); !slices.Equal(got, want) {
			t.Fatalf("watermark %d: the restored LSM backend fired %d timers, the memory one %d, or in another order", wm, len(got), len(want))
		}
	}
	if lsm.Len() != 0 || restored.Len() != 0 {
		t.Fatalf("Len after firing all: %d, %d", lsm.Len(), restored.Len())
	}
}

// TestLSMNamespacedModel is TestNamespacedModel on the LSM backend, with
// checkpoints instead of snapshots.
//
// Under the race detector it runs a quarter of the steps: it is one
// goroutine (Upload runs inline), so -race adds nothing to what the plain
// run checks, and the full run costs 90 s there.
func TestLSMNamespacedModel(t *testing.T) {
	t.Run("default", func(t *testing.T) { testLSMNamespacedModel(t, 0, 300, 6) })
	// A write budget of 1 KiB makes the write cache forget its entries
	// every few writes, often at a namespace's first write in a key group,
	// and few keys make reads of such a key follow soon (see
	// lsmNamespaced.present's fresh marks).
	t.Run("small-cache", func(t *testing.T) { testLSMNamespacedModel(t, 1<<10, 12, 3) })
}

// testLSMNamespacedModel drives a NamespacedValueState on an LSM backend
// whose write cache has budget bytes (0: the default) against a model, with
// keys keys in spaces namespaces. Every fifth checkpoint, it goes on from
// that checkpoint restored into a new backend.
func testLSMNamespacedModel(t *testing.T, budget, keys, spaces int) {
	steps := 8000
	if testkit.RaceEnabled {
		steps = 2000
	}
	if budget > 0 {
		steps /= 2 // few keys: the states are small, the bugs near
	}
	r := rand.New(rand.NewPCG(9, 7))
	files := testFiles(t)
	full := KeyGroupRange{0, DefaultMaxParallelism}
	newBackend := func() *Backend {
		env := lsmEnv(t)
		if budget > 0 {
			env.writeBudget = budget
		}
		return lsmBackend(t, env, "op", DefaultMaxParallelism, full)
	}
	b := newBackend()
	s := nsState(t, b)
	m := nsModel{}
	type cp struct {
		want nsModel
		up   *Uploaded
	}
	var cps []cp
	for step := range steps {
		ns := int64(r.IntN(spaces) - 2)
		key := fmt.Sprint("k", r.IntN(keys))
		switch op := r.IntN(100); {
		case op < 30:
			v := fmt.Sprint(r.IntN(1000))
			s.Update(ns, key, v)
			m[nsKey{ns, key}] = v
		case op < 60:
			s.Apply(ns, key, nil, func(old string, found bool) string {
				want, ok := m[nsKey{ns, key}]
				if found != ok || old != want {
					t.Fatalf("step %d: Apply(%d, %q) got %q, %v; want %q, %v", step, ns, key, old, found, want, ok)
				}
				return old + "a"
			})
			m[nsKey{ns, key}] += "a"
		case op < 75:
			v, ok := s.Get(ns, key)
			want, wok := m[nsKey{ns, key}]
			if ok != wok || v != want {
				t.Fatalf("step %d: Get(%d, %q) = %q, %v; want %q, %v", step, ns, key, v, ok, want, wok)
			}
		case op < 90:
			s.Clear(ns, key)
			delete(m, nsKey{ns, key})
		case op < 92:
			s.DropNamespace(ns)
			maps.DeleteFunc(m, func(k nsKey, _ string) bool { return k.ns == ns })
		case op < 96:
			if d := diffNS(nsContents(t, s), m); d != "" {
				t.Fatalf("step %d: contents differ from the model:\n%s", step, d)
			}
		default:
			id := int64(len(cps) + 1)
			up, err := b.CheckpointSnapshot(id, false).Upload(context.Background(), files, "s")
			if err != nil {
				t.Fatal(err)
			}
			b.Complete(id)
			cps = append(cps, cp{maps.Clone(m), up})
			if len(cps)%5 == 0 {
				b = newBackend()
				if err := b.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
					t.Fatalf("step %d: restoring checkpoint %d: %v", step, id, err)
				}
				s = nsState(t, b)
			}
		}
		if err := b.Err(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if len(cps) < 10 {
		t.Fatalf("%d checkpoints: the workload restored too few times", len(cps))
	}
	for i, c := range cps {
		rb := newBackend()
		if err := rb.RestoreLSM(context.Background(), files, c.up.Manifest); err != nil {
			t.Fatalf("checkpoint %d: %v", i+1, err)
		}
		if d := diffNS(nsContents(t, nsState(t, rb)), c.want); d != "" {
			t.Fatalf("checkpoint %d restores other entries than the model's:\n%s", i+1, d)
		}
	}
}

// TestLSMDropAndUnclaimed: restored state nobody registers is reported,
// carried into later checkpoints until dropped, and gone after a drop.
func TestLSMDropAndUnclaimed(t *testing.T) {
	files := testFiles(t)
	full := KeyGroupRange{0, 8}
	b := lsmBackend(t, lsmEnv(t), "op", 8, full)
	must(NewValueState(b, "a", Int64Codec{}, Int64Codec{})).Update(1, 10)
	must(NewValueState(b, "b", Int64Codec{}, Int64Codec{})).Update(1, 20)
	up, err := b.CheckpointSnapshot(1, false).Upload(context.Background(), files, "s")
	if err != nil {
		t.Fatal(err)
	}
	rb := lsmBackend(t, lsmEnv(t), "op", 8, full)
	if err := rb.RestoreLSM(context.Background(), files, up.Manifest); err != nil {
		t.Fatal(err)
	}
	a := must(NewValueState(rb, "a", Int64Codec{}, Int64Codec{}))
	if got := rb.Unclaimed(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Unclaimed = %v", got)
	}
	snap := rb.CheckpointSnapshot(2, false)
	if got := snap.Schemas(); len(got) != 2 {
		t.Fatalf("a checkpoint with unclaimed state records %d schemas", len(got))
	}
	if got := rb.DropUnclaimed(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("DropUnclaimed = %v", got)
	}
	// A new state of the dropped name starts empty.
	if _, ok := must(NewValueState(rb, "b", Int64Codec{}, Int64Codec{})).Get(1); ok {
		t.Fatal("a dropped state's entry is back")
	}
	if v, _ := a.Get(1); v != 10 {
		t.Fatalf("a = %d", v)
	}
	if !rb.DropState("a") || rb.DropState("never") {
		t.Fatal("DropState results")
	}
	if _, ok := must(NewValueState(rb, "a", Int64Codec{}, Int64Codec{})).Get(1); ok {
		t.Fatal("a dropped registered state's entry is back")
	}
}

// TestLSMAdoptsMemoryCheckpoint: a job switched to the LSM backend restores
// the memory backend's checkpoint (full and incremental files, namespaced
// state with deltas, timers): every state holds what the memory backend
// held, timers fire in the same order, and the next checkpoint is the
// store's.
func TestLSMAdoptsMemoryCheckpoint(t *testing.T) {
	const keys = 300
	r := rand.New(rand.NewPCG(21, 22))
	full := KeyGroupRange{0, DefaultMaxParallelism}
	mem := fullBackend("op")
	w := mustWorkload(t, mem)
	ns := nsState(t, mem)
	m := newModel()
	nm := nsModel{}
	stored := map[int64][]byte{}
	var last *Encoded
	for id := int64(1); id <= 5; id++ {
		steps := 1500 // then fewer, so that later checkpoints write deltas
		if id > 1 {
			steps = 40
		}
		for range steps {
			w.step(r, m, keys)
			n, k := int64(r.IntN(4)), fmt.Sprint("k", r.IntN(100))
			if r.IntN(5) == 0 {
				ns.Clear(n, k)
				delete(nm, nsKey{n, k})
			} else {
				v := fmt.Sprint(r.IntN(1000))
				ns.Update(n, k, v)
				nm[nsKey{n, k}] = v
			}
		}
		snap := mem.CheckpointSnapshot(id, false)
		enc, err := snap.EncodeCheckpoint()
		if err != nil {
			t.Fatal(err)
		}
		snap.Release()
		mem.Complete(id)
		stored[id], last = enc.Data, enc
	}
	// The last checkpoint's file and the earlier ones it builds on.
	files := [][]byte{last.Data}
	for _, id := range last.Shared {
		files = append(files, stored[id])
	}
	if len(files) < 2 {
		t.Fatalf("the last checkpoint references %v: the test covers no chain", last.Shared)
	}
	lb := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, full)
	if err := lb.Restore(files...); err != nil {
		t.Fatal(err)
	}
	lw := mustWorkload(t, lb)
	if d := diff(lw.apiContents(t, keys, m.timers), m); d != "" {
		t.Fatalf("the LSM backend holds other state than the memory checkpoint: %s", d)
	}
	if d := diffNS(nsContents(t, nsState(t, lb)), nm); d != "" {
		t.Fatalf("namespaced state differs:\n%s", d)
	}
	if u := lb.Unclaimed(); len(u) != 0 {
		t.Fatalf("unclaimed after registering everything: %v", u)
	}
	type f struct{ k, ns, ts int64 }
	var want, got []f
	_ = w.timers.Advance(math.MaxInt64, func(k, n, ts int64) error { want = append(want, f{k, n, ts}); return nil })
	_ = lw.timers.Advance(math.MaxInt64, func(k, n, ts int64) error { got = append(got, f{k, n, ts}); return nil })
	if !slices.Equal(got, want) {
		t.Fatalf("adopted timers fire %d timers, the memory ones %d, or in another order", len(got), len(want))
	}
	files2 := testFiles(t)
	up, err := lb.CheckpointSnapshot(6, false).Upload(context.Background(), files2, "s")
	if err != nil {
		t.Fatal(err)
	}
	rb := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, full)
	if err := rb.RestoreLSM(context.Background(), files2, up.Manifest); err != nil {
		t.Fatal(err)
	}
	if d := diffNS(nsContents(t, nsState(t, rb)), nm); d != "" {
		t.Fatalf("the first LSM checkpoint after adopting lost namespaced state:\n%s", d)
	}
	// Adopted with a write cache far smaller than the namespaced state:
	// the spill drops the cache midway, and every key still reads as the
	// model has it (a namespace marked fresh by the spill would read as
	// empty what the drop moved into Pebble).
	small := lsmEnv(t)
	small.writeBudget = 1 << 10
	sb := lsmBackend(t, small, "op", DefaultMaxParallelism, full)
	if err := sb.Restore(files...); err != nil {
		t.Fatal(err)
	}
	mustWorkload(t, sb)
	sns := nsState(t, sb)
	// The keys of namespaces marked fresh (none should be: the spill's
	// writes may have dropped the cache) are read first, since any read
	// through Pebble may drop the small cache and make every mark stale.
	var first, rest []nsKey
	for n := range int64(4) {
		for i := range 100 {
			k := nsKey{n, fmt.Sprint("k", i)}
			if g, ok := sns.index(k.key); ok && sns.lns.present[g][n] == fresh(sb.lsm.cache) {
				first = append(first, k)
			} else {
				rest = append(rest, k)
			}
		}
	}
	for _, k := range append(first, rest...) {
		want, wok := nm[k]
		if got, ok := sns.Get(k.ns, k.key); ok != wok || got != want {
			t.Fatalf("adopted with a small write cache: Get(%d, %q) = %q, %v; want %q, %v", k.ns, k.key, got, ok, want, wok)
		}
	}
	// A state of the memory checkpoint nobody registers is reported, and
	// a checkpoint refuses to go without it.
	lb2 := lsmBackend(t, lsmEnv(t), "op", DefaultMaxParallelism, full)
	if err := lb2.Restore(files...); err != nil {
		t.Fatal(err)
	}
	if u := lb2.Unclaimed(); !slices.Contains(u, "values") {
		t.Fatalf("Unclaimed = %v", u)
	}
	if _, err := lb2.CheckpointSnapshot(7, false).Upload(context.Background(), files2, "s"); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("a checkpoint with unregistered memory-format state: %v", err)
	}
}
