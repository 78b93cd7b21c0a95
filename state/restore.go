package state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// restoredState is one state's entries as read by Restore, still encoded,
// until a registration decodes them. It is immutable, so while unclaimed it
// doubles as its own frozen view in snapshots (carried forward unchanged).
type restoredState struct {
	meta  stateInfo
	parts []restoredPart // indexed by key group - Start; count 0 = no entries
}

// restoredPart is one key group's encoded entries of one state: count
// entries in payload, then the deltas of later delta sections (see the
// format comment in snapshot.go), oldest first, to apply over them.
type restoredPart struct {
	kg      int
	count   int
	payload []byte   // aliases the snapshot passed to Restore
	deltas  [][]byte // likewise
}

func (r *restoredState) info() *stateInfo { return &r.meta }
func (r *restoredState) count(i int) int  { return r.parts[i].count }
func (r *restoredState) appendEntries(dst []byte, i int) []byte {
	return append(dst, r.parts[i].payload...)
}

// Restore loads the key groups in b's range from one or more encoded
// snapshots of the same operator: one when parallelism is unchanged, or those
// of every old subtask whose range overlaps b's after rescaling (other
// snapshots are read only as far as their header and index). It must be
// called at most once, before any state is registered: entries stay encoded
// until the operator registers each state with its codecs, and are decoded
// then. The snapshot slices are retained (not copied) until then, and while
// their state is unclaimed: the caller must not modify them.
//
// It verifies every checksum it relies on and fails, changing nothing, with
// an error wrapping ErrCorrupt that names the operator, the snapshot and the
// key group or part that failed; with one wrapping ErrStateMismatch if a
// snapshot belongs to another operator or max parallelism; and if the
// snapshots overlap (two files of one checkpoint, or two full files, holding
// one key group) or leave some of b's key groups uncovered (a snapshot file
// is missing). Each key group is taken from the newest file holding it: an
// incremental file's sections override its chain's earlier files.
func (b *Backend) Restore(snapshots ...[]byte) error {
	if b.restoreCalled {
		return fmt.Errorf("state: operator %q: Restore called twice", b.operator)
	}
	if len(b.states) > 0 {
		return fmt.Errorf("state: operator %q: Restore called after states were registered: restore before the operator opens", b.operator)
	}
	n := b.kgRange.Len()
	files := make([]*fileInfo, len(snapshots))
	ctxs := make([]string, len(snapshots))
	for si, data := range snapshots {
		ctxs[si] = fmt.Sprintf("operator %q: snapshot %d of %d", b.operator, si+1, len(snapshots))
		f, err := parseFile(data, ctxs[si])
		if err != nil {
			return err
		}
		if f.operator != b.operator {
			return fmt.Errorf("%w: %s was written by operator %q", ErrStateMismatch, ctxs[si], f.operator)
		}
		if f.maxParallelism != b.maxParallelism {
			return fmt.Errorf("%w: %s has max parallelism %d, the operator now has %d: max parallelism cannot change without discarding state",
				ErrStateMismatch, ctxs[si], f.maxParallelism, b.maxParallelism)
		}
		files[si] = f
	}
	// Each key group comes from the newest file that holds it and, when
	// that file's section is a delta, from the files before it back to the
	// last full section. Two files of one checkpoint never hold the same
	// key group, and a chain has one full file, at its start.
	used := make([][]int, n) // by key group: the snapshots read, oldest first
	restored := make(map[string]*restoredState)
	for i := range n {
		kg := b.kgRange.Start + i
		var cands []int // snapshots holding kg, newest first
		for si, f := range files {
			if _, ok := f.holds(kg); ok {
				cands = append(cands, si)
			}
		}
		slices.SortStableFunc(cands, func(x, y int) int { return cmp.Compare(files[y].checkpoint, files[x].checkpoint) })
		var fullAt []int
		for k, si := range cands {
			if !files[si].incremental {
				fullAt = append(fullAt, si)
			}
			p := -1
			switch {
			case k > 0 && files[cands[k-1]].checkpoint == files[si].checkpoint:
				p = cands[k-1]
			case len(fullAt) > 1:
				p = fullAt[0]
			}
			if p >= 0 {
				return fmt.Errorf("state: %s: key group %d is also covered by snapshot %d (checkpoints %d and %d, full files: %v, %v): snapshots of different checkpoints or subtasks were mixed",
					ctxs[si], kg, p+1, files[p].checkpoint, files[si].checkpoint, !files[p].incremental, !files[si].incremental)
			}
		}
		var secs [][]sectionState // oldest first once reversed
		for _, si := range cands {
			e, _ := files[si].holds(kg)
			var sec parsedSection
			if e.length > 0 {
				var err error
				if sec, err = parseSection(snapshots[si], e, files[si].version, ctxs[si]); err != nil {
					return err
				}
			}
			used[i] = append(used[i], si)
			secs = append(secs, sec.states)
			if !sec.delta {
				break
			}
			if len(used[i]) == len(cands) {
				return fmt.Errorf("state: operator %q: key group %d: the changes that checkpoint %d's snapshot holds build on a snapshot file that is missing (no earlier file holds the key group in full)",
					b.operator, kg, files[si].checkpoint)
			}
		}
		slices.Reverse(used[i])
		slices.Reverse(secs)
		for k, sec := range secs {
			si := used[i][k]
			for _, st := range sec {
				meta := st.meta
				meta.kind &^= kindDelta
				r := restored[meta.name]
				if r == nil {
					r = &restoredState{meta: meta, parts: make([]restoredPart, n)}
					restored[meta.name] = r
				} else if r.meta.kind != meta.kind || !slices.Equal(r.meta.codecs, meta.codecs) {
					return fmt.Errorf("%w: %s: key group %d: state %q is a %v here but a %v in another key group",
						ErrCorrupt, ctxs[si], kg, meta.name, &meta, &r.meta)
				}
				if st.meta.kind&kindDelta != 0 {
					r.parts[i].kg = kg
					r.parts[i].deltas = append(r.parts[i].deltas, st.payload)
				} else {
					r.parts[i] = restoredPart{kg: kg, count: st.count, payload: st.payload}
				}
			}
		}
	}
	if len(snapshots) > 0 {
		if i := slices.IndexFunc(used, func(u []int) bool { return len(u) == 0 }); i >= 0 {
			j := i
			for j < n && len(used[j]) == 0 {
				j++
			}
			return fmt.Errorf("state: operator %q: no snapshot covers key groups %v: a snapshot file is missing",
				b.operator, KeyGroupRange{Start: b.kgRange.Start + i, End: b.kgRange.Start + j})
		}
	}
	for name, r := range restored {
		if !slices.ContainsFunc(r.parts, func(p restoredPart) bool { return p.count > 0 || len(p.deltas) > 0 }) {
			delete(restored, name) // emptied in every key group
		}
	}
	// Restored entries are loaded at the epoch before this one, so that
	// the next checkpoint can build on the files restored from (see
	// restoredChain) and rewrite only what is written from now on.
	b.restoreEpoch = b.epoch
	b.epoch++
	if b.lsm == nil {
		b.base = restoredChain(b, files, used)
	}
	if b.base != nil {
		for _, f := range files {
			b.completed = max(b.completed, f.checkpoint)
		}
	}
	b.restoreCalled = true
	b.restored = restored
	return nil
}

