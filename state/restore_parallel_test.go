package state

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Registration decodes a large restored state's key groups on several
// goroutines (loadParts). These tests force more workers than the machine
// has cores, so that go test -race sees loads of different key groups of one
// state run at once whatever the machine: a load that writes anything but
// its own key group's table (a shared counter, queue or backend field) is
// reported as a race. Nothing here depends on timing: results are compared
// exactly, and errors must be the sequential path's.

// testRestoreWorkers is more than any CI machine's cores and fewer than the
// key groups, so several loads always run at once and each worker loads
// several key groups.
const testRestoreWorkers = 8

// setRestoreWorkers makes loadParts use n workers until the test ends.
// Tests of this package do not run in parallel, so the swap is safe.
func setRestoreWorkers(tb testing.TB, n int) {
	tb.Helper()
	prev := restoreWorkers
	restoreWorkers = func() int { return n }
	tb.Cleanup(func() { restoreWorkers = prev })
}

// bigState is the content the parallel-restore tests write and expect back:
// every state kind, each well above parallelRestoreMinEntries entries, so
// each takes the parallel path.
type bigState struct {
	values map[int64]agg
	maps   map[int64]map[string]int64
	lists  map[string][]int64
	timers []restoredTimer // in firing order: (ts, registration order)
	spaces map[nsKey]int64
}

type restoredTimer struct{ key, ns, ts int64 }

// bigStates is a backend's registered states of every kind.
type bigStates struct {
	values *ValueState[int64, agg]
	maps   *MapState[int64, string, int64]
	lists  *ListState[string, int64]
	timers *Timers[int64]
	spaces *NamespacedValueState[string, int64]
}

