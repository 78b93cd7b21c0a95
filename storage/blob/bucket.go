package blob

import (
	"context"
	"errors"
	"io"
)

// bucket is what Storage needs of an object store: whole-object puts (optionally conditional),
// gets, existence checks, deletes and listings. The drivers are s3 (s3.go, through minio-go),
// file (file.go), mem (mem.go) and, in a build with the tag gocloud, any scheme a gocloud.dev/blob
// driver linked into the program registers (gocloud.go).
//
// Keys are '/'-separated; a driver maps them to its own names. Every method honours ctx.
type bucket interface {
	// put stores the concatenation of parts under key, atomically: a reader sees the old object
	// or the whole new one, never part of it. With ifNotExist it stores nothing and fails with an
	// error wrapping errExists when key already exists, deciding that atomically against
	// concurrent writers.
	put(ctx context.Context, key string, parts [][]byte, ifNotExist bool) error
	// get returns the object stored under key; a missing one fails with an error wrapping
	// errNotExist.
	get(ctx context.Context, key string) ([]byte, error)
	// exists reports whether an object is stored under key.
	exists(ctx context.Context, key string) (bool, error)
	// del deletes the object under key; a missing one is not an error.
	del(ctx context.Context, key string) error
	// list returns the entries whose keys start with prefix. With delimiter it lists one level,
	// as S3 does with the delimiter "/": keys with no further '/' after the prefix, and, once
	// each, the common prefixes up to and including the next '/', as directories. Without it,
	// every object under the prefix, and no directories. The order is unspecified.
	list(ctx context.Context, prefix string, delimiter bool) ([]listEntry, error)
	// close releases what the bucket holds (connections, a gocloud.dev bucket).
	close() error
}

// listEntry is one result of bucket.list.
type listEntry struct {
	// key is the object's key, or for a directory the common prefix, ending in '/'.
	key   string
	isDir bool
}

// Sentinel errors of the bucket drivers, for errors.Is.
var (
	// errNotExist: no object under that key.
	errNotExist = errors.New("object does not exist")
	// errExists: a conditional create found an object under that key.
	errExists = errors.New("object already exists")
)

// driverError is an error of a driver classified as errNotExist or errExists while keeping the
// driver's own message and chain.
type driverError struct {
	kind error // errNotExist or errExists
	err  error
}

func (e *driverError) Error() string { return e.err.Error() }

// Unwrap returns the driver's error and the sentinel.
func (e *driverError) Unwrap() []error { return []error{e.kind, e.err} }

// partsReader reads the concatenation of byte slices without copying them. It implements
// io.ReaderAt and io.Seeker so that an HTTP client can retry an upload from the start.
type partsReader struct {
	parts [][]byte
	size  int64
	off   int64
}

func newPartsReader(parts [][]byte) *partsReader {
	r := &partsReader{parts: parts}
	for _, p := range parts {
		r.size += int64(len(p))
	}
	return r
}

// Read implements io.Reader.
func (r *partsReader) Read(b []byte) (int, error) {
	n, err := r.ReadAt(b, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt implements io.ReaderAt.
func (r *partsReader) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("partsReader: negative offset")
	}
	n := 0
	for _, p := range r.parts {
		if n == len(b) {
			break
		}
		if off >= int64(len(p)) {
			off -= int64(len(p))
			continue
		}
		c := copy(b[n:], p[off:])
		n += c
		off = 0
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Seek implements io.Seeker.
func (r *partsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("partsReader: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("partsReader: negative position")
	}
	r.off = offset
	return offset, nil
}