// SnapshotInfo describes an encoded snapshot, as Inspect reads it.
type SnapshotInfo struct {
	Operator       string
	MaxParallelism int
	KeyGroups      KeyGroupRange // the range of the subtask that wrote it
	// Checkpoint is the id of the checkpoint the file was written for (0
	// when unknown: format version 1, or encoded outside a checkpoint).
	Checkpoint int64
	// Incremental reports a file that holds only the key groups of its
	// Sections (an empty section: a key group that became empty); the
	// others of KeyGroups are in earlier files of its checkpoint's chain.
	Incremental bool
	Sections    []SectionInfo // non-empty key groups, in increasing order
}

// SectionInfo describes one key group's section of a snapshot.
type SectionInfo struct {
	KeyGroup int
	Offset   int // byte offset of the section in the file
	Length   int // bytes, including the checksum
	// Delta reports a delta section: the key group's changes since its
	// section in the checkpoint before, with only the states written
	// since (see the format comment in snapshot.go).
	Delta  bool
	States []StateInfo
}

// StateInfo describes one state's entries in one key group.
type StateInfo struct {
	Name    string
	Kind    Kind
	Codecs  []string // key codec first, then value codec(s)
	Entries int      // keys (for timers: timers); 0 for a delta
	Bytes   int      // encoded payload size
	// Delta reports a delta part: dropped namespaces, deleted keys and
	// set entries since the key group's earlier section.
	Delta bool
}

