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
	"github.com/ingest-engine/ingest/stream"
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

	// setup is the bad-record policy (SetBadRecords); bad applies it.
	setup stream.BadRecordSetup
	bad   *stream.BadRecords
	// maxLine is the size limit of a record, named limitName in errors:
	// the policy's MaxRecordBytes when set, else MaxLineBytes.
	maxLine   int
	limitName string
}

// SetBadRecords sets the subtask's bad-record policy (see
// stream.OnBadRecords); without it a bad record fails the task. The
// policy's MaxRecordBytes, when set, replaces SourceConfig.MaxLineBytes.
func (r *reader[T]) SetBadRecords(s stream.BadRecordSetup) { r.setup = s }

// badLine is a record nextLine consumed that is bad: malformed CSV, the
// wrong number of fields, or longer than the size limit. The bad-record
// policy decides what becomes of it.
type badLine struct {
	rec stream.BadRecord
	// err names the file, line, byte offset and cause.
	err error
}

func (e *badLine) Error() string { return e.err.Error() }

// badLine returns the bad record of s starting at byte start on line
// number, with its bytes raw and cause.
func (r *reader[T]) badLine(s *split, start, number int64, raw []byte, cause error) *badLine {
	return &badLine{
		rec: stream.BadRecord{Partition: s.path, Offset: start, Line: number, Raw: raw, Err: cause},
		err: fmt.Errorf("file source: %s:%d (byte offset %d): %w", s.path, number, start, cause),
	}
}

