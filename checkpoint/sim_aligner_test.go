package checkpoint

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// A seeded simulation of one multi-input subtask around the Aligner, driven
// the way runtime/task.go drives it: the task reads a channel only while
// Blocked says it may, feeds barriers and end-of-input to the aligner, serves
// Abort messages from its mailbox between reads, and snapshots when an
// Alignment says Complete.
//
// Upstream producers send numbered records and forward each triggered
// checkpoint's barrier after the records that belong to it, in id order; a
// producer may skip a barrier (its checkpoint was abandoned upstream; the
// coordinator then aborts it), end its input at any point, and lag behind the
// others so that several checkpoints are in flight. Aborts reach the task
// after a random delay, before or after the barriers they concern, and the
// coordinator also aborts checkpoints no producer skipped (a timeout, another
// task's decline), sometimes after this task snapshotted them.
//
// The records a channel delivered before each barrier are known, so every
// snapshot's cut is checked against the barriers exactly (checkpointing.txt,
// "Barrier alignment": the operator "must not mix records from opposite sides
// of the checkpoint boundary"). Checked after every step: no record after an
// open barrier is read (ExactlyOnce); Blocked holds exactly the inputs that
// delivered the barrier being aligned; every barrier is stale, opens or joins
// the alignment, or abandons an older one, as Aligner documents; a snapshot
// comes exactly when the last live input delivers its barrier or ends, in id
// order, once, never for an aborted or abandoned checkpoint, holding exactly
// (AtLeastOnce: at least) the records before the barrier of every input and
// every record of an ended one, with Duration measured from the first
// barrier. At the end every input is read to its end (nothing held forever),
// and every checkpoint that reached the task and was neither skipped nor
// aborted was snapshotted (ExactlyOnce).
//
// Replay one seed: go test ./checkpoint -run '^TestAlignerSimulation$' -alignseed=N -v

var (
	alignSeed  = flag.Int64("alignseed", 0, "TestAlignerSimulation: run only this seed; with -v, print its whole step log")
	alignSeeds = flag.Int("alignseeds", simDefaultSeeds(10000), "TestAlignerSimulation: number of seeds to run (1..N); a tenth of the default under -race")
)

func TestAlignerSimulation(t *testing.T) {
	runSeeded(t, seededSim[alignStats]{
		test: "TestAlignerSimulation", replay: "alignseed",
		run:      runAlignSim,
		coverMin: 1000,
		cover: func(t *testing.T, s alignStats) {
			requireCovered(t, map[string]int{
				"snapshots": s.Snapshots, "snapshots completed by end-of-input": s.EndSnapshots,
				"abandoned alignments": s.Abandoned, "aborts while aligning": s.AbortedAligning,
				"aborts before the first barrier": s.AbortedAhead, "stale barriers": s.Stale,
				"held reads": s.Held, "skipped barriers": s.Skipped, "overlapping checkpoints": s.Overlap,
				"early end-of-input": s.EarlyEnds, "at-least-once seeds": s.AtLeastOnce,
				"at-least-once records past the cut": s.PastCut,
			})
		},
	}, *alignSeed, *alignSeeds)
}

// alignStats counts what the aligner simulation exercised.
type alignStats struct {
	Seeds, Steps, Records, Barriers, Snapshots, EndSnapshots int
	Abandoned, AbortedAligning, AbortedAhead, Stale, Held    int
	Skipped, Overlap, EarlyEnds, AtLeastOnce, PastCut        int
}

const (
	amRecord = iota
	amBarrier
	amEnd
)

// alignMsg is one message on a channel: a record with its sequence number,
// a barrier with its checkpoint id, or end-of-input.
type alignMsg struct {
	kind uint8
	v    int64
}

// alignCut is a barrier a channel delivered and the number of records before
// it on that channel.
type alignCut struct{ id, pos int64 }

// alignChan is one input channel: its producer's side and the task's side.
type alignChan struct {
	q    []alignMsg // sent, not yet read
	sent int64      // records sent
	// todo are checkpoints triggered that the producer has yet to forward (or
	// skip), increasing.
	todo   []int64
	closed bool // the producer sent end-of-input

	read     int64      // records the task read
	ended    bool       // the task read end-of-input
	barriers []alignCut // barriers the task read, in order
}

