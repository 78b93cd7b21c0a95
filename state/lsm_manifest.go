package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ingest-engine/ingest/storage"
)

// LSM manifest format, version 1: the state file an LSM backend stores for a
// checkpoint. It names every data file of the store's checkpoint, uploaded
// by this checkpoint or an earlier one, and carries the store's small files
// (MANIFEST, OPTIONS, markers) whole. Integers are uvarints unless marked;
// a string is a uvarint length and its bytes.
//
//	manifest = "IGLS" | version=1 | string operator | maxParallelism
//	           | rangeStart | rangeEnd | checkpoint | nextSID
//	           | stateCount | state* | smallCount | small* | fileCount | file*
//	           | u32le crc | "IGLS"
//	state    = string name | sid | byte kind | codecCount | string*
//	small    = string name | string bytes
//	file     = string localName | varint checkpoint | string storedName
//	           | size | u32le crc | kgLo | kgHi
//
// crc is the CRC-32C of everything before it. A file's checkpoint, stored
// name, size and crc are its storage.Handle; [kgLo, kgHi] are the key groups
// its keys span (the subtask's whole range when unknown), so a rescaling
// restore can tell which files it needs.
const (
	lsmMagic   = "IGLS"
	lsmVersion = 1
)

// lsmManifest is a decoded LSM manifest.
type lsmManifest struct {
	operator       string
	maxParallelism int
	kgRange        KeyGroupRange
	checkpoint     int64
	nextSID        uint16
	states         []lsmCatalogEntry
	small          []lsmSmallFile
	files          []lsmFile
}

// lsmSmallFile is a store file the manifest carries whole.
type lsmSmallFile struct {
	name string
	data []byte
}

// lsmFile is a store data file (an SST) as stored for a checkpoint.
type lsmFile struct {
	local  string // its name in the store's directory
	handle storage.Handle
	// kgLo and kgHi bound the key groups of its keys, inclusive.
	kgLo, kgHi int
}

// IsLSMManifest reports whether a state file is an LSM backend's manifest
// (as opposed to a memory backend's snapshot file).
func IsLSMManifest(data []byte) bool { return bytes.HasPrefix(data, []byte(lsmMagic)) }

func (m *lsmManifest) encode() []byte {
	out := []byte(lsmMagic)
	out = appendUvarint(out, lsmVersion)
	out = appendString(out, m.operator)
	out = appendUvarint(out, m.maxParallelism)
	out = appendUvarint(out, m.kgRange.Start)
	out = appendUvarint(out, m.kgRange.End)
	out = appendUvarint(out, uint64(m.checkpoint))
	out = appendUvarint(out, int(m.nextSID))
	out = appendUvarint(out, len(m.states))
	for _, e := range m.states {
		out = appendString(out, e.meta.name)
		out = appendUvarint(out, int(e.sid))
		out = append(out, byte(e.meta.kind))
		out = appendUvarint(out, len(e.meta.codecs))
		for _, c := range e.meta.codecs {
			out = appendString(out, c)
		}
	}
	out = appendUvarint(out, len(m.small))
	for _, f := range m.small {
		out = appendString(out, f.name)
		out = appendUvarint(out, len(f.data))
		out = append(out, f.data...)
	}
	out = appendUvarint(out, len(m.files))
	for _, f := range m.files {
		out = appendString(out, f.local)
		out = appendVarint(out, f.handle.Checkpoint)
		out = appendString(out, f.handle.Name)
		out = appendUvarint(out, uint64(f.handle.Size))
		out = binary.LittleEndian.AppendUint32(out, f.handle.CRC)
		out = appendUvarint(out, f.kgLo)
		out = appendUvarint(out, f.kgHi)
	}
	out = binary.LittleEndian.AppendUint32(out, crc32c(out))
	return append(out, lsmMagic...)
}

