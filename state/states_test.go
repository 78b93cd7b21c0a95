package state

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func fullBackend(op string) *Backend {
	return NewBackend(op, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestValueState(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		b := newBackend("op")
		s := must(NewValueState(b, "count", StringCodec{}, Int64Codec{}))
		if _, ok := s.Get("a"); ok {
			t.Fatal("Get on an empty state found a value")
		}
		s.Update("a", 1)
		s.Update("b", 2)
		s.Update("a", 3)
		if v, ok := s.Get("a"); !ok || v != 3 {
			t.Fatalf(`Get("a") = %d, %v; want 3, true`, v, ok)
		}
		if s.Len() != 2 {
			t.Fatalf("Len = %d, want 2", s.Len())
		}
		s.Clear("a")
		s.Clear("never")
		if _, ok := s.Get("a"); ok || s.Len() != 1 {
			t.Fatalf("after Clear: Get found a value or Len = %d", s.Len())
		}
		if b.Err() != nil {
			t.Fatal(b.Err())
		}
	})
}

func TestMapState(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		b := newBackend("op")
		s := must(NewMapState(b, "m", Int64Codec{}, StringCodec{}, Float64Codec{}))
		s.Put(1, "x", 1.5)
		s.Put(1, "y", 2.5)
		s.Put(2, "x", 9)
		if v, ok := s.Get(1, "y"); !ok || v != 2.5 {
			t.Fatalf("Get(1, y) = %v, %v", v, ok)
		}
		if _, ok := s.Get(1, "z"); ok {
			t.Fatal("Get of a missing user key found a value")
		}
		if _, ok := s.Get(3, "x"); ok {
			t.Fatal("Get of a missing key found a value")
		}
		if got := maps.Collect(s.All(1)); !maps.Equal(got, map[string]float64{"x": 1.5, "y": 2.5}) {
			t.Fatalf("All(1) = %v", got)
		}
		if s.Len(1) != 2 || s.Len(3) != 0 {
			t.Fatalf("Len(1) = %d, Len(3) = %d", s.Len(1), s.Len(3))
		}
		// Early stop.
		n := 0
		for range s.All(1) {
			n++
			break
		}
		if n != 1 {
			t.Fatal("All did not stop when yield returned false")
		}
		s.Remove(1, "x")
		s.Remove(1, "nope")
		if s.Len(1) != 1 {
			t.Fatalf("after Remove, Len(1) = %d", s.Len(1))
		}
		s.Remove(1, "y") // last entry: the key disappears
		if s.Len(1) != 0 || len(maps.Collect(s.All(1))) != 0 {
			t.Fatal("removing the last entry left the key")
		}
		s.Clear(2)
		if _, ok := s.Get(2, "x"); ok {
			t.Fatal("Clear left an entry")
		}
	})
}

func TestListState(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		b := newBackend("op")
		s := must(NewListState(b, "l", StringCodec{}, Int64Codec{}))
		if s.Get("k") != nil {
			t.Fatal("Get on an empty state returned a list")
		}
		s.Add("k", 1)
		s.Add("k", 2)
		view := s.Get("k")
		s.Add("k", 3)
		if !slices.Equal(view, []int64{1, 2}) {
			t.Fatalf("a view from Get changed after Add: %v", view)
		}
		if !slices.Equal(s.Get("k"), []int64{1, 2, 3}) {
			t.Fatalf("Get = %v", s.Get("k"))
		}
		// Appending to a view copies: the state is unchanged, and a later Add
		// does not clobber the caller's slice.
		mine := append(s.Get("k"), 99)
		s.Add("k", 4)
		if !slices.Equal(mine, []int64{1, 2, 3, 99}) || !slices.Equal(s.Get("k"), []int64{1, 2, 3, 4}) {
			t.Fatalf("appending to a view interfered with state: mine=%v state=%v", mine, s.Get("k"))
		}
		in := []int64{7, 8}
		s.Update("k", in)
		in[0] = 0 // Update copies
		if !slices.Equal(s.Get("k"), []int64{7, 8}) {
			t.Fatalf("after Update: %v", s.Get("k"))
		}
		s.Update("k", nil)
		if s.Get("k") != nil {
			t.Fatal("Update with an empty list did not clear")
		}
		s.Add("j", 1)
		s.Clear("j")
		if s.Get("j") != nil {
			t.Fatal("Clear left the list")
		}
	})
}

// keyOutside returns an int64 key whose key group is outside r.
func keyOutside(t *testing.T, maxP int, r KeyGroupRange) int64 {
	for k := range int64(1 << 20) {
		if !r.Contains(KeyGroupFor(HashKey(k), maxP)) {
			return k
		}
	}
	t.Fatal("no key outside the range")
	return 0
}

