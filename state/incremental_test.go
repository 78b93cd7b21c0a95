package state

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// incWorkload is the standard workload plus a namespaced value state (the
// compact tables aligned windows use), which tracks writes its own way.
type incWorkload struct {
	*workload
	ns *NamespacedValueState[int64, int64]
}

type incKey struct{ ns, key int64 }

func newIncWorkload(t testing.TB, b *Backend) *incWorkload {
	t.Helper()
	w := mustWorkload(t, b)
	ns, err := NewNamespacedValueState(b, "windows", "int64+ns", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	return &incWorkload{workload: w, ns: ns}
}

// step applies one random operation, on keys from a domain of keys.
func (w *incWorkload) step(r *rand.Rand, m *model, nsm map[incKey]int64, keys int) {
	if r.IntN(4) > 0 {
		w.workload.step(r, m, keys)
		return
	}
	k := incKey{ns: int64(r.IntN(3)), key: int64(r.IntN(keys))}
	if !w.owns(HashKey(k.key)) {
		return
	}
	switch r.IntN(5) {
	case 0:
		w.ns.Clear(k.ns, k.key)
		delete(nsm, k)
	case 1:
		if r.IntN(8) == 0 {
			w.ns.DropNamespace(k.ns)
			maps.DeleteFunc(nsm, func(x incKey, _ int64) bool { return x.ns == k.ns })
		}
	default:
		v := r.Int64N(100)
		w.ns.Apply(k.ns, k.key, nil, func(old int64, _ bool) int64 { return old + v })
		nsm[k] += v
	}
}

func (w *incWorkload) nsContents() map[incKey]int64 {
	out := map[incKey]int64{}
	for _, ns := range w.ns.Namespaces() {
		w.ns.Entries(ns, func(k, v int64) bool {
			out[incKey{ns, k}] = v
			return true
		})
	}
	return out
}

// restoreInc restores files into a backend for kgRange and returns its
// workload, or the restore's error.
func restoreInc(t testing.TB, maxP int, kgRange KeyGroupRange, files ...[]byte) (*incWorkload, error) {
	t.Helper()
	b := NewBackend("op", maxP, kgRange)
	if err := b.Restore(files...); err != nil {
		return nil, err
	}
	w := newIncWorkload(t, b)
	if u := b.Unclaimed(); len(u) != 0 {
		t.Fatalf("unclaimed state: %v", u)
	}
	return w, nil
}

// checkpointed is a checkpoint's encoded snapshot and what it must restore to.
type checkpointed struct {
	id   int64
	enc  *Encoded
	want *model
	nsm  map[incKey]int64
}

// files returns the checkpoint's own file and every file it references, or
// fails naming the first one storage no longer has.
func (c *checkpointed) files(t *testing.T, stored map[int64][]byte) [][]byte {
	t.Helper()
	out := [][]byte{c.enc.Data}
	for _, id := range c.enc.Shared {
		data, ok := stored[id]
		if !ok {
			t.Fatalf("checkpoint %d references the file of checkpoint %d, which was deleted", c.id, id)
		}
		out = append(out, data)
	}
	return out
}

// verify restores c in full and into two halves, and compares with what it
// must hold.
func (c *checkpointed) verify(t *testing.T, maxP int, stored map[int64][]byte) {
	t.Helper()
	files := c.files(t, stored)
	got := newModel()
	gotNS := map[incKey]int64{}
	for _, r := range []KeyGroupRange{{Start: 0, End: maxP / 2}, {Start: maxP / 2, End: maxP}} {
		w, err := restoreInc(t, maxP, r, files...)
		if err != nil {
			t.Fatalf("checkpoint %d (shared %v), range %v: %v", c.id, c.enc.Shared, r, err)
		}
		got.merge(w.contents())
		maps.Copy(gotNS, w.nsContents())
	}
	if d := diff(got, c.want); d != "" {
		t.Fatalf("checkpoint %d (shared %v) restored in halves: %s", c.id, c.enc.Shared, d)
	}
	if !maps.Equal(gotNS, c.nsm) {
		t.Fatalf("checkpoint %d (shared %v): namespaced state restored as %v, want %v", c.id, c.enc.Shared, gotNS, c.nsm)
	}
	w, err := restoreInc(t, maxP, KeyGroupRange{Start: 0, End: maxP}, files...)
	if err != nil {
		t.Fatalf("checkpoint %d: %v", c.id, err)
	}
	if d := diff(w.contents(), c.want); d != "" || !maps.Equal(w.nsContents(), c.nsm) {
		t.Fatalf("checkpoint %d restored whole: %s / namespaced equal %v", c.id, d, maps.Equal(w.nsContents(), c.nsm))
	}
}

// Random writes over many checkpoints, some of them in flight together,
// each completed, aborted or abandoned at random; storage deletes what the
// coordinator would (aborted and abandoned files, and completed ones that no
// kept checkpoint references). Every kept checkpoint restores exactly, in
// full and rescaled, from its file and the files it references; and the
// chains do reuse sections and stay bounded.
func TestIncrementalChainRestoresExactly(t *testing.T) {
	const maxP, retain = 32, 2
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 77))
		b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
		w := newIncWorkload(t, b)
		m, nsm := newModel(), map[incKey]int64{}
		stored := map[int64][]byte{}
		var inFlight, kept []*checkpointed
		incremental, reusedBytes, restarts, deltaSections := 0, int64(0), 0, 0
		for id := int64(1); id <= 120; id++ {
			// Mostly a few hot keys (a few key groups), sometimes many.
			keys := 6
			if r.IntN(5) == 0 {
				keys = 200
			}
			for range r.IntN(40) {
				w.step(r, m, nsm, keys)
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			s := b.CheckpointSnapshot(id, false)
			enc, err := s.EncodeCheckpoint()
			s.Release()
			if err != nil {
				t.Fatal(err)
			}
			if len(enc.Shared) > maxChainFiles-1 {
				t.Fatalf("checkpoint %d references %d files, more than %d", id, len(enc.Shared), maxChainFiles-1)
			}
			if enc.Incremental {
				incremental++
				reusedBytes += enc.Reused
				deltaSections += countDeltas(t, enc.Data)
			}
			stored[id] = enc.Data
			inFlight = append(inFlight, &checkpointed{id: id, enc: enc, want: m.clone(), nsm: maps.Clone(nsm)})

			// Resolve some in-flight checkpoints, oldest first.
			for len(inFlight) > 0 && (len(inFlight) > 3 || r.IntN(3) > 0) {
				c := inFlight[0]
				inFlight = inFlight[1:]
				switch r.IntN(8) {
				case 0:
					b.Abort(c.id)
					delete(stored, c.id)
				case 1: // abandoned: the backend is never told
					delete(stored, c.id)
				default:
					b.Complete(c.id)
					kept = append(kept, c)
					if len(kept) > retain {
						kept = kept[1:]
					}
				}
			}
			// Retention: keep the kept checkpoints and what they and the
			// in-flight ones reference.
			live := map[int64]bool{}
			for _, c := range slices.Concat(kept, inFlight) {
				live[c.id] = true
				for _, id := range c.enc.Shared {
					live[id] = true
				}
			}
			maps.DeleteFunc(stored, func(id int64, _ []byte) bool { return !live[id] })
			if id%10 == 0 {
				for _, c := range kept {
					c.verify(t, maxP, stored)
				}
			}
			// Now and then the job restarts from the newest kept
			// checkpoint: in-flight ones are abandoned, and the new
			// backend's checkpoints build on the files it restored from.
			if id%17 == 0 && len(kept) > 0 {
				c := kept[len(kept)-1]
				for _, p := range inFlight {
					if !slices.ContainsFunc(kept, func(k *checkpointed) bool { return slices.Contains(k.enc.Shared, p.id) }) {
						delete(stored, p.id)
					}
				}
				inFlight = nil
				nw, err := restoreInc(t, maxP, KeyGroupRange{Start: 0, End: maxP}, c.files(t, stored)...)
				if err != nil {
					t.Fatalf("restart from checkpoint %d: %v", c.id, err)
				}
				got := nw.b.ChainFiles()
				if len(got) == 0 || slices.ContainsFunc(got, func(id int64) bool { return id != c.id && !slices.Contains(c.enc.Shared, id) }) {
					t.Fatalf("restored from checkpoint %d (shared %v): ChainFiles() = %v, want its files", c.id, c.enc.Shared, got)
				}
				b, w, m, nsm = nw.b, nw, c.want.clone(), maps.Clone(c.nsm)
				restarts++
			}
		}
		for _, c := range kept {
			c.verify(t, maxP, stored)
		}
		if restarts < 3 {
			t.Fatalf("seed %d: %d restarts", seed, restarts)
		}
		if incremental < 40 || reusedBytes == 0 || deltaSections < 20 {
			t.Fatalf("seed %d: %d incremental snapshots reusing %d bytes, %d delta sections: the chain is not used", seed, incremental, reusedBytes, deltaSections)
		}
	}
}

