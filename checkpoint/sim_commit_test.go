package checkpoint

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A seeded simulation of the sink commit path end to end: the real
// Coordinator, driven the way runtime/attempt.go drives it, model sink
// subtasks that stage output at barriers and prune it on NotifyComplete, the
// model committers and destinations of sim_sink_test.go, crash-consistent
// checkpoint storage with its ledger (Ledger), and the recovery of
// runtime/recovery.go: refuse to fall back past output a sink already
// published (the fallback guard), re-commit the recovery point's commits,
// abandon what else is staged, delete incomplete checkpoints and those the
// ledger records as failed, apply retention and pick the next id above
// every id stored or reserved.
//
// Faults: acknowledgements in any order, declines and timeouts; metadata
// writes that fail, or become durable and report failure; discards that
// fail; completion notifications lost, duplicated, early and late (past the
// NotifyComplete obligation); results (MetadataWritten, Committed) late and
// duplicated; commit steps that fail before or after they took effect,
// retried by the committer and then by a restart; failed actions (the
// runtime's failpoints between metadata write, notification and commit);
// task failures (a graceful attempt failure: the queued storage writes and
// commits still run); and process crashes at any step, including between a
// durable metadata write and its commit, in the middle of a commit of several
// committables, during shutdown, and during every step of recovery
// (re-commit, abandon, storage cleanup); ledger writes that fail, or land
// and report failure; and an operator deleting the newest checkpoint while
// the job is down (`ingest checkpoints delete --force`).
//
// Checked, after every step that changes a destination: a consumer sees only
// output of complete checkpoints, no record twice, and of a destination-wide
// sink either all of a checkpoint's output or none; a committer never finds
// staged output of a complete checkpoint gone; Abandon never deletes output a
// complete checkpoint holds. After every recovery and when the job finishes:
// the visible output is exactly the records before the recovery point's (the
// final checkpoint's) cut, each once; a recovery refuses only after a
// checkpoint was deleted. At every trigger: the id was reserved by a durable
// ledger and never triggered before in the run (#12 item 1).
//
// Replay one seed: go test ./checkpoint -run '^TestCommitSimulation$' -commitseed=N -v

var (
	commitSeed  = flag.Int64("commitseed", 0, "TestCommitSimulation: run only this seed; with -v, print its whole step log")
	commitSeeds = flag.Int("commitseeds", simDefaultSeeds(3000), "TestCommitSimulation: number of seeds to run (1..N); a tenth of the default under -race")
	// commitStorageFaults scales the rate of the double storage faults that
	// leave a checkpoint complete that the coordinator failed (see storeOp).
	commitStorageFaults = flag.Int("commitstoragefaults", 1, "TestCommitSimulation: multiply the rate of metadata writes that land but report failure, and of failed discards, by this")
)

func TestCommitSimulation(t *testing.T) {
	runSeeded(t, seededSim[commitStats]{
		test: "TestCommitSimulation", replay: "commitseed",
		flags:    fmt.Sprintf(" -commitstoragefaults=%d", *commitStorageFaults),
		run:      runCommitSim,
		coverMin: 2000,
		cover: func(t *testing.T, s commitStats) {
			requireCovered(t, map[string]int{
				"finished jobs":                       s.Finished,
				"completions":                         s.Completions,
				"published items":                     s.Published,
				"abandoned items":                     s.AbandonedItems,
				"crashes after an unreported write":   s.CrashWrittenUnreported,
				"crashes with a commit queued":        s.CrashCommitQueued,
				"crashes in the middle of a commit":   s.CrashMidCommit,
				"crashes during shutdown":             s.CrashInShutdown,
				"crashes during a recovery commit":    s.CrashMidRecoveryCommit,
				"crashes during abandon":              s.CrashMidAbandon,
				"crashes during storage cleanup":      s.CrashMidCleanup,
				"recovery failures":                   s.RecoveryFailures,
				"commit failures":                     s.CommitFailures,
				"ambiguous commit failures":           s.AmbiguousFailures,
				"committer retries":                   s.CommitRetries,
				"failed actions":                      s.ActFailures,
				"task failures":                       s.TaskFailures,
				"lost notifications":                  s.NotifyLost,
				"duplicated notifications":            s.NotifyDup,
				"late notifications":                  s.NotifyLate,
				"early notifications":                 s.NotifyEarly,
				"duplicated results":                  s.ResultDups,
				"recoveries that published output":    s.Recommits,
				"partly visible per-partition sinks":  s.PartialVisible,
				"ledger writes":                       s.LedgerWrites,
				"failed ledger writes":                s.LedgerFailures,
				"failed checkpoints skipped":          s.SkippedFailed,
				"checkpoints deleted by an operator":  s.Deleted,
				"recoveries refused":                  s.Refused,
				"fallbacks past a deleted checkpoint": s.SafeFallbacks,
				"declines":                            s.Declines,
				"timeouts":                            s.Timeouts,
				"durable writes reported failed":      s.AmbiguousWrites,
				"recoveries from such a checkpoint":   s.RestoredAmbiguous,
				"failed discards":                     s.DiscardFailures,
			})
		},
	}, *commitSeed, *commitSeeds)
}

