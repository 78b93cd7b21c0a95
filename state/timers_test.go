package state

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type fired struct {
	key    string
	ns, ts int64
}

func collect(t *testing.T, tm *Timers[string], wm int64) []fired {
	t.Helper()
	var out []fired
	if err := tm.Advance(wm, func(k string, ns, ts int64) error {
		out = append(out, fired{k, ns, ts})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTimersFireInTimestampOrderUpToTheWatermark(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		tm := must(NewTimers(newBackend("op"), "t", StringCodec{}))
		r := rand.New(rand.NewPCG(1, 2))
		want := map[fired]bool{}
		for i := range 2000 {
			f := fired{fmt.Sprint("k", i%97), int64(i % 3), r.Int64N(1000)}
			tm.Register(f.key, f.ns, f.ts)
			want[f] = true
		}
		if tm.Len() != len(want) {
			t.Fatalf("Len = %d, want %d", tm.Len(), len(want))
		}
		got := collect(t, tm, 499)
		if !slices.IsSortedFunc(got, func(a, b fired) int { return int(a.ts - b.ts) }) {
			t.Fatal("timers fired out of timestamp order")
		}
		for _, f := range got {
			if f.ts > 499 || !want[f] {
				t.Fatalf("fired %v: beyond the watermark or never registered", f)
			}
			delete(want, f)
		}
		for f := range want {
			if f.ts <= 499 {
				t.Fatalf("timer %v at or before the watermark did not fire", f)
			}
		}
		if ts, ok := tm.Next(); !ok || ts < 500 {
			t.Fatalf("Next = %d, %v", ts, ok)
		}
		if rest := collect(t, tm, math.MaxInt64); len(rest) != len(want) || tm.Len() != 0 {
			t.Fatalf("second Advance fired %d, want %d; Len %d", len(rest), len(want), tm.Len())
		}
		if _, ok := tm.Next(); ok {
			t.Fatal("Next reports a timer after all fired")
		}
	})
}

// Equal timestamps fire in registration order; registering a pending timer
// again changes nothing, not even its place.
func TestTimersTiesFireInRegistrationOrderAndRegisterIsIdempotent(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		tm := must(NewTimers(newBackend("op"), "t", StringCodec{}))
		keys := []string{"m", "c", "x", "a", "q"}
		for _, k := range keys {
			tm.Register(k, 0, 10)
		}
		tm.Register("m", 0, 10) // again
		tm.Register("c", 0, 10)
		if tm.Len() != len(keys) {
			t.Fatalf("Len = %d after duplicate registrations, want %d", tm.Len(), len(keys))
		}
		var order []string
		for _, f := range collect(t, tm, 10) {
			order = append(order, f.key)
		}
		if !slices.Equal(order, keys) {
			t.Fatalf("fired %v, want registration order %v", order, keys)
		}
	})
}

func TestTimersDelete(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		tm := must(NewTimers(newBackend("op"), "t", StringCodec{}))
		tm.Register("a", 1, 5)
		tm.Register("a", 2, 5) // other namespace
		tm.Register("b", 1, 5)
		tm.Delete("a", 1, 5)
		tm.Delete("a", 1, 6) // not pending: no-op
		if tm.Len() != 2 {
			t.Fatalf("Len = %d", tm.Len())
		}
		// Delete then register again: fires once, after timers registered in between.
		tm.Delete("b", 1, 5)
		tm.Register("c", 0, 5)
		tm.Register("b", 1, 5)
		got := collect(t, tm, 5)
		want := []fired{{"a", 2, 5}, {"c", 0, 5}, {"b", 1, 5}}
		if !slices.Equal(got, want) {
			t.Fatalf("fired %v, want %v", got, want)
		}
	})
}

