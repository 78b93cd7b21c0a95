package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/runtime"
)

// This file is the source's proof of continuity: that it skips no message
// of its subject filter that the stream held once. A consumer silently
// steps over removed messages (a purge, a retention limit, DeleteMsg), so
// every stream sequence the source goes past without reading it is either
// explained or a gap: see doc.go, "Continuity".

// ErrGap marks messages removed from the stream (a purge, a retention
// limit, a deletion) before the source read them. The error names the
// stream, the subject and the removed sequences; it also wraps
// runtime.ErrIncompatible, so the job stops instead of restarting: a
// restart cannot bring the messages back. When the sequence a checkpoint
// continues at is itself gone the error wraps ErrPositionLost too.
var ErrGap = errors.New("messages removed from the stream before they were read")

// GapTally counts the removed messages a source skipped under OnGapSkip
// since the job first started. It is stored with the replay position, so a
// restore resumes the count of its checkpoint.
type GapTally struct {
	// Ranges counts the ranges of consecutive removed sequences skipped.
	Ranges int64 `json:"ranges,omitempty"`
	// Sequences counts the removed stream sequences in them. With a subject
	// filter it is an upper bound of the filter's messages lost: the stream
	// keeps no record of a removed message's subject.
	Sequences int64 `json:"sequences,omitempty"`
}

// maxTrackedHoles bounds the deleted sequences inside the stream (between
// its first and last sequence) the source keeps track of, about 8 bytes
// each, and the size of a stream info answer listing them. A variable for
// tests only.
var maxTrackedHoles = 1 << 16

// retryLook is the least time between two tries of a look at the stream
// that failed, for ranges crossed and still to prove (Position proves
// them before a checkpoint in any case).
const retryLook = 100 * time.Millisecond

// refreshEvery is the most time between two looks at the stream: they keep
// the horizon of the position fresh, and move a quiet filtered source past
// other subjects' messages at most this often.
const refreshEvery = time.Second

// gapLogBurst warnings about skipped gaps are written per gapLogEvery at
// most; the others are counted in the next one.
const (
	gapLogBurst = 20
	gapLogEvery = 10 * time.Second
)

// span is the stream sequences lo … hi, lo <= hi.
type span struct{ lo, hi uint64 }

func (s span) String() string {
	if s.lo == s.hi {
		return fmt.Sprintf("sequence %d", s.lo)
	}
	return fmt.Sprintf("sequences %d-%d", s.lo, s.hi)
}

// holes is a sorted set of stream sequences that hold no message.
type holes []uint64

// count is the number of sequences of h in lo … hi.
func (h holes) count(lo, hi uint64) uint64 {
	if lo > hi {
		return 0
	}
	return uint64(h.index(hi+1) - h.index(lo))
}

// index is the index of the first sequence of h at or above seq.
func (h holes) index(seq uint64) int {
	return sort.Search(len(h), func(i int) bool { return h[i] >= seq })
}

// runs returns the ranges of consecutive sequences of h in lo … hi.
func (h holes) runs(lo, hi uint64) []span {
	var out []span
	for _, seq := range h[h.index(lo):] {
		if seq > hi {
			break
		}
		if n := len(out); n > 0 && out[n-1].hi+1 == seq {
			out[n-1].hi = seq
		} else {
			out = append(out, span{seq, seq})
		}
	}
	return out
}

