package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func encode(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// populated returns a full-range workload after n random operations, with its model.
func populated(t testing.TB, seed uint64, n, keys int) (*workload, *model) {
	w := mustWorkload(t, fullBackend("op"))
	m := newModel()
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		w.step(r, m, keys)
	}
	if d := diff(w.contents(), m); d != "" {
		t.Fatalf("workload diverged from its model before any snapshot: %s", d)
	}
	return w, m
}

func TestSnapshotRoundTrip(t *testing.T) {
	w, m := populated(t, 1, 5000, 300)
	data := encode(t, w.b.Snapshot())
	got := restoreInto(t, "op", DefaultMaxParallelism, w.b.kgRange, data)
	if d := diff(got.contents(), m); d != "" {
		t.Fatal(d)
	}
	// The restored backend snapshots to the same content again.
	again := restoreInto(t, "op", DefaultMaxParallelism, w.b.kgRange, encode(t, got.b.Snapshot()))
	if d := diff(again.contents(), m); d != "" {
		t.Fatal(d)
	}
}

func TestEmptySnapshotRoundTrip(t *testing.T) {
	b := fullBackend("op")
	data := encode(t, b.Snapshot())
	info, err := Inspect(data)
	if err != nil || len(info.Sections) != 0 {
		t.Fatalf("Inspect(empty) = %+v, %v", info, err)
	}
	w := restoreInto(t, "op", DefaultMaxParallelism, b.kgRange, data)
	if w.contents().size() != 0 {
		t.Fatal("restored an empty snapshot into non-empty state")
	}
}