func registerBig(b *Backend) (*bigStates, error) {
	s := &bigStates{}
	var err error
	if s.values, err = NewValueState(b, "values", Int64Codec{}, aggCodec{}); err != nil {
		return nil, err
	}
	if s.maps, err = NewMapState(b, "maps", Int64Codec{}, StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	if s.lists, err = NewListState(b, "lists", StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	if s.timers, err = NewTimers(b, "timers", Int64Codec{}); err != nil {
		return nil, err
	}
	if s.spaces, err = NewNamespacedValueState(b, "spaces", "spaces-key(string)", StringCodec{}, Int64Codec{}); err != nil {
		return nil, err
	}
	return s, nil
}

// bigSnapshot writes bigState's content into a full-range backend (max
// parallelism 128) and returns the encoded snapshot and the content.
func bigSnapshot(t testing.TB) ([]byte, *bigState) {
	t.Helper()
	b := fullBackend("op")
	s := must(registerBig(b))
	want := &bigState{values: map[int64]agg{}, maps: map[int64]map[string]int64{}, lists: map[string][]int64{}, spaces: map[nsKey]int64{}}
	for k := range int64(20_000) {
		v := agg{Sum: k * 7, Count: k % 13}
		s.values.Update(k, v)
		want.values[k] = v
	}
	for k := range int64(5_000) {
		um := map[string]int64{}
		for j := range k%4 + 1 {
			uk := fmt.Sprint("u", j)
			s.maps.Put(k, uk, k*10+j)
			um[uk] = k*10 + j
		}
		want.maps[k] = um
		lk := fmt.Sprint("l", k)
		for j := range k%5 + 1 {
			s.lists.Add(lk, k+j)
			want.lists[lk] = append(want.lists[lk], k+j)
		}
	}
	// Few distinct timestamps, so that most timers tie on ts and only the
	// restored sequence numbers (spread over every key group) order them.
	for k := range int64(6_000) {
		tm := restoredTimer{key: k % 3_000, ns: k / 3_000, ts: k % 50}
		s.timers.Register(tm.key, tm.ns, tm.ts)
		want.timers = append(want.timers, tm)
	}
	slices.SortStableFunc(want.timers, func(a, b restoredTimer) int { return cmp.Compare(a.ts, b.ts) })
	for i := range 6_000 {
		k := nsKey{ns: int64(i % 3), key: fmt.Sprint("n", i)}
		s.spaces.Update(k.ns, k.key, int64(i))
		want.spaces[k] = int64(i)
	}
	return encode(t, b.Snapshot()), want
}

// checkBig compares s with want, restricted to the keys b owns, exactly:
// every entry, nothing more, and the timers' firing order. It fires and so
// consumes the timers.
func checkBig(t *testing.T, b *Backend, s *bigStates, want *bigState) {
	t.Helper()
	owns := func(h uint64) bool { return b.kgRange.Contains(KeyGroupFor(h, b.maxParallelism)) }
	hashString := must(Hasher[string]())
	hashInt := must(Hasher[int64]())

	n := 0
	for k, v := range want.values {
		if !owns(hashInt(k)) {
			continue
		}
		n++
		if got, ok := s.values.Get(k); !ok || got != v {
			t.Fatalf("values[%d] = %v, %v; want %v", k, got, ok, v)
		}
	}
	if s.values.Len() != n {
		t.Fatalf("values: %d keys, want %d", s.values.Len(), n)
	}

	n = 0
	for k, um := range want.maps {
		if !owns(hashInt(k)) {
			continue
		}
		n++
		if got := maps.Collect(s.maps.All(k)); !maps.Equal(got, um) {
			t.Fatalf("maps[%d] = %v, want %v", k, got, um)
		}
	}
	keys := 0
	for i := range s.maps.tables {
		keys += len(s.maps.tables[i].m)
	}
	if keys != n {
		t.Fatalf("maps: %d keys, want %d", keys, n)
	}

	n = 0
	for k, l := range want.lists {
		if !owns(hashString(k)) {
			continue
		}
		n++
		if got := s.lists.Get(k); !slices.Equal(got, l) {
			t.Fatalf("lists[%q] = %v, want %v", k, got, l)
		}
	}
	keys = 0
	s.lists.All(func(string, []int64) bool { keys++; return true })
	if keys != n {
		t.Fatalf("lists: %d keys, want %d", keys, n)
	}

	gotNS := map[nsKey]int64{}
	for _, ns := range s.spaces.Namespaces() {
		s.spaces.Entries(ns, func(k string, v int64) bool {
			gotNS[nsKey{ns, k}] = v
			return true
		})
	}
	wantNS := maps.Collect(func(yield func(nsKey, int64) bool) {
		for k, v := range want.spaces {
			if owns(hashString(k.key)) && !yield(k, v) {
				return
			}
		}
	})
	if !maps.Equal(gotNS, wantNS) {
		t.Fatalf("namespaced: %d entries, want %d (or values differ)", len(gotNS), len(wantNS))
	}
	if s.spaces.Len() != len(wantNS) {
		t.Fatalf("namespaced: Len %d, want %d", s.spaces.Len(), len(wantNS))
	}

	var wantTimers []restoredTimer
	for _, tm := range want.timers {
		if owns(hashInt(tm.key)) {
			wantTimers = append(wantTimers, tm)
		}
	}
	if s.timers.Len() != len(wantTimers) {
		t.Fatalf("timers: Len %d, want %d", s.timers.Len(), len(wantTimers))
	}
	// A timer registered after the restore at the earliest timestamp fires
	// after every restored one with that timestamp: its sequence number is
	// past all restored ones.
	late := restoredTimer{key: wantTimers[0].key, ns: 99, ts: 0}
	s.timers.Register(late.key, late.ns, late.ts)
	at := slices.IndexFunc(wantTimers, func(tm restoredTimer) bool { return tm.ts > 0 })
	wantTimers = slices.Insert(wantTimers, at, late)
	var fired []restoredTimer
	if err := s.timers.Advance(math.MaxInt64, func(k, ns, ts int64) error {
		fired = append(fired, restoredTimer{k, ns, ts})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fired, wantTimers) {
		i := 0
		for i < min(len(fired), len(wantTimers)) && fired[i] == wantTimers[i] {
			i++
		}
		t.Fatalf("timers fired %d, want %d; first difference at %d", len(fired), len(wantTimers), i)
	}
}

// A snapshot of every state kind, thousands of keys over all 128 key groups,
// restores exactly on the parallel path: into the full range, and rescaled
// into a range that starts in the middle (table index = key group - Start).
func TestParallelRestoreIsExact(t *testing.T) {
	data, want := bigSnapshot(t)
	setRestoreWorkers(t, testRestoreWorkers)
	for _, r := range []KeyGroupRange{{0, DefaultMaxParallelism}, {37, 101}} {
		t.Run(r.String(), func(t *testing.T) {
			b := NewBackend("op", DefaultMaxParallelism, r)
			if err := b.Restore(data); err != nil {
				t.Fatal(err)
			}
			s := must(registerBig(b))
			if u := b.Unclaimed(); len(u) != 0 {
				t.Fatalf("Unclaimed() = %v", u)
			}
			if b.Err() != nil {
				t.Fatalf("Err() = %v", b.Err())
			}
			checkBig(t, b, s, want)
		})
	}
}

// corruptKeyGroups makes the first key of each listed key group's part of
// the only state in data undecodable (an int64 varint of ten 0xff bytes
// overflows), fixing the section checksums so that Restore accepts the file
// and registration finds the damage.
func corruptKeyGroups(t *testing.T, data []byte, kgs ...int) {
	t.Helper()
	info := must(Inspect(data))
	for _, kg := range kgs {
		i := slices.IndexFunc(info.Sections, func(s SectionInfo) bool { return s.KeyGroup == kg })
		if i < 0 || len(info.Sections[i].States) != 1 {
			t.Fatalf("no single-state section for key group %d", kg)
		}
		sec := info.Sections[i]
		body := data[sec.Offset : sec.Offset+sec.Length-4]
		p := len(body) - sec.States[0].Bytes
		copy(body[p:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		fixSectionCRC(data, sec)
	}
}

// oneBigState is one state kind, filled with more than
// parallelRestoreMinEntries int64 keys, for the error tests.
type oneBigState struct {
	kind     string
	fill     func(b *Backend)
	register func(b *Backend) error
}

func oneBigStates() []oneBigState {
	const keys = 6_000
	return []oneBigState{
		{"value", func(b *Backend) {
			s := must(NewValueState(b, "s", Int64Codec{}, Int64Codec{}))
			for k := range int64(keys) {
				s.Update(k, k)
			}
		}, func(b *Backend) error { _, err := NewValueState(b, "s", Int64Codec{}, Int64Codec{}); return err }},
		{"map", func(b *Backend) {
			s := must(NewMapState(b, "s", Int64Codec{}, Int64Codec{}, Int64Codec{}))
			for k := range int64(keys) {
				s.Put(k, k, k)
			}
		}, func(b *Backend) error {
			_, err := NewMapState(b, "s", Int64Codec{}, Int64Codec{}, Int64Codec{})
			return err
		}},
		{"list", func(b *Backend) {
			s := must(NewListState(b, "s", Int64Codec{}, Int64Codec{}))
			for k := range int64(keys) {
				s.Add(k, k)
			}
		}, func(b *Backend) error { _, err := NewListState(b, "s", Int64Codec{}, Int64Codec{}); return err }},
		{"timers", func(b *Backend) {
			s := must(NewTimers(b, "s", Int64Codec{}))
			for k := range int64(keys) {
				s.Register(k, 0, k)
			}
		}, func(b *Backend) error { _, err := NewTimers(b, "s", Int64Codec{}); return err }},
		{"namespaced", func(b *Backend) {
			s := must(NewNamespacedValueState(b, "s", "s-key(int64)", Int64Codec{}, Int64Codec{}))
			for k := range int64(keys) {
				s.Update(k%3, k, k)
			}
		}, func(b *Backend) error {
			_, err := NewNamespacedValueState(b, "s", "s-key(int64)", Int64Codec{}, Int64Codec{})
			return err
		}},
	}
}

// registerCorrupt restores data into a full-range backend and registers the
// state with loadParts using workers goroutines; it returns the
// unclaimed states afterwards and the registration's error.
func registerCorrupt(t *testing.T, st oneBigState, data []byte, workers int) ([]string, error) {
	t.Helper()
	setRestoreWorkers(t, workers)
	b := fullBackend("op")
	if err := b.Restore(data); err != nil {
		t.Fatalf("restore (checksums valid): %v", err)
	}
	err := st.register(b)
	return b.Unclaimed(), err
}

// With parts corrupt in several key groups, the parallel path reports
// exactly the sequential path's error: the lowest corrupt key group's, in
// the existing wording, however the workers' loads interleave. The failed
// registration leaves the state unclaimed, as before.
func TestParallelRestoreReportsLowestKeyGroupError(t *testing.T) {
	for _, st := range oneBigStates() {
		t.Run(st.kind, func(t *testing.T) {
			b := fullBackend("op")
			st.fill(b)
			data := encode(t, b.Snapshot())
			corruptKeyGroups(t, data, 61, 60, 95, 127)

			unclaimed, seq := registerCorrupt(t, st, data, 1)
			want := `state: corrupt snapshot: operator "op" state "s" key group 60: decode key with codec int64: state: int64 codec: varint overflows 64 bits`
			if seq == nil || seq.Error() != want || !IsCorrupt(seq) {
				t.Fatalf("sequential: %v\nwant %s", seq, want)
			}
			if !slices.Equal(unclaimed, []string{"s"}) {
				t.Fatalf("sequential: Unclaimed() = %v after a failed registration", unclaimed)
			}
			// Repeat: the interleaving varies, the error must not.
			for range 20 {
				unclaimed, par := registerCorrupt(t, st, data, testRestoreWorkers)
				if par == nil || par.Error() != seq.Error() || !IsCorrupt(par) {
					t.Fatalf("parallel: %v\nsequential: %v", par, seq)
				}
				if !slices.Equal(unclaimed, []string{"s"}) {
					t.Fatalf("parallel: Unclaimed() = %v after a failed registration", unclaimed)
				}
			}

			// Only the last key group corrupt: every other one loads, the
			// last one's error is reported.
			b = fullBackend("op")
			st.fill(b)
			data = encode(t, b.Snapshot())
			corruptKeyGroups(t, data, 127)
			_, par := registerCorrupt(t, st, data, testRestoreWorkers)
			if par == nil || !strings.Contains(par.Error(), "key group 127:") {
				t.Fatalf("parallel, key group 127 corrupt: %v", par)
			}
		})
	}
}

// panicCodec is an int64 codec whose Decode panics on negative values,
// naming the value: a codec breaking its contract.
type panicCodec struct{ Int64Codec }

func (panicCodec) Name() string { return "panicky-int64" }
func (c panicCodec) Decode(src []byte) (int64, int, error) {
	v, n, err := c.Int64Codec.Decode(src)
	if v < 0 {
		panic(fmt.Sprintf("negative value %d", v))
	}
	return v, n, err
}

// A codec panic in a worker is re-raised on the registering goroutine (where
// the runtime turns panics into a task error), not in a worker, which would
// kill the process: the lowest key group's, as the sequential path raises it.
func TestParallelRestoreReraisesLowestPanic(t *testing.T) {
	b := fullBackend("op")
	s := must(NewValueState(b, "p", Int64Codec{}, panicCodec{}))
	hash := must(Hasher[int64]())
	poisoned := map[int]bool{}
	for k := range int64(6_000) {
		v := k
		// One poisoned value in each of key groups 80, 40 and 100; the
		// value names its key group.
		if kg := KeyGroupFor(hash(k), DefaultMaxParallelism); (kg == 80 || kg == 40 || kg == 100) && !poisoned[kg] {
			poisoned[kg] = true
			v = -int64(1000 + kg)
		}
		s.Update(k, v)
	}
	if len(poisoned) != 3 {
		t.Fatalf("poisoned key groups %v, want 40, 80 and 100", poisoned)
	}
	data := encode(t, b.Snapshot())
	register := func(workers int) (recovered any) {
		setRestoreWorkers(t, workers)
		b := fullBackend("op")
		if err := b.Restore(data); err != nil {
			t.Fatal(err)
		}
		defer func() { recovered = recover() }()
		_, err := NewValueState(b, "p", Int64Codec{}, panicCodec{})
		t.Fatalf("registration returned %v, want a panic", err)
		return nil
	}
	if got := register(1); got != "negative value -1040" {
		t.Fatalf("sequential: panic %v", got)
	}
	for range 20 {
		if got := register(testRestoreWorkers); got != "negative value -1040" {
			t.Fatalf("parallel: panic %v, want the sequential path's (key group 40)", got)
		}
	}
}

// stackState is a registered state whose load records whether it ran on the
// goroutine that called loadParts (the test function is on its stack) or on
// a worker.
type stackState struct {
	caller  string // the test function's name
	loads   []int  // key groups loaded on the caller's goroutine, in order
	workers atomic.Int64
}

func (s *stackState) info() *stateInfo              { return &stateInfo{name: "fake"} }
func (s *stackState) freeze() frozenState           { return nil }
func (s *stackState) writtenSince(int, uint64) bool { return true }
func (s *stackState) load(p restoredPart) error {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(1, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "."+s.caller) {
			s.loads = append(s.loads, p.kg)
			return nil
		}
		if !more {
			break
		}
	}
	s.workers.Add(1)
	return nil
}

// Below parallelRestoreMinEntries entries a state loads on the registering
// goroutine, in key-group order, skipping empty parts; from it on, on
// workers only.
func TestParallelRestoreThreshold(t *testing.T) {
	setRestoreWorkers(t, testRestoreWorkers)
	half := parallelRestoreMinEntries / 2
	s := &stackState{caller: "TestParallelRestoreThreshold"}
	parts := []restoredPart{{kg: 0, count: half}, {kg: 1}, {kg: 2, count: half - 1}}
	if err := loadParts(s, parts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.loads, []int{0, 2}) || s.workers.Load() != 0 {
		t.Fatalf("%d entries: loaded %v on the caller, %d on workers; want [0 2] on the caller", 2*half-1, s.loads, s.workers.Load())
	}
	s = &stackState{caller: "TestParallelRestoreThreshold"}
	parts[2].count = half
	if err := loadParts(s, parts); err != nil {
		t.Fatal(err)
	}
	if len(s.loads) != 0 || s.workers.Load() != 2 {
		t.Fatalf("%d entries: loaded %v on the caller, %d on workers; want both on workers", 2*half, s.loads, s.workers.Load())
	}
	// One worker: sequential whatever the size.
	setRestoreWorkers(t, 1)
	s = &stackState{caller: "TestParallelRestoreThreshold"}
	if err := loadParts(s, parts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.loads, []int{0, 2}) || s.workers.Load() != 0 {
		t.Fatalf("one worker: loaded %v on the caller, %d on workers; want [0 2] on the caller", s.loads, s.workers.Load())
	}
}

// orderState is a registered state whose load fails for key groups 5 and 6,
// and whose load of 5 returns only after that of 6 has failed: the parallel
// path sees the higher key group's failure first.
type orderState struct {
	sixFailed chan struct{}
}

func (s *orderState) info() *stateInfo              { return &stateInfo{name: "fake"} }
func (s *orderState) freeze() frozenState           { return nil }
func (s *orderState) writtenSince(int, uint64) bool { return true }
func (s *orderState) load(p restoredPart) error {
	switch p.kg {
	case 5:
		select {
		case <-s.sixFailed:
		case <-time.After(10 * time.Second):
			return errors.New("key group 6 was not loaded while 5 was loading")
		}
		return errors.New("key group 5 failed")
	case 6:
		close(s.sixFailed)
		return errors.New("key group 6 failed")
	}
	return nil
}

// The error returned is the lowest failing key group's, not the first to
// fail in time.
func TestParallelRestoreLowestErrorWinsOverEarlierOne(t *testing.T) {
	setRestoreWorkers(t, testRestoreWorkers)
	parts := make([]restoredPart, 16)
	for i := range parts {
		parts[i] = restoredPart{kg: i, count: parallelRestoreMinEntries}
	}
	s := &orderState{sixFailed: make(chan struct{})}
	if err := loadParts(s, parts); err == nil || err.Error() != "key group 5 failed" {
		t.Fatalf("loadParts = %v, want key group 5's error", err)
	}
}