// commitStats counts what the committer simulation exercised.
type commitStats struct {
	Seeds, Steps, Attempts, Completions, Finished, Published, AbandonedItems     int
	Crashes, CrashWrittenUnreported, CrashCommitQueued, CrashMidCommit           int
	CrashInShutdown, CrashMidRecoveryCommit, CrashMidAbandon, CrashMidCleanup    int
	RecoveryFailures, AttemptFailures, CommitFailures, AmbiguousFailures         int
	ActFailures, TaskFailures, NotifyLost, NotifyDup, NotifyLate, NotifyEarly    int
	ResultDups, Recommits, PartialVisible, Declines, Timeouts, Restarts          int
	AmbiguousWrites, RestoredAmbiguous, DiscardFailures, CommitRetries           int
	LedgerWrites, LedgerFailures, SkippedFailed, Deleted, Refused, SafeFallbacks int
}

// csTask is one subtask of the simulated job.
type csTask struct {
	id    TaskID
	sink  *csSink // nil for a task that stages no output
	state bool    // writes a state file into checkpoint storage at every barrier
	// inbox holds barriers and completion notifications in the order the
	// job sent them.
	inbox []csMsg
	// pos is the offset of the next record; staged is the offset up to which
	// the sink staged output. Both restart from the recovery point's cut.
	pos, staged int64
	// pending are the committables not yet known committed.
	pending []Committable
	// vis[o] is the item that made record o visible, nil if none.
	vis []*csItem
}

type csMsg struct {
	notify bool
	id     int64
}

// csPublish is one Commit call sequence in progress: a CommitOutput on the
// job's commit worker (id > 0) or the recovery's re-commit (id 0).
type csPublish struct {
	id      int64
	commits []Commit
	ci, st  int  // the commit being published and the committer's step in it
	retries int  // the committer's retries of commit ci
	started bool // past the failpoint before the first commit
	effect  bool // some step changed a destination
}

type commitSim struct {
	rng          *rand.Rand
	opts         Options
	faults       int  // fault weight: 0 is a fault-free run
	notifyFaults bool // completion notifications may be lost, duplicated or late
	retries      int  // how often a committer retries a failed Commit itself
	noFaults     bool // the drain: nothing fails any more
	// mutant names a deliberate bug of the model, for
	// TestSimulationsCatchBugs; "" is none.
	mutant string
	now    time.Time
	stepN  int
	log    simLog
	stats  commitStats

	tasks      []*csTask
	taskIDs    []TaskID
	sinks      []*csSink
	sinkByName map[string]*csSink

	// store is checkpoint storage: every checkpoint directory by id, with
	// its metadata once durable (nil: state files only).
	store map[int64]*Metadata
	// ever is every metadata that was ever durable; adopted the checkpoints
	// the job went on from.
	ever    map[int64]*Metadata
	adopted map[int64]bool
	// ghosts are checkpoints whose metadata write was durable but reported
	// failed.
	ghosts   map[int64]bool
	attemptN int
	// ledger is the durable checkpoint ledger (Ledger).
	ledger Ledger
	// triggered is every checkpoint id ever triggered, in any attempt.
	triggered map[int64]bool
	// refused is set when a recovery refused to start (the fallback guard):
	// the run ends there, as the job does.
	refused bool
	// deleted is set when an operator deleted a checkpoint since the last
	// recovery.
	deleted bool

	// The current attempt (runtime/attempt.go).
	coord *Coordinator
	// acks are acknowledgements on their way (async writers: any order).
	acks []Acked
	// storeQ and commitQ are the store and commit workers' queues, each run
	// in order; their results reach the driver in order.
	storeQ     []Action
	storeEv    []Event // MetadataWritten and LedgerWritten, in order
	commitQ    []CommitOutput
	cur        *csPublish
	commitEv   []Committed
	results    []Event // results delivered, for duplicates
	down       bool    // the attempt failed: FailJob, a failed action, a task failure
	finalAsked bool
	finished   int64
	effect     bool // set by a destination step that changed something
}