// continuity is what the reader knows of the stream's missing sequences.
//
// INVARIANT: baseline and removed are disjoint; together they are every
// sequence missing from the stream between first and last at the last look
// (untracked: not kept), and baseline also keeps those below first that the
// reader has not gone past. A sequence missing once stays missing, so a
// later look that finds deleted == the count of both in [first, last]
// proves that nothing else went missing in between.
type continuity struct {
	// baseline holds the sequences missing when the source opened: nothing
	// was lost there while it ran. removed holds those found missing since.
	baseline, removed holes
	// mirror is set for a mirror stream: it records the sequences of its
	// origin it does not hold (filtered out, deleted there) as deleted
	// ones, so one missing past the last look is not taken as removed.
	mirror bool
	// untracked is set when more sequences are missing inside the stream
	// than maxTrackedHoles (on_gap skip only): interior deletions are then
	// not detected.
	untracked bool
	// first, last and deleted are the stream's state at the last look,
	// taken before lookedAt; triedAt is when a look was last tried.
	first, last uint64
	deleted     int
	lookedAt    time.Time
	triedAt     time.Time
	// crossed holds the ranges a filtered consumer went past without a
	// message since the last look. Each sequence in them held another
	// subject's message, or none: the next look tells which (prove). The
	// look follows in the same Read, before the records after the ranges
	// are emitted; only a look that failed leaves them for later.
	crossed []span
	// quietAt is when a quiet source last moved past other subjects'
	// messages (advanceQuiet).
	quietAt time.Time
}

// gap is a range of sequences the source would go past although they were
// removed: n of them (those missing before the source began excluded).
type gap struct {
	span
	n   uint64
	why string
}

// gapCounter is the Source's GapTally, set by its subtask.
type gapCounter struct {
	mu sync.Mutex
	t  GapTally
}

func (c *gapCounter) set(t GapTally) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *gapCounter) get() GapTally {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// SkippedGaps returns the removed messages the source skipped under
// OnGapSkip: the tally of its subtask, which resumes from the checkpoint it
// restored (so after a recovery it drops back to the checkpoint's count and
// counts again what it reads again).
func (s *Source[T]) SkippedGaps() GapTally { return s.gaps.get() }

// gapError is an ErrGap: its message says what was removed, and it is not
// cured by a restart.
type gapError struct {
	msg string
	// lost is set when the sequence the source resumes at is gone.
	lost bool
}

func (e *gapError) Error() string { return e.msg }

// Unwrap makes the error ErrGap, runtime.ErrIncompatible, and
// ErrPositionLost when lost.
func (e *gapError) Unwrap() []error {
	if e.lost {
		return []error{ErrGap, ErrPositionLost, runtime.ErrIncompatible}
	}
	return []error{ErrGap, runtime.ErrIncompatible}
}

// coversStream says whether a consumer filtered by filter gets every
// message of the stream cfg configures: then any sequence it goes past is
// missing from the stream.
func coversStream(filter string, cfg jetstream.StreamConfig) bool {
	if filter == "" || filter == ">" {
		return true
	}
	return cfg.Mirror == nil && len(cfg.Sources) == 0 && cfg.SubjectTransform == nil &&
		len(cfg.Subjects) == 1 && cfg.Subjects[0] == filter
}

// initContinuity takes the stream's state at Open as the baseline: what is
// missing now was removed before the source began.
func (r *reader[T]) initContinuity(info *jetstream.StreamInfo, at time.Time) error {
	c := &r.cont
	*c = continuity{mirror: info.Config.Mirror != nil}
	// A mirror's skipped sequences are told from removed ones by a look
	// (relist), as for a filter.
	r.filtered = !coversStream(r.cfg.Subject, info.Config) || c.mirror
	st := info.State
	if st.NumDeleted > 0 {
		if st.NumDeleted > maxTrackedHoles {
			if err := r.tooManyHoles(st.NumDeleted); err != nil {
				return err
			}
		} else {
			full, err := r.lookStream(true)
			if err != nil {
				return err
			}
			st = full.State
			if len(st.Deleted) > maxTrackedHoles {
				if err := r.tooManyHoles(len(st.Deleted)); err != nil {
					return err
				}
			} else {
				c.baseline = sortedHoles(st.Deleted)
			}
		}
	}
	c.first, c.last, c.deleted = st.FirstSeq, st.LastSeq, st.NumDeleted
	c.lookedAt, c.triedAt = at, at
	return nil
}

// sortedHoles returns a sorted copy of seqs.
func sortedHoles(seqs []uint64) holes {
	h := holes(slices.Clone(seqs))
	slices.Sort(h)
	return slices.Compact(h)
}

// tooManyHoles is what the source does when the stream has more missing
// sequences inside it than it tracks: an error, or under on_gap skip a
// warning, and interior deletions are no longer detected.
func (r *reader[T]) tooManyHoles(n int) error {
	if r.cfg.OnGap != OnGapSkip {
		return &gapError{msg: fmt.Sprintf("%s: %v: cannot be ruled out: the stream has %d deleted sequences inside it, more than the %d the source keeps track of to prove that none held a message it has not read; set on_gap: skip to read it without that proof",
			r.where, ErrGap, n, maxTrackedHoles)}
	}
	if !r.cont.untracked {
		r.log.Warn("nats source: too many deleted sequences inside the stream to track; under on_gap: skip, deletions ahead of the reader are no longer detected (only a stream that begins past the position is)",
			"stream", r.cfg.Stream, "deleted", n, "limit", maxTrackedHoles)
	}
	c := &r.cont
	c.untracked, c.baseline, c.removed = true, nil, nil
	return nil
}

// lookStream asks the server for the stream's info (details: with the list
// of deleted sequences).
func (r *reader[T]) lookStream(details bool) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	var opts []jetstream.StreamInfoOpt
	if details {
		opts = append(opts, jetstream.WithDeletedDetails(true))
	}
	info, err := r.str.Info(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: looking at the stream's state: %w", r.where, err)
	}
	return info, nil
}