// delivered returns the position of barrier id on c and whether c delivered it.
func (c *alignChan) delivered(id int64) (int64, bool) {
	for i := len(c.barriers) - 1; i >= 0; i-- {
		if c.barriers[i].id == id {
			return c.barriers[i].pos, true
		}
		if c.barriers[i].id < id {
			break
		}
	}
	return 0, false
}

// lastBarrier is the newest barrier c delivered, 0 if none.
func (c *alignChan) lastBarrier() int64 {
	if len(c.barriers) == 0 {
		return 0
	}
	return c.barriers[len(c.barriers)-1].id
}

const (
	fateNone = iota
	fateSnapshot
	fateAbandoned
	fateAborted // aborted while being aligned
)

// alignCkpt is what the simulation knows of one checkpoint.
type alignCkpt struct {
	skipped   bool // a producer skipped its barrier
	abortSent bool // the coordinator aborted it: an Abort is in the mailbox or delivered
	aborted   bool // Abort was delivered to the aligner
	reached   bool // an input delivered its barrier
	opened    bool // its alignment started at this task
	fate      uint8
	first     time.Time // when its alignment started
}

type alignAbort struct {
	id  int64
	due int // the step from which the task may see it
}

// alignerUnderTest is the part of Aligner the task uses. The simulation
// drives the real Aligner; sim_mutants_test.go wraps it in broken ones to
// check that the simulation notices.
type alignerUnderTest interface {
	Blocked(i int) bool
	Aligning() int64
	Barrier(now time.Time, i int, id int64) Alignment
	EndOfInput(now time.Time, i int) Alignment
	Abort(id int64)
}

type alignSim struct {
	rng  *rand.Rand
	mode Mode
	a    alignerUnderTest
	now  time.Time
	ch   []*alignChan
	ck   []alignCkpt // by checkpoint id; ck[0] is unused
	// maxAhead is how many triggered checkpoints may be unsettled at once.
	maxAhead int
	// faults weighs skipped barriers and extra aborts; earlyEnd lets
	// producers end their input before the drain.
	faults   int
	earlyEnd bool
	mailbox  []alignAbort
	stepN    int
	// lastSnap is the newest snapshot; resolved the newest checkpoint
	// snapshotted, abandoned or aborted while aligned: barriers at or below
	// it are stale.
	lastSnap, resolved int64
	log                simLog
	stats              alignStats
}

func runAlignSim(seed int64, logTail int) simRun[alignStats] {
	return runAlignSimWith(seed, logTail, nil)
}

// runAlignSimWith runs one seed with the aligner wrap returns (the real one
// when wrap is nil).
func runAlignSimWith(seed int64, logTail int, wrap func(*Aligner) alignerUnderTest) simRun[alignStats] {
	s := newAlignSim(seed, logTail)
	if wrap != nil {
		s.a = wrap(s.a.(*Aligner))
	}
	err := runSeed(s.run)
	out := simRun[alignStats]{seed: seed, err: err, stats: s.stats}
	if s.log.on() {
		out.trail = s.header() + s.log.String()
	}
	return out
}

func newAlignSim(seed int64, logTail int) *alignSim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xa119e))
	s := &alignSim{rng: rng, now: t0, log: simLog{limit: logTail}, ck: make([]alignCkpt, 1, 32)}
	n := 1 + rng.IntN(6)
	s.mode = ExactlyOnce
	s.maxAhead = 1 + rng.IntN(3)
	if rng.IntN(4) == 0 {
		// Options.Validate allows one checkpoint at a time in this mode; an
		// aborted one can still be overtaken by the next.
		s.mode = AtLeastOnce
		s.maxAhead = 1
		s.stats.AtLeastOnce++
	}
	s.faults = []int{0, 1, 3, 6}[rng.IntN(4)]
	s.earlyEnd = rng.IntN(3) == 0
	s.a = NewAligner(s.mode, n)
	for range n {
		s.ch = append(s.ch, &alignChan{})
	}
	return s
}

func (s *alignSim) header() string {
	return fmt.Sprintf("mode %v, %d inputs, %d checkpoints ahead, fault weight %d, early end %v\n",
		s.mode, len(s.ch), s.maxAhead, s.faults, s.earlyEnd)
}

func (s *alignSim) failf(format string, args ...any) {
	panic(simFailed{msg: fmt.Sprintf(format, args...)})
}

