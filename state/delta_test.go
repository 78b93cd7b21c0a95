package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A namespaced state with tables large enough to compact, values whose
// length changes (new versions in the arena), many deletes (the log of
// deleted keys restarts) and namespaces that come and go, checkpointed
// every few hundred writes with most checkpoints completed: each checkpoint
// restores exactly from its file and the files it references, whole and in
// halves, and most key groups are written as deltas. This is the workload
// whose cost an entry-level delta cuts: every key group written, few of its
// keys.
func TestNamespacedDeltasRestoreExactly(t *testing.T) {
	const maxP = 8
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 3))
			if seed%2 == 1 { // logs of deleted keys restart often
				defer func(f func(int, int) bool) { deletedLogFull = f }(deletedLogFull)
				deletedLogFull = func(log, _ int) bool { return log > 24 }
			}
			newState := func(b *Backend) *NamespacedValueState[int64, string] {
				s, err := NewNamespacedValueState(b, "acc", "int64+ns", Int64Codec{}, StringCodec{})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			contents := func(s *NamespacedValueState[int64, string]) map[incKey]string {
				out := map[incKey]string{}
				for _, ns := range s.Namespaces() {
					s.Entries(ns, func(k int64, v string) bool {
						out[incKey{ns, k}] = v
						return true
					})
				}
				return out
			}
			b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
			s := newState(b)
			model := map[incKey]string{}
			stored := map[int64][]byte{}
			type kept struct {
				enc  *Encoded
				want map[incKey]string
			}
			var last *kept
			lastID, deltas, full := int64(0), 0, 0
			oldest := int64(0)
			for id := int64(1); id <= 60; id++ {
				for range 300 + r.IntN(300) {
					k := incKey{ns: oldest + int64(r.IntN(3)), key: int64(r.IntN(3000))}
					switch op := r.IntN(10); {
					case op < 3:
						s.Clear(k.ns, k.key)
						delete(model, k)
					case op < 6:
						v := strings.Repeat("x", r.IntN(6)) + fmt.Sprint(id)
						s.Update(k.ns, k.key, v)
						model[k] = v
					default:
						s.Apply(k.ns, k.key, nil, func(v string, _ bool) string { return v + "y" })
						model[k] += "y"
					}
				}
				if r.IntN(12) == 0 { // a window fires
					s.DropNamespace(oldest)
					maps.DeleteFunc(model, func(k incKey, _ string) bool { return k.ns == oldest })
					oldest++
				}
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				snap := b.CheckpointSnapshot(id, false)
				enc, err := snap.EncodeCheckpoint()
				snap.Release()
				if err != nil {
					t.Fatal(err)
				}
				if enc.Incremental {
					deltas += countDeltas(t, enc.Data)
				} else {
					full++
				}
				stored[id] = enc.Data
				if r.IntN(6) == 0 {
					b.Abort(id)
					delete(stored, id)
					continue
				}
				b.Complete(id)
				last = &kept{enc: enc, want: maps.Clone(model)}
				lastID = id
				files := [][]byte{enc.Data}
				for _, sid := range enc.Shared {
					if stored[sid] == nil {
						t.Fatalf("checkpoint %d references checkpoint %d's file, which was dropped", id, sid)
					}
					files = append(files, stored[sid])
				}
				// Keep only what the last complete checkpoint needs.
				maps.DeleteFunc(stored, func(sid int64, _ []byte) bool { return sid != id && !containsID(enc.Shared, sid) })
				for _, kr := range []KeyGroupRange{{Start: 0, End: maxP}, {Start: 0, End: maxP / 2}, {Start: maxP / 2, End: maxP}} {
					rb := NewBackend("op", maxP, kr)
					if err := rb.Restore(files...); err != nil {
						t.Fatalf("checkpoint %d (shared %v), range %v: %v", id, enc.Shared, kr, err)
					}
					got := contents(newState(rb))
					want := maps.Clone(model)
					maps.DeleteFunc(want, func(k incKey, _ string) bool { return !kr.Contains(KeyGroupFor(HashKey(k.key), maxP)) })
					if !maps.Equal(got, want) {
						t.Fatalf("checkpoint %d (shared %v), range %v: restored %d entries, want %d; first difference: %s", id, enc.Shared, kr, len(got), len(want), firstDiff(got, want))
					}
				}
				// Now and then the job restarts from it.
				if r.IntN(8) == 0 {
					b = NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
					if err := b.Restore(files...); err != nil {
						t.Fatal(err)
					}
					s = newState(b)
				}
			}
			if last == nil || lastID == 0 || deltas < 100 {
				t.Fatalf("%d delta parts, %d full snapshots: deltas are not used", deltas, full)
			}
		})
	}
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func firstDiff(got, want map[incKey]string) string {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return fmt.Sprintf("%v = %q (present %v), want %q", k, g, ok, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("%v = %q, want absent", k, v)
		}
	}
	return "none"
}

// A dropped namespace's tables are garbage once no snapshot holds them,
// even while checkpoints keep failing: the base a delta builds on names
// tables by id and keeps none of them (found by review: it held pointers,
// so every window fired during a storage outage stayed in memory).
func TestBaselineKeepsNoDroppedTable(t *testing.T) {
	b := NewBackend("op", 4, KeyGroupRange{Start: 0, End: 4})
	s, err := NewNamespacedValueState(b, "acc", "int64+ns", Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(1000) {
		s.Update(1, k, k)
	}
	checkpoint := func(id int64) {
		snap := b.CheckpointSnapshot(id, false)
		if _, err := snap.EncodeCheckpoint(); err != nil {
			t.Fatal(err)
		}
		snap.Release()
	}
	checkpoint(1)
	b.Complete(1)
	var freed atomic.Int64
	tables := 0
	for i := range s.groups {
		if tab := s.groups[i].tables[1]; tab != nil {
			runtime.AddCleanup(tab, func(*atomic.Int64) { freed.Add(1) }, &freed)
			tables++
		}
	}
	s.DropNamespace(1)
	for id := int64(2); id <= 4; id++ {
		checkpoint(id)
		b.Abort(id)
	}
	for deadline := time.Now().Add(time.Minute); freed.Load() < int64(tables) && time.Now().Before(deadline); {
		runtime.GC()
		runtime.Gosched()
	}
	if got := freed.Load(); got != int64(tables) {
		t.Fatalf("%d of %d dropped tables freed while the base is checkpoint 1's", got, tables)
	}
	runtime.KeepAlive(b)
}