// An incremental file alone does not restore: the key groups it takes from
// earlier files are reported missing, never restored empty. Two files of one
// checkpoint covering the same key group are an error.
func TestIncrementalFileWithoutItsChainIsAnError(t *testing.T) {
	const maxP = 16
	b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	w := newIncWorkload(t, b)
	r := rand.New(rand.NewPCG(1, 2))
	m, nsm := newModel(), map[incKey]int64{}
	for range 2000 {
		w.step(r, m, nsm, 100)
	}
	s := b.CheckpointSnapshot(1, false)
	full, err := s.EncodeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	b.Complete(1)
	w.values.Update("k1", 5) // one key group
	s = b.CheckpointSnapshot(2, false)
	inc, err := s.EncodeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	if !inc.Incremental || !slices.Equal(inc.Shared, []int64{1}) {
		t.Fatalf("second snapshot: incremental %v shared %v, want incremental on [1]", inc.Incremental, inc.Shared)
	}
	if len(inc.Data)*4 > len(full.Data) {
		t.Fatalf("one changed key group wrote %d bytes, the full snapshot %d", len(inc.Data), len(full.Data))
	}
	_, err = restoreInc(t, maxP, KeyGroupRange{Start: 0, End: maxP}, inc.Data)
	// (The changed key group is a delta section: the missing file is the
	// one its changes build on.)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("restore of the incremental file alone: %v, want a missing-file error", err)
	}
	_, err = restoreInc(t, maxP, KeyGroupRange{Start: 0, End: maxP}, full.Data, full.Data)
	if err == nil || !strings.Contains(err.Error(), "were mixed") {
		t.Fatalf("restore of one checkpoint's file twice: %v, want an overlap error", err)
	}
	s = b.CheckpointSnapshot(3, true)
	self, err := s.EncodeCheckpoint()
	if err != nil || self.Incremental || len(self.Shared) != 0 {
		t.Fatalf("self-contained snapshot: %+v, %v; want a full one", self, err)
	}
	// Two full files never belong to one restore, whatever their checkpoints.
	_, err = restoreInc(t, maxP, KeyGroupRange{Start: 0, End: maxP}, full.Data, self.Data)
	if err == nil || !strings.Contains(err.Error(), "were mixed") {
		t.Fatalf("restore of full files of checkpoints 1 and 3: %v, want an overlap error", err)
	}
	info, err := Inspect(inc.Data)
	if err != nil || info.Checkpoint != 2 || !info.Incremental || len(info.Sections) != 1 {
		t.Fatalf("Inspect of the incremental file: %+v, %v", info, err)
	}
}