// A key outside the backend's range is a routing bug: recorded (first one
// wins), the access ignored, nothing panics.
func TestMisroutedKeyIsAStickyError(t *testing.T) {
	r := KeyGroupRangeFor(128, 2, 0)
	b := NewBackend("sum", 128, r)
	v := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	m := must(NewMapState(b, "m", Int64Codec{}, Int64Codec{}, Int64Codec{}))
	l := must(NewListState(b, "l", Int64Codec{}, Int64Codec{}))
	tm := must(NewTimers(b, "t", Int64Codec{}))
	bad := keyOutside(t, 128, r)
	v.Update(bad, 1)
	err := b.Err()
	if err == nil {
		t.Fatal("no error for a misrouted key")
	}
	for _, want := range []string{`"sum"`, `"v"`, "wrong subtask", r.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, ok := v.Get(bad); ok || v.Len() != 0 {
		t.Fatal("the misrouted write was stored")
	}
	m.Put(bad, 1, 1)
	m.Remove(bad, 1)
	m.Clear(bad)
	l.Add(bad, 1)
	l.Update(bad, []int64{1})
	l.Clear(bad)
	tm.Register(bad, 0, 1)
	tm.Delete(bad, 0, 1)
	v.Clear(bad)
	if m.Len(bad) != 0 || l.Get(bad) != nil || tm.Len() != 0 || len(maps.Collect(m.All(bad))) != 0 {
		t.Fatal("misrouted writes were stored")
	}
	if b.Err() != err {
		t.Fatal("the first routing error was replaced")
	}
	if _, err := b.Snapshot().Encode(); err == nil || !strings.Contains(err.Error(), "routed to the wrong subtask") {
		t.Fatalf("Encode of a backend with a routing error: %v", err)
	}
}

func TestRegistration(t *testing.T) {
	b := fullBackend("op")
	v1 := must(NewValueState(b, "x", StringCodec{}, Int64Codec{}))
	v2, err := NewValueState(b, "x", StringCodec{}, Int64Codec{})
	if err != nil || v1 != v2 {
		t.Fatalf("registering the same state twice: %v, same=%v", err, v1 == v2)
	}
	if _, err := NewMapState(b, "x", StringCodec{}, StringCodec{}, Int64Codec{}); err == nil {
		t.Error("a name registered as value was accepted as map")
	}
	if _, err := NewValueState(b, "x", StringCodec{}, StringCodec{}); err == nil {
		t.Error("a name registered with V=int64 was accepted with V=string")
	}
	if _, err := NewValueState(b, "x", StringCodec{}, JSONCodec[int64]()); err == nil {
		t.Error("a name registered with one codec was accepted with another")
	}
	if _, err := NewTimers(b, "x", StringCodec{}); err == nil {
		t.Error("timers may not share a state's name")
	}
	if _, err := NewValueState(b, "", StringCodec{}, Int64Codec{}); err == nil {
		t.Error("an empty name was accepted")
	}
	if _, err := NewValueState[string, int64](b, "nil", nil, Int64Codec{}); err == nil {
		t.Error("a nil codec was accepted")
	}
	type structKey struct{ A int }
	_, err = NewValueState(b, "bad", JSONCodec[structKey](), Int64Codec{})
	if err == nil || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), "structKey") {
		t.Errorf("unsupported key type: %v, want an error naming the state and type", err)
	}
	if errors.Is(err, ErrStateMismatch) {
		t.Error("an unsupported key type is not a restore mismatch")
	}
}

func TestCompositeAndNamedKeys(t *testing.T) {
	b := fullBackend("op")
	s := must(NewValueState(b, "v", JSONCodec[compositeKey](), Int64Codec{}))
	s.Update(compositeKey{"t", 1}, 5)
	if v, ok := s.Get(compositeKey{"t", 1}); !ok || v != 5 {
		t.Fatal("composite key lost")
	}
	n := must(NewValueState(b, "n", JSONCodec[userID](), StringCodec{}))
	n.Update(userID(3), "x")
	if v, _ := n.Get(userID(3)); v != "x" {
		t.Fatal("named key lost")
	}
}

// All visits every entry once, also when the visit clears entries of a
// table a snapshot froze (the clear copies it; the visit goes on over the
// frozen one), and the snapshot keeps what it saw.
func TestValueStateAll(t *testing.T) {
	b := fullBackend("op")
	s := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
	want := map[int64]int64{}
	for k := range int64(1000) {
		s.Update(k, k*k)
		want[k] = k * k
	}
	snap := b.Snapshot()
	got := map[int64]int64{}
	s.All(func(k, v int64) bool {
		if _, dup := got[k]; dup {
			t.Fatalf("key %d visited twice", k)
		}
		got[k] = v
		if k%2 == 0 {
			s.Clear(k)
		}
		return true
	})
	if !maps.Equal(got, want) {
		t.Fatalf("All visited %d entries, want %d", len(got), len(want))
	}
	if s.Len() != 500 {
		t.Fatalf("after clearing the even keys during All: Len %d, want 500", s.Len())
	}
	r := fullBackend("op")
	if err := r.Restore(encode(t, snap)); err != nil {
		t.Fatal(err)
	}
	restored := must(NewValueState(r, "v", Int64Codec{}, Int64Codec{}))
	if restored.Len() != 1000 {
		t.Fatalf("the snapshot taken before All holds %d entries, want 1000", restored.Len())
	}
	n := 0
	s.All(func(int64, int64) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("All went on after f returned false: %d calls", n)
	}
}