// Inspect verifies every checksum of an encoded snapshot and describes it
// without decoding entries (no codecs needed): for tools that list and check
// checkpoints. Errors are as for Restore.
func Inspect(data []byte) (*SnapshotInfo, error) {
	f, err := parseFile(data, "snapshot")
	if err != nil {
		return nil, err
	}
	info := &SnapshotInfo{Operator: f.operator, MaxParallelism: f.maxParallelism, KeyGroups: f.kgRange, Checkpoint: f.checkpoint, Incremental: f.incremental}
	ctx := fmt.Sprintf("snapshot of operator %q", f.operator)
	seen := map[string]*stateInfo{} // each state's schema in the first key group holding it
	for _, e := range f.index {
		sec, err := parseSection(data, e, f.version, ctx)
		if err != nil {
			return nil, err
		}
		si := SectionInfo{KeyGroup: e.kg, Offset: e.off, Length: e.length, Delta: sec.delta}
		for _, st := range sec.states {
			// As Restore: a state has one schema in every key group.
			meta := st.meta
			meta.kind &^= kindDelta
			if first, ok := seen[meta.name]; !ok {
				seen[meta.name] = &meta
			} else if first.kind != meta.kind || !slices.Equal(first.codecs, meta.codecs) {
				return nil, fmt.Errorf("%w: %s: key group %d: state %q is a %v here but a %v in another key group",
					ErrCorrupt, ctx, e.kg, meta.name, &meta, first)
			}
			si.States = append(si.States, StateInfo{Name: st.meta.name, Kind: st.meta.kind &^ kindDelta, Codecs: st.meta.codecs, Entries: st.count, Bytes: len(st.payload), Delta: st.meta.kind&kindDelta != 0})
		}
		info.Sections = append(info.Sections, si)
	}
	return info, nil
}

// fileInfo is a parsed header and index.
type fileInfo struct {
	version        int
	operator       string
	maxParallelism int
	kgRange        KeyGroupRange
	// checkpoint is the id of the checkpoint the file was written for (0
	// for version 1 and for files encoded outside a checkpoint).
	checkpoint int64
	// incremental files hold only the key groups of their index.
	incremental bool
	index       []indexEntry
}

// holds returns the index entry of key group kg and whether the file holds
// kg: a full file every key group of its range (an entry of length 0 for an
// empty one), an incremental file those it has sections for.
func (f *fileInfo) holds(kg int) (indexEntry, bool) {
	if !f.kgRange.Contains(kg) {
		return indexEntry{}, false
	}
	i, ok := slices.BinarySearchFunc(f.index, kg, func(e indexEntry, kg int) int { return e.kg - kg })
	if ok {
		return f.index[i], true
	}
	return indexEntry{kg: kg}, !f.incremental
}

type indexEntry struct{ kg, off, length int }

// sectionState is one state's part of a parsed section.
type sectionState struct {
	meta    stateInfo
	count   int
	payload []byte
}