// A state dropped and registered again under its name never brings back the
// dropped entries from an earlier file of the chain.
func TestDropStateResetsTheChain(t *testing.T) {
	b, _ := checkpointedValues(t, 200)
	// Dropped while checkpoint 1 is in flight: it must not become the base.
	b.DropState("v")
	b.Complete(1)
	v, err := NewValueState(b, "v", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	v.Update(7, 700)
	enc, err := b.CheckpointSnapshot(2, false).EncodeCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	if enc.Incremental || len(enc.Shared) != 0 {
		t.Fatalf("snapshot after DropState: incremental %v shared %v, want a full one", enc.Incremental, enc.Shared)
	}
	r := NewBackend("op", 16, KeyGroupRange{Start: 0, End: 16})
	if err := r.Restore(enc.Data); err != nil {
		t.Fatal(err)
	}
	rv, err := NewValueState(r, "v", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	if n := rv.Len(); n != 1 {
		t.Fatalf("restored %d entries, want 1", n)
	}
}

// With two checkpoints in flight, the files the older one's plan builds on
// stay listed by ChainFiles after the newer base is adopted, until that
// checkpoint ends.
func TestChainFilesKeepPendingBases(t *testing.T) {
	b, v := checkpointedValues(t, 100)
	b.Complete(1)
	v.Update(1, -1)
	if _, err := b.CheckpointSnapshot(2, true).EncodeCheckpoint(); err != nil { // full
		t.Fatal(err)
	}
	v.Update(2, -2)
	b.CheckpointSnapshot(3, false) // planned on 1, not yet encoded
	b.Complete(2)
	if got := b.ChainFiles(); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("ChainFiles() = %v after full checkpoint 2 completed with 3 planned on 1: want [1 2]", got)
	}
	b.Abort(3)
	if got := b.ChainFiles(); !slices.Equal(got, []int64{2}) {
		t.Fatalf("ChainFiles() = %v after 3 was aborted: want [2]", got)
	}
}

// A state dropped while checkpoints are in flight: their snapshots never
// become a base, but ChainFiles keeps the files they were planned on until
// they end, so their encoding still finds every handle.
func TestDropStateKeepsInFlightChains(t *testing.T) {
	b, v := checkpointedValues(t, 100)
	b.Complete(1)
	v.Update(1, -1)
	s2 := b.CheckpointSnapshot(2, false)
	v.Update(2, -2)
	s3 := b.CheckpointSnapshot(3, false)
	b.DropState("v")
	for _, s := range []*Snapshot{s2, s3} {
		enc, err := s.EncodeCheckpoint()
		if err != nil || !slices.Equal(enc.Shared, []int64{1}) {
			t.Fatalf("in-flight snapshot after DropState: %+v, %v; want one built on 1", enc, err)
		}
	}
	b.Complete(2)
	if got := b.ChainFiles(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("ChainFiles() = %v with 3 in flight on 1: want [1]", got)
	}
	if b.base != nil {
		t.Fatal("a snapshot taken before DropState became the base")
	}
	b.Complete(3)
	if got := b.ChainFiles(); len(got) != 0 {
		t.Fatalf("ChainFiles() = %v after every in-flight checkpoint ended: want none", got)
	}
}

// checkpointedValues returns a backend of 16 key groups with a value state
// "v" holding k → k for k < keys, and checkpoint 1's snapshot of it encoded
// (not yet completed).
func checkpointedValues(t *testing.T, keys int64) (*Backend, *ValueState[int64, int64]) {
	t.Helper()
	b := NewBackend("op", 16, KeyGroupRange{Start: 0, End: 16})
	v, err := NewValueState(b, "v", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		v.Update(k, k)
	}
	if _, err := b.CheckpointSnapshot(1, false).EncodeCheckpoint(); err != nil {
		t.Fatal(err)
	}
	return b, v
}

// countDeltas returns the number of delta parts in an encoded snapshot.
func countDeltas(t testing.TB, data []byte) int {
	t.Helper()
	info, err := Inspect(data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sec := range info.Sections {
		for _, st := range sec.States {
			if st.Delta {
				if !sec.Delta {
					t.Fatalf("key group %d: a delta part in a full section", sec.KeyGroup)
				}
				n++
			}
		}
	}
	return n
}

// What a chain of checkpoints writes and what a restore of one reads, with a
// window's compact state of 256 K keys and a share of them updated between
// checkpoints, spread over every key group (the worst case for key-group
// granularity: every key group is written each time) or over all but a few
// key groups (which would keep the first checkpoint's file referenced while
// the rest of it is dead), or over 16 key groups that move on by one at
// each checkpoint (so that each key group's chain, left behind, keeps other
// files referenced). Over 150 checkpoints:
//   - the bytes written per checkpoint follow the updates: at 1% and at 10%
//     of the keys, at most 4 times what the updated entries take in a full
//     snapshot (deltas, plus each key group written in full again before
//     its deltas reach maxMaterialiseShare of its full section; at 1% the
//     sections' counts and checksums add a third);
//   - no checkpoint after the first writes more than 1.5 times the mean
//     (the key groups, all due at once, are materialised a few at a time),
//     nor, with moving key groups, more than a fifth of the state;
//   - the earlier files a checkpoint references hold at most
//     maxReadAmplification times the bytes a restore uses of them (so a few
//     idle key groups may keep a mostly dead file referenced, within that
//     bound), and what a restore uses is at most twice the state (a full
//     section and its deltas, which stay below it before the last);
//   - every 50th checkpoint restores to exactly the counts written.
func TestCheckpointBytesFollowUpdates(t *testing.T) {
	const keys, maxP, checkpoints = 1 << 18, 128, 150
	for _, w := range []struct {
		pct    int
		idle   int  // key groups 0..idle-1 are never updated
		moving bool // only 16 key groups are updated, the next ones at each checkpoint
	}{{1, 0, false}, {10, 0, false}, {10, 4, false}, {5, 0, true}, {1, 0, true}} {
		pct := w.pct
		be := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
		s, err := NewNamespacedValueState(be, "w", "int64+ns", Int64Codec{}, Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, keys) // each key's count
		add := func(k int64) {
			s.Apply(0, k, nil, func(v int64, _ bool) int64 { return v + 1 })
			want[k]++
		}
		var hot []int64
		byGroup := make([][]int64, maxP)
		for k := range int64(keys) {
			add(k)
			kg := KeyGroupFor(HashKey(k), maxP)
			if kg >= w.idle {
				hot = append(hot, k)
			}
			byGroup[kg] = append(byGroup[kg], k)
		}
		files := map[int64][]byte{}
		var full, written, most int
		next := int64(0)
		for id := int64(1); id <= checkpoints; id++ {
			if id > 1 {
				if w.moving {
					hot = nil
					for g := range 16 {
						hot = append(hot, byGroup[(int(id)+g)%maxP]...)
					}
				}
				for range keys * pct / 100 {
					add(hot[next%int64(len(hot))])
					next++
				}
			}
			snap := be.CheckpointSnapshot(id, false)
			enc, err := snap.EncodeCheckpoint()
			snap.Release()
			if err != nil {
				t.Fatal(err)
			}
			be.Complete(id)
			files[id] = enc.Data
			if id == 1 {
				full = len(enc.Data)
				continue
			}
			written += len(enc.Data)
			most = max(most, len(enc.Data))
			shared := 0
			for _, sh := range enc.Shared {
				shared += len(files[sh])
			}
			// Each file's header and index: at most 32 bytes per key group.
			if slack := len(enc.Shared) * 32 * maxP; shared > maxReadAmplification*int(enc.Reused)+slack {
				t.Fatalf("%d%%: checkpoint %d references %d files of %d bytes for %d bytes used: more than %d times", pct, id, len(enc.Shared), shared, enc.Reused, maxReadAmplification)
			}
			if len(enc.Shared) > maxChainFiles-1 {
				t.Fatalf("%d%%: checkpoint %d references %d files", pct, id, len(enc.Shared))
			}
			if int(enc.Reused) > 2*full {
				t.Fatalf("%d%%: checkpoint %d uses %d bytes of earlier files, the state is %d", pct, id, enc.Reused, full)
			}
			if id%50 == 0 { // the chain restores exactly
				restoreCounts(t, maxP, want, enc, files)
			}
		}
		updated := float64(full) * float64(pct) / 100
		mean := float64(written) / (checkpoints - 1)
		t.Logf("%d%% (%d idle key groups, moving %v): %.0f bytes per checkpoint (%.2f× the %.0f bytes updated), largest %d of %d", pct, w.idle, w.moving, mean, mean/updated, updated, most, full)
		if mean > 4*updated {
			t.Errorf("%d%%: %.0f bytes per checkpoint, %.2f times the %.0f bytes of the entries updated", pct, mean, mean/updated, updated)
		}
		// Files are retired all at once: the moving key groups' chains are
		// rewritten together when the files they keep referenced become too
		// many or too dead.
		if float64(most) > 1.5*mean && (!w.moving || most*5 > full) {
			t.Errorf("%d%%: a checkpoint wrote %d bytes, %.1f times the mean", pct, most, float64(most)/mean)
		}
	}
}

// restoreCounts restores enc, with the earlier files it references, and
// checks that every key's count in namespace 0 is want's.
func restoreCounts(t *testing.T, maxP int, want []int64, enc *Encoded, files map[int64][]byte) {
	t.Helper()
	in := [][]byte{enc.Data}
	for _, id := range enc.Shared {
		in = append(in, files[id])
	}
	b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	if err := b.Restore(in...); err != nil {
		t.Fatalf("restore of a chain of %d files: %v", len(in), err)
	}
	s, err := NewNamespacedValueState(b, "w", "int64+ns", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	s.Entries(0, func(k, v int64) bool {
		if k < 0 || k >= int64(len(want)) || want[k] != v {
			t.Fatalf("restored from %d files: key %d = %d, want %d", len(in), k, v, want[min(max(k, 0), int64(len(want)-1))])
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("restored %d keys from %d files, want %d", n, len(in), len(want))
	}
}
