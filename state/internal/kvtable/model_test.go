package kvtable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The model test drives a Table with random operations mirrored into a
// map[string][]byte, and checks every Frozen view against a copy of the model
// taken at its Freeze. The same driver runs on fuzzed bytes (FuzzTable).
//
// README.md lists the mutants tried against it (skipping the slot copy after
// Freeze, compacting with a view live, writing a frozen entry in place, a
// non-idempotent Release, Robin Hood order and deletion errors, ...) and the
// tests that caught each.

var seeds = flag.Int("kvtable.seeds", 3000, "seeds for TestModel")

// source yields the driver's choices: a seeded random generator, or fuzz
// bytes.
type source interface {
	// intn returns a choice in [0, n).
	intn(n int) int
	// done reports that the source is exhausted (fuzz bytes only).
	done() bool
}

type randSource struct{ r *rand.Rand }

func (s randSource) intn(n int) int { return s.r.IntN(n) }
func (randSource) done() bool       { return false }

// byteSource reads choices from fuzz input, one byte each (two for n > 256),
// and yields 0 once it runs out.
type byteSource struct {
	b   []byte
	off int
}

func (s *byteSource) intn(n int) int {
	if n <= 1 {
		return 0
	}
	var x int
	for range 1 + (n-1)/256 {
		x <<= 8
		if s.off < len(s.b) {
			x |= int(s.b[s.off])
			s.off++
		}
	}
	return x % n
}

func (s *byteSource) done() bool { return s.off >= len(s.b) }

// view is a live Frozen view with the model as of its Freeze.
type view struct {
	f     *Frozen
	model map[string][]byte
}

type driver struct {
	tb    testing.TB
	src   source
	tab   *Table
	hash  func([]byte) uint64
	model map[string][]byte
	keys  [][]byte
	views []view
	// released are views already released: Release again must be a no-op.
	released []*Frozen
	log      []string // recent operations, for failure messages
	desc     string   // hash function and geometry, for failure messages
	ck       checker
}

// hash functions, chosen per seed: a good one, and degenerate ones whose
// collisions exercise the key comparisons behind equal tags.
var hashes = []struct {
	name string
	fn   func([]byte) uint64
}{
	{"fnv-splitmix", func(k []byte) uint64 { return splitmix(fnv(k)) }},
	{"three-values", func(k []byte) uint64 { return fnv(k) % 3 }},
	{"constant", func([]byte) uint64 { return 42 }},
	{"raw-prefix", func(k []byte) uint64 {
		var b [8]byte
		copy(b[:], k)
		return binary.LittleEndian.Uint64(b[:]) // weak: shared prefixes collide
	}},
}

func fnv(k []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range k {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// splitmix is the splitmix64 finalizer the engine hashes integers with
// (state.hashUint64).
func splitmix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// newDriver builds a table with a geometry drawn from src (tiny chunks so
// chunk boundaries, big entries, ErrFull and compaction happen within a few
// hundred operations) and a key pool of 1–64 keys of 0–40 bytes.
func newDriver(tb testing.TB, src source) *driver {
	d := &driver{tb: tb, src: src, model: map[string][]byte{}}
	h := hashes[src.intn(len(hashes))]
	d.hash = h.fn
	d.tab = &Table{}
	d.tab.cfg = config{
		minChunk:   []int{16, 64, 256}[src.intn(3)],
		maxChunk:   []int{64, 128, 1024}[src.intn(3)],
		maxChunks:  []int{0, 0, 0, 6}[src.intn(4)],
		minCompact: []int{1, 64, 0}[src.intn(3)],
		offHeapMin: []int{1, 64, 0}[src.intn(3)], // off the heap: every chunk, some, none
	}
	d.desc = fmt.Sprintf("hash %s, config %+v", h.name, d.tab.cfg)
	seen := map[string]bool{}
	for range 1 + src.intn(64) {
		n := 1 + src.intn(40)
		switch src.intn(64) {
		case 0, 1:
			n = 0
		case 2:
			n = 128 + src.intn(72) // a two-byte length
		}
		k := d.bytes(n)
		if !seen[string(k)] {
			seen[string(k)] = true
			d.keys = append(d.keys, k)
		}
	}
	return d
}

func (d *driver) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(d.src.intn(256))
	}
	return b
}

func (d *driver) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
	if len(d.log) > 40 {
		d.log = d.log[1:]
	}
}

func (d *driver) fatalf(format string, args ...any) {
	d.tb.Helper()
	msg := fmt.Sprintf(format, args...)
	d.tb.Fatalf("%s\n%s; last operations:\n  %s", msg, d.desc, joinLines(d.log))
}

