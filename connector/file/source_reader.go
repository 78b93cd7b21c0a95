package file

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/watermark"
)

// maxBatchBytes bounds the input one Read consumes, so a Read of long
// lines still returns promptly.
const maxBatchBytes = 4 << 20

// reader is one source subtask. Its methods are called from the subtask's
// goroutine.
type reader[T any] struct {
	src *Source[T]
	cfg *SourceConfig
	out runtime.Output
	log *slog.Logger
	// maxP and kgs decide which files are this subtask's (see owns).
	maxP int
	kgs  state.KeyGroupRange
	// splits are the subtask's files in the order found; known indexes
	// them by path.
	splits []*split
	known  map[string]*split
	// listed: stop_at latest, the file list is fixed (see position.Listed).
	listed bool
	// rr is the round-robin cursor over splits; open counts open files.
	rr, open int
	// nextPoll is when a following subtask next globs and stats.
	nextPoll time.Time
	wm       *watermark.Tracker
	csv      csvRecord
	// patternParts are the glob's path components (see hidden).
	patternParts []string
}

func (r *reader[T]) stopAtLatest() bool { return r.cfg.StopAt == StopAtLatest }

func (r *reader[T]) Open(ctx *runtime.Context) error {
	r.cfg = &r.src.cfg
	r.out = ctx.Output
	r.log = ctx.Log
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.maxP = ctx.MaxParallelism
	if r.maxP == 0 {
		r.maxP = state.DefaultMaxParallelism
	}
	if ctx.Parallelism < 1 || ctx.Parallelism > r.maxP || ctx.Task.Subtask < 0 || ctx.Task.Subtask >= ctx.Parallelism || r.maxP > state.UpperBoundMaxParallelism {
		return fmt.Errorf("file source %s: subtask %d of %d with max parallelism %d", r.cfg.Path, ctx.Task.Subtask, ctx.Parallelism, r.maxP)
	}
	r.kgs = state.KeyGroupRangeFor(r.maxP, ctx.Parallelism, ctx.Task.Subtask)
	r.known = map[string]*split{}
	r.wm = watermark.NewTracker(r.cfg.Watermark)
	r.patternParts = strings.Split(filepath.ToSlash(r.cfg.Path), "/")
	now := time.Now()

	var pos position
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		var err error
		if pos, err = decodePosition(ctx.Restored.Inline); err != nil {
			return fmt.Errorf("file source %s: %w", r.cfg.Path, err)
		}
	}
	for _, fp := range pos.Files {
		if !r.owns(fp.Path) {
			continue // another subtask's, after a rescale
		}
		s := &split{path: fp.Path, off: fp.Offset, line: fp.Line, headerEnd: fp.HeaderEnd, end: -1}
		if fp.MaxTime != nil {
			s.maxTime, s.timed = *fp.MaxTime, true
		}
		switch {
		case !r.stopAtLatest():
			// Following: a file read to its end at stop_at latest may
			// have grown since; read on.
		case pos.Listed:
			s.end, s.done = *fp.End, fp.Done
		default:
			// Switched to stop_at latest: read to the size now.
			fi, err := os.Stat(fp.Path)
			if err != nil {
				return fmt.Errorf("file source: %s was read to byte %d and cannot be read to its end now: %w", fp.Path, fp.Offset, err)
			}
			s.end = fi.Size()
			if s.end < s.off {
				return s.truncated(s.end)
			}
		}
		r.add(s, now)
	}
	if r.stopAtLatest() {
		if !pos.Listed {
			if err := r.discover(now); err != nil {
				return err
			}
		}
		r.listed = true
		return nil
	}
	r.nextPoll = now.Add(r.cfg.PollInterval)
	return r.discover(now)
}

// owns reports whether path is this subtask's: the file's key group, as
// keyed state would place the path as a key, is in the subtask's range.
func (r *reader[T]) owns(path string) bool {
	return r.kgs.Contains(state.KeyGroupFor(state.HashKey(path), r.maxP))
}

