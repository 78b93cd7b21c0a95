package kvtable

import (
	"encoding/binary"
	"fmt"
	"iter"
)

// Arena addresses are 32 bits: chunk index << posBits | position in chunk.
const (
	posBits = 20
	posMask = 1<<posBits - 1
	// maxStart bounds the position an entry may start at in its chunk, so
	// the position fits its posBits; the entry itself may run past it (a
	// big entry in a chunk of its own).
	maxStart = 1 << posBits

	defaultMinChunk = 256
	defaultMaxChunk = 1 << posBits
	// defaultMaxChunks is the number of chunk indexes an address holds.
	defaultMaxChunks = 1 << (32 - posBits)
	// defaultMinCompact is the dead bytes below which a table is not
	// compacted, whatever its live bytes: tiny tables are left alone.
	defaultMinCompact = 1 << 10

	// tagSize is the size of the tag at the front of every entry.
	tagSize = 4
)

func (c config) chunkMin() int {
	if c.minChunk == 0 {
		return defaultMinChunk
	}
	return c.minChunk
}

func (c config) chunkMax() int {
	if c.maxChunk == 0 {
		return defaultMaxChunk
	}
	return c.maxChunk
}

func (c config) chunksMax() int {
	if c.maxChunks == 0 {
		return defaultMaxChunks
	}
	return c.maxChunks
}

func (c config) offHeapFrom() int {
	if c.offHeapMin == 0 {
		return defaultOffHeapMin
	}
	return c.offHeapMin
}

func (c config) compactMin() int {
	if c.minCompact == 0 {
		return defaultMinCompact
	}
	return c.minCompact
}

// entrySize returns the arena size of an entry with these lengths.
func entrySize(klen, vlen int) int {
	return tagSize + uvarintLen(klen) + uvarintLen(vlen) + klen + vlen
}

func uvarintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// parseEntry decodes the header of the entry at c[p:]: the key is
// c[ks:ks+kl], the value the vl bytes after it. One-byte lengths (keys and
// values under 128 bytes) take the fast path.
func parseEntry(c []byte, p int) (ks, kl, vl int) {
	if x := binary.LittleEndian.Uint16(c[p+tagSize:]); x&0x8080 == 0 {
		return p + tagSize + 2, int(x & 0xff), int(x >> 8)
	}
	return parseEntrySlow(c, p)
}

func parseEntrySlow(c []byte, p int) (ks, kl, vl int) {
	p += tagSize
	x, n := binary.Uvarint(c[p:])
	kl, p = int(x), p+n
	x, n = binary.Uvarint(c[p:])
	vl, p = int(x), p+n
	return p, kl, vl
}

// locate returns the chunk and position of addr.
func (t *Table) locate(addr uint32) ([]byte, int) {
	return t.chunks[addr>>posBits], int(addr & posMask)
}

// entry returns the key and value of the entry at addr, each with its
// capacity cut at its length so an append by the caller cannot overwrite the
// next bytes.
func (t *Table) entry(addr uint32) (key, value []byte) {
	c, p := t.locate(addr)
	ks, kl, vl := parseEntry(c, p)
	vs := ks + kl
	return c[ks:vs:vs], c[vs : vs+vl : vs+vl]
}

// end returns the address the next append would get if it fit in the last
// chunk: every entry already in the arena is below it, every later one at or
// above it. It is 64 bits: past a full last chunk it is the next chunk's
// first address, which overflows 32 bits for the last chunk index.
func (t *Table) end() uint64 {
	if len(t.chunks) == 0 {
		return 0
	}
	return uint64(len(t.chunks)-1)<<posBits + uint64(min(t.fill, maxStart))
}

// fits reports whether an entry of size bytes can start at p in a chunk of
// capacity c.
func fits(c, p, size int) bool { return p < maxStart && size <= c-p }

// appendEntry appends an entry and returns its address and size. It fails
// with ErrFull when a new chunk is needed and the chunk indexes are used up.
func (t *Table) appendEntry(tag uint32, key, value []byte) (uint32, error) {
	size := entrySize(len(key), len(value))
	if len(t.chunks) == 0 || !fits(len(t.chunks[len(t.chunks)-1]), t.fill, size) {
		if err := t.newChunk(size); err != nil {
			return 0, err
		}
	}
	ci := len(t.chunks) - 1
	c, p := t.chunks[ci], t.fill
	binary.LittleEndian.PutUint32(c[p:], tag)
	q := p + tagSize
	q += binary.PutUvarint(c[q:], uint64(len(key)))
	q += binary.PutUvarint(c[q:], uint64(len(value)))
	q += copy(c[q:], key)
	copy(c[q:], value)
	t.fill += size
	t.used += size
	return uint32(ci)<<posBits | uint32(p), nil
}