// Copy-on-write: every kind of write after Snapshot() leaves the snapshot as
// it was at the call, including writes into a list's spare capacity and into a
// map state's existing user map.
func TestSnapshotIsUnaffectedByLaterWrites(t *testing.T) {
	w, m := populated(t, 2, 3000, 100)
	snap := w.b.Snapshot()
	want := m.clone()
	// Hit every existing key with every kind of write.
	for k := range m.values {
		w.values.Update(k, -1)
		w.values.Clear(k)
	}
	for k := range m.maps {
		w.maps.Put(k, "u0", -1)
		w.maps.Put(k, "new", -1)
		w.maps.Remove(k, "u1")
	}
	for k := range m.lists {
		w.lists.Add(k, -1) // into spare capacity when there is some
	}
	if err := w.timers.Advance(25, func(int64, int64, int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for k := range m.timers {
		w.timers.Delete(k.key, k.ns, k.ts)
	}
	w.timers.Register(5, 0, 5)
	for k := range 50 {
		w.values.Update(fmt.Sprint("fresh", k), 1)
	}
	got := restoreInto(t, "op", DefaultMaxParallelism, w.b.kgRange, encode(t, snap))
	if d := diff(got.contents(), want); d != "" {
		t.Fatal(d)
	}
}

// The snapshot is encoded on other goroutines while the task goroutine keeps
// writing the same keys and taking further snapshots. Each encoded snapshot,
// restored, holds exactly the state as of its Snapshot() call. Run with -race:
// any write to a table an Encode reads is a reported race.
func TestEncodeConcurrentWithWrites(t *testing.T) {
	w, m := populated(t, 3, 20000, 500)
	r := rand.New(rand.NewPCG(4, 4))
	type result struct {
		data []byte
		err  error
		want *model
		n    int
	}
	results := make(chan result, 16)
	var wg sync.WaitGroup
	const rounds = 8
	for round := range rounds {
		snap := w.b.Snapshot()
		want := m.clone()
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := snap.Encode()
			results <- result{data, err, want, round}
		}()
		// Keep writing while the encode runs.
		for range 3000 {
			w.step(r, m, 500)
		}
	}
	wg.Wait()
	close(results)
	for res := range results {
		if res.err != nil {
			t.Fatalf("snapshot %d: %v", res.n, res.err)
		}
		got := restoreInto(t, "op", DefaultMaxParallelism, w.b.kgRange, res.data)
		if d := diff(got.contents(), res.want); d != "" {
			t.Fatalf("snapshot %d does not hold the state as of its Snapshot() call: %s", res.n, d)
		}
	}
	if d := diff(w.contents(), m); d != "" {
		t.Fatalf("live state diverged: %s", d)
	}
}

// rescale restores the given snapshots into p backends covering [0, maxP) and
// checks that every entry lands in exactly one of them and they hold want.
func rescale(t *testing.T, maxP, p int, want *model, snapshots ...[]byte) {
	t.Helper()
	union := newModel()
	total := 0
	for s := range p {
		r := KeyGroupRangeFor(maxP, p, s)
		w := restoreInto(t, "op", maxP, r, snapshots...)
		c := w.contents()
		for k := range c.values {
			if !r.Contains(KeyGroupFor(HashKey(k), maxP)) {
				t.Fatalf("p=%d subtask %d %v holds value key %q of another key group", p, s, r, k)
			}
		}
		total += c.size()
		union.merge(c)
	}
	if total != union.size() {
		t.Fatalf("p=%d: %d entries restored, %d distinct: some landed twice", p, total, union.size())
	}
	if d := diff(union, want); d != "" {
		t.Fatalf("p=%d: %s", p, d)
	}
}

func TestRescaleFromOneToMany(t *testing.T) {
	w, m := populated(t, 5, 8000, 400)
	data := encode(t, w.b.Snapshot())
	for _, p := range []int{1, 2, 3, 7} {
		rescale(t, DefaultMaxParallelism, p, m, data)
	}
}

// Three subtasks each snapshot their own range; two (and four) new subtasks
// each restore from all the files, and from only the files that overlap them.
func TestRescaleFromManyToMany(t *testing.T) {
	const maxP, oldP = 64, 3
	want := newModel()
	var files [][]byte
	ranges := make([]KeyGroupRange, oldP)
	for s := range oldP {
		ranges[s] = KeyGroupRangeFor(maxP, oldP, s)
		w := mustWorkload(t, NewBackend("op", maxP, ranges[s]))
		m := newModel()
		r := rand.New(rand.NewPCG(6, uint64(s)))
		for range 6000 {
			w.step(r, m, 300) // skips keys the subtask does not own
		}
		if w.b.Err() != nil {
			t.Fatal(w.b.Err())
		}
		want.merge(m)
		files = append(files, encode(t, w.b.Snapshot()))
	}
	for _, p := range []int{1, 2, 4, 5} {
		rescale(t, maxP, p, want, files...)
	}
	// Only the overlapping files.
	union := newModel()
	for s := range 2 {
		r := KeyGroupRangeFor(maxP, 2, s)
		var mine [][]byte
		for i, or := range ranges {
			if or.Start < r.End && r.Start < or.End {
				mine = append(mine, files[i])
			}
		}
		union.merge(restoreInto(t, "op", maxP, r, mine...).contents())
	}
	if d := diff(union, want); d != "" {
		t.Fatal(d)
	}
	// A missing file leaves key groups uncovered: an error, not silent loss.
	b := NewBackend("op", maxP, KeyGroupRange{0, maxP})
	err := b.Restore(files[0], files[2])
	if err == nil || !strings.Contains(err.Error(), ranges[1].String()) {
		t.Fatalf("restore with a missing file: %v, want an error naming %v", err, ranges[1])
	}
	// The same file twice (or files of overlapping ranges) is an error.
	if err := NewBackend("op", maxP, KeyGroupRange{0, maxP}).Restore(files[0], files[1], files[2], files[1]); err == nil {
		t.Fatal("restore with a duplicated file succeeded")
	}
}

// smallSnapshot returns an encoded snapshot with a few key groups.
func smallSnapshot(t testing.TB) ([]byte, *model) {
	w, m := populated(t, 7, 120, 12)
	return encode(t, w.b.Snapshot()), m
}

// Every single-byte corruption anywhere in the file is detected (by the
// header, section or index checksum, or the footer), with ErrCorrupt; a
// corruption inside a section names its key group.
func TestRestoreDetectsEveryFlippedByte(t *testing.T) {
	data, _ := smallSnapshot(t)
	info, err := Inspect(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Sections) < 3 {
		t.Fatalf("want several sections, got %d", len(info.Sections))
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		b := fullBackend("op")
		err := b.Restore(bad)
		if err == nil {
			t.Fatalf("flipping byte %d of %d went undetected", i, len(data))
		}
		if !IsCorrupt(err) {
			t.Fatalf("flipping byte %d: error %v does not wrap ErrCorrupt", i, err)
		}
		if !strings.Contains(err.Error(), `operator "op"`) {
			t.Fatalf("flipping byte %d: error %q does not name the operator", i, err)
		}
		for _, s := range info.Sections {
			if i >= s.Offset && i < s.Offset+s.Length {
				if want := fmt.Sprintf("key group %d:", s.KeyGroup); !strings.Contains(err.Error(), want) {
					t.Fatalf("flipping byte %d in the section of key group %d: error %q does not name it", i, s.KeyGroup, err)
				}
			}
		}
		if _, err := Inspect(bad); err == nil || !IsCorrupt(err) {
			t.Fatalf("Inspect missed the flip of byte %d: %v", i, err)
		}
	}
}

func TestRestoreDetectsTruncation(t *testing.T) {
	data, _ := smallSnapshot(t)
	for n := range len(data) {
		err := fullBackend("op").Restore(data[:n])
		if err == nil || !IsCorrupt(err) {
			t.Fatalf("truncated to %d of %d bytes: %v, want ErrCorrupt", n, len(data), err)
		}
	}
	// Truncation that keeps a valid footer shape is still caught: cut a
	// section out of the middle and fix nothing else.
	info, _ := Inspect(data)
	s := info.Sections[1]
	cut := slices.Concat(data[:s.Offset], data[s.Offset+s.Length:])
	if err := fullBackend("op").Restore(cut); err == nil || !IsCorrupt(err) {
		t.Fatalf("a snapshot missing a section: %v", err)
	}
}

// A section whose checksum is recomputed after damage (a bug, not bit rot)
// is still rejected when its entries do not decode, naming the state and key
// group, when the state is registered.
func TestRegisterReportsUndecodableEntries(t *testing.T) {
	b := fullBackend("op")
	v := must(NewValueState(b, "v", StringCodec{}, Int64Codec{}))
	v.Update("k", 1)
	data := encode(t, b.Snapshot())
	info, _ := Inspect(data)
	sec := info.Sections[0]
	// Make the payload's string length claim more bytes than there are:
	// the payload starts after its 8-byte length, which ends the state header.
	body := data[sec.Offset : sec.Offset+sec.Length-4]
	p := len(body) - sec.States[0].Bytes
	body[p] = 0x7f
	fixSectionCRC(data, sec)
	b2 := fullBackend("op")
	if err := b2.Restore(data); err != nil {
		t.Fatalf("restore (checksums valid): %v", err)
	}
	_, err := NewValueState(b2, "v", StringCodec{}, Int64Codec{})
	if err == nil || !IsCorrupt(err) {
		t.Fatalf("register over an undecodable payload: %v", err)
	}
	for _, want := range []string{`operator "op"`, `state "v"`, fmt.Sprintf("key group %d", sec.KeyGroup)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %s", err, want)
		}
	}
	if u := b2.Unclaimed(); !slices.Equal(u, []string{"v"}) {
		t.Errorf("a failed registration must leave the state unclaimed, Unclaimed() = %v", u)
	}
}