func (s *alignSim) logf(format string, args ...any) {
	s.log.add(fmt.Sprintf("#%-4d t=%-8v ", s.stepN, s.now.Sub(t0)) + fmt.Sprintf(format, args...))
}

func (s *alignSim) run() {
	steps := 50 + s.rng.IntN(300)
	for s.stepN = 0; s.stepN < steps; s.stepN++ {
		s.randomStep()
	}
	s.drain()
	s.stats.Seeds++
	s.stats.Steps += s.stepN
}

const (
	akRecord = iota
	akForward
	akTrigger
	akRead
	akMailbox
	akExtraAbort
	akEnd
	akNum
)

func (s *alignSim) randomStep() {
	s.now = s.now.Add(time.Duration(s.rng.IntN(50)) * time.Millisecond)
	var w [akNum]int
	readable := 0
	for i, c := range s.ch {
		if !c.closed {
			w[akRecord] = 30
			if s.earlyEnd {
				w[akEnd] = 1
			}
		}
		if len(c.todo) > 0 {
			w[akForward] = 15
		}
		if !c.ended && len(c.q) > 0 {
			if s.a.Blocked(i) {
				s.stats.Held++
			} else {
				readable++
			}
		}
	}
	if readable > 0 {
		w[akRead] = 40
	}
	if s.canTrigger() {
		w[akTrigger] = 6
	}
	if len(s.mailbox) > 0 && s.mailbox[0].due <= s.stepN {
		w[akMailbox] = 10
	}
	if len(s.ck) > 1 {
		w[akExtraAbort] = s.faults
	}
	k := pickWeighted(s.rng, w[:])
	if k < 0 {
		return
	}
	switch k {
	case akRecord:
		c := s.pickChan(func(c *alignChan) bool { return !c.closed })
		c.q = append(c.q, alignMsg{kind: amRecord, v: c.sent})
		c.sent++
	case akForward:
		i := s.pickIndex(func(c *alignChan) bool { return len(c.todo) > 0 })
		s.forward(i, s.rng.IntN(20) < s.faults)
	case akTrigger:
		s.trigger()
	case akRead:
		s.read(s.pickIndexOr(func(c *alignChan) bool { return !c.ended && len(c.q) > 0 }, true), true)
	case akMailbox:
		s.serveMailbox(false)
	case akExtraAbort:
		// The coordinator aborts a checkpoint for its own reasons (a timeout,
		// another task's decline), possibly after this task snapshotted it.
		id := int64(len(s.ck)-1) - s.rng.Int64N(min(int64(len(s.ck)-1), 3))
		s.sendAbort(id)
	case akEnd:
		i := s.pickIndex(func(c *alignChan) bool { return !c.closed })
		s.close(i)
		s.stats.EarlyEnds++
	}
}

// drain stops triggering, lets every producer forward its barriers and end
// its input, and has the task read everything: the aligner must never leave
// it with unread messages and nothing it may read.
func (s *alignSim) drain() {
	for {
		s.stepN++
		s.now = s.now.Add(time.Millisecond)
		progressed := false
		for i, c := range s.ch {
			switch {
			case len(c.todo) > 0:
				s.forward(i, false)
			case !c.closed:
				s.close(i)
			default:
				continue
			}
			progressed = true
			break
		}
		if progressed {
			continue
		}
		if len(s.mailbox) > 0 {
			s.serveMailbox(true)
			continue
		}
		i := s.pickIndexOr(func(c *alignChan) bool { return !c.ended && len(c.q) > 0 }, true)
		if i < 0 {
			break
		}
		s.read(i, false)
	}
	for i, c := range s.ch {
		if !c.ended || len(c.q) > 0 || c.read != c.sent {
			s.failf("liveness: input %d holds %d unread messages (read %d of %d records, ended %v) and the task may read nothing (aligning %d, blocked %v)",
				i, len(c.q), c.read, c.sent, c.ended, s.a.Aligning(), s.a.Blocked(i))
		}
	}
	if x := s.a.Aligning(); x != 0 {
		s.failf("liveness: every input ended but checkpoint %d is still aligning", x)
	}
	if s.mode != ExactlyOnce {
		return
	}
	// A checkpoint no producer skipped and nobody aborted reaches every
	// input that had not ended: once it reached one, its alignment must
	// complete.
	for id := int64(1); id < int64(len(s.ck)); id++ {
		if k := s.ck[id]; k.reached && !k.skipped && !k.aborted && k.fate != fateSnapshot {
			s.failf("liveness: checkpoint %d was forwarded on every live input and never aborted, but not snapshotted (fate %d)", id, k.fate)
		}
	}
}