// passed records that the consumer went past lo … hi without a message.
// Without a filter (or one that covers the stream) those sequences are
// missing and are judged at once; with one they are proven by the next
// look (prove). It returns the gap error of OnGapFail.
func (r *reader[T]) passed(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	if r.filtered {
		c := &r.cont
		if n := len(c.crossed); n > 0 && c.crossed[n-1].hi+1 == lo {
			c.crossed[n-1].hi = hi
		} else {
			c.crossed = append(c.crossed, span{lo, hi})
		}
		return nil
	}
	return r.missing(lo, hi, false)
}

// missing judges lo … hi, which the stream no longer holds: a gap unless
// every one of them was missing before the source began. resume says that
// lo is the sequence the source resumes at (a restore, a new consumer).
func (r *reader[T]) missing(lo, hi uint64, resume bool) error {
	if lo > hi {
		return nil
	}
	n := hi - lo + 1 - r.cont.baseline.count(lo, hi)
	if n == 0 {
		return nil
	}
	if r.cfg.Subject != "" && !r.filtered && !resume {
		// The filter covered the stream at Open; if the stream's subjects
		// changed since, the sequences may hold other subjects' messages.
		if info, err := r.lookStream(false); err == nil && !coversStream(r.cfg.Subject, info.Config) {
			r.filtered = true
			return r.passed(lo, hi)
		}
	}
	return r.gaps([]gap{{span: span{lo, hi}, n: n, why: r.whyMissing(lo)}}, resume)
}

// whyMissing describes, best effort, why the sequences from lo on are gone.
func (r *reader[T]) whyMissing(lo uint64) string {
	info, err := r.lookStream(false)
	if err != nil {
		return "purged, deleted or removed by a retention limit"
	}
	if f := info.State.FirstSeq; f > lo {
		return fmt.Sprintf("the stream now begins at %d: a purge or a retention limit removed them", f)
	}
	return "deleted"
}

// proveDue says whether Read should look at the stream now: ranges are
// left to prove (a look failed), or the last look is old.
func (r *reader[T]) proveDue(now time.Time) bool {
	c := &r.cont
	since := now.Sub(c.triedAt)
	if len(c.crossed) > 0 {
		return since >= retryLook || r.exhausted
	}
	return since >= refreshEvery
}