func runCommitSim(seed int64, logTail int) simRun[commitStats] {
	return runCommitSimWith(seed, logTail, "")
}

// runCommitSimWith runs one seed with the model broken as mutant says (see
// sim_mutants_test.go); "" is the faithful model.
func runCommitSimWith(seed int64, logTail int, mutant string) simRun[commitStats] {
	s := newCommitSim(seed, logTail)
	s.mutant = mutant
	err := runSeed(s.run)
	out := simRun[commitStats]{seed: seed, err: err, stats: s.stats}
	if s.log.on() {
		out.trail = s.header() + s.log.String()
	}
	return out
}

func newCommitSim(seed int64, logTail int) *commitSim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc0331))
	s := &commitSim{rng: rng, now: t0, log: simLog{limit: logTail}, sinkByName: map[string]*csSink{},
		store: map[int64]*Metadata{}, ever: map[int64]*Metadata{}, adopted: map[int64]bool{}, ghosts: map[int64]bool{}, triggered: map[int64]bool{}}
	sec := func(lo, hi int) time.Duration {
		return time.Duration(lo)*time.Second + time.Duration(rng.IntN((hi-lo)*1000+1))*time.Millisecond
	}
	o := Options{Mode: ExactlyOnce}
	if rng.IntN(10) > 0 {
		o.Interval = sec(1, 8)
	}
	o.Timeout = sec(5, 60)
	if rng.IntN(5) < 2 {
		o.MinPause = sec(0, 4)
	}
	o.MaxConcurrent = 1 + rng.IntN(3)
	o.TolerableFailures = rng.IntN(4)
	o.Retain = 1 + rng.IntN(3)
	s.opts = o
	s.faults = []int{0, 1, 2, 4}[rng.IntN(4)]
	s.notifyFaults = rng.IntN(2) == 0
	s.retries = rng.IntN(3)

	for i := range 1 + rng.IntN(3) {
		k := newSink("sink-"+string(rune('a'+i)), csKind(rng.IntN(3)))
		s.sinks = append(s.sinks, k)
		s.sinkByName[k.name] = k
		for sub := range 1 + rng.IntN(3) {
			s.tasks = append(s.tasks, &csTask{id: TaskID{Operator: k.name, Subtask: sub}, sink: k, state: rng.IntN(2) == 0})
		}
	}
	for sub := range rng.IntN(3) {
		s.tasks = append(s.tasks, &csTask{id: TaskID{Operator: "source", Subtask: sub}, state: rng.IntN(2) == 0})
	}
	for _, t := range s.tasks {
		s.taskIDs = append(s.taskIDs, t.id)
	}
	return s
}

func (s *commitSim) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "options %+v, fault weight %d, notification faults %v, committer retries %d, sinks", s.opts, s.faults, s.notifyFaults, s.retries)
	for _, k := range s.sinks {
		fmt.Fprintf(&b, " %s(%v)", k.name, k.kind)
	}
	fmt.Fprintf(&b, ", tasks %v\n", s.taskIDs)
	return b.String()
}

func (s *commitSim) failf(format string, args ...any) {
	panic(simFailed{msg: fmt.Sprintf(format, args...)})
}

func (s *commitSim) logf(format string, args ...any) {
	s.log.add(fmt.Sprintf("#%-4d t=%-10v a=%d ", s.stepN, s.now.Sub(t0), s.attemptN) + fmt.Sprintf(format, args...))
}

