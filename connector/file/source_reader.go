package file

import (
	"bytes"
	"errors"
	"fmt"
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
	out runtime.Emitter[T]
	log *slog.Logger
	// maxP and kgs decide which files are this subtask's (see owns).
	maxP int
	kgs  state.KeyGroupRange
	// splits are the subtask's files in the order found; known indexes
	// them by knownKey (inode, or path where there is none).
	splits []*split
	known  map[string]*split
	// seen holds the path of every file the glob matched at the last look,
	// this subtask's or not, by inode number ("" for the files of another
	// subtask a restored position lists; see isNew).
	seen map[uint64]string
	// listed: stop_at latest, the file list is fixed (see position.Listed).
	listed bool
	// byPath: files are assigned to subtasks by path (position.ByPath).
	byPath bool
	// rr is the round-robin cursor over splits.
	rr int
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
	// headerOnly: nextLine returns once a CSV header is read (CSVHeaders).
	headerOnly bool

	// clock is the subtask's processing time (polls, watermark idleness):
	// the job's clock (Context.Now), or a test's clock set before Open.
	clock func() time.Time
	// lookAt is the processing time (Unix ns) the current Read began: every
	// look at a file in it (a poll's stat, a read to its end) came after.
	lookAt int64
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
	raw = raw[:min(len(raw), r.maxLine)] // what a dead letter keeps
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

func (r *reader[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	r.cfg = &r.src.cfg
	r.out = out
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
	if r.clock == nil {
		r.clock = ctx.Now
	}
	now := r.clock()

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
	r.byPath = pos.ByPath
	union := ctx.RestoredUnion != nil
	r.seen = map[uint64]string{}
	for _, ino := range pos.Seen {
		r.seen[ino] = ""
	}
	var sizeNow []*split
	for _, fp := range pos.Files {
		if union && !r.ownsEntry(fp) {
			if fp.ID != nil && fp.ID.Ino != 0 {
				r.seen[fp.ID.Ino] = ""
			}
			continue // another subtask's, after a rescale
		}
		s := &split{path: fp.Path, off: fp.Offset, line: fp.Line, headerEnd: fp.HeaderEnd, end: -1, atEnd: fp.AtEnd}
		if fp.ID != nil {
			s.id, s.hasID = *fp.ID, true
		}
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
			// Switched to stop_at latest: read to the size now (below,
			// once the file is found).
			sizeNow = append(sizeNow, s)
		}
		r.add(s, now)
	}
	// Every restored file is found again by its identity, before anything
	// is read: renamed files are followed, replaced ones are refused (or
	// read from their start, with on_replace: reread).
	l, err := r.look()
	if err != nil {
		return err
	}
	if err := r.placeAll(l, true); err != nil {
		return err
	}
	for _, s := range sizeNow {
		if s.dropped {
			continue
		}
		fi, err := os.Stat(s.path)
		if err != nil {
			return fmt.Errorf("file source: %s was read to byte %d and cannot be read to its end now: %w", s.path, s.off, err)
		}
		s.end = fi.Size()
		if s.end < s.off {
			if err := r.rewritten(s, fmt.Sprintf("it is %d bytes, shorter than the %d bytes already read", s.end, s.off)); err != nil {
				return err
			}
		}
	}
	r.compact()
	if r.stopAtLatest() {
		if !pos.Listed {
			if err := r.discover(l, now); err != nil {
				return err
			}
		}
		r.listed = true
		r.remember(l)
		return nil
	}
	r.nextPoll = now.Add(r.pollEvery())
	if err := r.discover(l, now); err != nil {
		return err
	}
	r.remember(l)
	return nil
}

// pollEvery is the time between two polls: PollInterval, or half the idle
// timeout when that is shorter. A look at a file counts for the idle timeout
// (watermark.Tracker.CaughtUp), and the polls are the looks at files read to
// their end, so they must come often enough to keep a quiet file idle.
func (r *reader[T]) pollEvery() time.Duration {
	if it := r.cfg.Watermark.IdleTimeout; it > 0 && it/2 < r.cfg.PollInterval {
		return max(it/2, time.Millisecond)
	}
	return r.cfg.PollInterval
}

// next picks the split to read: round-robin over pending splits, opening a
// closed one only while fewer than MaxOpenFiles are open.
func (r *reader[T]) next() *split {
	n := len(r.splits)
	open := 0
	for _, s := range r.splits {
		if s.f != nil {
			open++
		}
	}
	for i := range n {
		s := r.splits[(r.rr+i)%n]
		if !s.pending || s.dropped || (s.f == nil && open >= r.cfg.MaxOpenFiles) {
			continue
		}
		r.rr = (r.rr + i + 1) % n
		return s
	}
	return nil
}

func (r *reader[T]) Read() (runtime.ReadResult, error) {
	now := r.clock()
	r.lookAt = now.UnixNano()
	if !r.stopAtLatest() && !now.Before(r.nextPoll) {
		if err := r.poll(now); err != nil {
			return runtime.ReadResult{}, err
		}
		r.nextPoll = now.Add(r.pollEvery())
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
	now = r.clock()
	res.Watermark, res.Idle = r.wm.Current(now.UnixNano())
	switch {
	case r.stopAtLatest():
		res.Exhausted = !slices.ContainsFunc(r.splits, func(s *split) bool { return !s.done })
	case len(batch) == 0:
		// Nothing to read until the next poll (which comes often enough
		// for idleness, see pollEvery).
		res.Wait = max(r.nextPoll.Sub(now), time.Millisecond)
	}
	return res, nil
}

// readSplit reads up to BatchSize records from s into batch. When s has
// nothing more for now it is closed: finished with stop_at latest, no
// longer pending when following.
func (r *reader[T]) readSplit(s *split, batch runtime.Batch[T]) (_ runtime.Batch[T], err error) {
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
	h := &split{path: s.path, end: s.headerEnd, id: s.id, hasID: s.hasID}
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

// failed closes s's file and returns err. An open that found s's path
// gone or naming another file (errMoved), and a file found truncated or
// rewritten, are not failures yet: relocate and rewritten decide, and
// return nil when s reads on (renamed, or on_replace: reread).
func (r *reader[T]) failed(s *split, err error) error {
	var rw *rewrittenError
	switch {
	case errors.Is(err, errMoved):
		err = r.relocate(s)
	case errors.As(err, &rw):
		err = r.rewritten(s, rw.why)
		r.compact()
	default:
		s.release()
	}
	return err
}

// caughtUp closes s after it had nothing more to read: a look that may
// make it idle; a retiring split is then dropped.
func (r *reader[T]) caughtUp(s *split) {
	s.release()
	s.pending, s.atEnd = false, true
	r.wm.CaughtUp(s.idx, r.lookAt)
	if s.end >= 0 && s.off >= s.end {
		s.done = true
		r.wm.Finish(s.idx)
	}
	if s.retiring {
		r.log.Info("file source: finished reading the file that left the glob", "path", s.path, "offset", s.off)
		r.drop(s)
		r.compact()
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
					if j := bytes.IndexByte(data, '\n'); j >= 0 {
						// CSV only: a line break inside a quoted field
						// still open after the size limit. Bounded by it,
						// the record ends at its first line break.
						cause := r.tooLong()
						if j < r.maxLine {
							cause = fmt.Errorf("a quoted field is not closed within %s %d", r.limitName, r.maxLine)
						}
						s.consume(j+1, 1)
						return l, false, r.badLine(s, start, number, trimEOL(data[:j+1]), cause)
					}
					r.startSkip(s, start, number, data)
					continue
				case err != nil:
					// A CSV syntax error. The record ends at the first line
					// break after its start, not after the error: a quote
					// it opened may be closed by a later record's, and the
					// records in between must not go with it.
					if header {
						return l, false, fmt.Errorf("file source: %s: %w", s.where(), err)
					}
					j := bytes.IndexByte(data, '\n')
					switch {
					case j >= 0:
						s.consume(j+1, 1)
						return l, false, r.badLine(s, start, number, trimEOL(data[:j+1]), err)
					case final:
						s.consume(len(data), 0)
						return l, false, r.badLine(s, start, number, data, err)
					case len(data) >= r.maxLine:
						r.startSkip(s, start, number, data)
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
							if r.headerOnly {
								return l, false, nil
							}
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
// which begins at byte start on line number and ends at the first line
// break (a CSV record too: a quote it opened is bounded by the size limit).
func (r *reader[T]) startSkip(s *split, start, number int64, data []byte) {
	k := &oversized{start: start, number: number}
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
	end := bytes.IndexByte(data, '\n') + 1
	switch {
	case end > 0:
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
	mine := make(map[uint64]bool, len(r.splits))
	for _, s := range r.splits {
		mine[s.id.Ino] = true
	}
	var seen []uint64
	for ino := range r.seen {
		if !mine[ino] {
			seen = append(seen, ino)
		}
	}
	slices.Sort(seen)
	return encodePosition(r.listed, r.byPath, r.splits, seen, r.bad.Tally())
}

func (r *reader[T]) Close() error {
	r.bad.Close()
	for _, s := range r.splits {
		s.release()
	}
	return nil
}