// DropState removes a restored or registered state from later snapshots and
// remembers its schema.
func TestDropState(t *testing.T) {
	b := fullBackend("op")
	old := must(NewValueState(b, "old", StringCodec{}, Int64Codec{}))
	old.Update("a", 1)
	must(NewTimers(b, "timers", StringCodec{})).Register("a", 0, 5)
	data := encode(t, b.Snapshot())

	r := fullBackend("op")
	if err := r.Restore(data); err != nil {
		t.Fatal(err)
	}
	_ = must(NewValueState(r, "old", StringCodec{}, Int64Codec{})) // claimed, read, then moved by its operator
	if !r.DropState("old") || !r.DropState("timers") || r.DropState("never") {
		t.Fatal("DropState: want true for a registered and a restored state, false for an unknown one")
	}
	if len(r.Unclaimed()) != 0 {
		t.Fatalf("unclaimed after dropping: %v", r.Unclaimed())
	}
	var names []string
	for _, s := range r.Dropped() {
		names = append(names, s.Name+":"+s.Kind.String())
	}
	if !slices.Equal(names, []string{"old:value", "timers:timers"}) {
		t.Fatalf("Dropped = %v", names)
	}
	for _, s := range r.Snapshot().Schemas() {
		t.Errorf("a snapshot after dropping everything holds %q", s.Name)
	}
}

// ListState.All visits every key once with its list, also while it clears
// the lists of a table a snapshot froze.
func TestListStateAll(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		b := newBackend("op")
		s := must(NewListState(b, "l", Int64Codec{}, Int64Codec{}))
		for k := range int64(300) {
			for v := range k % 4 {
				s.Add(k, v)
			}
		}
		b.Snapshot()
		seen := map[int64]int{}
		s.All(func(k int64, vs []int64) bool {
			seen[k]++
			if int64(len(vs)) != k%4 {
				t.Fatalf("key %d: list %v", k, vs)
			}
			s.Clear(k)
			return true
		})
		// Keys with an empty list (k%4 == 0) hold no list at all.
		if len(seen) != 225 {
			t.Fatalf("All visited %d keys, want 225", len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("key %d visited %d times", k, n)
			}
		}
		n := 0
		s.All(func(int64, []int64) bool { n++; return true })
		if n != 0 {
			t.Fatalf("%d lists left after clearing each during All", n)
		}
	})
}

// MoveRestoredValues and MoveRestoredLists move a restored, unclaimed state
// into another and drop it; without one they do nothing.
func TestMoveRestored(t *testing.T) {
	b := fullBackend("op")
	must(NewValueState(b, "old-v", StringCodec{}, Int64Codec{})).Update("a", 7)
	ol := must(NewListState(b, "old-l", StringCodec{}, Int64Codec{}))
	ol.Add("b", 1)
	ol.Add("b", 2)
	data := encode(t, b.Snapshot())

	r := fullBackend("op")
	if err := r.Restore(data); err != nil {
		t.Fatal(err)
	}
	nv := must(NewValueState(r, "new-v", StringCodec{}, Int64Codec{}))
	nl := must(NewListState(r, "new-l", StringCodec{}, Int64Codec{}))
	if err := MoveRestoredValues(r, "old-v", Codec[string](StringCodec{}), Codec[int64](Int64Codec{}), nv.Update); err != nil {
		t.Fatal(err)
	}
	if err := MoveRestoredLists(r, "old-l", Codec[string](StringCodec{}), Codec[int64](Int64Codec{}), nl); err != nil {
		t.Fatal(err)
	}
	if err := MoveRestoredValues(r, "never", Codec[string](StringCodec{}), Codec[int64](Int64Codec{}), nv.Update); err != nil {
		t.Fatal(err)
	}
	if v, ok := nv.Get("a"); !ok || v != 7 {
		t.Fatalf("moved value: %d, %v", v, ok)
	}
	if l := nl.Get("b"); !slices.Equal(l, []int64{1, 2}) {
		t.Fatalf("moved list: %v", l)
	}
	if u := r.Unclaimed(); len(u) != 0 {
		t.Fatalf("unclaimed after moving: %v", u)
	}
	var names []string
	for _, s := range r.Snapshot().Schemas() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"new-l", "new-v"}) {
		t.Fatalf("snapshot states %v, want only the new ones", names)
	}
}