// arenaEntries yields the address and size of every entry of the arena,
// live or dead, in address order. It reads a chunk's data end when it
// reaches the chunk, so the caller may move entries into chunks it has
// walked and set their ends (slide).
func (t *Table) arenaEntries() iter.Seq2[uint32, int] {
	return func(yield func(addr uint32, size int) bool) {
		for i, c := range t.chunks {
			end := t.fill
			if i < len(t.ends) {
				end = int(t.ends[i])
			}
			for p := 0; p < end; {
				ks, kl, vl := parseEntry(c, p)
				if !yield(uint32(i)<<posBits|uint32(p), ks-p+kl+vl) {
					return
				}
				p = ks + kl + vl
			}
		}
	}
}

// newChunk starts a chunk that can hold an entry of size bytes. Chunks grow
// with the arena, an eighth of its capacity each, from minChunk (a table
// with a few entries stays small) to maxChunk: the unused tail of the last
// chunk stays around 6% of the arena, and a table of a million 30-byte
// entries has under 90 chunks. An entry larger than that gets a chunk of its
// own size.
func (t *Table) newChunk(size int) error {
	if len(t.chunks) >= t.cfg.chunksMax() {
		return fmt.Errorf("%w: %d chunks, %d bytes of arena", ErrFull, len(t.chunks), t.chunkBytes)
	}
	if len(t.chunks) > 0 {
		last := t.chunks[len(t.chunks)-1]
		t.ends = append(t.ends, uint32(min(t.fill, len(last))))
		t.used += len(last) - t.fill
	}
	n := max(min(t.chunkBytes/8, t.cfg.chunkMax()), t.cfg.chunkMin())
	n = roundChunk(n)
	n = max(min(n, t.cfg.chunkMax()), size)
	var c []byte
	if n >= t.cfg.offHeapFrom() {
		c, _ = t.mapChunk(n)
	}
	if c == nil {
		c = make([]byte, n)
	}
	t.chunks = append(t.chunks, c)
	t.chunkBytes += n
	t.fill = 0
	return nil
}

// roundChunk rounds n up to a size the Go allocator serves without waste:
// a power of two up to 32 KiB (small size classes), else whole 8 KiB pages.
func roundChunk(n int) int {
	if n <= 32<<10 {
		p := 1
		for p < n {
			p <<= 1
		}
		return p
	}
	return (n + 8<<10 - 1) &^ (8<<10 - 1)
}

// slide compacts the arena in place: it walks every entry in address order
// and moves each live one down to the next free address, repointing its
// slot, which it finds by the entry's tag and old address (a dead entry has
// no slot). An entry never moves up (the destination never
// passes the source: in the source's own chunk an entry that fits at the
// source fits lower down), so no live entry is overwritten before it is
// moved. Chunks left empty at the end are dropped. The caller must ensure
// that no Frozen view can read the arena or the slots.
func (t *Table) slide() {
	if len(t.chunks) == 0 {
		return
	}
	dc, dp := 0, 0 // destination chunk and position
	// The frozen mark moves with the entries: to the new address of the
	// first live entry at or above it (the order is kept), else to the
	// new end. So the entries above it are still exactly those written
	// since the last Mark (see Frozen.Changes).
	mark, marked := t.frozenMark, t.frozenMark == 0
	for addr, size := range t.arenaEntries() {
		sc, sp := int(addr>>posBits), int(addr&posMask)
		c := t.chunks[sc]
		tag := binary.LittleEndian.Uint32(c[sp:])
		if j, ok := t.findAddr(tag, addr); ok {
			for !fits(len(t.chunks[dc]), dp, size) {
				t.ends[dc] = uint32(dp) // dc < sc here: see above
				dc++
				dp = 0
			}
			if !marked && uint64(addr) >= t.frozenMark {
				mark, marked = uint64(dc)<<posBits|uint64(dp), true
			}
			copy(t.chunks[dc][dp:dp+size], c[sp:sp+size])
			t.slots[j] = slotOf(tag, uint32(dc)<<posBits|uint32(dp))
			dp += size
		}
	}
	// Drop the chunks after the destination: unmapped, or for the garbage
	// collector.
	for i := dc + 1; i < len(t.chunks); i++ {
		t.chunkBytes -= len(t.chunks[i])
		t.dropChunk(t.chunks[i])
		t.chunks[i] = nil
	}
	t.chunks = t.chunks[:dc+1]
	t.ends = t.ends[:dc]
	t.fill = dp
	t.used = dp
	if t.frozenMark = mark; !marked {
		t.frozenMark = t.end()
	}
	for _, c := range t.chunks[:dc] {
		t.used += len(c)
	}
}