// decodeLSMManifest parses and verifies a manifest; ctx names it in errors,
// which wrap ErrCorrupt.
func decodeLSMManifest(data []byte, ctx string) (*lsmManifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, ctx, fmt.Sprintf(format, args...))
	}
	if len(data) < 2*len(lsmMagic)+4 || !bytes.HasPrefix(data, []byte(lsmMagic)) || !bytes.HasSuffix(data, []byte(lsmMagic)) {
		return nil, bad("not an LSM state manifest (%d bytes)", len(data))
	}
	body := data[:len(data)-len(lsmMagic)-4]
	if got, want := crc32c(body), binary.LittleEndian.Uint32(data[len(body):]); got != want {
		return nil, bad("checksum mismatch (%08x, stored %08x)", got, want)
	}
	r := &byteReader{b: body[len(lsmMagic):]}
	if v := r.uvarint(); r.err == nil && v != lsmVersion {
		return nil, fmt.Errorf("%s: LSM manifest format version %d; this build reads version %d", ctx, v, lsmVersion)
	}
	m := &lsmManifest{}
	m.operator = r.string()
	m.maxParallelism = r.int()
	m.kgRange = KeyGroupRange{Start: r.int(), End: r.int()}
	m.checkpoint = int64(r.uvarint())
	nextSID := r.uvarint()
	if nextSID > math.MaxUint16 {
		return nil, bad("state id %d out of range", nextSID)
	}
	m.nextSID = uint16(nextSID)
	n := r.int()
	for i := 0; i < n && r.err == nil; i++ {
		var e lsmCatalogEntry
		e.meta.name = r.string()
		sid := r.uvarint()
		if sid == 0 || sid >= nextSID {
			return nil, bad("state %q has id %d, outside [1,%d)", e.meta.name, sid, nextSID)
		}
		e.sid = uint16(sid)
		e.meta.kind = Kind(r.byte())
		nc := r.int()
		for j := 0; j < nc && r.err == nil; j++ {
			e.meta.codecs = append(e.meta.codecs, r.string())
		}
		m.states = append(m.states, e)
	}
	n = r.int()
	for i := 0; i < n && r.err == nil; i++ {
		name := r.string()
		size := r.int()
		m.small = append(m.small, lsmSmallFile{name: name, data: bytes.Clone(r.next(size))})
	}
	n = r.int()
	for i := 0; i < n && r.err == nil; i++ {
		var f lsmFile
		f.local = r.string()
		f.handle.Checkpoint = r.varint()
		f.handle.Name = r.string()
		f.handle.Size = int64(r.uvarint())
		f.handle.CRC = r.uint32()
		f.kgLo, f.kgHi = r.int(), r.int()
		m.files = append(m.files, f)
	}
	if r.err != nil {
		return nil, bad("%v", r.err)
	}
	if r.off != len(r.b) {
		return nil, bad("%d trailing bytes", len(r.b)-r.off)
	}
	if m.kgRange.Len() == 0 || m.kgRange.End > m.maxParallelism {
		return nil, bad("key group range %v outside [0,%d)", m.kgRange, m.maxParallelism)
	}
	seen := map[uint16]bool{}
	for _, e := range m.states {
		if seen[e.sid] {
			return nil, bad("two states with id %d", e.sid)
		}
		seen[e.sid] = true
	}
	for _, f := range m.files {
		if !safeLocalName(f.local) {
			return nil, bad("file name %q is not a store file name", f.local)
		}
	}
	for _, f := range m.small {
		if !safeLocalName(f.name) {
			return nil, bad("file name %q is not a store file name", f.name)
		}
	}
	return m, nil
}

// safeLocalName reports whether name can be a file of a store directory:
// one path component, no traversal.
func safeLocalName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == '\\' || name[i] == 0 {
			return false
		}
	}
	return true
}

// handles returns the storage handles of the manifest's data files.
func (m *lsmManifest) handles() []storage.Handle {
	out := make([]storage.Handle, len(m.files))
	for i, f := range m.files {
		out[i] = f.handle
	}
	return out
}
