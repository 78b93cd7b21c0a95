package state

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// Value and list states write a changed key group as a delta of the keys
// written since the last complete checkpoint, also after a hot key's log
// restarted (that key group is then written in full), and a chain of such
// files restores exactly: values set, updated and cleared, lists added to,
// replaced and cleared. The deltas hold a few keys, not the whole state.
func TestValueAndListDeltasRestoreExactly(t *testing.T) {
	const maxP = 16
	b := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
	w := mustWorkload(t, b)
	values, lists := map[string]int64{}, map[string][]int64{}
	set := func(k string, v int64) { w.values.Update(k, v); values[k] = v }
	add := func(k string, v int64) { w.lists.Add(k, v); lists[k] = append(lists[k], v) }
	for i := range 2000 {
		set(fmt.Sprint("k", i), int64(i))
		add(fmt.Sprint("l", i%500), int64(i))
	}
	files := map[int64][]byte{}
	checkpoint := func(id int64) *Encoded {
		t.Helper()
		s := b.CheckpointSnapshot(id, false)
		enc, err := s.EncodeCheckpoint()
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		b.Complete(id)
		files[id] = enc.Data
		return enc
	}
	full := checkpoint(1)
	// A hot key written far more often than its key group holds keys: its
	// log restarts, so its key group is written in full.
	for i := range 3 * keyLogMin {
		set("hot", int64(i))
	}
	set("k7", -7)
	w.values.Clear("k8")
	delete(values, "k8")
	add("l3", 42)
	w.lists.Update("l4", []int64{1, 2, 3})
	lists["l4"] = []int64{1, 2, 3}
	w.lists.Clear("l5")
	delete(lists, "l5")
	second := checkpoint(2)
	atSecond, listsAtSecond := maps.Clone(values), maps.Clone(lists)
	for k, vs := range listsAtSecond {
		listsAtSecond[k] = slices.Clone(vs)
	}
	if !second.Incremental || countDeltas(t, second.Data) == 0 {
		t.Fatalf("checkpoint 2: incremental %v with %d delta parts, want deltas", second.Incremental, countDeltas(t, second.Data))
	}
	if len(second.Data)*3 > len(full.Data) {
		t.Fatalf("checkpoint 2 wrote %d bytes for a few keys, the full one %d", len(second.Data), len(full.Data))
	}
	set("k9", 99)
	add("l3", 43)
	w.values.Clear("hot")
	delete(values, "hot")
	third := checkpoint(3)

	for _, c := range []struct {
		enc    *Encoded
		id     int64
		values map[string]int64
		lists  map[string][]int64
	}{{second, 2, atSecond, listsAtSecond}, {third, 3, values, lists}} {
		r := NewBackend("op", maxP, KeyGroupRange{Start: 0, End: maxP})
		var restore [][]byte
		for _, id := range append(slices.Clone(c.enc.Shared), c.id) {
			restore = append(restore, files[id])
		}
		if err := r.Restore(restore...); err != nil {
			t.Fatal(err)
		}
		got := mustWorkload(t, r)
		if n := got.values.Len(); n != len(c.values) {
			t.Errorf("checkpoint %d: %d values restored, want %d", c.id, n, len(c.values))
		}
		for k, v := range c.values {
			if g, ok := got.values.Get(k); !ok || g != v {
				t.Errorf("checkpoint %d: value %s: %d %v, want %d", c.id, k, g, ok, v)
			}
		}
		n := 0
		got.lists.All(func(k string, vs []int64) bool {
			n++
			if !slices.Equal(vs, c.lists[k]) {
				t.Errorf("checkpoint %d: list %s: %v, want %v", c.id, k, vs, c.lists[k])
			}
			return true
		})
		if n != len(c.lists) {
			t.Errorf("checkpoint %d: %d lists restored, want %d", c.id, n, len(c.lists))
		}
	}
}