func fixSectionCRC(data []byte, s SectionInfo) {
	body := data[s.Offset : s.Offset+s.Length-4]
	crc := crc32c(body)
	data[s.Offset+s.Length-4] = byte(crc)
	data[s.Offset+s.Length-3] = byte(crc >> 8)
	data[s.Offset+s.Length-2] = byte(crc >> 16)
	data[s.Offset+s.Length-1] = byte(crc >> 24)
}

func TestSchemaMismatchIsDetected(t *testing.T) {
	w, _ := populated(t, 8, 500, 50)
	data := encode(t, w.b.Snapshot())
	check := func(what string, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, ErrStateMismatch) {
			t.Errorf("%s: %v, want ErrStateMismatch", what, err)
			return
		}
		for _, s := range want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not contain %s", what, err, s)
			}
		}
	}
	restored := func() *Backend {
		b := fullBackend("op")
		if err := b.Restore(data); err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, err := NewMapState(restored(), "values", StringCodec{}, StringCodec{}, Int64Codec{})
	check("value restored as map", err, `operator "op"`, `state "values"`, "value state", "map state")
	_, err = NewValueState(restored(), "values", StringCodec{}, Float64Codec{})
	check("value codec changed", err, `state "values"`, "float64")
	_, err = NewListState(restored(), "lists", StringCodec{}, JSONCodec[int64]())
	check("list codec changed", err, `state "lists"`, "json:int64")
	_, err = NewTimers(restored(), "timers", StringCodec{})
	check("timer key codec changed", err, `state "timers"`)
	check("max parallelism changed", NewBackend("op", 256, KeyGroupRange{0, 256}).Restore(data), "max parallelism 128", "256")
	check("operator changed", fullBackend("other").Restore(data), `"other"`, `"op"`)
}