func TestTimersFireMayRegisterMore(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		tm := must(NewTimers(newBackend("op"), "t", StringCodec{}))
		tm.Register("a", 0, 1)
		tm.Register("b", 0, 5)
		var got []fired
		err := tm.Advance(10, func(k string, ns, ts int64) error {
			got = append(got, fired{k, ns, ts})
			if k == "a" && ts < 8 {
				tm.Register(k, ns, ts+3) // 4, 7, 10: within the watermark, fire now
				tm.Register(k, ns, 100)  // beyond it: stays pending
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []fired{{"a", 0, 1}, {"a", 0, 4}, {"b", 0, 5}, {"a", 0, 7}, {"a", 0, 10}}
		if !slices.Equal(got, want) {
			t.Fatalf("fired %v, want %v", got, want)
		}
		if next, ok := tm.Next(); !ok || next != 100 || tm.Len() != 1 {
			t.Fatalf("Next = %d, %v, Len %d; want 100, true, 1", next, ok, tm.Len())
		}
	})
}

func TestTimersAdvanceStopsAtFireError(t *testing.T) {
	forBackends(t, func(t *testing.T, newBackend func(string) *Backend) {
		tm := must(NewTimers(newBackend("op"), "t", StringCodec{}))
		for i := range int64(5) {
			tm.Register("k", 0, i)
		}
		boom := errors.New("boom")
		n := 0
		err := tm.Advance(10, func(string, int64, int64) error {
			n++
			if n == 2 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) || n != 2 || tm.Len() != 3 {
			t.Fatalf("err=%v fired=%d Len=%d; want boom, 2, 3", err, n, tm.Len())
		}
	})
}

// Deleting and re-registering many times does not grow the queue without bound.
func TestTimersQueueStaysBounded(t *testing.T) {
	tm := must(NewTimers(fullBackend("op"), "t", Int64Codec{}))
	for i := range int64(100) {
		tm.Register(i, 0, 1000)
	}
	for round := range int64(1000) {
		for i := range int64(100) {
			tm.Delete(i, 0, 1000+round)
			tm.Register(i, 0, 1001+round)
		}
	}
	if tm.Len() != 100 || len(tm.queue) > 2*tm.Len()+64 {
		t.Fatalf("Len %d, queue %d", tm.Len(), len(tm.queue))
	}
	var n int
	if err := tm.Advance(math.MaxInt64, func(k, ns, ts int64) error {
		if ts != 2000 {
			return fmt.Errorf("key %d fired at %d, want 2000", k, ts)
		}
		n++
		return nil
	}); err != nil || n != 100 {
		t.Fatalf("fired %d: %v", n, err)
	}
}

// Timers survive snapshot and restore, in the same firing order (ties
// included), and rescaled into three subtasks each timer lands in exactly one.
func TestTimersSnapshotRestoreAndRescale(t *testing.T) {
	b := fullBackend("op")
	tm := must(NewTimers(b, "t", StringCodec{}))
	for i := range 500 {
		tm.Register(fmt.Sprint("k", i), int64(i%2), int64(i%7)) // many ties
	}
	for i := range 50 {
		tm.Delete(fmt.Sprint("k", i*3), int64(i*3%2), int64(i*3%7))
	}
	data := encode(t, b.Snapshot())
	// COW: firing after the snapshot does not affect it.
	want := collect(t, tm, math.MaxInt64)

	b2 := fullBackend("op")
	if err := b2.Restore(data); err != nil {
		t.Fatal(err)
	}
	tm2 := must(NewTimers(b2, "t", StringCodec{}))
	if got := collect(t, tm2, math.MaxInt64); !slices.Equal(got, want) {
		t.Fatalf("restored timers fire differently:\n got %v\nwant %v", got[:5], want[:5])
	}

	seen := map[fired]int{}
	for s := range 3 {
		r := KeyGroupRangeFor(DefaultMaxParallelism, 3, s)
		bs := NewBackend("op", DefaultMaxParallelism, r)
		if err := bs.Restore(data); err != nil {
			t.Fatal(err)
		}
		ts := must(NewTimers(bs, "t", StringCodec{}))
		got := collect(t, ts, math.MaxInt64)
		// Within a subtask the relative order is the original one.
		var sub []fired
		for _, f := range want {
			if r.Contains(KeyGroupFor(HashKey(f.key), DefaultMaxParallelism)) {
				sub = append(sub, f)
			}
		}
		if !slices.Equal(got, sub) {
			t.Fatalf("subtask %d fires %d timers, want its %d in the original order", s, len(got), len(sub))
		}
		for _, f := range got {
			seen[f]++
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("rescaled: %d distinct timers, want %d", len(seen), len(want))
	}
	for f, n := range seen {
		if n != 1 {
			t.Fatalf("timer %v restored %d times", f, n)
		}
	}
	// New registrations after restore order after the restored ones.
	b3 := fullBackend("op")
	b3.Restore(data)
	tm3 := must(NewTimers(b3, "t", StringCodec{}))
	tm3.Register("late", 0, 0)
	got := collect(t, tm3, 0)
	if len(got) == 0 || got[len(got)-1].key != "late" {
		t.Fatalf("a timer registered after restore fired before restored ties: %v", got)
	}
}
