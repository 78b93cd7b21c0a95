package kvtable

import (
	"encoding/binary"
	"fmt"
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

func (c config) compactMin() int {
	if c.minCompact == 0 {
		return defaultMinCompact
	}
	return c.minCompact
}

// arena is the append-only store of entries: a list of pointer-free byte
// chunks, so the garbage collector never scans entries.
//
// An entry is: tag (4 bytes, little-endian) | uvarint key length | uvarint
// value length | key | value. The tag is the one in the entry's slot; it
// lets compaction, which walks the arena, find the slot of an entry
// without the key's hash.
type arena struct {
	// chunks holds the entry bytes; len(chunks[i]) == cap(chunks[i]).
	// INVARIANT: a chunk's bytes below its data end (ends[i], or fill for
	// the last chunk) are a sequence of whole entries, live or dead; no
	// chunk is ever reallocated, and bytes a live Frozen view can reach
	// are never written (see Table.frozenMark, Table.views).
	chunks [][]byte
	// ends[i] is the data end of chunks[i] for every chunk but the last.
	ends []uint32
	// fill is the data end of the last chunk.
	fill int
	// chunkBytes is the total capacity of chunks.
	chunkBytes int
	// used is the arena bytes consumed: the capacity of every chunk but
	// the last (a chunk's unused tail counts as dead once the next one is
	// started) plus fill.
	used int
	// live is the total size of the entries the slots reference.
	// INVARIANT: used - live is the dead bytes compaction can reclaim.
	live int

	cfg config
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
func (a *arena) locate(addr uint32) ([]byte, int) {
	return a.chunks[addr>>posBits], int(addr & posMask)
}

// entry returns the key and value of the entry at addr, each with its
// capacity cut at its length so an append by the caller cannot overwrite the
// next bytes.
func (a *arena) entry(addr uint32) (key, value []byte) {
	c, p := a.locate(addr)
	ks, kl, vl := parseEntry(c, p)
	vs := ks + kl
	return c[ks:vs:vs], c[vs : vs+vl : vs+vl]
}

// end returns the address the next append would get if it fit in the last
// chunk: every entry already in the arena is below it, every later one at or
// above it. It is 64 bits: past a full last chunk it is the next chunk's
// first address, which overflows 32 bits for the last chunk index.
func (a *arena) end() uint64 {
	if len(a.chunks) == 0 {
		return 0
	}
	return uint64(len(a.chunks)-1)<<posBits + uint64(min(a.fill, maxStart))
}

// fits reports whether an entry of size bytes can start at p in a chunk of
// capacity c.
func fits(c, p, size int) bool { return p < maxStart && size <= c-p }

// appendEntry appends an entry and returns its address and size. It fails
// with ErrFull when a new chunk is needed and the chunk indexes are used up.
func (a *arena) appendEntry(tag uint32, key, value []byte) (uint32, error) {
	size := entrySize(len(key), len(value))
	if len(a.chunks) == 0 || !fits(len(a.chunks[len(a.chunks)-1]), a.fill, size) {
		if err := a.newChunk(size); err != nil {
			return 0, err
		}
	}
	ci := len(a.chunks) - 1
	c, p := a.chunks[ci], a.fill
	binary.LittleEndian.PutUint32(c[p:], tag)
	q := p + tagSize
	q += binary.PutUvarint(c[q:], uint64(len(key)))
	q += binary.PutUvarint(c[q:], uint64(len(value)))
	q += copy(c[q:], key)
	copy(c[q:], value)
	a.fill += size
	a.used += size
	return uint32(ci)<<posBits | uint32(p), nil
}

// newChunk starts a chunk that can hold an entry of size bytes. Chunks grow
// with the arena, an eighth of its capacity each, from minChunk (a table
// with a few entries stays small) to maxChunk: the unused tail of the last
// chunk stays around 6% of the arena, and a table of a million 30-byte
// entries has under 90 chunks. An entry larger than that gets a chunk of its
// own size.
func (a *arena) newChunk(size int) error {
	if len(a.chunks) >= a.cfg.chunksMax() {
		return fmt.Errorf("%w: %d chunks, %d bytes of arena", ErrFull, len(a.chunks), a.chunkBytes)
	}
	if len(a.chunks) > 0 {
		last := a.chunks[len(a.chunks)-1]
		a.ends = append(a.ends, uint32(min(a.fill, len(last))))
		a.used += len(last) - a.fill
	}
	n := max(min(a.chunkBytes/8, a.cfg.chunkMax()), a.cfg.chunkMin())
	n = roundChunk(n)
	n = max(min(n, a.cfg.chunkMax()), size)
	a.chunks = append(a.chunks, make([]byte, n))
	a.chunkBytes += n
	a.fill = 0
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
// and moves each live one down to the next free address, calling
// moved(slot, naddr) so the caller can repoint the entry's slot; slotOf
// returns the slot referencing the entry with this tag at addr, if any (a
// dead entry has none). An entry never moves up (the destination never
// passes the source: in the source's own chunk an entry that fits at the
// source fits lower down), so no live entry is overwritten before it is
// moved. Chunks left empty at the end are dropped. The caller must ensure
// that no Frozen view can read the arena.
func (a *arena) slide(slotOf func(tag, addr uint32) (uint32, bool), moved func(slot, naddr uint32)) {
	if len(a.chunks) == 0 {
		return
	}
	dc, dp := 0, 0 // destination chunk and position
	for sc, c := range a.chunks {
		end := a.fill
		if sc < len(a.ends) {
			end = int(a.ends[sc])
		}
		for sp := 0; sp < end; {
			ks, kl, vl := parseEntry(c, sp)
			size := ks - sp + kl + vl
			tag := binary.LittleEndian.Uint32(c[sp:])
			if j, ok := slotOf(tag, uint32(sc)<<posBits|uint32(sp)); ok {
				for !fits(len(a.chunks[dc]), dp, size) {
					a.ends[dc] = uint32(dp) // dc < sc here: see above
					dc++
					dp = 0
				}
				copy(a.chunks[dc][dp:dp+size], c[sp:sp+size])
				moved(j, uint32(dc)<<posBits|uint32(dp))
				dp += size
			}
			sp += size
		}
	}
	// Drop the chunks after the destination, for the garbage collector.
	for i := dc + 1; i < len(a.chunks); i++ {
		a.chunkBytes -= len(a.chunks[i])
		a.chunks[i] = nil
	}
	a.chunks = a.chunks[:dc+1]
	a.ends = a.ends[:dc]
	a.fill = dp
	a.used = dp
	for _, c := range a.chunks[:dc] {
		a.used += len(c)
	}
}
