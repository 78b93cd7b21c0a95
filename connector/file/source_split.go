package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// readChunk is the size of one read from a file.
const readChunk = 128 << 10

// utf8BOM is skipped at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// split is one file a source subtask reads: a watermark split, and the unit
// of the replay position.
type split struct {
	path string
	// idx is the file's split in the subtask's watermark.Tracker.
	idx int
	// off is the byte offset after the last record consumed: the replay
	// position. line counts the line breaks before off.
	off, line int64
	// end is the size to read to with stop_at latest; -1 when following.
	end int64
	// maxTime is the newest event time read; valid when timed.
	maxTime int64
	timed   bool
	// done: read to end (stop_at latest only); the split is finished.
	done bool
	// pending: the file may hold bytes not yet read. Following, it is
	// cleared when a read reaches the end of the file and set by a poll
	// that finds the file grown.
	pending bool
	// atEnd: the file was read to its end at the last look (see
	// filePosition.AtEnd).
	atEnd bool
	// id is the identity of the file (see fileID), valid when hasID: taken
	// when the file is first seen, or on restore from a version 1 position.
	id    fileID
	hasID bool
	// retiring: the file left the glob (or its path names another file)
	// while open; it is read to its end through f and then dropped.
	retiring bool
	// dropped: the split is to be removed (see reader.compact).
	dropped bool
	// header is a CSV file's header, nil until read; headerEnd is the
	// offset after it, 0 until read.
	header    *Header
	headerEnd int64
	// f is open while the file is read; nil otherwise.
	f *os.File
	// skip is the oversized record being skipped, nil when none is.
	skip *oversized
	// buf[pos:] are the bytes from off (plus those of skip discarded) on
	// that were read and not consumed.
	// INVARIANT: readOff() == off + skip.n + len(buf) - pos is where the
	// next read from the file starts.
	buf []byte
	pos int
}

// oversized is a record longer than the size limit that a split is
// skipping up to its first line break: its bytes are discarded as they are
// read, so it is never buffered whole. The split's offset stays at the record's start until its
// end is found: a checkpoint taken meanwhile resumes at the record, which is
// then found oversized again.
type oversized struct {
	// start and number are the record's byte offset and line number.
	start, number int64
	// n and lines are the bytes and line breaks discarded so far.
	n, lines int64
	// raw is the record's first bytes, up to the limit (kept for the
	// dead-letter output only).
	raw []byte
}

// discard drops the first m buffered bytes of s as part of the record.
func (k *oversized) discard(s *split, m int) {
	k.n += int64(m)
	k.lines += int64(bytes.Count(s.buf[s.pos:s.pos+m], []byte{'\n'}))
	s.pos += m
}

// readOff is the file offset the next read starts at.
func (s *split) readOff() int64 {
	off := s.off + int64(len(s.buf)-s.pos)
	if s.skip != nil {
		off += s.skip.n
	}
	return off
}

// final reports whether no more bytes will be read: stop_at latest and the
// end is buffered.
func (s *split) final() bool { return s.end >= 0 && s.readOff() >= s.end }

// consume moves past n buffered bytes spanning lines line breaks.
func (s *split) consume(n, lines int) {
	s.pos += n
	s.off += int64(n)
	s.line += int64(lines)
}

// where locates the next unconsumed record for error messages.
func (s *split) where() string {
	return fmt.Sprintf("%s:%d (byte offset %d)", s.path, s.line+1, s.off)
}

// fill reads more of the file into buf. It returns false when nothing more
// is there now (or, with stop_at latest, up to end).
func (s *split) fill(maxLine int) (bool, error) {
	if s.final() {
		return false, nil
	}
	if s.f == nil {
		f, err := os.Open(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, errMoved
		}
		if err != nil {
			return false, fmt.Errorf("file source: opening %s: %w", s.path, err)
		}
		if err := s.verify(f); err != nil {
			_ = f.Close()
			return false, err
		}
		s.f = f
	}
	if s.pos > 0 {
		n := copy(s.buf, s.buf[s.pos:])
		s.buf, s.pos = s.buf[:n], 0
	}
	if cap(s.buf)-len(s.buf) < readChunk/2 {
		s.buf = slices.Grow(s.buf, max(readChunk, min(2*len(s.buf), maxLine+readChunk)))
	}
	at := s.readOff()
	want := s.buf[len(s.buf):cap(s.buf)]
	if s.end >= 0 && s.end-at < int64(len(want)) {
		want = want[:s.end-at]
	}
	n, err := s.f.ReadAt(want, at)
	s.buf = s.buf[:len(s.buf)+n]
	if n > 0 {
		return true, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("file source: reading %s at byte %d: %w", s.path, at, err)
	}
	fi, err := s.f.Stat()
	if err != nil {
		return false, fmt.Errorf("file source: %w", err)
	}
	if fi.Size() < at || (s.end >= 0 && fi.Size() < s.end) {
		return false, &rewrittenError{why: fmt.Sprintf("it is %d bytes, shorter than the %d bytes already read or listed by stop_at latest", fi.Size(), max(at, s.end))}
	}
	return false, nil
}

// errMoved says a split's path is gone or names another file than the
// split's: the reader finds out where the file went (reader.relocate).
var errMoved = errors.New("the file is no longer under its path")

// rewrittenError says a split's file, still under its path, got shorter
// than what was read or its first bytes changed.
type rewrittenError struct{ why string }

func (e *rewrittenError) Error() string { return "the file was truncated or rewritten: " + e.why }

// verify checks that f, just opened under s's path, is s's file: errMoved
// when it is another file, a *rewrittenError when it is s's file but
// shorter than what was read or with other first bytes. A split without an
// identity takes f's.
func (s *split) verify(f *os.File) error {
	if !s.hasID {
		id, err := takeID(f)
		if err != nil {
			return err
		}
		s.id, s.hasID = id, true
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	if k := keyOf(fi); k.ok && k != s.id.key() {
		return errMoved
	}
	id, changed, err := s.id.confirm(f, max(s.readOff(), s.end))
	if err != nil {
		return err
	}
	if changed != "" {
		return &rewrittenError{why: changed}
	}
	s.id = id
	return nil
}

// release closes the file and keeps at most the unconsumed tail (a partial
// last line) of the buffer.
func (s *split) release() {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	switch tail := s.buf[s.pos:]; {
	case len(tail) == 0:
		s.buf, s.pos = nil, 0
	case cap(s.buf) > 2*len(tail)+4096:
		s.buf, s.pos = bytes.Clone(tail), 0
	}
}

// skipBOM consumes a UTF-8 byte order mark at the start of the file. It
// returns false when too few bytes are buffered to tell.
func (s *split) skipBOM() bool {
	if s.off != 0 {
		return true
	}
	data := s.buf[s.pos:]
	if bytes.HasPrefix(data, utf8BOM) {
		s.consume(len(utf8BOM), 0)
		return true
	}
	return len(data) >= len(utf8BOM) || !bytes.HasPrefix(utf8BOM, data) || s.final()
}