func (s *alignSim) pickIndex(ok func(*alignChan) bool) int {
	return s.pickIndexOr(ok, false)
}

// pickIndexOr returns a random channel that satisfies ok and, with
// unblocked, may be read; -1 when none does (allowed only with unblocked).
func (s *alignSim) pickIndexOr(ok func(*alignChan) bool, unblocked bool) int {
	var c [8]int
	n := 0
	for i, ch := range s.ch {
		if ok(ch) && !(unblocked && s.a.Blocked(i)) {
			c[n] = i
			n++
		}
	}
	if n == 0 {
		if unblocked {
			return -1
		}
		s.failf("simulation error: no channel to pick")
	}
	return c[s.rng.IntN(n)]
}

func (s *alignSim) pickChan(ok func(*alignChan) bool) *alignChan { return s.ch[s.pickIndex(ok)] }

// canTrigger reports whether another checkpoint may start: fewer than
// maxAhead of the newer ones are still unsettled (neither done at this task
// nor aborted by the coordinator).
func (s *alignSim) canTrigger() bool {
	if len(s.ck) > 40 {
		return false
	}
	open := 0
	for id := s.resolved + 1; id < int64(len(s.ck)); id++ {
		if k := s.ck[id]; k.fate == fateNone && !k.abortSent {
			open++
		}
	}
	return open < s.maxAhead
}

func (s *alignSim) trigger() {
	id := int64(len(s.ck))
	s.ck = append(s.ck, alignCkpt{})
	for _, c := range s.ch {
		if !c.closed {
			c.todo = append(c.todo, id)
		}
	}
	if len(s.ck) > 2 && s.a.Aligning() != 0 {
		s.stats.Overlap++
	}
	if s.log.on() {
		s.logf("trigger %d", id)
	}
}

// forward has channel i's producer send its next barrier, or skip it: its
// checkpoint was abandoned upstream, and the coordinator will abort it.
func (s *alignSim) forward(i int, skip bool) {
	c := s.ch[i]
	id := c.todo[0]
	c.todo = c.todo[1:]
	if skip {
		s.ck[id].skipped = true
		s.stats.Skipped++
		if s.log.on() {
			s.logf("input %d skips barrier %d", i, id)
		}
		s.sendAbort(id)
		return
	}
	c.q = append(c.q, alignMsg{kind: amBarrier, v: id})
}

// close has channel i's producer end its input; barriers it had yet to
// forward are never sent.
func (s *alignSim) close(i int) {
	c := s.ch[i]
	c.todo = nil
	c.closed = true
	c.q = append(c.q, alignMsg{kind: amEnd})
}

// sendAbort puts Abort{id} on its way to the task's mailbox.
func (s *alignSim) sendAbort(id int64) {
	if s.ck[id].abortSent {
		return
	}
	s.ck[id].abortSent = true
	s.mailbox = append(s.mailbox, alignAbort{id: id, due: s.stepN + s.rng.IntN(40)})
}

// serveMailbox hands the due aborts (all, with all) to the aligner, in order.
func (s *alignSim) serveMailbox(all bool) {
	n := 0
	for n < len(s.mailbox) && (all || s.mailbox[n].due <= s.stepN) {
		n++
	}
	for _, m := range s.mailbox[:n] {
		s.abort(m.id)
	}
	s.mailbox = s.mailbox[n:]
}

// abort delivers Abort{id}: "if it is being aligned every input is
// unblocked; if its barriers have not arrived yet they will be ignored".
func (s *alignSim) abort(id int64) {
	prev := s.a.Aligning()
	s.a.Abort(id)
	k := &s.ck[id]
	k.aborted = true
	if s.log.on() {
		s.logf("abort %d (aligning %d) -> aligning %d", id, prev, s.a.Aligning())
	}
	switch {
	case prev == id:
		s.stats.AbortedAligning++
		if s.a.Aligning() != 0 {
			s.failf("Abort{%d} of the checkpoint being aligned left checkpoint %d aligning", id, s.a.Aligning())
		}
		k.fate = fateAborted
		s.resolved = id
	case s.a.Aligning() != prev:
		s.failf("Abort{%d} changed the alignment from %d to %d", id, prev, s.a.Aligning())
	case !k.opened && k.fate == fateNone && id > s.resolved:
		s.stats.AbortedAhead++
	}
	s.checkBlocked()
}