// proveCrossed proves the ranges crossed, if any: before a batch is
// emitted, so that no record after a gap is. It returns the gap error of
// OnGapFail; a look that failed is logged and left to later (Read, and
// Position before a checkpoint).
func (r *reader[T]) proveCrossed() error {
	if len(r.cont.crossed) == 0 {
		return nil
	}
	err := r.prove()
	if err == nil || errors.Is(err, ErrGap) || errors.Is(err, ErrPositionLost) {
		return err
	}
	r.log.Warn("nats source: looking at the stream's state failed; trying again", "stream", r.cfg.Stream, "err", err)
	return nil
}

// prove looks at the stream and judges the ranges crossed before: a
// sequence in them that is missing now, and was not before the source
// began, is a gap. The stream keeps no record of a removed message's
// subject, so with a filter the judgement is conservative: another
// subject's message removed in a range the source crossed counts too. The
// look also updates what the reader knows (continuity). It returns the gap
// error of OnGapFail, or the error of the look.
func (r *reader[T]) prove() error {
	c := &r.cont
	c.triedAt = time.Now()
	info, err := r.lookStream(false)
	if err != nil {
		return err
	}
	st := info.State
	if st.LastSeq < c.last || st.LastSeq+1 < r.pos.Next {
		return &gapError{lost: true, msg: fmt.Sprintf("%s: %v: the stream's last sequence went back from %d to %d: was the stream deleted and recreated?",
			r.where, ErrPositionLost, max(c.last, r.pos.Next-1), st.LastSeq)}
	}
	if !c.untracked {
		known := c.baseline.count(st.FirstSeq, st.LastSeq) + c.removed.count(st.FirstSeq, st.LastSeq)
		if uint64(st.NumDeleted) != known {
			if st, err = r.relist(st); err != nil {
				return err
			}
		}
	}
	// The sequences below the stream's first are gone, whatever they held;
	// above it, the missing ones are in removed (or baseline).
	var found []gap
	for _, x := range c.crossed {
		if x.lo < st.FirstSeq {
			hi := min(x.hi, st.FirstSeq-1)
			if c.mirror {
				// A mirror's sequences past the last look that it does not
				// hold are its origin's skipped ones (see relist): a mirror
				// that was still empty at the last look begins at its first
				// copied message, however far into the origin that is.
				hi = min(hi, c.last)
			}
			if hi < x.lo {
				continue
			}
			if n := hi - x.lo + 1 - c.baseline.count(x.lo, hi); n > 0 {
				found = append(found, gap{span: span{x.lo, hi}, n: n,
					why: fmt.Sprintf("the stream now begins at %d: a purge or a retention limit removed them", st.FirstSeq)})
			}
		}
		if lo := max(x.lo, st.FirstSeq); lo <= x.hi {
			for _, run := range c.removed.runs(lo, x.hi) {
				found = append(found, gap{span: run, n: run.hi - run.lo + 1, why: "deleted"})
			}
		}
	}
	c.crossed = c.crossed[:0]
	c.first, c.last, c.deleted = st.FirstSeq, st.LastSeq, st.NumDeleted
	c.lookedAt = time.Now()
	// Forget what neither a count nor a judgement needs any more.
	floor := min(st.FirstSeq, r.pos.Next)
	c.baseline = c.baseline[c.baseline.index(floor):]
	c.removed = c.removed[c.removed.index(st.FirstSeq):]
	return r.gaps(found, false)
}

// relist fetches the list of the stream's deleted sequences, after a look
// found more (or fewer) of them than the reader knew: the new ones were
// removed while it ran. It returns the state of the list.
func (r *reader[T]) relist(st jetstream.StreamState) (jetstream.StreamState, error) {
	c := &r.cont
	if st.NumDeleted > maxTrackedHoles {
		return st, r.tooManyHoles(st.NumDeleted)
	}
	info, err := r.lookStream(true)
	if err != nil {
		return st, err
	}
	st = info.State
	if len(st.Deleted) > maxTrackedHoles {
		return st, r.tooManyHoles(len(st.Deleted))
	}
	list := sortedHoles(st.Deleted)
	// Keep the baseline below the stream's first sequence: crossed ranges
	// there are judged against it.
	baseline := slices.Clone(c.baseline[:c.baseline.index(st.FirstSeq)])
	var removed holes
	for _, seq := range list {
		if seq < st.FirstSeq {
			continue
		}
		// A mirror's new sequences past the last look that it does not
		// hold are its origin's skipped ones, not removed messages.
		if c.baseline.count(seq, seq) == 1 || c.mirror && seq > c.last {
			baseline = append(baseline, seq)
		} else {
			removed = append(removed, seq)
		}
	}
	c.baseline, c.removed = baseline, removed
	return st, nil
}