// fault reports whether to inject a fault whose rate is w per mille per unit
// of the seed's fault weight.
func (s *commitSim) fault(w int) bool {
	return !s.noFaults && s.faults > 0 && s.rng.IntN(1000) < w*s.faults
}

// --- Driving -----------------------------------------------------------------

func (s *commitSim) run() {
	s.recover("start")
	steps := 100 + s.rng.IntN(400)
	for s.stepN = 0; s.stepN < steps && s.finished == 0 && !s.refused; s.stepN++ {
		s.randomStep(s.stepN > steps/2)
	}
	if s.refused {
		s.stats.Seeds++
		s.stats.Steps += s.stepN
		return
	}
	s.noFaults = true
	s.drain()
	s.end()
	s.stats.Seeds++
	s.stats.Steps += s.stepN
}

const (
	ckTick = iota
	ckDeliver
	ckNotifyEarly
	ckAck
	ckDecline
	ckStoreOp
	ckStoreEv
	ckCommitStep
	ckCommitEv
	ckDupResult
	ckCrash
	ckTaskFail
	ckFinal
	ckNum
)

func (s *commitSim) randomStep(late bool) {
	s.now = s.now.Add(time.Duration(s.rng.IntN(50)) * time.Millisecond)
	if s.down {
		s.shutdown()
		return
	}
	// Weights: the protocol's steps weigh 40..120, faults a few each, so that
	// an attempt lives long enough to complete several checkpoints.
	f := s.faults
	var w [ckNum]int
	w[ckTick] = 80
	for _, t := range s.tasks {
		if len(t.inbox) > 0 {
			w[ckDeliver] = 120
			if slices.ContainsFunc(t.inbox[1:], func(m csMsg) bool { return m.notify }) {
				w[ckNotifyEarly] = 8
			}
		}
	}
	if len(s.acks) > 0 {
		w[ckAck] = 120
		w[ckDecline] = f
	}
	if len(s.storeQ) > 0 {
		w[ckStoreOp] = 50
	}
	if len(s.storeEv) > 0 {
		w[ckStoreEv] = 50
	}
	if s.cur != nil || len(s.commitQ) > 0 {
		w[ckCommitStep] = 60
	}
	if len(s.commitEv) > 0 {
		w[ckCommitEv] = 50
	}
	if len(s.results) > 0 {
		w[ckDupResult] = f
	}
	if f > 0 {
		// Crashes weigh more while something interesting is in flight.
		w[ckCrash] = 1
		if s.cur != nil && s.cur.effect {
			w[ckCrash] += 4
		}
		if slices.ContainsFunc(s.storeEv, writtenOK) || len(s.commitQ) > 0 {
			w[ckCrash] += 3
		}
		w[ckTaskFail] = 1
	}
	if late && !s.finalAsked {
		w[ckFinal] = 8
	}
	switch pickWeighted(s.rng, w[:]) {
	case ckTick:
		var d time.Duration
		switch x := s.rng.IntN(80); {
		case x < 56:
			d = time.Duration(s.rng.IntN(2000)) * time.Millisecond
		case x < 79:
			d = time.Duration(s.rng.Int64N(int64(s.opts.Interval + time.Second)))
		default:
			d = s.opts.Timeout + time.Duration(s.rng.IntN(1000))*time.Millisecond
		}
		s.now = s.now.Add(d)
		s.step(Tick{})
	case ckDeliver:
		s.deliver(s.pickTask(func(t *csTask) bool { return len(t.inbox) > 0 }), false)
	case ckNotifyEarly:
		s.deliver(s.pickTask(func(t *csTask) bool {
			return len(t.inbox) > 1 && slices.ContainsFunc(t.inbox[1:], func(m csMsg) bool { return m.notify })
		}), true)
	case ckAck:
		s.step(s.takeAck())
	case ckDecline:
		a := s.takeAck()
		s.stats.Declines++
		s.step(Declined{ID: a.ID, Task: a.State.Task, Reason: errBoom})
	case ckStoreOp:
		s.storeOp()
	case ckStoreEv:
		e := s.storeEv[0]
		s.storeEv = s.storeEv[1:]
		s.result(e)
	case ckCommitStep:
		s.commitWork()
	case ckCommitEv:
		e := s.commitEv[0]
		s.commitEv = s.commitEv[1:]
		s.result(e)
	case ckDupResult:
		s.stats.ResultDups++
		s.step(s.results[s.rng.IntN(len(s.results))])
	case ckCrash:
		s.crash()
	case ckTaskFail:
		s.stats.TaskFailures++
		if s.log.on() {
			s.logf("task failure")
		}
		s.down = true
	case ckFinal:
		s.finalAsked = true
		s.step(RequestFinal{})
	}
}