// parseFile checks the footer, the index checksum and the header checksum,
// and validates the index against the file's bounds. ctx prefixes errors.
func parseFile(data []byte, ctx string) (*fileInfo, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, ctx, fmt.Sprintf(format, args...))
	}
	if len(data) < len(formatMagic)+footerLen {
		return nil, corrupt("truncated: %d bytes is shorter than an empty snapshot", len(data))
	}
	if string(data[:len(formatMagic)]) != formatMagic {
		return nil, corrupt("bad magic %q: not a state snapshot", data[:len(formatMagic)])
	}
	foot := data[len(data)-footerLen:]
	if string(foot[12:]) != formatMagic {
		return nil, corrupt("footer missing: file truncated or overwritten")
	}
	indexOff64 := binary.LittleEndian.Uint64(foot)
	indexEnd := len(data) - footerLen
	if indexOff64 > uint64(indexEnd) {
		return nil, corrupt("index offset %d beyond the index end %d", indexOff64, indexEnd)
	}
	indexOff := int(indexOff64)
	if indexOff < len(formatMagic) {
		return nil, corrupt("index offset %d inside the magic number", indexOff)
	}
	if stored, got := binary.LittleEndian.Uint32(foot[8:]), crc32c(data[indexOff:indexEnd]); stored != got {
		return nil, corrupt("index checksum mismatch (stored %#08x, computed %#08x)", stored, got)
	}

	h := &byteReader{b: data[:indexOff], off: len(formatMagic)}
	version := h.uvarint()
	if h.err == nil && (version < formatVersionV1 || version > formatVersion) {
		return nil, corrupt("unsupported format version %d (this build reads %d to %d)", version, formatVersionV1, formatVersion)
	}
	f := &fileInfo{version: int(version)}
	f.operator = h.string()
	f.maxParallelism = h.int()
	f.kgRange.Start = h.int()
	f.kgRange.End = h.int()
	if version >= formatVersionV2 {
		id := h.uvarint()
		flags := h.byte()
		if h.err == nil && (id > math.MaxInt64 || flags&^flagIncremental != 0) {
			return nil, corrupt("header: checkpoint %d or flags %#x out of range", id, flags)
		}
		f.checkpoint, f.incremental = int64(id), flags&flagIncremental != 0
	}
	headerEnd := h.off
	stored := h.uint32()
	if h.err != nil {
		return nil, corrupt("header: %v", h.err)
	}
	if got := crc32c(data[:headerEnd]); stored != got {
		return nil, corrupt("header checksum mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	if f.maxParallelism <= 0 || f.maxParallelism > UpperBoundMaxParallelism ||
		f.kgRange.Start < 0 || f.kgRange.End > f.maxParallelism || f.kgRange.Len() == 0 {
		return nil, corrupt("header: invalid max parallelism %d or key group range %v", f.maxParallelism, f.kgRange)
	}
	dataStart := h.off

	x := &byteReader{b: data[indexOff:indexEnd]}
	count := x.int()
	if x.err == nil && count > f.kgRange.Len() {
		return nil, corrupt("index: %d sections for %d key groups", count, f.kgRange.Len())
	}
	prevEnd, prevKG := dataStart, -1
	for i := 0; i < count && x.err == nil; i++ {
		e := indexEntry{kg: x.int(), off: x.int(), length: x.int()}
		if x.err != nil {
			break
		}
		switch {
		case !f.kgRange.Contains(e.kg) || e.kg <= prevKG:
			return nil, corrupt("index: key group %d out of order or outside the range %v", e.kg, f.kgRange)
		case e.off < prevEnd || e.length < 4 || e.length > indexOff-e.off:
			return nil, corrupt("index: key group %d: section at offset %d length %d outside the data [%d,%d)", e.kg, e.off, e.length, prevEnd, indexOff)
		}
		prevEnd, prevKG = e.off+e.length, e.kg
		f.index = append(f.index, e)
	}
	if x.err == nil && x.off != len(x.b) {
		x.err = fmt.Errorf("%d trailing bytes", len(x.b)-x.off)
	}
	if x.err != nil {
		return nil, corrupt("index: %v", x.err)
	}
	return f, nil
}

// parsedSection is a parsed section: a delta section (version 3) holds the
// states written since the key group's section before it, each in full or
// (kind with kindDelta) as a delta.
type parsedSection struct {
	delta  bool
	states []sectionState
}

// parseSection verifies one section's checksum and splits it into states,
// leaving their payloads encoded (aliasing data). version is the file's
// format version.
func parseSection(data []byte, e indexEntry, version int, ctx string) (parsedSection, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: key group %d: %s", ErrCorrupt, ctx, e.kg, fmt.Sprintf(format, args...))
	}
	var out parsedSection
	sec := data[e.off : e.off+e.length]
	body := sec[:len(sec)-4]
	if stored, got := binary.LittleEndian.Uint32(sec[len(body):]), crc32c(body); stored != got {
		return out, corrupt("section checksum mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	r := &byteReader{b: body}
	if kg := r.int(); r.err == nil && kg != e.kg {
		return out, corrupt("section holds key group %d", kg)
	}
	if version >= formatVersion {
		flags := r.byte()
		if r.err == nil && flags&^sectionDelta != 0 {
			return out, corrupt("section flags %#x", flags)
		}
		out.delta = flags&sectionDelta != 0
	}
	n := r.int()
	if r.err == nil && n > len(body) {
		return out, corrupt("%d states in %d bytes", n, len(body))
	}
	for i := 0; i < n && r.err == nil; i++ {
		var st sectionState
		st.meta.name = r.string()
		st.meta.kind = Kind(r.byte())
		nc := r.int()
		if r.err == nil && nc > len(body) {
			return out, corrupt("state %q: %d codecs", st.meta.name, nc)
		}
		for j := 0; j < nc && r.err == nil; j++ {
			st.meta.codecs = append(st.meta.codecs, r.string())
		}
		st.count = r.int()
		plen := r.uint64()
		if r.err != nil {
			break
		}
		if plen > uint64(len(body)-r.off) {
			return out, corrupt("state %q: payload of %d bytes exceeds the section", st.meta.name, plen)
		}
		st.payload = r.next(int(plen))
		kind := st.meta.kind &^ kindDelta
		switch {
		case kind < KindValue || kind > KindTimers || (st.meta.kind&kindDelta != 0 && (!out.delta || kind != KindValue && kind != KindList)):
			return out, corrupt("state %q: unknown kind %d", st.meta.name, st.meta.kind)
		case st.count == 0 && !out.delta:
			return out, corrupt("state %q: no entries", st.meta.name)
		case st.meta.kind&kindDelta != 0 && st.count != 0:
			return out, corrupt("state %q: a delta with an entry count", st.meta.name)
		case i > 0 && st.meta.name <= out.states[i-1].meta.name:
			return out, corrupt("state %q: states out of order", st.meta.name)
		}
		out.states = append(out.states, st)
	}
	if r.err == nil && r.off != len(body) {
		r.err = fmt.Errorf("%d trailing bytes", len(body)-r.off)
	}
	if r.err != nil {
		return out, corrupt("%v", r.err)
	}
	return out, nil
}

// byteReader reads the format's primitives, remembering the first error so
// parsers can check once.
type byteReader struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("unexpected end of data")

func (r *byteReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = errShort
		if n < 0 {
			r.err = errors.New("varint overflows 64 bits")
		}
		return 0
	}
	r.off += n
	return v
}

// varint reads a zigzag varint.
func (r *byteReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.err = errShort
		if n < 0 {
			r.err = errors.New("varint overflows 64 bits")
		}
		return 0
	}
	r.off += n
	return v
}

