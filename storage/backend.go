package storage

import "fmt"

// The names below are for Storage implementations outside this package (storage/blob). They
// export the file format and the layout Local uses, so that every backend writes the same bytes
// under the same names: a checkpoint copied from one backend to another reads back verified, and
// operators find the same layout everywhere. They are thin wrappers over what Local itself calls.

// TrailerSize is the length of the checksum trailer every stored file ends with (see format.go).
const TrailerSize = trailerSize

// Trailer returns the checksum trailer to store after payload: the stored file is payload followed
// by Trailer(payload).
func Trailer(payload []byte) []byte { return trailer(payload) }

// Decode verifies the trailer of b, the full contents of the file at path, and returns the payload
// (a subslice of b). A truncated or corrupted b yields a *CorruptError naming path.
func Decode(path string, b []byte) ([]byte, error) { return decode(path, b) }

// Checksum returns the CRC-32C (Castagnoli) of p, the checksum a Handle records.
func Checksum(p []byte) uint32 { return checksum(p) }

// ValidName says why name cannot be a state file name (empty, too long, a path separator, "..",
// a NUL byte, a leading '.' or '_'), or returns nil.
func ValidName(name string) error { return validName(name) }

// CheckID rejects ids that cannot name a checkpoint (negative ones).
func CheckID(id int64) error { return checkID(id) }

// CheckpointDirName returns the name of checkpoint id's directory (or object-key prefix):
// "chk-" and the id zero-padded to 10 digits, e.g. chk-0000000007.
func CheckpointDirName(id int64) string { return fmt.Sprintf("%s%010d", dirPrefix, id) }