// gaps applies the OnGap policy to what was found: under OnGapFail the
// first gap (and how many more) is the error; under OnGapSkip each is
// counted and logged.
func (r *reader[T]) gaps(found []gap, resume bool) error {
	if len(found) == 0 {
		return nil
	}
	if r.cfg.OnGap != OnGapSkip {
		g := found[0]
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %v: %s", r.where, ErrGap, g.span)
		if g.n != g.hi-g.lo+1 {
			fmt.Fprintf(&b, " (%d of them removed; the others were missing before the source began)", g.n)
		}
		fmt.Fprintf(&b, " (%s)", g.why)
		if len(found) > 1 {
			fmt.Fprintf(&b, ", and %d more ranges", len(found)-1)
		}
		if r.filtered {
			b.WriteString("; with a subject filter this is judged conservatively: the stream keeps no record of whether a removed sequence held a message of the subject")
		}
		b.WriteString("; a restart cannot bring removed messages back: set on_gap: skip to read on past them (counted and logged)")
		return &gapError{msg: b.String(), lost: resume}
	}
	now := time.Now()
	for _, g := range found {
		r.gapTally.Ranges++
		r.gapTally.Sequences += int64(g.n)
		if now.Sub(r.gapLogAt) >= gapLogEvery {
			r.gapLogAt, r.gapLogged = now, 0
		}
		if r.gapLogged >= gapLogBurst {
			r.gapUnlogged++
			continue
		}
		r.gapLogged++
		args := []any{"stream", r.cfg.Stream, "range", g.span.String(), "removed", g.n, "why", g.why,
			"skipped_ranges", r.gapTally.Ranges, "skipped_sequences", r.gapTally.Sequences}
		if r.cfg.Subject != "" {
			args = append(args, "subject", r.cfg.Subject)
		}
		if r.gapUnlogged > 0 {
			args = append(args, "ranges_not_logged", r.gapUnlogged)
			r.gapUnlogged = 0
		}
		r.log.Warn("nats source: messages removed from the stream before they were read; skipping them (on_gap: skip)", args...)
	}
	r.src.gaps.set(r.gapTally)
	return nil
}

// checkHorizon, at a restore, judges the sequences from the position's
// next up to its horizon: more of them missing now than at the checkpoint
// were removed while the job was down.
func (r *reader[T]) checkHorizon(p position, st jetstream.StreamState) error {
	c := &r.cont
	if p.Horizon == 0 || c.untracked {
		return nil
	}
	lo, hi := r.pos.Next, p.Horizon
	if r.pos.HasEnd {
		// stop_at latest set since the checkpoint: nothing past the end
		// is read.
		hi = min(hi, r.pos.End)
	}
	if hi < lo {
		return nil
	}
	top := min(hi, st.LastSeq)
	now := c.baseline.count(lo, top) + (hi - top)
	if now <= p.Holes {
		return nil
	}
	why := "removed since the checkpoint, while the job was not reading"
	var found []gap
	if p.Holes == 0 {
		for _, run := range c.baseline.runs(lo, top) {
			found = append(found, gap{span: run, n: run.hi - run.lo + 1, why: why})
		}
		if top < hi {
			found = append(found, gap{span: span{top + 1, hi}, n: hi - top, why: why})
		}
	} else {
		found = []gap{{span: span{lo, hi}, n: now - p.Holes, why: fmt.Sprintf("%d of them %s", now-p.Holes, why)}}
	}
	return r.gaps(found, false)
}