// int reads a uvarint that must fit a non-negative int; callers bound it
// further against what the data can hold.
func (r *byteReader) int() int {
	v := r.uvarint()
	if r.err == nil && v > math.MaxInt {
		r.err = fmt.Errorf("value %d out of range", v)
		return 0
	}
	return int(v)
}

func (r *byteReader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.err = errShort
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *byteReader) byte() byte {
	if b := r.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *byteReader) uint32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *byteReader) uint64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *byteReader) string() string {
	n := r.int()
	return string(r.next(n))
}

// partReader decodes one restored part during registration; its errors name
// the operator, state and key group.
type partReader struct {
	operator string
	state    string
	kg       int
	src      []byte
}

var (
	errEmptyContainer = errors.New("empty map or list (never written)")
	errDuplicateKeys  = errors.New("duplicate keys")
)

func (b *Backend) partReader(state string, p restoredPart) *partReader {
	return &partReader{operator: b.operator, state: state, kg: p.kg, src: p.payload}
}

func (r *partReader) corrupt(what string, err error) error {
	return fmt.Errorf("%w: operator %q state %q key group %d: decode %s: %w", ErrCorrupt, r.operator, r.state, r.kg, what, err)
}

// readValue decodes one value with c, checking the codec's byte count.
func readValue[T any](r *partReader, c Codec[T], what string) (T, error) {
	v, n, err := c.Decode(r.src)
	if err == nil && n >= 0 && n <= len(r.src) {
		r.src = r.src[n:]
		return v, nil
	}
	return v, r.decodeFailed(n, err, c, what)
}