// drain drives the job to its end without faults: the sources are done
// (RequestFinal), every message, write and commit goes through, and time
// passes the timeout when only lost acknowledgements hold a checkpoint.
func (s *commitSim) drain() {
	for i := 0; s.finished == 0 && !s.refused; i++ {
		s.stepN++
		if i > 20000 {
			s.failf("liveness: the job did not finish within 20000 fault-free steps")
		}
		s.now = s.now.Add(10 * time.Millisecond)
		switch {
		case s.down:
			s.shutdown()
		case !s.finalAsked:
			s.finalAsked = true
			s.step(RequestFinal{})
		case slices.ContainsFunc(s.tasks, func(t *csTask) bool { return len(t.inbox) > 0 }):
			s.deliver(s.tasks[slices.IndexFunc(s.tasks, func(t *csTask) bool { return len(t.inbox) > 0 })], false)
		case len(s.acks) > 0:
			s.step(s.takeAck())
		case len(s.storeQ) > 0:
			s.storeOp()
		case len(s.storeEv) > 0:
			e := s.storeEv[0]
			s.storeEv = s.storeEv[1:]
			s.result(e)
		case s.cur != nil || len(s.commitQ) > 0:
			s.commitWork()
		case len(s.commitEv) > 0:
			e := s.commitEv[0]
			s.commitEv = s.commitEv[1:]
			s.result(e)
		default:
			s.now = s.now.Add(s.opts.Timeout)
			s.step(Tick{})
		}
	}
}

// end follows Finished: the job's shutdown runs the queued storage work, its
// output must be exactly the records before the final cut, and the next run
// of the pipeline, recovering from the final checkpoint, must publish nothing
// new and abandon what the job left staged.
func (s *commitSim) end() {
	if s.refused {
		return
	}
	if s.cur != nil || len(s.commitQ) > 0 || len(s.commitEv) > 0 {
		s.failf("Finished{%d} while a CommitOutput was still being carried out (\"the final checkpoint ID is complete and its output committed\")", s.finished)
	}
	m := s.ever[s.finished]
	s.checkCoverage(m, "when the job finished")
	for len(s.storeQ) > 0 {
		s.storeOp()
	}
	published := s.stats.Published
	s.recover("rerun")
	if s.refused {
		s.failf("the next run of the finished job refused to start")
	}
	if s.coord.LatestComplete() != s.finished {
		s.failf("the next run restores checkpoint %d, not the final checkpoint %d", s.coord.LatestComplete(), s.finished)
	}
	if s.stats.Published != published {
		s.failf("re-running a finished job published %d more items", s.stats.Published-published)
	}
	s.stats.Finished++
}

func (s *commitSim) pickTask(ok func(*csTask) bool) *csTask {
	var c []*csTask
	for _, t := range s.tasks {
		if ok(t) {
			c = append(c, t)
		}
	}
	return c[s.rng.IntN(len(c))]
}

func (s *commitSim) takeAck() Acked {
	i := s.rng.IntN(len(s.acks))
	a := s.acks[i]
	s.acks = slices.Delete(s.acks, i, i+1)
	return a
}

