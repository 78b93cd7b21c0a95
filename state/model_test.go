package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// This file holds a reference model for snapshot tests: a set of states on a
// backend, driven by random operations mirrored into plain Go maps, and
// functions that read a backend's states back out for comparison.

type timerKey struct {
	key    int64
	ns, ts int64
}

// model is the expected content of a workload's states.
type model struct {
	values map[string]int64
	maps   map[int64]map[string]int64
	lists  map[string][]int64
	timers map[timerKey]bool
}

func newModel() *model {
	return &model{values: map[string]int64{}, maps: map[int64]map[string]int64{}, lists: map[string][]int64{}, timers: map[timerKey]bool{}}
}

func (m *model) clone() *model {
	c := newModel()
	c.values = maps.Clone(m.values)
	for k, um := range m.maps {
		c.maps[k] = maps.Clone(um)
	}
	for k, l := range m.lists {
		c.lists[k] = slices.Clone(l)
	}
	c.timers = maps.Clone(m.timers)
	return c
}

func (m *model) merge(o *model) {
	maps.Copy(m.values, o.values)
	maps.Copy(m.maps, o.maps)
	maps.Copy(m.lists, o.lists)
	maps.Copy(m.timers, o.timers)
}

func (m *model) size() int { return len(m.values) + len(m.maps) + len(m.lists) + len(m.timers) }

// workload is the standard set of states on one backend.
type workload struct {
	b      *Backend
	values *ValueState[string, int64]
	maps   *MapState[int64, string, int64]
	lists  *ListState[string, int64]
	timers *Timers[int64]
}

func register4(b *Backend) (*workload, error) {
	w := &workload{b: b}
	var err error
	if w.values, err = NewValueState(b, "values", StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	if w.maps, err = NewMapState(b, "maps", Int64Codec{}, StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	if w.lists, err = NewListState(b, "lists", StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	if w.timers, err = NewTimers(b, "timers", Int64Codec{}); err != nil {
		return nil, err
	}
	return w, nil
}

func mustWorkload(t testing.TB, b *Backend) *workload {
	t.Helper()
	w, err := register4(b)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// owns reports whether the workload's backend owns a key with hash h.
func (w *workload) owns(h uint64) bool {
	return w.b.kgRange.Contains(KeyGroupFor(h, w.b.maxParallelism))
}

// step applies one random operation to the workload and the model, on keys
// drawn from a small domain so that operations keep hitting the same keys.
// Keys the backend does not own are skipped.
func (w *workload) step(r *rand.Rand, m *model, keys int) {
	sk := fmt.Sprintf("k%d", r.IntN(keys))
	ik := int64(r.IntN(keys))
	v := r.Int64N(1000)
	switch op := r.IntN(15); {
	case op < 2 && w.owns(HashKey(sk)):
		w.values.Update(sk, v)
		m.values[sk] = v
	case op == 2 && w.owns(HashKey(sk)):
		w.values.Clear(sk)
		delete(m.values, sk)
	case op < 5 && w.owns(HashKey(ik)):
		uk := fmt.Sprintf("u%d", r.IntN(4))
		w.maps.Put(ik, uk, v)
		if m.maps[ik] == nil {
			m.maps[ik] = map[string]int64{}
		}
		m.maps[ik][uk] = v
	case op == 5 && w.owns(HashKey(ik)):
		uk := fmt.Sprintf("u%d", r.IntN(4))
		w.maps.Remove(ik, uk)
		delete(m.maps[ik], uk)
		if len(m.maps[ik]) == 0 {
			delete(m.maps, ik)
		}
	case op == 6 && w.owns(HashKey(ik)):
		w.maps.Clear(ik)
		delete(m.maps, ik)
	case op < 9 && w.owns(HashKey(sk)):
		w.lists.Add(sk, v)
		m.lists[sk] = append(m.lists[sk], v)
	case op == 9 && w.owns(HashKey(sk)):
		w.lists.Update(sk, []int64{v, v + 1})
		m.lists[sk] = []int64{v, v + 1}
	case op == 10 && w.owns(HashKey(sk)):
		w.lists.Clear(sk)
		delete(m.lists, sk)
	case op < 13 && w.owns(HashKey(ik)):
		tk := timerKey{ik, int64(r.IntN(3)), int64(r.IntN(50))}
		w.timers.Register(tk.key, tk.ns, tk.ts)
		m.timers[tk] = true
	case op == 13 && w.owns(HashKey(ik)):
		tk := timerKey{ik, int64(r.IntN(3)), int64(r.IntN(50))}
		w.timers.Delete(tk.key, tk.ns, tk.ts)
		delete(m.timers, tk)
	case op == 14 && r.IntN(4) == 0:
		wm := int64(r.IntN(8))
		_ = w.timers.Advance(wm, func(k, ns, ts int64) error {
			delete(m.timers, timerKey{k, ns, ts})
			return nil
		})
		for tk := range m.timers {
			if tk.ts <= wm {
				panic(fmt.Sprintf("timer %v at or before watermark %d did not fire", tk, wm))
			}
		}
	}
}

// contents reads a workload's states into a model.
func (w *workload) contents() *model {
	m := newModel()
	for _, t := range w.values.tables {
		maps.Copy(m.values, t.m)
	}
	for _, t := range w.maps.tables {
		for k, um := range t.m {
			m.maps[k] = maps.Clone(um.m)
		}
	}
	for _, t := range w.lists.tables {
		for k, l := range t.m {
			m.lists[k] = slices.Clone(l.vs)
		}
	}
	for _, t := range w.timers.tables {
		for id := range t.m {
			m.timers[timerKey(id)] = true
		}
	}
	return m
}

// diff describes the first differences between two models, "" if equal.
func diff(got, want *model) string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < 5 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	for k, v := range want.values {
		if g, ok := got.values[k]; !ok || g != v {
			add("value %q: got %d (present %v), want %d", k, g, ok, v)
		}
	}
	for k := range got.values {
		if _, ok := want.values[k]; !ok {
			add("value %q: unexpected", k)
		}
	}
	for k, um := range want.maps {
		if !maps.Equal(got.maps[k], um) {
			add("map %d: got %v, want %v", k, got.maps[k], um)
		}
	}
	for k := range got.maps {
		if _, ok := want.maps[k]; !ok {
			add("map %d: unexpected %v", k, got.maps[k])
		}
	}
	for k, l := range want.lists {
		if !slices.Equal(got.lists[k], l) {
			add("list %q: got %v, want %v", k, got.lists[k], l)
		}
	}
	for k := range got.lists {
		if _, ok := want.lists[k]; !ok {
			add("list %q: unexpected %v", k, got.lists[k])
		}
	}
	if !maps.Equal(got.timers, want.timers) {
		add("timers: got %d, want %d", len(got.timers), len(want.timers))
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

// restoreInto restores snapshots into a fresh backend for kgRange and returns
// its workload.
func restoreInto(t testing.TB, op string, maxP int, kgRange KeyGroupRange, snapshots ...[]byte) *workload {
	t.Helper()
	b := NewBackend(op, maxP, kgRange)
	if err := b.Restore(snapshots...); err != nil {
		t.Fatalf("restore %v: %v", kgRange, err)
	}
	w := mustWorkload(t, b)
	if u := b.Unclaimed(); len(u) != 0 {
		t.Fatalf("unclaimed state after registering the workload: %v", u)
	}
	return w
}