// hashA and hashB have the same codec name but different hashes: what a
// changed HashKey method looks like on restore.
type hashA int64
type hashB int64

func (k hashA) HashKey() uint64 { return uint64(k) }
func (k hashB) HashKey() uint64 { return uint64(k) * 7919 }

type hkCodec[T ~int64] struct{}

func (hkCodec[T]) Name() string                  { return "hk" }
func (hkCodec[T]) Append(dst []byte, v T) []byte { return Int64Codec{}.Append(dst, int64(v)) }
func (hkCodec[T]) Decode(src []byte) (T, int, error) {
	v, n, err := Int64Codec{}.Decode(src)
	return T(v), n, err
}

func TestChangedKeyHashIsDetected(t *testing.T) {
	b := fullBackend("op")
	s := must(NewValueState(b, "v", hkCodec[hashA]{}, Int64Codec{}))
	for k := range hashA(100) {
		s.Update(k, int64(k))
	}
	data := encode(t, b.Snapshot())
	b2 := fullBackend("op")
	if err := b2.Restore(data); err != nil {
		t.Fatal(err)
	}
	_, err := NewValueState(b2, "v", hkCodec[hashB]{}, Int64Codec{})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), "hashes to key group") {
		t.Fatalf("restoring keys whose hash changed: %v", err)
	}
}