// deliver makes t process the head of its inbox or, early, its first
// notification behind it (NotifyComplete allows that).
func (s *commitSim) deliver(t *csTask, early bool) {
	i := 0
	if early {
		i = 1 + slices.IndexFunc(t.inbox[1:], func(m csMsg) bool { return m.notify })
		s.stats.NotifyEarly++
	}
	m := t.inbox[i]
	t.inbox = slices.Delete(t.inbox, i, i+1)
	if !m.notify {
		s.barrier(t, m.id)
		return
	}
	if s.notifyFaults && !s.noFaults {
		switch s.rng.IntN(16) {
		case 0:
			s.stats.NotifyLost++
			if s.log.on() {
				s.logf("%v loses notification %d", t.id, m.id)
			}
			return
		case 1:
			s.stats.NotifyDup++
			at := s.rng.IntN(len(t.inbox) + 1)
			t.inbox = slices.Insert(t.inbox, at, m)
		case 2:
			// Late: behind every barrier now in the inbox, past the
			// obligation when one of them was triggered after it.
			if j := slices.IndexFunc(t.inbox, func(x csMsg) bool { return !x.notify && x.id > m.id }); j >= 0 {
				s.stats.NotifyLate++
				t.inbox = append(t.inbox, m)
				if s.log.on() {
					s.logf("%v delays notification %d", t.id, m.id)
				}
				return
			}
		}
	}
	// "Sink subtasks stop reporting committables prepared at or before ID."
	t.pending = slices.DeleteFunc(t.pending, func(c Committable) bool { return c.PreparedAt <= m.id })
	if s.log.on() {
		s.logf("%v notified of %d", t.id, m.id)
	}
}

// barrier makes t take its snapshot for checkpoint id: consume some records,
// write its state file, stage the records since the last barrier (sinks) and
// acknowledge with its position and every pending committable.
func (s *commitSim) barrier(t *csTask, id int64) {
	t.pos += int64(s.rng.IntN(4))
	if _, ok := s.store[id]; t.state && !ok {
		s.store[id] = nil
	}
	st := SubtaskState{Task: t.id, Inline: encodePos(t.pos)}
	if k := t.sink; k != nil {
		if t.pos > t.staged {
			// Like the file sink, stage only when records arrived.
			name := k.name + "/" + strconv.Itoa(t.id.Subtask) + "/a" + strconv.Itoa(s.attemptN) + "/" + strconv.FormatInt(id, 10)
			k.stage(name, t, id, t.staged, t.pos)
			t.pending = append(t.pending, Committable{PreparedAt: id, Data: []byte(name)})
			t.staged = t.pos
		}
		st.Committables = slices.Clone(t.pending)
	}
	if s.log.on() {
		s.logf("%v barrier %d at %d, pending %d", t.id, id, t.pos, len(t.pending))
	}
	s.acks = append(s.acks, Acked{ID: id, State: st})
}

// result delivers a worker's result to the driver.
func (s *commitSim) result(e Event) {
	if len(s.results) < 16 {
		s.results = append(s.results, e)
	} else {
		s.results[s.rng.IntN(16)] = e
	}
	s.step(e)
}

// --- The attempt ---------------------------------------------------------------

// step feeds ev to the coordinator and carries out its actions as
// attempt.act does, stopping at the first that fails.
func (s *commitSim) step(ev Event) {
	prev := s.coord.LatestComplete()
	acts := s.coord.Step(s.now, ev)
	if s.log.on() {
		s.logf("%s -> %s", fmtEvent(ev), fmtActions(acts))
	}
	if latest := s.coord.LatestComplete(); latest != prev {
		if mw, ok := ev.(MetadataWritten); !ok || mw.Err != nil || mw.ID != latest || s.store[latest] == nil {
			s.failf("invariant 1: recovery point %d -> %d on %s", prev, latest, fmtEvent(ev))
		}
		s.adopt(s.store[latest])
		s.stats.Completions++
	}
	if _, ok := ev.(Tick); ok {
		for _, a := range acts {
			if _, ok := a.(Abort); ok {
				s.stats.Timeouts++
			}
		}
	}
	for _, a := range acts {
		if !s.act(a) {
			break
		}
	}
}