// read has the task take the next message of channel i. With respect, the
// task first checks Blocked, as runtime/task.go does.
func (s *alignSim) read(i int, respect bool) {
	if respect && s.a.Blocked(i) {
		s.failf("simulation error: reading blocked input %d", i)
	}
	c := s.ch[i]
	m := c.q[0]
	c.q = c.q[1:]
	switch m.kind {
	case amRecord:
		s.readRecord(i, c, m.v)
	case amBarrier:
		s.readBarrier(i, c, m.v)
	case amEnd:
		s.readEnd(i, c)
	}
	s.checkBlocked()
}

// readRecord: "an input that delivered barrier N is blocked — the task must
// not read it — until barrier N arrived on every input that has not ended"
// (ExactlyOnce). A record read past an open barrier would be in the snapshot
// of N although it comes after N's cut.
func (s *alignSim) readRecord(i int, c *alignChan, seq int64) {
	if seq != c.read {
		s.failf("simulation error: input %d record %d read as number %d", i, seq, c.read)
	}
	if s.mode == ExactlyOnce {
		if last := c.lastBarrier(); last != 0 {
			if k := s.ck[last]; k.opened && k.fate == fateNone && !k.aborted {
				s.failf("exactly-once: record %d of input %d, after barrier %d, read before checkpoint %d's snapshot", seq, i, last, last)
			}
		}
	}
	c.read++
	s.stats.Records++
	if s.log.on() {
		s.logf("input %d record %d", i, seq)
	}
}

// readBarrier feeds barrier id of input i to the aligner and checks the
// result against Aligner's contract.
func (s *alignSim) readBarrier(i int, c *alignChan, id int64) {
	s.stats.Barriers++
	prev := s.a.Aligning()
	res := s.a.Barrier(s.now, i, id)
	c.barriers = append(c.barriers, alignCut{id: id, pos: c.read})
	if s.log.on() {
		s.logf("input %d barrier %d after %d records (aligning %d) -> %+v, aligning %d", i, id, c.read, prev, res, s.a.Aligning())
	}
	k := &s.ck[id]
	k.reached = true
	// "stale: a checkpoint this subtask already finished or gave up",
	// checkpoints older than the one aligning, and aborted ones ("their
	// barriers are stale too").
	if id <= s.resolved || (prev != 0 && id < prev) || k.aborted {
		s.stats.Stale++
		if res != (Alignment{}) || s.a.Aligning() != prev {
			s.failf("stale barrier %d on input %d (newest resolved %d, aligning %d, aborted %v) gave %+v and aligning %d",
				id, i, s.resolved, prev, k.aborted, res, s.a.Aligning())
		}
		return
	}
	if prev != 0 && id > prev {
		// "a newer barrier arrived on an input that had not delivered it".
		if res.Abandoned != prev {
			s.failf("barrier %d on input %d while aligning %d: Abandoned = %d, want %d", id, i, prev, res.Abandoned, prev)
		}
		if _, ok := c.delivered(prev); ok && s.mode == ExactlyOnce {
			s.failf("exactly-once: input %d delivered barrier %d after %d while %d was aligning: it should have been blocked", i, id, prev, prev)
		}
		s.ck[prev].fate = fateAbandoned
		s.resolved = prev
		s.stats.Abandoned++
	} else if res.Abandoned != 0 {
		s.failf("barrier %d on input %d while aligning %d: Abandoned = %d, want none", id, i, prev, res.Abandoned)
	}
	if !k.opened {
		k.opened = true
		k.first = s.now
	}
	if s.allDelivered(id) {
		if !res.Complete || res.ID != id {
			s.failf("barrier %d on input %d is the last one the live inputs owed: got %+v, want Complete %d", id, i, res, id)
		}
		s.snapshot(id, res)
		return
	}
	if res.Complete || s.a.Aligning() != id {
		s.failf("barrier %d on input %d, inputs still owing it: got %+v and aligning %d, want aligning %d", id, i, res, s.a.Aligning(), id)
	}
}

