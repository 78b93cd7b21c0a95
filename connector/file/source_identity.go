package file

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// A split's identity is not its path: a path can come to name another file
// (mv of a new file over it, rotation) while the source is running or
// stopped, and reading the new file from the old file's byte offset loses its
// first bytes silently. A split therefore carries the identity of its file,
// taken when the file is first seen and checked on restore, at every poll and
// at every open.

// headBytes is how many of a file's first bytes its identity checksums.
const headBytes = 1024

// castagnoli is the CRC-32C table: of fileID.HeadCRC, and of staged sink
// files' checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileKey is a file's device and inode number: what a rename keeps and a
// replacement changes. ok is false where the platform reports no inode
// numbers; files are then known by path and content only.
type fileKey struct {
	dev, ino uint64
	ok       bool
}

// fileID is the identity of a split's file, stored in its position.
// INVARIANT: a split's file is the one its bytes 0..offset were read from
// only if its inode is Ino, it is at least Size bytes long and its first
// HeadLen bytes have checksum HeadCRC.
type fileID struct {
	// Dev and Ino are the device and inode numbers. Dev is compared only
	// within one run: a restore after a remount may see other device
	// numbers for the same files (network and overlay filesystems).
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	// Size is the file's size when the identity was taken or last
	// confirmed: a file that is only appended to never gets shorter.
	Size int64 `json:"size"`
	// HeadLen is how many first bytes HeadCRC covers: min(size, headBytes)
	// when the identity was taken or last confirmed.
	HeadLen int64 `json:"head_len"`
	// HeadCRC is the CRC-32C of the first HeadLen bytes.
	HeadCRC uint32 `json:"head_crc"`
}

// key returns the identity's device and inode.
func (id fileID) key() fileKey { return fileKey{dev: id.Dev, ino: id.Ino, ok: id.Ino != 0} }

// idOfPath returns the identity of the file now under path.
func idOfPath(path string) (fileID, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileID{}, fmt.Errorf("file source: opening %s: %w", path, err)
	}
	defer f.Close()
	return takeID(f)
}

// takeID returns the identity of the open file f.
func takeID(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, fmt.Errorf("file source: %w", err)
	}
	k := keyOf(fi)
	head, err := readHead(f, min(fi.Size(), headBytes))
	if err != nil {
		return fileID{}, err
	}
	return fileID{Dev: k.dev, Ino: k.ino, Size: fi.Size(), HeadLen: int64(len(head)), HeadCRC: crc32.Checksum(head, castagnoli)}, nil
}

// readHead reads the first n bytes of f, fewer if it is shorter.
func readHead(f *os.File, n int64) ([]byte, error) {
	head := make([]byte, n)
	m, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("file source: reading the first bytes of %s: %w", f.Name(), err)
	}
	return head[:m], nil
}

// confirm checks that f, found under the split's key, is still the file
// the identity describes, of which read bytes were read, and returns the
// identity brought up to date (device, size, a longer head while the file is
// shorter than headBytes). changed says why it is not the same file: it got
// shorter, or its first bytes changed (truncated, or rewritten in place).
func (id fileID) confirm(f *os.File, read int64) (_ fileID, changed string, err error) {
	fi, err := f.Stat()
	if err != nil {
		return id, "", fmt.Errorf("file source: %w", err)
	}
	size := fi.Size()
	if floor := max(read, id.Size); size < floor {
		return id, fmt.Sprintf("it is %d bytes, shorter than the %d bytes it had when read before", size, floor), nil
	}
	head, err := readHead(f, min(size, headBytes))
	if err != nil {
		return id, "", err
	}
	if int64(len(head)) < id.HeadLen || crc32.Checksum(head[:id.HeadLen], castagnoli) != id.HeadCRC {
		return id, fmt.Sprintf("its first %d bytes are not those read before", id.HeadLen), nil
	}
	k := keyOf(fi)
	id.Dev, id.Ino = k.dev, k.ino
	id.Size = size
	id.HeadLen, id.HeadCRC = int64(len(head)), crc32.Checksum(head, castagnoli)
	return id, "", nil
}

// String names the identity in errors and logs.
func (id fileID) String() string {
	if id.Ino == 0 {
		return fmt.Sprintf("%d bytes", id.Size)
	}
	return fmt.Sprintf("inode %d, %d bytes", id.Ino, id.Size)
}

// validate reports an identity no build writes.
func (id fileID) validate() error {
	if id.Size < 0 || id.HeadLen < 0 || id.HeadLen > headBytes || id.HeadLen > id.Size {
		return fmt.Errorf("identity size %d, head %d", id.Size, id.HeadLen)
	}
	return nil
}