// act carries out one action; false means the attempt failed.
func (s *commitSim) act(a Action) bool {
	switch x := a.(type) {
	case Trigger:
		if _, ok := s.store[x.ID]; ok {
			s.failf("Trigger{%d}: the id is in storage (NextID must be above every stored id)", x.ID)
		}
		if s.triggered[x.ID] {
			s.failf("Trigger{%d}: the id was triggered before (a checkpoint id is never reused in a pipeline's lifetime)", x.ID)
		}
		if x.ID > s.ledger.Reserved {
			s.failf("Trigger{%d} above the durable ledger's reservation %d", x.ID, s.ledger.Reserved)
		}
		s.triggered[x.ID] = true
		for _, t := range s.tasks {
			t.inbox = append(t.inbox, csMsg{id: x.ID})
		}
	case WriteMetadata, WriteLedger:
		s.storeQ = append(s.storeQ, x)
	case NotifyComplete:
		if s.fault(8) {
			// Failpoint job/after-metadata-before-notify: the checkpoint is
			// complete, its output not yet committed.
			s.stats.ActFailures++
			s.down = true
			if s.log.on() {
				s.logf("failed action %s", fmtAction(x))
			}
			return false
		}
		for _, t := range s.tasks {
			t.inbox = append(t.inbox, csMsg{notify: true, id: x.ID})
		}
	case CommitOutput:
		s.commitQ = append(s.commitQ, x)
	case Abort:
	case Discard:
		s.storeQ = append(s.storeQ, x)
	case FailJob:
		s.down = true
		return false
	case Finished:
		s.finished = x.ID
	default:
		s.failf("unknown action %T", a)
	}
	return true
}

// storeOp runs the store worker's next job: a metadata write (which may
// fail) or a discard.
func (s *commitSim) storeOp() {
	op := s.storeQ[0]
	s.storeQ = s.storeQ[1:]
	switch x := op.(type) {
	case WriteLedger:
		s.stats.LedgerWrites++
		ev := LedgerWritten{Reserved: x.Reserved, Failed: x.Failed}
		switch {
		case s.fault(20):
			s.stats.LedgerFailures++
			ev.Err = errBoom
		case s.fault(5):
			// Durable, but reported failed (a lost answer): harmless, the
			// coordinator writes the same facts again.
			s.stats.LedgerFailures++
			s.ledger = s.ledger.Apply(x)
			ev.Err = errBoom
		default:
			s.ledger = s.ledger.Apply(x)
		}
		if s.log.on() {
			s.logf("ledger write %+v: err %v, ledger reserved %d failed %v", x, ev.Err, s.ledger.Reserved, s.ledger.Failed)
		}
		s.storeEv = append(s.storeEv, ev)
	case WriteMetadata:
		switch {
		case s.fault(20):
			s.storeEv = append(s.storeEv, MetadataWritten{ID: x.Metadata.ID, Err: errBoom})
		case s.fault(5 * *commitStorageFaults):
			// Durable, but reported failed: storage could neither make the
			// write durable for sure nor undo it (storage.Local: the directory
			// fsync after the rename failed, then removing the file failed;
			// storage/blob: the put's outcome is unknown and the delete
			// failed). The coordinator fails the checkpoint, discards it and
			// records it as failed in the ledger before any newer checkpoint
			// completes; a recovery before that may restore it, one after it
			// never does.
			s.stats.AmbiguousWrites++
			s.persist(x.Metadata)
			s.ghosts[x.Metadata.ID] = true
			s.storeEv = append(s.storeEv, MetadataWritten{ID: x.Metadata.ID, Err: errBoom})
		default:
			s.persist(x.Metadata)
			s.storeEv = append(s.storeEv, MetadataWritten{ID: x.Metadata.ID})
		}
	case Discard:
		if newest := s.newestComplete(); x.ID == newest && s.adopted[x.ID] {
			s.failf("Discard{%d} deletes the recovery point", x.ID)
		}
		// Storage that could not undo a ghost's write often fails to
		// delete it too: correlated failures.
		if s.fault(10**commitStorageFaults) || s.ghosts[x.ID] && s.fault(150) {
			// attempt.act logs a failed discard; the next recovery's cleanup
			// deletes what is left.
			s.stats.DiscardFailures++
			return
		}
		delete(s.store, x.ID)
		if s.log.on() {
			s.logf("discarded %d", x.ID)
		}
	}
}