// tooLong is the cause of an oversized record.
func (r *reader[T]) tooLong() error {
	return fmt.Errorf("the record is longer than %s %d", r.limitName, r.maxLine)
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
	switch {
	case ctx.RestoredUnion != nil:
		// Restored at another parallelism: every old subtask's position;
		// the loop below takes the files this subtask owns now.
		var err error
		if pos, err = unionPositions(ctx.RestoredUnion, ctx.Task.Subtask == 0); err != nil {
			return fmt.Errorf("file source %s: %w", r.cfg.Path, err)
		}
	case ctx.Restored != nil && len(ctx.Restored.Inline) > 0:
		var err error
		if pos, err = decodePosition(ctx.Restored.Inline); err != nil {
			return fmt.Errorf("file source %s: %w", r.cfg.Path, err)
		}
	}
	setup := r.setup
	r.maxLine, r.limitName = r.cfg.MaxLineBytes, "max_line_bytes"
	if setup.Policy.MaxRecordBytes > 0 {
		r.maxLine, r.limitName = setup.Policy.MaxRecordBytes, "max_record_bytes"
	}
	setup.Policy.MaxRecordBytes = r.maxLine
	var tally stream.BadRecordTally
	if pos.Bad != nil {
		tally = *pos.Bad
	}
	bad, err := setup.Open(ctx, tally)
	if err != nil {
		return fmt.Errorf("file source %s: %w", r.cfg.Path, err)
	}
	r.bad = bad
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
	if err := r.bad.Flush(); err != nil {
		return runtime.ReadResult{}, err
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
	// A Read returns promptly: at most BatchSize records (good or bad) and
	// about maxBatchBytes of input.
	from, bad := s.off, 0
	for len(batch)+bad < r.cfg.BatchSize && s.off-from < maxBatchBytes {
		line, ok, err := r.nextLine(s)
		if bl, isBad := err.(*badLine); isBad {
			bad++
			if err := r.bad.Reject(bl.rec, bl.err); err != nil {
				return batch, r.failed(s, err)
			}
			continue
		}
		if err != nil {
			return batch, r.failed(s, err)
		}
		if !ok {
			r.caughtUp(s)
			return batch, nil
		}
		v, t, err := r.src.decode(line)
		if err == nil {
			err = r.bad.CheckEventTime(t) // before t can move the watermark
		}
		if err != nil {
			bad++
			failure := fmt.Errorf("file source: %s:%d (byte offset %d): %w", line.Path, line.Number, line.Offset, err)
			rec := stream.BadRecord{Partition: line.Path, Offset: line.Offset, Line: line.Number, Raw: line.raw, Err: err}
			if err := r.bad.Reject(rec, failure); err != nil {
				return batch, r.failed(s, err)
			}
			continue
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
// file's header. ok is false when no complete record is there yet. A bad
// record (malformed CSV, the wrong number of fields, longer than the size
// limit) is consumed and returned as a *badLine error; a bad CSV header is
// a plain error, since no record of the file can be read without it.
func (r *reader[T]) nextLine(s *split) (l Line, ok bool, err error) {
	csv := r.cfg.Format == FormatCSV
	for {
		final := s.final()
		if s.skip != nil {
			if bad := r.skipOversized(s, final); bad != nil {
				return l, false, bad
			}
		} else if s.skipBOM() {
			if data := s.buf[s.pos:]; len(data) > 0 {
				start, number := s.off, s.line+1
				var n, lines int
				var text []byte
				if csv {
					n, lines, err = r.csv.parse(data, byte(r.cfg.Comma), final)
				} else {
					n, lines, text, err = parseJSONLine(data, final)
				}
				header := csv && s.header == nil
				switch {
				case errors.Is(err, errIncomplete):
					if len(data) < r.maxLine {
						break // read more
					}
					if header {
						return l, false, fmt.Errorf("file source: %s: the header is longer than %s %d", s.where(), r.limitName, r.maxLine)
					}
					r.startSkip(s, start, number, data, csv)
					continue
				case err != nil:
					// A CSV syntax error at data[n]: the record ends at the
					// first line break from there.
					if header {
						return l, false, fmt.Errorf("file source: %s: %w", s.where(), err)
					}
					j := bytes.IndexByte(data[n:], '\n')
					switch {
					case j >= 0:
						m := n + j + 1
						s.consume(m, bytes.Count(data[:m], []byte{'\n'}))
						return l, false, r.badLine(s, start, number, trimEOL(data[:m]), err)
					case final:
						s.consume(len(data), bytes.Count(data, []byte{'\n'}))
						return l, false, r.badLine(s, start, number, data, err)
					case len(data) >= r.maxLine:
						r.startSkip(s, start, number, data, false)
						s.skip.discard(s, n)
						continue
					}
				case n > r.maxLine:
					if header {
						return l, false, fmt.Errorf("file source: %s: the header is longer than %s %d", s.where(), r.limitName, r.maxLine)
					}
					s.consume(n, lines)
					return l, false, r.badLine(s, start, number, trimEOL(data[:n]), r.tooLong())
				default:
					raw := trimEOL(data[:n])
					s.consume(n, lines)
					if csv {
						if len(bytes.TrimRight(raw, "\r")) == 0 {
							continue // a blank line
						}
						if header {
							h, err := newHeader(slices.Clone(r.csv.strings()))
							if err != nil {
								return l, false, fmt.Errorf("file source: %s:%d: %w", s.path, number, err)
							}
							s.header, s.headerEnd = h, s.off
							continue
						}
						fields := r.csv.strings()
						if len(fields) != len(s.header.Names) {
							return l, false, r.badLine(s, start, number, raw, fmt.Errorf("%d fields, the header has %d", len(fields), len(s.header.Names)))
						}
						return Line{Path: s.path, Number: number, Offset: start, Fields: fields, Header: s.header, raw: raw}, true, nil
					}
					if len(bytes.TrimSpace(text)) == 0 {
						continue
					}
					return Line{Path: s.path, Number: number, Offset: start, JSON: text, raw: text}, true, nil
				}
			}
		}
		if final {
			return l, false, nil
		}
		more, err := s.fill(r.maxLine)
		if err != nil || !more {
			return l, false, err
		}
	}
}

// startSkip starts skipping the oversized record at the start of data,
// which begins at byte start on line number; quotes says its end is the
// first line break outside CSV quotes.
func (r *reader[T]) startSkip(s *split, start, number int64, data []byte, quotes bool) {
	k := &oversized{start: start, number: number, quotes: quotes}
	if r.bad.KeepsRaw() {
		k.raw = bytes.Clone(data[:min(len(data), r.maxLine)])
	}
	s.skip = k
}

// skipOversized discards the buffered bytes of the record s is skipping.
// Once the record's end is buffered (its line break, or the end of the
// input with stop_at latest) it consumes the whole record and returns it as
// a bad line; until then it discards all that is buffered and returns nil.
func (r *reader[T]) skipOversized(s *split, final bool) *badLine {
	k := s.skip
	data := s.buf[s.pos:]
	end := -1
	if k.quotes {
		for i, c := range data {
			if c == '"' {
				k.inQuote = !k.inQuote
			} else if c == '\n' && !k.inQuote {
				end = i + 1
				break
			}
		}
	} else if i := bytes.IndexByte(data, '\n'); i >= 0 {
		end = i + 1
	}
	switch {
	case end >= 0:
	case final:
		end = len(data)
	default:
		k.discard(s, len(data))
		return nil
	}
	k.discard(s, end)
	s.skip = nil
	s.off += k.n
	s.line += k.lines
	return r.badLine(s, k.start, k.number, k.raw, r.tooLong())
}

// trimEOL returns b without its line terminator (\n or \r\n).
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
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

func (r *reader[T]) Position() ([]byte, error) {
	return encodePosition(r.listed, r.splits, r.bad.Tally())
}

func (r *reader[T]) Close() error {
	for _, s := range r.splits {
		s.release()
	}
	r.open = 0
	return nil
}
