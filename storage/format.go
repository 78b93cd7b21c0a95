package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Every stored file is its payload followed by a 16-byte trailer:
//
//	offset n     4 bytes  magic "IGCK"
//	offset n+4   8 bytes  payload length n, little-endian
//	offset n+12  4 bytes  CRC-32C (Castagnoli) of the payload, little-endian
//
// The trailer sits at the end so a writer can stream the payload and append it. A file cut short
// loses its trailer (the last 16 bytes are then payload bytes whose magic and length do not match),
// which is why truncation is told apart from a checksum mismatch.
const trailerSize = 16

// trailerMagic opens the trailer.
const trailerMagic = "IGCK"

// castagnoli is the CRC-32C table; CRC-32C has hardware support on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of p.
func checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// trailer returns the trailer for payload.
func trailer(payload []byte) []byte {
	t := make([]byte, trailerSize)
	copy(t, trailerMagic)
	binary.LittleEndian.PutUint64(t[4:12], uint64(len(payload)))
	binary.LittleEndian.PutUint32(t[12:16], checksum(payload))
	return t
}

// decode verifies the trailer of b, the full contents of the file at path, and returns the payload
// (a subslice of b). Errors are *CorruptError naming path.
func decode(path string, b []byte) ([]byte, error) {
	if len(b) < trailerSize {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("truncated: %d bytes, expected at least %d", len(b), trailerSize)}
	}
	n := len(b) - trailerSize
	t := b[n:]
	if string(t[:4]) != trailerMagic {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("truncated: %d bytes and no trailer (magic %q, expected %q)", len(b), t[:4], trailerMagic)}
	}
	if size := binary.LittleEndian.Uint64(t[4:12]); size != uint64(n) {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("truncated: trailer says %d payload bytes, file holds %d", size, n)}
	}
	payload := b[:n]
	if stored, computed := binary.LittleEndian.Uint32(t[12:16]), checksum(payload); stored != computed {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("checksum mismatch: stored 0x%08x computed 0x%08x", stored, computed)}
	}
	return payload, nil
}