func joinLines(l []string) string {
	var b bytes.Buffer
	for i, s := range l {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// run performs up to steps operations, checking the table after each, then
// checks and releases every view and checks that the table compacts.
func (d *driver) run(steps int) {
	for i := 0; i < steps && !d.src.done(); i++ {
		d.step()
		d.checkTable()
	}
	for _, v := range d.views {
		d.checkView(v)
		v.f.Release()
	}
	d.views = nil
	// With every view released, rewriting each key once must leave an
	// arena whose dead bytes are under its live bytes, or small.
	for _, k := range d.keys {
		if v, ok := d.model[string(k)]; ok {
			d.put(k, append([]byte{}, v...))
		}
	}
	if len(d.model) == 0 {
		k := d.key()
		d.put(k, nil)
		d.tab.Delete(d.hash(k), k)
		delete(d.model, string(k))
	}
	d.checkTable()
	if dead := d.tab.used - d.tab.live - d.tab.deadBase; dead >= max(d.tab.live, d.tab.cfg.compactMin()) {
		d.fatalf("no compaction with every view released: %d dead bytes since the last (%d then), %d live, %d views",
			dead, d.tab.deadBase, d.tab.live, d.tab.views.Load())
	}
}

func (d *driver) key() []byte { return d.keys[d.src.intn(len(d.keys))] }

func (d *driver) step() {
	switch op := d.src.intn(20); {
	case op < 7:
		k := d.key()
		n := d.src.intn(65)
		if d.src.intn(32) == 0 {
			n = 128 + d.src.intn(200) // a two-byte length, a big entry
		}
		if old, ok := d.model[string(k)]; ok && d.src.intn(2) == 0 {
			n = len(old) // same length: the in-place path
		}
		d.put(k, d.bytes(n))
	case op < 10:
		k := d.key()
		d.logf("modify %x", k)
		v, ok, err := d.tab.Modify(d.hash(k), k)
		if err != nil {
			if !errors.Is(err, ErrFull) {
				d.fatalf("Modify: %v", err)
			}
			ok = false
			v, _ = d.tab.Get(d.hash(k), k)
			if !bytes.Equal(v, d.model[string(k)]) {
				d.fatalf("Modify failed with %v and changed the value", err)
			}
			return
		}
		want, wok := d.model[string(k)]
		if ok != wok || !bytes.Equal(v, want) {
			d.fatalf("Modify %x = %x, %v; want %x, %v", k, v, ok, want, wok)
		}
		if ok {
			nv := d.bytes(len(v))
			copy(v, nv)
			d.model[string(k)] = nv
		}
	case op < 13:
		k := d.key()
		v, ok := d.tab.Get(d.hash(k), k)
		want, wok := d.model[string(k)]
		d.logf("get %x", k)
		if ok != wok || !bytes.Equal(v, want) {
			d.fatalf("Get %x = %x, %v; want %x, %v", k, v, ok, want, wok)
		}
		if ok && cap(v) != len(v) {
			d.fatalf("Get returned a value with spare capacity %d > %d", cap(v), len(v))
		}
	case op < 16:
		k := d.key()
		d.logf("delete %x", k)
		_, want := d.model[string(k)]
		if got := d.tab.Delete(d.hash(k), k); got != want {
			d.fatalf("Delete %x = %v, want %v", k, got, want)
		}
		delete(d.model, string(k))
	case op < 17:
		if len(d.views) < 4 {
			d.logf("freeze (%d live views)", len(d.views))
			d.views = append(d.views, view{d.tab.Freeze(), maps.Clone(d.model)})
		}
	case op < 18:
		if len(d.views) > 0 {
			i := d.src.intn(len(d.views))
			d.logf("release view %d of %d", i, len(d.views))
			d.views[i].f.Release()
			if d.src.intn(4) == 0 {
				d.views[i].f.Release() // idempotent
			}
			d.released = append(d.released, d.views[i].f)
			d.views = append(d.views[:i], d.views[i+1:]...)
		} else if len(d.released) > 0 {
			d.logf("release a released view again")
			f := d.released[d.src.intn(len(d.released))]
			f.Release()
			for k := range f.All() {
				d.fatalf("a released view yields %x", k)
			}
		}
	default:
		if len(d.views) > 0 {
			i := d.src.intn(len(d.views))
			d.logf("iterate view %d of %d", i, len(d.views))
			d.checkView(d.views[i])
		}
	}
	if d.tab.Len() != len(d.model) {
		d.fatalf("Len = %d, model has %d", d.tab.Len(), len(d.model))
	}
}

func (d *driver) put(k, v []byte) {
	d.logf("put %x = %x", k, v)
	if err := d.tab.Put(d.hash(k), k, v); err != nil {
		if !errors.Is(err, ErrFull) {
			d.fatalf("Put: %v", err)
		}
		return // the table is unchanged: checkTable compares it to the model
	}
	d.model[string(k)] = v
}

// checkView compares a view with the model as of its Freeze: every entry
// once, none missing, none extra.
func (d *driver) checkView(v view) {
	if v.f.Len() != len(v.model) {
		d.fatalf("view Len = %d, want %d", v.f.Len(), len(v.model))
	}
	seen := map[string]bool{}
	stop := -1 // stop iterating early sometimes: the iterator must honour it
	if d.src.intn(8) == 0 {
		stop = d.src.intn(len(v.model) + 1)
	}
	for k, val := range v.f.All() {
		if len(seen) == stop {
			return
		}
		if seen[string(k)] {
			d.fatalf("view yields %x twice", k)
		}
		seen[string(k)] = true
		want, ok := v.model[string(k)]
		if !ok || !bytes.Equal(val, want) {
			d.fatalf("view has %x = %x; at Freeze it was %x (present %v)", k, val, want, ok)
		}
	}
	if len(seen) != len(v.model) {
		d.fatalf("view yields %d entries, want %d", len(seen), len(v.model))
	}
}

// checkTable checks the table's invariants and compares it to the model.
func (d *driver) checkTable() {
	if err := d.ck.check(d.tab); err != nil {
		d.fatalf("invariant: %v", err)
	}
	for _, k := range d.keys {
		v, ok := d.tab.Get(d.hash(k), k)
		want, wok := d.model[string(k)]
		if ok != wok || !bytes.Equal(v, want) {
			d.fatalf("Get %x = %x, %v; model has %x, %v", k, v, ok, want, wok)
		}
	}
	// The owner's iterator yields exactly the model's entries, each once.
	seen := map[string]bool{}
	for k, v := range d.tab.All() {
		if seen[string(k)] {
			d.fatalf("All yields %x twice", k)
		}
		seen[string(k)] = true
		if want, ok := d.model[string(k)]; !ok || !bytes.Equal(v, want) {
			d.fatalf("All has %x = %x; the model has %x (present %v)", k, v, want, ok)
		}
	}
	if len(seen) != len(d.model) {
		d.fatalf("All yields %d entries, want %d", len(seen), len(d.model))
	}
}

// checkInvariants checks a table's structure: the Robin Hood order, entry
// count, that every slot references a whole entry carrying its tag, that no
// two slots share an entry, that each chunk's data is a sequence of whole
// entries, and the byte accounting.
func checkInvariants(t *Table) error { return new(checker).check(t) }

// checker keeps checkInvariants' scratch maps between calls.
type checker struct {
	starts map[uint32]int // entry address → size, from a walk of the arena
	refs   map[uint32]bool
}

func (ck *checker) check(t *Table) error {
	if ck.starts == nil {
		ck.starts, ck.refs = map[uint32]int{}, map[uint32]bool{}
	}
	clear(ck.starts)
	clear(ck.refs)
	if t.off != nil {
		// Off-heap bookkeeping: exactly the table's mapped chunks, its
		// slot array if mapped and the retired slot arrays, each once (a
		// dropped one unmapped and forgotten).
		mapped := 0
		for _, c := range t.chunks {
			if _, ok := t.off.chunks[&c[0]]; ok {
				mapped++
			}
		}
		if len(t.slots) > 0 {
			if _, ok := t.off.chunks[(*byte)(unsafe.Pointer(&t.slots[0]))]; ok {
				mapped++
			}
		}
		if t.spare != nil {
			if _, ok := t.off.chunks[&t.spare[0]]; !ok {
				return fmt.Errorf("the spare slot array is not registered off the heap")
			}
			if len(t.slots) > 0 && &t.spare[0] == (*byte)(unsafe.Pointer(&t.slots[0])) {
				return fmt.Errorf("the table's slot array is also its spare")
			}
			mapped++
		}
		for _, r := range t.retired {
			if t.spare != nil && &r[0] == &t.spare[0] {
				return fmt.Errorf("the spare slot array is also retired")
			}
			if _, ok := t.off.chunks[&r[0]]; !ok {
				return fmt.Errorf("a retired slot array is not registered off the heap")
			}
			if len(t.slots) > 0 && &r[0] == (*byte)(unsafe.Pointer(&t.slots[0])) {
				return fmt.Errorf("the table's slot array is also retired")
			}
			mapped++
		}
		if mapped != len(t.off.chunks) {
			return fmt.Errorf("%d chunks registered off the heap, %d of them still the table's", len(t.off.chunks), mapped)
		}
	}
	ns := len(t.slots)
	if ns != 0 && (ns < minSlots || ns&(ns-1) != 0 || 1<<(32-int(t.shift)) != ns) {
		return fmt.Errorf("slot array of %d slots, shift %d", ns, t.shift)
	}
	if ns == 0 {
		if t.n != 0 {
			return fmt.Errorf("n = %d without slots", t.n)
		}
		return nil
	}
	if t.n > maxLoad(ns) {
		return fmt.Errorf("n = %d over the load limit of %d slots", t.n, ns)
	}
	starts, refs := ck.starts, ck.refs
	if len(t.ends) != max(len(t.chunks)-1, 0) {
		return fmt.Errorf("%d ends for %d chunks", len(t.ends), len(t.chunks))
	}
	used, chunkBytes := 0, 0
	for ci, c := range t.chunks {
		end := t.fill
		if ci < len(t.ends) {
			end = int(t.ends[ci])
			used += len(c)
		} else {
			used += t.fill
		}
		chunkBytes += len(c)
		if end > len(c) {
			return fmt.Errorf("chunk %d: data end %d past its %d bytes", ci, end, len(c))
		}
		for p := 0; p < end; {
			if p >= maxStart {
				return fmt.Errorf("chunk %d: entry at %d, past the addressable start", ci, p)
			}
			ks, kl, vl := parseEntry(c, p)
			size := ks - p + kl + vl
			if p+size > end {
				return fmt.Errorf("chunk %d: entry at %d of %d bytes runs past the data end %d", ci, p, size, end)
			}
			starts[uint32(ci)<<posBits|uint32(p)] = size
			p += size
		}
	}
	if used != t.used || chunkBytes != t.chunkBytes {
		return fmt.Errorf("used %d, chunk bytes %d; recorded %d, %d", used, chunkBytes, t.used, t.chunkBytes)
	}
	mask := uint32(ns - 1)
	n, live := 0, 0
	for j, s := range t.slots {
		if s == 0 {
			continue
		}
		n++
		addr, tag := slotAddr(s), slotTag(s)
		size, ok := starts[addr]
		if !ok {
			return fmt.Errorf("slot %d references %#x, not an entry", j, addr)
		}
		if refs[addr] {
			return fmt.Errorf("two slots reference entry %#x", addr)
		}
		refs[addr] = true
		live += size
		c, p := t.locate(addr)
		if got := binary.LittleEndian.Uint32(c[p:]); got != tag {
			return fmt.Errorf("slot %d has tag %#x, its entry %#x", j, tag, got)
		}
		dist := (uint32(j) - tag>>t.shift) & mask
		if dist > 0 {
			prev := t.slots[(uint32(j)-1)&mask]
			if prev == 0 {
				return fmt.Errorf("slot %d is %d from home after an empty slot", j, dist)
			}
			if pd := (uint32(j) - 1 - slotTag(prev)>>t.shift) & mask; pd+1 < dist {
				return fmt.Errorf("slot %d is %d from home after a slot %d from home (Robin Hood order)", j, dist, pd)
			}
		}
		k, _ := t.entry(addr)
		if fj, _, _, _, found := t.lookup(tag, k); !found || fj != uint32(j) {
			return fmt.Errorf("find of slot %d's key gives slot %d, %v", j, fj, found)
		}
	}
	if n != t.n {
		return fmt.Errorf("%d non-empty slots, n = %d", n, t.n)
	}
	if live != t.live {
		return fmt.Errorf("live bytes %d, recorded %d", live, t.live)
	}
	if t.frozenMark > t.end() {
		return fmt.Errorf("frozen mark %#x past the arena end %#x", t.frozenMark, t.end())
	}
	return nil
}

// TestModel runs the driver on -kvtable.seeds seeded random sequences of 300
// operations each.
func TestModel(t *testing.T) {
	n := *seeds
	if testing.Short() {
		n /= 10
	}
	for seed := range n {
		ok := t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			d := newDriver(t, randSource{rand.New(rand.NewPCG(uint64(seed), 0x6b76))})
			d.run(300)
		})
		if !ok {
			t.Fatalf("reproduce with: go test ./state/internal/kvtable -run 'TestModel/seed=%d$'", seed)
		}
	}
}

// FuzzTable drives the model test's operations from fuzz bytes: the first
// bytes choose the hash function, geometry and key pool, the rest the
// operations.
func FuzzTable(f *testing.F) {
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDriver(t, &byteSource{b: data})
		d.run(1000)
	})
}
