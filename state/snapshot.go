package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync/atomic"
)

// Snapshot file format, version 3. Integers are unsigned varints (uvarint)
// unless marked u32le/u64le (little endian, fixed width); a string is a
// uvarint length followed by its bytes.
//
//	file    = header section* index footer
//	header  = "IGKS" | version=3 | string operator | maxParallelism
//	          | rangeStart | rangeEnd | checkpoint | byte flags | u32le crc
//	section = keyGroup | byte sectionFlags | stateCount | state* | u32le crc
//	state   = string name | byte kind | codecCount | string* codecNames
//	          | entryCount | u64le payloadLength | payload
//	index   = sectionCount | (keyGroup | offset | length)*
//	footer  = u64le indexOffset | u32le crc | "IGKS"
//
// Every crc is CRC-32C (Castagnoli) over the bytes of its part before it
// (header, section; the footer's covers the index). A section's length in the
// index includes its crc. Sections appear in increasing key-group order;
// states within a section are sorted by name and, in a full section, only
// those with entries appear. The index lets a reader take the sections of the key groups it
// owns (rescaling) without decoding, or even reading, the others; the
// fixed-size footer lets it find the index.
//
// checkpoint is the id of the checkpoint the file was written for (0 when it
// was encoded outside a checkpoint). flags bit 0 marks an incremental file.
// A full file holds every key group of its range: one section per key group
// that has entries, none for an empty one. An incremental file holds only
// the key groups it has sections for, an empty section (no states) standing
// for a key group that became empty; every other key group of its range is
// held by an earlier checkpoint's file of the same subtask (see
// Backend.CheckpointSnapshot). Restore takes each key group from the newest
// file that holds it, and when that section is a delta, from the earlier
// files back to the key group's last full section.
//
// Delta sections (version 3). sectionFlags bit 0 marks a section of an
// incremental file that holds the key group's changes since the
// checkpoint before (in its chain) instead of all of it: a restore applies
// it over the key group as the earlier sections leave it, so a key group is
// read from its last full section and the delta sections after it, oldest
// first. A delta section lists only the states written since; each is
// either in full (entryCount 0 allowed: the state has no entries in the key
// group now) or, kind bit 7 set, a delta of a value or list state
// (entryCount 0):
//
//	delta   = u64le dropCount | varint(namespace)×dropCount
//	          | u64le deleteCount | entryKey×deleteCount
//	          | u64le putCount | (entryKey value)×putCount
//
// applied in that order: drop every entry of each namespace, delete each
// entry key, then set each entry. entryKey is key ++ varint(namespace), as
// in a NamespacedValueState's entries; a ValueState's key is an entryKey
// (with its codec's bytes), and a list state's delta drops nothing, deletes
// keys and sets entries as its payload has them (key n value×n).
//
// Version 2 is version 3 without section flags (every section full), and
// version 1 is version 2 without checkpoint and file flags: a full file of
// checkpoint 0. Restore still reads both.
//
// Payload layouts per kind, entryCount entries each, in unspecified order
// (Go map order):
//
//	value:  key value
//	map:    key n (userKey userValue)×n    (n > 0)
//	list:   key n value×n                  (n > 0)
//	timers: key varint(namespace) varint(ts) seq
//
// where keys and values use the state's codecs, varint is a zigzag varint,
// and seq orders timers with equal ts.
const (
	formatMagic     = "IGKS"
	formatVersion   = 3
	formatVersionV2 = 2
	formatVersionV1 = 1
	footerLen       = 8 + 4 + len(formatMagic)
	// flagIncremental marks a file that holds only the key groups it has
	// sections for.
	flagIncremental = 1
	// sectionDelta marks a delta section (version 3).
	sectionDelta = 1
	// kindDelta marks a state's part that is a delta (version 3).
	kindDelta Kind = 0x80
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c is the checksum of every part of the format: CRC-32C (Castagnoli).
func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Snapshot is an immutable view of a Backend's state at one instant, taken by
// Backend.Snapshot. Encode serialises it; it may run on any goroutine,
// concurrently with the task goroutine's further use of the backend.
type Snapshot struct {
	operator       string
	maxParallelism int
	kgRange        KeyGroupRange
	// states is sorted by name. INVARIANT: every table it references is
	// frozen: no goroutine writes it again (see Backend.epoch).
	states []frozenState
	// err is the backend's routing error at snapshot time.
	err error
	// sizeHint is the backend's last encoded size, shared by its
	// snapshots: Encode reserves about that much at once instead of growing
	// the buffer by doubling.
	sizeHint *atomic.Int64
	// plan is set for a snapshot taken by CheckpointSnapshot, and epoch is
	// the copy-on-write epoch it was taken at.
	plan  *checkpointPlan
	epoch uint64
	// released is set by Release. INVARIANT: once set, Encode fails: the
	// frozen tables may be reused.
	released atomic.Bool
	// lsm is set for a snapshot of an LSM backend, which is stored with
	// Upload; states is then empty and schemas lists the states.
	lsm     *lsmSnapshot
	schemas []Schema
}

// Release tells the backend that the snapshot will not be encoded again,
// so the compact tables (NamespacedValueState) can reclaim the versions only
// it still pins. Call it after the last Encode, on any goroutine; Encode
// fails afterwards. A snapshot never released costs memory, not
// correctness: its tables keep every version written since, and never
// compact.
func (s *Snapshot) Release() {
	if s.released.CompareAndSwap(false, true) {
		for _, st := range s.states {
			if r, ok := st.(releaser); ok {
				r.release()
			}
		}
	}
}

// Snapshot captures the backend's state for a checkpoint: the synchronous
// part, run on the task goroutine at the barrier. It costs O(key groups ×
// states), independent of the number of entries: it keeps references to the
// current tables and starts a new copy-on-write epoch, so the first later
// write to each key group (and to each MapState map or ListState list) copies
// that table instead of writing into what the snapshot sees.
//
// Restored state that no registration claimed is included unchanged. Call
// Encode, typically on another goroutine, to serialise the snapshot.
//
// On an LSM backend it returns a snapshot that fails to encode: its state is
// checkpointed with CheckpointSnapshot and Upload.
func (b *Backend) Snapshot() *Snapshot {
	s := &Snapshot{
		operator:       b.operator,
		maxParallelism: b.maxParallelism,
		kgRange:        b.kgRange,
		states:         make([]frozenState, 0, len(b.states)+len(b.restored)),
		err:            b.err,
		sizeHint:       &b.sizeHint,
	}
	if b.lsm != nil {
		s.states = nil
		s.err = fmt.Errorf("state: operator %q: the state of an LSM backend is checkpointed with CheckpointSnapshot and Upload, not Snapshot", b.operator)
		return s
	}
	for _, st := range b.states {
		s.states = append(s.states, st.freeze())
	}
	for _, r := range b.restored {
		s.states = append(s.states, r) // immutable already
		if s.err == nil && slices.ContainsFunc(r.parts, func(p restoredPart) bool { return len(p.deltas) > 0 }) {
			// Its full form needs the deltas applied, which takes its
			// codecs: only a registration can.
			s.err = fmt.Errorf("state %q was restored from incremental changes and is not registered: register it (or drop it) before a snapshot", r.meta.name)
		}
	}
	slices.SortFunc(s.states, func(x, y frozenState) int { return strings.Compare(x.info().name, y.info().name) })
	b.frozen = b.epoch
	b.epoch++
	return s
}

// Encode serialises the snapshot in the snapshot file format (see the
// format comment in snapshot.go) as a full file of checkpoint 0: one
// checksummed section per non-empty key group, and an index. It is the
// asynchronous part of a checkpoint: it only reads frozen tables, so it may
// run on another goroutine while the task keeps processing. It may be called
// more than once. (A checkpoint uses EncodeCheckpoint.)
//
// It fails if the backend had recorded a routing error (Backend.Err) when the
// snapshot was taken, or if a codec panics (a value it cannot encode); the
// error names the operator, state and key group.
func (s *Snapshot) Encode() ([]byte, error) {
	out, _, err := s.encode(0, nil, nil)
	return out, err
}

// encode writes the file of checkpoint id. With plan nil (or one without
// modes) it is a full file; else an incremental one holding the key groups
// the plan writes: in full (empty ones as empty sections) or as deltas over
// the plan's base. It returns the length of each key group's section by
// index (0 for one not written). It appends to dst[:0]: the file is in
// dst's array when it fits.
func (s *Snapshot) encode(id int64, plan *checkpointPlan, dst []byte) (out []byte, lens []int, err error) {
	if s.lsm != nil {
		return nil, nil, fmt.Errorf("state: operator %q: a snapshot of an LSM backend is stored with Upload, not encoded", s.operator)
	}
	if s.err != nil {
		return nil, nil, fmt.Errorf("state: operator %q: refusing to encode a snapshot of a backend with an access error: %w", s.operator, s.err)
	}
	if s.released.Load() {
		return nil, nil, fmt.Errorf("state: operator %q: Encode of a released snapshot", s.operator)
	}
	var (
		cur *stateInfo // the state and key group being encoded, for errors
		kg  = -1
	)
	defer func() {
		if r := recover(); r != nil {
			name := ""
			if cur != nil {
				name = cur.name
			}
			if e, ok := r.(error); ok {
				err = fmt.Errorf("state: operator %q state %q key group %d: encode: %w", s.operator, name, kg, e)
			} else {
				err = fmt.Errorf("state: operator %q state %q key group %d: encode: panic: %v", s.operator, name, kg, r)
			}
			out, lens = nil, nil
		}
	}()

	incremental := plan != nil && plan.mode != nil
	out = dst[:0]
	if s.sizeHint != nil && !incremental {
		// The hint is a full file's size: an incremental one is smaller.
		if hint := s.sizeHint.Load(); hint > 0 && int64(cap(out)) < hint {
			out = make([]byte, 0, hint+hint/8)
		}
		defer func() {
			if err == nil {
				s.sizeHint.Store(int64(len(out)))
			}
		}()
	}
	flags := byte(0)
	if incremental {
		flags |= flagIncremental
	}
	out = append(out, formatMagic...)
	out = appendUvarint(out, formatVersion)
	out = appendString(out, s.operator)
	out = appendUvarint(out, s.maxParallelism)
	out = appendUvarint(out, s.kgRange.Start)
	out = appendUvarint(out, s.kgRange.End)
	out = appendUvarint(out, uint64(id))
	out = append(out, flags)
	out = binary.LittleEndian.AppendUint32(out, crc32c(out))

	// appendPart appends one state's part header, then its payload from
	// entries, patching the payload's length.
	appendPart := func(st frozenState, kind Kind, count int, entries func([]byte) []byte) {
		cur = st.info()
		out = appendString(out, cur.name)
		out = append(out, byte(kind))
		out = appendUvarint(out, len(cur.codecs))
		for _, c := range cur.codecs {
			out = appendString(out, c)
		}
		out = appendUvarint(out, count)
		lenAt := len(out)
		out = binary.LittleEndian.AppendUint64(out, 0) // patched below
		out = entries(out)
		binary.LittleEndian.PutUint64(out[lenAt:], uint64(len(out)-lenAt-8))
	}
	lens = make([]int, s.kgRange.Len())
	var index []indexEntry
	for i := range s.kgRange.Len() {
		mode := writeFull
		if incremental {
			mode = plan.mode[i]
		}
		if mode == reuseSection {
			continue
		}
		kg = s.kgRange.Start + i
		off := len(out)
		if mode == writeDelta {
			// Only the states written since the base, each as a delta
			// when it can write one, else in full (count 0: it is
			// empty now).
			out = appendUvarint(out, kg)
			out = append(out, sectionDelta)
			out = appendUvarint(out, countTrue(plan.written[i]))
			for j, st := range s.states {
				if !plan.written[i][j] {
					continue
				}
				if d, bl := deltaBase(st, plan.base); bl != nil && d.hasDelta(i, bl) {
					appendPart(st, st.info().kind|kindDelta, 0, func(dst []byte) []byte { return d.appendDelta(dst, i, bl) })
					continue
				}
				appendPart(st, st.info().kind, st.count(i), func(dst []byte) []byte { return st.appendEntries(dst, i) })
			}
		} else {
			nonEmpty := 0
			for _, st := range s.states {
				if st.count(i) > 0 {
					nonEmpty++
				}
			}
			if nonEmpty == 0 && !incremental {
				kg = -1
				continue
			}
			out = appendUvarint(out, kg)
			out = append(out, 0) // section flags: full
			out = appendUvarint(out, nonEmpty)
			for _, st := range s.states {
				if n := st.count(i); n > 0 {
					appendPart(st, st.info().kind, n, func(dst []byte) []byte { return st.appendEntries(dst, i) })
				}
			}
		}
		cur = nil
		out = binary.LittleEndian.AppendUint32(out, crc32c(out[off:]))
		index = append(index, indexEntry{kg: kg, off: off, length: len(out) - off})
		lens[i] = len(out) - off
	}
	kg = -1

	indexOff := len(out)
	out = appendUvarint(out, len(index))
	for _, e := range index {
		out = appendUvarint(out, e.kg)
		out = appendUvarint(out, e.off)
		out = appendUvarint(out, e.length)
	}
	crc := crc32c(out[indexOff:])
	out = binary.LittleEndian.AppendUint64(out, uint64(indexOff))
	out = binary.LittleEndian.AppendUint32(out, crc)
	out = append(out, formatMagic...)
	return out, lens, nil
}

func appendUvarint[N int | uint64](dst []byte, v N) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

func appendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	dst = appendUvarint(dst, len(s))
	return append(dst, s...)
}

// Schemas returns the schema of every state in the snapshot, sorted by name:
// what the checkpoint records of the operator's state (see Backend.Schemas).
func (s *Snapshot) Schemas() []Schema {
	if s.lsm != nil {
		return slices.Clone(s.schemas)
	}
	out := make([]Schema, len(s.states))
	for i, st := range s.states {
		out[i] = st.info().schema()
	}
	return out
}