// readEnd feeds end-of-input of channel i: "it delivers no more barriers, so
// it no longer holds an alignment back".
func (s *alignSim) readEnd(i int, c *alignChan) {
	prev := s.a.Aligning()
	res := s.a.EndOfInput(s.now, i)
	c.ended = true
	if s.log.on() {
		s.logf("input %d ends after %d records (aligning %d) -> %+v, aligning %d", i, c.read, prev, res, s.a.Aligning())
	}
	if prev != 0 && s.allDelivered(prev) {
		if !res.Complete || res.ID != prev || res.Abandoned != 0 {
			s.failf("input %d ended and every other live input delivered %d: got %+v, want Complete %d", i, prev, res, prev)
		}
		s.stats.EndSnapshots++
		s.snapshot(prev, res)
		return
	}
	if res != (Alignment{}) || s.a.Aligning() != prev {
		s.failf("input %d ended, alignment of %d still waiting: got %+v and aligning %d", i, prev, res, s.a.Aligning())
	}
}

// allDelivered reports whether every input that has not ended delivered
// barrier id.
func (s *alignSim) allDelivered(id int64) bool {
	for _, c := range s.ch {
		if _, ok := c.delivered(id); !ok && !c.ended {
			return false
		}
	}
	return true
}

// snapshot checks the cut of a completed alignment: the subtask "snapshots
// once", in id order, and its state holds exactly the records before barrier
// id on every input that delivered it (ExactlyOnce) or at least those
// (AtLeastOnce: "records after the cut may be in the snapshot"), and every
// record of an input that ended.
func (s *alignSim) snapshot(id int64, res Alignment) {
	k := &s.ck[id]
	if id <= s.lastSnap || k.fate != fateNone || k.aborted {
		s.failf("snapshot of %d after snapshot %d (fate %d, aborted %v)", id, s.lastSnap, k.fate, k.aborted)
	}
	if want := s.now.Sub(k.first); res.Duration != want {
		s.failf("checkpoint %d: Duration %v, want %v (first barrier at %v)", id, res.Duration, want, k.first.Sub(t0))
	}
	for i, c := range s.ch {
		pos, ok := c.delivered(id)
		switch {
		case !ok && !c.ended:
			s.failf("snapshot of %d while input %d neither delivered barrier %d nor ended: records before its barrier would be missing", id, i, id)
		case !ok:
			if c.read != c.sent {
				s.failf("snapshot of %d: input %d ended but %d of its %d records were read", id, i, c.read, c.sent)
			}
		case s.mode == ExactlyOnce && c.read != pos:
			s.failf("exactly-once: snapshot of %d holds %d records of input %d, whose barrier %d came after %d", id, c.read, i, id, pos)
		case c.read < pos:
			s.failf("snapshot of %d holds %d records of input %d, whose barrier came after %d", id, c.read, i, pos)
		case c.lastBarrier() != id:
			s.failf("snapshot of %d after input %d delivered the newer barrier %d", id, i, c.lastBarrier())
		case c.read > pos:
			s.stats.PastCut++
		}
	}
	k.fate = fateSnapshot
	s.lastSnap, s.resolved = id, id
	s.stats.Snapshots++
}

// checkBlocked: in ExactlyOnce an input is blocked exactly while it delivered
// the barrier being aligned ("INVARIANT: in ExactlyOnce mode, Blocked(i) ==
// arrived[i] while current != 0"); in AtLeastOnce "no input is blocked".
func (s *alignSim) checkBlocked() {
	cur := s.a.Aligning()
	if cur != 0 {
		if k := s.ck[cur]; !k.opened || k.fate != fateNone || k.aborted {
			s.failf("aligning %d, which is not open here (opened %v, fate %d, aborted %v)", cur, k.opened, k.fate, k.aborted)
		}
	}
	for i, c := range s.ch {
		want := s.mode == ExactlyOnce && cur != 0 && !c.ended && c.lastBarrier() == cur
		if got := s.a.Blocked(i); got != want {
			s.failf("Blocked(%d) = %v, want %v (aligning %d, last barrier of input %d: %d, ended %v)", i, got, want, cur, i, c.lastBarrier(), c.ended)
		}
	}
}