func TestUnclaimedStateIsReportedCarriedAndDroppable(t *testing.T) {
	w, m := populated(t, 9, 800, 60)
	data := encode(t, w.b.Snapshot())
	b := fullBackend("op")
	if err := b.Restore(data); err != nil {
		t.Fatal(err)
	}
	must(NewValueState(b, "values", StringCodec{}, Int64Codec{}))
	if u := b.Unclaimed(); !slices.Equal(u, []string{"lists", "maps", "timers"}) {
		t.Fatalf("Unclaimed() = %v", u)
	}
	// Not dropped: carried into the next snapshot unchanged.
	carried := encode(t, b.Snapshot())
	if d := diff(restoreInto(t, "op", DefaultMaxParallelism, b.kgRange, carried).contents(), m); d != "" {
		t.Fatalf("unclaimed state was not carried forward: %s", d)
	}
	// Dropped: gone from later snapshots.
	if got := b.DropUnclaimed(); !slices.Equal(got, []string{"lists", "maps", "timers"}) {
		t.Fatalf("DropUnclaimed() = %v", got)
	}
	info, err := Inspect(encode(t, b.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Sections {
		for _, st := range s.States {
			if st.Name != "values" {
				t.Fatalf("dropped state %q still in the snapshot", st.Name)
			}
		}
	}
}

func TestRestoreOrderRules(t *testing.T) {
	data, _ := smallSnapshot(t)
	b := fullBackend("op")
	must(NewValueState(b, "x", StringCodec{}, Int64Codec{}))
	if err := b.Restore(data); err == nil {
		t.Error("Restore after registration succeeded")
	}
	b = fullBackend("op")
	if err := b.Restore(data); err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(data); err == nil {
		t.Error("a second Restore succeeded")
	}
	// A failed Restore changes nothing.
	b = fullBackend("op")
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 1
	if err := b.Restore(data, bad); err == nil {
		t.Fatal("restore of a corrupt file succeeded")
	}
	if len(b.Unclaimed()) != 0 {
		t.Fatal("a failed Restore left restored state behind")
	}
}

func TestInspect(t *testing.T) {
	w, m := populated(t, 10, 400, 40)
	info, err := Inspect(encode(t, w.b.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Operator != "op" || info.MaxParallelism != DefaultMaxParallelism || info.KeyGroups != w.b.kgRange {
		t.Fatalf("header: %+v", info)
	}
	counts := map[string]int{}
	prev := -1
	for _, s := range info.Sections {
		if s.KeyGroup <= prev {
			t.Fatal("sections out of order")
		}
		prev = s.KeyGroup
		for _, st := range s.States {
			counts[st.Name] += st.Entries
		}
	}
	want := map[string]int{"values": len(m.values), "maps": len(m.maps), "lists": len(m.lists), "timers": len(m.timers)}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("Inspect counts %d %s entries, want %d", counts[k], k, v)
		}
	}
}

// A codec that panics (JSON cannot encode NaN) fails the encode with an error
// naming the state and key group, not the process.
func TestEncodeReportsCodecPanic(t *testing.T) {
	b := fullBackend("op")
	s := must(NewValueState(b, "ratio", StringCodec{}, JSONCodec[float64]()))
	s.Update("k", 0.5)
	s.Update("bad", nanValue())
	_, err := b.Snapshot().Encode()
	if err == nil || !strings.Contains(err.Error(), `state "ratio"`) || !strings.Contains(err.Error(), "key group") {
		t.Fatalf("Encode with an unencodable value: %v", err)
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

// Snapshot() does O(key groups × states) work, independent of entries: it
// allocates the same with 10 entries as with 100 000.
func TestSnapshotCostIndependentOfEntries(t *testing.T) {
	allocs := func(n int) float64 {
		b := fullBackend("op")
		s := must(NewValueState(b, "v", Int64Codec{}, Int64Codec{}))
		for k := range int64(n) {
			s.Update(k, k)
		}
		return testing.AllocsPerRun(20, func() { b.Snapshot() })
	}
	small, large := allocs(10), allocs(100_000)
	if small != large {
		t.Fatalf("Snapshot allocates %.0f times with 10 entries, %.0f with 100000", small, large)
	}
}

func FuzzRestore(f *testing.F) {
	data, _ := smallSnapshot(f)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("IGKS"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fullBackend("op")
		if err := b.Restore(data); err != nil {
			return
		}
		register4(b) // decoding must not panic either
		Inspect(data)
	})
}

// Payload decoding (behind the checksums, so FuzzRestore rarely reaches it)
// returns errors, never panics, on arbitrary bytes.
func FuzzDecodePayload(f *testing.F) {
	w, _ := populated(f, 11, 200, 10)
	snap := w.b.Snapshot()
	for _, st := range snap.states {
		for i := range w.b.kgRange.Len() {
			if n := st.count(i); n > 0 {
				f.Add(uint8(st.info().kind-1), uint8(i), uint8(n), st.appendEntries(nil, i))
				break
			}
		}
	}
	f.Fuzz(func(t *testing.T, kind, kg, count uint8, payload []byte) {
		w := mustWorkload(t, fullBackend("op"))
		p := restoredPart{kg: int(kg) % DefaultMaxParallelism, count: int(count), payload: payload}
		switch Kind(kind%4) + 1 {
		case KindValue:
			_ = w.values.load(p)
		case KindMap:
			_ = w.maps.load(p)
		case KindList:
			_ = w.lists.load(p)
		case KindTimers:
			_ = w.timers.load(p)
		}
	})
}
