// Package kvtable is the table the memory state backend can keep one key
// group's entries in: encoded key bytes → encoded value bytes, in about 45
// bytes per entry of an 8-byte key and a 16-byte value, with copy-on-write
// snapshots whose synchronous part is O(1) per table.
//
// A Table is written by one goroutine (the task's). Freeze returns a Frozen
// view that any goroutine may iterate while the table keeps being written;
// Release ends it. Figures and the commands that produce them are in
// README.md.
//
// # Layout
//
// Slots. The table is open addressing over []uint64 slots, each 0 (empty)
// or tag<<32 | address, with Robin Hood linear probing and backward-shift
// deletion (no tombstones). Robin Hood keeps every probe sequence sorted by
// home slot, so a lookup for an absent key stops at the first slot poorer
// than itself instead of at the next empty slot, and the variance of probe
// lengths stays small at a high load.
//
// Tags. The caller supplies a 64-bit hash of each key (the engine hashes
// every key once per record); the table never hashes key bytes. The tag is
// the high 32 bits of hash·φ (Fibonacci hashing; 0 is mapped to 1), and a
// key's home slot is the tag's top log2(len(slots)) bits. So:
//   - growing or shrinking the slot array rehomes each slot from its tag,
//     without the hash or the key: a pass over 8-byte words;
//   - a probe compares tags first and reads the arena only when the tag
//     matches; the tag bits below the home bits tell keys of one home
//     apart, so a false match costs one key comparison in about
//     load/2^(32-log2(slots)) lookups (1 in 2,000 at 2^21 slots);
//   - the multiplication is not the engine's key-group mix (fmix64(hash)
//     mod max parallelism), so the keys of one key group, which share that
//     residue, still spread over the table's slots: TestKeyGroupSpread
//     measures a mean probe distance of 1.6 at a load of 0.76, what random
//     hashing gives ((1/(1-load)-1)/2).
//
// Load factor. The slot array doubles when an insert would take it past 7/8
// full, and shrinks (at compaction) when under 1/8 full. A slot is 8 bytes,
// so the slots cost 9.1 to 18.3 bytes per entry between doublings; 7/8 is as
// high as linear probing stays fast (mean distance (1/(1-7/8)-1)/2 = 3.5
// slots, one or two cache lines, with Robin Hood's short tail). At 10 M keys
// over 128 key groups a table holds 78 K entries in 2^17 slots (load 0.6,
// 13.4 bytes per entry).
//
// Arena. Entries live in an append-only arena of []byte chunks, which hold
// no pointers, so the garbage collector never scans them: its cost is
// independent of the number of entries. An entry is the tag (4 bytes), the
// key's and the value's lengths (uvarints), the key and the value: 30 bytes
// for an 8-byte key and a 16-byte value. An address is chunk index << 20 |
// position, so a table addresses 4096 chunks, about 4 GiB (ErrFull past
// that). A new chunk is an eighth of the arena's capacity so far, rounded
// up to a size the allocator serves without waste, from 256 bytes (a table
// of a few entries stays under 400 bytes) to 1 MiB: the unused tail of the
// last chunk averages about 6% of the arena, and a 1 M-entry table of
// 30-byte entries has under 90 chunks. An entry larger than that gets a
// chunk of its own size. An entry never spans chunks, so Get returns a view
// into one chunk, without copying.
//
// Why an arena rather than a Go map of decoded values: the snapshot needs
// the encoded bytes anyway, the bytes need no per-entry header, pointer or
// allocation, and copy-on-write can share them instead of cloning: a
// snapshot costs nothing until a frozen entry is written, and then a new
// version of that one entry.
//
// # Writes
//
// Put of a value of the same length as the current one, and Modify, write in
// place when the entry is not frozen: no arena growth and no slot write, the
// common case of a fixed-size aggregate. Any other Put appends the entry and points its slot
// at it; the old version becomes dead bytes. Delete empties the slot; the
// entry becomes dead bytes.
//
// # Copy-on-write snapshots
//
// Freeze hands the view the current slot array and a chunk list capped at
// its length, records the arena's end as the frozen mark, marks the slots
// shared and counts the view: O(1), no entry or slot copied. Afterwards,
// while any view is live:
//   - the first write that changes a slot (insert, delete, a new version)
//     copies the slot array, 8 bytes per slot; the view keeps the old one;
//   - a write to an entry below the frozen mark appends a new version (its
//     key and value copied) and repoints the table's copy of its slot;
//   - later writes to that new version, which is above the mark, are in
//     place again: at most one new version per entry per Freeze.
//
// Release decrements the count (on any goroutine). The owner reads the
// count, an atomic, only when it would reuse frozen memory (a slot write
// while shared, a compaction) and, seeing 0, takes its slot array back.
//
// # Changes since a mark
//
// The frozen mark outlives the views: a write to an entry below it appends a
// new version even when no view is live, and only compaction (which moves
// entries) lowers it. So every entry written since a Freeze (or Mark) lies
// at or above that Freeze's arena end, and Frozen.Changes(mark) yields
// exactly the entries a later view holds that were written since: what an
// incremental checkpoint writes for the table, with the deleted keys, which
// the caller records. A compaction in between voids the mark (Changes says
// so, by the compaction count) and the caller writes the whole table. The
// cost is one new version per entry written after each Freeze, as while a
// view is live, reclaimed by the next compaction.
//
// # Compaction
//
// Dead bytes (old versions, deleted entries, chunk tails too short for the
// next entry) are reclaimed when those added since the last compaction are
// at least a quarter of the live bytes (and at least 1 KiB), and no view is
// live, so the arena stays within about 1.25 times its live bytes. The
// check runs at the end of every Put and Delete and before Modify takes its
// view; Get never moves anything. Compaction slides live entries down in
// address order, in place: for each entry of the arena it finds the slot by
// the tag stored in the entry (no hash needed) and the entry's old address,
// so a dead entry is one no slot points to. It costs O(used bytes), and the
// dead bytes it cannot reclaim (chunk tails, chunks too small for the next
// entry) are a bounded multiple of the live bytes, so it is paid for by the
// at least live bytes of dead ones written since the last: amortised O(1)
// per byte written. Chunks left empty at the end go back to the garbage
// collector.
//
// # Invariants
//
// Each is written on the field it constrains in table.go, arena.go and
// frozen.go; the model test checks the structural ones after every
// operation (checkInvariants).
//
//  1. A slot is 0 or tag<<32|address with tag != 0, so 0 means empty.
//  2. Robin Hood order: between an entry's home slot and its slot there is
//     no empty slot and no slot closer to its own home than the entry is
//     to its home. Lookups rely on it to stop early.
//  3. n ≤ 7/8 of the slots: an empty slot ends every probe.
//  4. Every slot references the start of a whole entry in the arena,
//     whose stored tag is the slot's tag; no two slots reference one entry.
//  5. Below its data end, each chunk holds whole entries, live or dead, so
//     compaction can walk it. Chunks are never reallocated.
//  6. What a live Frozen view references stays valid and unchanged until it
//     is released:
//     a. its slot array is never written: the table copies it before its
//     first slot write after the Freeze (shared);
//     b. every entry its slots reference lies below its Freeze's arena end,
//     which is at or below the table's frozen mark (the mark only grows
//     between compactions, which wait for the views), and no byte below
//     the mark is written: writes to such entries append new versions;
//     c. appends go at or past the arena's end, and new chunks at indexes
//     past the view's capped chunk list, which it cannot see;
//     d. compaction, the only writer of old bytes, runs only when no view
//     is live.
//     The order is established by the count: Release's atomic decrement
//     follows the reader's last read, and the owner's atomic load that sees
//     0 precedes any write it then allows (the Go memory model's ordering of
//     atomics; -race checks it in TestConcurrentFrozen).
//  7. Accounting: used is the capacity of every chunk but the last plus the
//     last one's fill, live the size of the entries the slots reference,
//     and used - live the dead bytes; Bytes is the slots plus the chunks'
//     capacity.
//
// # Limits
//
// About 4 GiB of arena per table (4096 chunks, entries starting in the
// first MiB of a chunk) and 2^31 slots: writes past them fail with ErrFull,
// leaving the table unchanged. While views are live the arena only grows:
// one new version per entry written after each Freeze, plus any churn; a
// view that is never released keeps the table from ever compacting.
package kvtable