// hidden reports whether a component of path that a wildcard of the
// pattern matched begins with '.' or '_'.
func (r *reader[T]) hidden(path string) bool {
	parts := strings.Split(filepath.ToSlash(path), "/")
	if len(parts) != len(r.patternParts) {
		return false
	}
	for i, p := range r.patternParts {
		if strings.ContainsAny(p, `*?[\`) && (strings.HasPrefix(parts[i], ".") || strings.HasPrefix(parts[i], "_")) {
			return true
		}
	}
	return false
}

// add makes s one of the subtask's splits.
func (r *reader[T]) add(s *split, now time.Time) {
	s.idx = r.wm.AddSplit(now.UnixNano())
	if s.timed {
		r.wm.Observe(s.idx, s.maxTime)
	}
	if s.done {
		r.wm.Finish(s.idx)
	}
	s.pending = !s.done
	r.splits = append(r.splits, s)
	r.known[s.path] = s
}

// discover adds the files matching the glob that are this subtask's and
// not yet known. With stop_at latest their ends are their sizes now.
func (r *reader[T]) discover(now time.Time) error {
	matches, err := filepath.Glob(r.cfg.Path)
	if err != nil {
		return fmt.Errorf("file source: glob %s: %w", r.cfg.Path, err)
	}
	for _, m := range matches {
		if r.known[m] != nil || !r.owns(m) || r.hidden(m) {
			continue
		}
		fi, err := os.Stat(m)
		if err != nil || !fi.Mode().IsRegular() {
			continue // gone again, or a directory
		}
		s := &split{path: m, end: -1}
		if r.stopAtLatest() {
			s.end = fi.Size()
		}
		r.add(s, now)
	}
	return nil
}

// poll (following only) marks files that grew as pending, forgets files
// that were deleted, and discovers new files.
func (r *reader[T]) poll(now time.Time) error {
	gone := false
	for _, s := range r.splits {
		if s.pending {
			continue
		}
		fi, err := os.Stat(s.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Deleted after it was read to its end: nothing more will
			// come. A file created later under its path is a new file.
			r.log.Info("file source: file deleted; forgetting it", "path", s.path, "offset", s.off)
			r.wm.Finish(s.idx)
			s.release()
			delete(r.known, s.path)
			s.path, gone = "", true
		case err != nil:
			return fmt.Errorf("file source: %w", err)
		case fi.Size() < s.readOff():
			return s.truncated(fi.Size())
		case fi.Size() > s.readOff():
			s.pending = true
		}
	}
	if gone {
		r.splits = slices.DeleteFunc(r.splits, func(s *split) bool { return s.path == "" })
	}
	return r.discover(now)
}

// next picks the split to read: round-robin over pending splits, opening a
// closed one only while fewer than MaxOpenFiles are open.
func (r *reader[T]) next() *split {
	n := len(r.splits)
	for i := range n {
		s := r.splits[(r.rr+i)%n]
		if !s.pending || (s.f == nil && r.open >= r.cfg.MaxOpenFiles) {
			continue
		}
		r.rr = (r.rr + i + 1) % n
		return s
	}
	return nil
}

func (r *reader[T]) Read() (runtime.ReadResult, error) {
	now := time.Now()
	if !r.stopAtLatest() && !now.Before(r.nextPoll) {
		if err := r.poll(now); err != nil {
			return runtime.ReadResult{}, err
		}
		r.nextPoll = now.Add(r.cfg.PollInterval)
	}
	var batch runtime.Batch[T]
	for range len(r.splits) {
		s := r.next()
		if s == nil {
			break
		}
		var err error
		if batch, err = r.readSplit(s, batch); err != nil {
			return runtime.ReadResult{}, err
		}
		if len(batch) > 0 {
			break
		}
	}
	if len(batch) > 0 {
		if err := r.out.Emit(batch); err != nil {
			return runtime.ReadResult{}, err
		}
	}
	var res runtime.ReadResult
	now = time.Now()
	res.Watermark, res.Idle = r.wm.Current(now.UnixNano())
	switch {
	case r.stopAtLatest():
		res.Exhausted = !slices.ContainsFunc(r.splits, func(s *split) bool { return !s.done })
	case len(batch) == 0:
		// Nothing to read until the next poll; come back by the idle
		// timeout at the latest so idleness is reported on time.
		wait := r.nextPoll.Sub(now)
		if it := r.cfg.Watermark.IdleTimeout; it > 0 && wait > it {
			wait = it
		}
		res.Wait = max(wait, time.Millisecond)
	}
	return res, nil
}

// readSplit reads up to BatchSize records from s into batch. When s has
// nothing more for now it is closed: finished with stop_at latest, no
// longer pending when following.
func (r *reader[T]) readSplit(s *split, batch runtime.Batch[T]) (_ runtime.Batch[T], err error) {
	wasOpen := s.f != nil
	defer func() {
		if isOpen := s.f != nil; isOpen != wasOpen {
			if isOpen {
				r.open++
			} else {
				r.open--
			}
		}
	}()
	if r.cfg.Format == FormatCSV && s.header == nil && s.headerEnd > 0 {
		if s.header, err = r.readHeader(s); err != nil {
			return batch, r.failed(s, err)
		}
	}
	// A Read returns promptly: at most BatchSize records and about
	// maxBatchBytes of input.
	from := s.off
	for len(batch) < r.cfg.BatchSize && s.off-from < maxBatchBytes {
		line, ok, err := r.nextLine(s)
		if err != nil {
			return batch, r.failed(s, err)
		}
		if !ok {
			r.caughtUp(s)
			return batch, nil
		}
		v, t, err := r.src.decode(line)
		if err != nil {
			return batch, r.failed(s, fmt.Errorf("file source: %s:%d (byte offset %d): %w", line.Path, line.Number, line.Offset, err))
		}
		if !s.timed || t > s.maxTime {
			s.maxTime, s.timed = t, true
		}
		r.wm.Observe(s.idx, t)
		if batch == nil {
			batch = make(runtime.Batch[T], 0, min(r.cfg.BatchSize, 1024))
		}
		batch = append(batch, runtime.Record[T]{Value: v, Time: t})
	}
	return batch, nil
}

// readHeader reads the header of a CSV split restored past it: the file's
// first record, which must end where the position says it did.
func (r *reader[T]) readHeader(s *split) (*Header, error) {
	h := &split{path: s.path, end: s.headerEnd}
	defer h.release()
	for {
		_, ok, err := r.nextLine(h)
		if err != nil {
			return nil, err
		}
		if h.header != nil || !ok {
			break
		}
	}
	if h.header == nil || h.headerEnd != s.headerEnd {
		return nil, fmt.Errorf("file source: %s: the header no longer ends at byte %d, where it did when the position was saved: the file was replaced", s.path, s.headerEnd)
	}
	return h.header, nil
}

// failed closes s's file and returns err; a missing file is named as such.
func (r *reader[T]) failed(s *split, err error) error {
	s.release()
	if errors.Is(err, fs.ErrNotExist) && !s.done {
		return fmt.Errorf("%w (read up to byte %d of it; a file must stay until it is read to its end)", err, s.off)
	}
	return err
}

// caughtUp closes s after it had nothing more to read.
func (r *reader[T]) caughtUp(s *split) {
	s.release()
	s.pending = false
	if s.end >= 0 && s.off >= s.end {
		s.done = true
		r.wm.Finish(s.idx)
	}
}

// nextLine consumes s's next record, skipping blank lines and a CSV
// file's header. ok is false when no complete record is there yet.
func (r *reader[T]) nextLine(s *split) (l Line, ok bool, err error) {
	csv := r.cfg.Format == FormatCSV
	for {
		final := s.final()
		if s.skipBOM() {
			if data := s.buf[s.pos:]; len(data) > 0 {
				start, number := s.off, s.line+1
				var n, lines int
				var text []byte
				if csv {
					n, lines, err = r.csv.parse(data, byte(r.cfg.Comma), final)
				} else {
					n, lines, text, err = parseJSONLine(data, final)
				}
				if err != nil && !errors.Is(err, errIncomplete) {
					return l, false, fmt.Errorf("file source: %s: %w", s.where(), err)
				}
				if err == nil && n > r.cfg.MaxLineBytes {
					return l, false, fmt.Errorf("file source: %s: the record is longer than max_line_bytes %d", s.where(), r.cfg.MaxLineBytes)
				}
				if err == nil {
					s.consume(n, lines)
					if csv {
						if len(bytes.TrimRight(data[:n], "\r\n")) == 0 {
							continue // a blank line
						}
						if s.header == nil {
							h, err := newHeader(slices.Clone(r.csv.strings()))
							if err != nil {
								return l, false, fmt.Errorf("file source: %s:%d: %w", s.path, number, err)
							}
							s.header, s.headerEnd = h, s.off
							continue
						}
						fields := r.csv.strings()
						if len(fields) != len(s.header.Names) {
							return l, false, fmt.Errorf("file source: %s:%d (byte offset %d): %d fields, the header has %d", s.path, number, start, len(fields), len(s.header.Names))
						}
						return Line{Path: s.path, Number: number, Offset: start, Fields: fields, Header: s.header}, true, nil
					}
					if len(bytes.TrimSpace(text)) == 0 {
						continue
					}
					return Line{Path: s.path, Number: number, Offset: start, JSON: text}, true, nil
				}
				if len(data) >= r.cfg.MaxLineBytes {
					return l, false, fmt.Errorf("file source: %s: the record is longer than max_line_bytes %d", s.where(), r.cfg.MaxLineBytes)
				}
			}
		}
		if final {
			return l, false, nil
		}
		more, err := s.fill(r.cfg.MaxLineBytes)
		if err != nil || !more {
			return l, false, err
		}
	}
}

// parseJSONLine splits the line at the start of data: its text without the
// line terminator, the bytes it spans and its line breaks. With final the
// end of data ends the line.
func parseJSONLine(data []byte, final bool) (n, lines int, text []byte, err error) {
	j := bytes.IndexByte(data, '\n')
	switch {
	case j >= 0:
		n, lines, text = j+1, 1, data[:j]
	case final:
		n, text = len(data), data
	default:
		return 0, 0, nil, errIncomplete
	}
	return n, lines, bytes.TrimSuffix(text, []byte{'\r'}), nil
}

func (r *reader[T]) Position() ([]byte, error) { return encodePosition(r.listed, r.splits) }

func (r *reader[T]) Close() error {
	for _, s := range r.splits {
		s.release()
	}
	r.open = 0
	return nil
}