// decodeFailed turns a codec's failed decode at r — its error, or a byte
// count outside r's bytes — into a corruption error naming the codec. It is
// called only on failure: converting the codec to an interface allocates,
// and some codecs build their name (a pane set's), too costly per value.
func (r *partReader) decodeFailed(n int, err error, codec interface{ Name() string }, what string) error {
	if err != nil {
		return r.corrupt(what+" with codec "+codec.Name(), err)
	}
	return r.corrupt(what, fmt.Errorf("codec %s reports %d bytes consumed of %d", codec.Name(), n, len(r.src)))
}

// readValueInto is readValue decoding into *dst: with into (c as an
// IntoDecoder, or nil) it reuses *dst's memory, so that a restore checking
// millions of values does not allocate one each.
func readValueInto[T any](r *partReader, c Codec[T], into IntoDecoder[T], dst *T, what string) error {
	if into == nil {
		v, err := readValue(r, c, what)
		*dst = v
		return err
	}
	n, err := into.DecodeInto(dst, r.src)
	if err == nil && n >= 0 && n <= len(r.src) {
		r.src = r.src[n:]
		return nil
	}
	return r.decodeFailed(n, err, c, what)
}

func (r *partReader) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.src)
	if n <= 0 {
		return 0, r.corrupt(what, varintError("uvarint", r.src, n))
	}
	r.src = r.src[n:]
	return v, nil
}

func (r *partReader) varint(what string) (int64, error) {
	v, n := binary.Varint(r.src)
	if n <= 0 {
		return 0, r.corrupt(what, varintError("varint", r.src, n))
	}
	r.src = r.src[n:]
	return v, nil
}

// u64count reads a delta's u64le count of items, each at least one byte.
func (r *partReader) u64count(what string) (int, error) {
	if len(r.src) < 8 {
		return 0, r.corrupt(what, errShort)
	}
	v := binary.LittleEndian.Uint64(r.src)
	r.src = r.src[8:]
	if v > uint64(len(r.src)) {
		return 0, r.corrupt(what, fmt.Errorf("%d in %d bytes", v, len(r.src)))
	}
	return int(v), nil
}

// length reads a uvarint element count.
func (r *partReader) length(what string) (int, error) {
	v, err := r.uvarint(what)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt32 {
		return 0, r.corrupt(what, fmt.Errorf("%d out of range", v))
	}
	return int(v), nil
}

// sizeHint bounds a preallocation by the bytes left, so a corrupt count
// cannot make registration allocate without bound.
func (r *partReader) sizeHint(n int) int { return min(n, len(r.src)) }

// finish checks that a part decoded to count distinct keys and used all its bytes.
func (r *partReader) finish(distinct, count int) error {
	if distinct != count {
		return r.corrupt("keys", fmt.Errorf("%w: %d distinct of %d", errDuplicateKeys, distinct, count))
	}
	if len(r.src) != 0 {
		return r.corrupt("entries", fmt.Errorf("%d trailing bytes", len(r.src)))
	}
	return nil
}

// restoredChain returns the chain of the files a restore read (used: by
// key group, the snapshots it was read from, oldest first), for the next
// checkpoint snapshot to build on, or nil when it cannot: the files are not
// all of this backend's key group range (a rescaling: the old subtasks'
// chains, which the new subtasks do not own), or one names no checkpoint
// (format version 1, or encoded outside a checkpoint), or there were none.
// It has no baselines: the key groups written after the restore are
// written in full.
func restoredChain(b *Backend, files []*fileInfo, used [][]int) *chain {
	if len(files) == 0 {
		return nil
	}
	for _, f := range files {
		if f.checkpoint <= 0 || f.kgRange != b.kgRange {
			return nil
		}
	}
	n := len(used)
	c := &chain{epoch: b.restoreEpoch, files: make([][]int64, n), bytes: make([][]int, n), fileBytes: map[int64]int{}}
	for i, sis := range used {
		for _, si := range sis {
			f := files[si]
			e, _ := f.holds(b.kgRange.Start + i)
			c.files[i] = append(c.files[i], f.checkpoint)
			c.bytes[i] = append(c.bytes[i], e.length)
			if _, ok := c.fileBytes[f.checkpoint]; !ok {
				total := 0
				for _, e := range f.index {
					total += e.length
				}
				c.fileBytes[f.checkpoint] = total
			}
		}
	}
	return c
}