// persist makes m durable: the checkpoint is complete, and each sink's own
// commit in it is what its committer must be asked to publish.
func (s *commitSim) persist(m *Metadata) {
	if s.ever[m.ID] != nil {
		s.failf("checkpoint %d completed twice: its id was reused", m.ID)
	}
	s.store[m.ID] = m
	s.ever[m.ID] = m
	if s.log.on() {
		s.logf("metadata %d durable, commits %s", m.ID, fmtCommits(m.Commits))
	}
	for _, c := range m.Commits {
		if c.Checkpoint != m.ID {
			continue
		}
		k := s.sinkByName[c.Sink]
		if k == nil || k.own[m.ID] != nil {
			s.failf("metadata %d: commit of unknown sink %q, or a second commit of it", m.ID, c.Sink)
		}
		names := make([]string, len(c.Committables))
		for i, d := range c.Committables {
			if k.items[string(d)] == nil {
				s.failf("metadata %d commits %q, which sink %s never staged", m.ID, d, k.name)
			}
			names[i] = string(d)
		}
		k.own[m.ID] = names
	}
}

// adopt records that the job goes on from complete checkpoint m: the
// coordinator reported it complete, or a recovery restored it. Each
// committable m's own commits hold is assigned to it and must be in no other
// adopted checkpoint's; every committable its acknowledgements report must be
// in its commits or an earlier adopted checkpoint's (Committable's
// INVARIANT).
func (s *commitSim) adopt(m *Metadata) {
	if s.adopted[m.ID] {
		return
	}
	s.adopted[m.ID] = true
	for _, c := range m.Commits {
		if c.Checkpoint != m.ID {
			continue
		}
		k := s.sinkByName[c.Sink]
		for _, d := range c.Committables {
			it := k.items[string(d)]
			if it.assigned != 0 {
				s.failf("exactly-once: %s is in the commits of complete checkpoints %d and %d", it.name, it.assigned, m.ID)
			}
			it.assigned = m.ID
		}
	}
	for _, st := range m.Tasks {
		for _, c := range st.Committables {
			if t := s.tasks[slices.IndexFunc(s.tasks, func(t *csTask) bool { return t.id == st.Task })]; t.sink != nil {
				if it := t.sink.items[string(c.Data)]; it == nil || it.assigned == 0 || it.assigned > m.ID {
					s.failf("exactly-once: %s, reported in the acknowledgements of complete checkpoint %d, is in no complete checkpoint's commits up to it", c.Data, m.ID)
				}
			}
		}
	}
}

// commitWork runs one step of the commit worker: the next CommitOutput's
// publication (attempt.publish), reporting Committed when it returns.
func (s *commitSim) commitWork() {
	if s.cur == nil {
		co := s.commitQ[0]
		s.commitQ = s.commitQ[1:]
		s.cur = &csPublish{id: co.ID, commits: co.Commits}
	}
	fin, err := s.publishStep(s.cur)
	if !fin && err == nil {
		return
	}
	if err != nil {
		s.stats.CommitFailures++
	}
	if s.log.on() {
		s.logf("commit output %d returned %v", s.cur.id, err)
	}
	s.commitEv = append(s.commitEv, Committed{ID: s.cur.id, Err: err})
	s.cur = nil
}

// publishStep carries out one step of p; fin when every commit returned
// nil.
func (s *commitSim) publishStep(p *csPublish) (fin bool, err error) {
	if !p.started {
		p.started = true
		if p.id != 0 && s.fault(10) {
			return true, errBoom // failpoint job/after-metadata-before-commit
		}
		return false, nil
	}
	if p.ci == len(p.commits) {
		if p.id != 0 && s.fault(5) {
			// Failpoint job/after-commit-before-cleanup: published, and
			// reported failed.
			s.stats.AmbiguousFailures++
			return true, errBoom
		}
		return true, nil
	}
	cm := p.commits[p.ci]
	k := s.sinkByName[cm.Sink]
	if k == nil {
		s.failf("commit of unknown sink %q", cm.Sink)
	}
	s.effect = false
	next, done, err := s.commitStep(k, cm, p.st)
	p.effect = p.effect || s.effect
	if err != nil && p.retries < s.retries {
		// The committer retries the whole call (connector/postgres:
		// CommitRetries); the failed step may have taken effect.
		p.retries++
		s.stats.CommitRetries++
		p.st = 0
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if done {
		p.ci, p.st, p.retries = p.ci+1, 0, 0
	} else {
		p.st = next
	}
	return false, nil
}

// writtenOK reports whether e is a successful metadata write's result.
func writtenOK(e Event) bool {
	mw, ok := e.(MetadataWritten)
	return ok && mw.Err == nil
}
