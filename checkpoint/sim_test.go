package checkpoint

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// A seeded simulation of a whole job around the Coordinator (STYLE.md: "A
// seeded simulator (virtual clock, reordered/dropped/duplicated messages,
// crashes, crash-consistent fake storage) runs thousands of interleavings per
// second and prints the seed that reproduces a failure").
//
// The simulated job has 1..8 tasks; sink tasks stage output exactly as the
// sink contract of Committable describes. Every record a sink task consumes
// has an offset; a committable covers the offsets [from, to) staged since the
// previous barrier, and a task's acknowledged Inline state is its offset at
// the barrier (its replay position). That makes sink output self-checking, as
// Flink's exactly-once tests are: at the end, every offset before the final
// checkpoint's cut must have been published exactly once, across any number of
// crashes and recoveries.
//
// Replay one seed: go test ./checkpoint -run '^TestSimulation$' -seed=N -v

var (
	simSeed          = flag.Int64("seed", 0, "TestSimulation: run only this seed; with -v, print its whole step log")
	simSeeds         = flag.Int("seeds", 10000, "TestSimulation: number of seeds to run (1..N)")
	simMaxConcurrent = flag.Int("sim.maxconcurrent", 3, "TestSimulation: Options.MaxConcurrent is drawn from 1..this")
)

func TestSimulation(t *testing.T) {
	runSeeded(t, seededSim[simStats]{
		test: "TestSimulation", replay: "seed",
		flags:    fmt.Sprintf(" -sim.maxconcurrent=%d", *simMaxConcurrent),
		run:      runSim,
		coverMin: 1000,
		// The simulation must exercise what it claims to check; a sim that
		// silently stopped crashing or completing checks nothing.
		cover: func(t *testing.T, total simStats) {
			covered := map[string]int{
				"completions": total.Completions, "crashes": total.Crashes, "finished": total.Finished,
				"fail jobs": total.FailJobs, "late discards": total.LateDiscards,
				"durable at crash": total.DurableAtCrash, "carried commits": total.Carried,
				"task failures": total.TaskFailed, "timeouts": total.Timeouts, "retention discards": total.Retired,
				"commit failures":             total.CommitFailures,
				"checkpoints with references": total.References, "held checkpoints": total.Held,
				"discards of held checkpoints": total.HeldDiscards, "cascading discards": total.Cascades,
				"dangling acks failed": total.DanglingFailed,
				"trims":                total.Trims, "trims of trimmed checkpoints": total.Shrinks,
				"restarts with trimmed checkpoints": total.RestartsWithTrimmed,
			}
			if *simMaxConcurrent > 1 {
				covered["subsumed"] = total.Subsumed
				covered["checkpoints held for a pending one"] = total.PendingHolds
			}
			requireCovered(t, covered)
		},
	}, *simSeed, *simSeeds)
}

// simStats counts what a run exercised.
type simStats struct {
	Seeds, Steps, Triggers, Completions, Crashes, Finished, FailJobs  int
	LateDiscards, Subsumed, DurableAtCrash, ConcurrentWrites, Carried int
	TaskFailed, Timeouts, Retired, Published, CommitFailures          int
	// Reference-counted retention (sim_retain_test.go).
	References, Held, HeldDiscards, Cascades, PendingHolds, DanglingFailed int
	Trims, Shrinks, RestartsWithTrimmed                                    int
}

// runSim runs one seed and checks the invariants after every step. logTail
// is as seededSim.run describes; the sim keeps its recent log entries either
// way, and all of them when logTail is -1.
func runSim(seed int64, logTail int) simRun[simStats] { return runSimWith(seed, logTail, "") }

// runSimWith runs one seed with the coordinator's retention broken as mutant
// says (see retentionMutant); "" is the coordinator as it is.
func runSimWith(seed int64, logTail int, mutant string) simRun[simStats] {
	s := newSim(seed, logTail < 0)
	s.mutant = mutant
	err := runSeed(s.run)
	out := simRun[simStats]{seed: seed, err: err, stats: s.stats}
	switch {
	case logTail < 0:
		out.trail = s.header() + s.logTail(len(s.log))
	case logTail > 0:
		out.trail = s.header() + s.logTail(logTail)
	}
	return out
}

// --- The simulated world ------------------------------------------------------

// simTask is one subtask of the simulated job in the current incarnation.
type simTask struct {
	id   TaskID
	sink bool
	// inbox holds barriers and completion notifications in the order the
	// coordinator emitted them; the task processes it in order, except that a
	// notification may be delivered early (NotifyComplete only requires it
	// before barriers triggered after it).
	inbox []simMsg
	// pos is the offset of the next record the task consumes.
	pos int64
	// staged is the offset up to which a sink staged its output.
	staged int64
	// pending are a sink's committables not yet known committed.
	pending []Committable
}

type simMsg struct {
	notify bool
	id     int64
}

// simResponse is a task's answer to a barrier, not yet delivered.
type simResponse struct {
	id    int64
	state SubtaskState
}

// prepared describes a committable: the sink task, incarnation and barrier
// that staged it and the records it covers.
type prepared struct {
	task     TaskID
	inc      int
	at       int64
	from, to int64
}

type logEntry struct {
	step int
	at   time.Duration
	inc  int
	note string
	task TaskID
	id   int64
	ev   Event
	acts []Action
}

type sim struct {
	seed    int64
	rng     *rand.Rand
	opts    Options
	faults  int // fault weight of this seed: 0 means a fault-free run
	tasks   []*simTask
	taskIDs []TaskID
	now     time.Time
	stepN   int
	log     []logEntry
	fullLog bool

	// store is the durable checkpoint storage: what survives a crash. store
	// holds the metadata of the complete checkpoints, files the state files
	// of every checkpoint whose metadata was written, by name (a trimmed one
	// has files and no metadata; see sim_retain_test.go).
	store map[int64]*Metadata
	files map[int64]map[string]bool
	// maxID is the largest checkpoint id ever triggered.
	maxID int64
	// reserved is the reservation of the durable ledger (Ledger.Reserved).
	reserved int64

	// The current incarnation (job attempt).
	inc       int
	coord     *Coordinator
	responses []simResponse // produced, not yet delivered
	withheld  []simResponse // dropped acks: never delivered, or delivered late
	delivered []simResponse // delivered acks, for duplicates
	writes    []*Metadata   // WriteMetadata in flight
	ledger    *WriteLedger  // WriteLedger in flight
	// unrecorded are the checkpoints whose metadata write failed and that
	// no durable ledger records yet.
	unrecorded []int64
	commits    []CommitOutput
	down       bool // TaskFailed reported: the job is going down
	failJob    bool // FailJob emitted: the runtime restarts the job
	finalAsked bool // RequestFinal given in this incarnation

	// Per-incarnation bookkeeping of the checker.
	started        bool
	failures       int // consecutive checkpoint failures, modelled independently
	lastTrigger    time.Time
	lastCompletion time.Time
	triggeredAt    map[int64]time.Time
	acked          map[int64]map[TaskID]SubtaskState
	wrote          map[int64]bool
	writing        map[int64]bool
	aborted        map[int64]bool
	completeOrder  []int64 // complete checkpoints known to be in storage, increasing
	lastCommitOut  int64

	// Reference-counted retention (sim_retain_test.go). incremental makes
	// tasks acknowledge with state that builds on the files of the
	// checkpoint that was the recovery point at the trigger, as an
	// incremental snapshot does.
	incremental bool
	mutant      string
	// base is, per checkpoint triggered in this incarnation, the recovery
	// point at its trigger (0: none); protect the files in storage then, any
	// of which it may build on.
	base    map[int64]int64
	protect map[int64]map[int64]map[string]bool
	// wholeAtTrigger are, per pending checkpoint, the checkpoints in
	// storage with their metadata at its trigger (retained, or held whole).
	wholeAtTrigger map[int64]map[int64]bool
	// metaOf is every metadata WriteMetadata carried, over the whole run,
	// and refsOf its SharedFiles; written the state files of each checkpoint
	// whose metadata was written.
	metaOf  map[int64]*Metadata
	refsOf  map[int64][]storage.FileRef
	written map[int64][]string

	// Whole-run bookkeeping of the checker.
	complete  map[int64]bool // metadata durably written
	final     map[int64]bool // triggered as final
	prepared  map[string]prepared
	assigned  map[string]int64 // committable -> complete checkpoint whose own commits hold it
	assignedC map[int64]bool   // checkpoints whose commits were assigned
	published map[string]int64 // committable -> checkpoint it was published under
	pubOffset map[TaskID][]string
	finished  int64
	stats     simStats
}

func newSim(seed int64, fullLog bool) *sim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1d6e57))
	s := &sim{
		seed:      seed,
		rng:       rng,
		fullLog:   fullLog,
		now:       t0,
		store:     map[int64]*Metadata{},
		files:     map[int64]map[string]bool{},
		written:   map[int64][]string{},
		complete:  map[int64]bool{},
		final:     map[int64]bool{},
		prepared:  map[string]prepared{},
		assigned:  map[string]int64{},
		assignedC: map[int64]bool{},
		published: map[string]int64{},
		pubOffset: map[TaskID][]string{},
		metaOf:    map[int64]*Metadata{},
		refsOf:    map[int64][]storage.FileRef{},
	}
	sec := func(lo, hi int) time.Duration {
		return time.Duration(lo)*time.Second + time.Duration(rng.IntN((hi-lo)*1000+1))*time.Millisecond
	}
	o := Options{Mode: ExactlyOnce}
	if rng.IntN(10) > 0 {
		o.Interval = sec(1, 10)
	}
	o.Timeout = sec(2, 40)
	if rng.IntN(5) < 2 {
		o.MinPause = sec(0, 5)
	}
	o.MaxConcurrent = 1 + rng.IntN(max(1, *simMaxConcurrent))
	o.TolerableFailures = rng.IntN(4)
	o.Retain = 1 + rng.IntN(3)
	s.opts = o
	s.faults = []int{0, 1, 2, 4}[rng.IntN(4)]
	s.incremental = rng.IntN(2) == 0

	// Tasks: 1..8, at least one sink; several subtasks of one sink share a
	// Commit per checkpoint.
	n := 1 + rng.IntN(8)
	ops := []string{"source", "map", "sink", "sink-b"}
	count := map[string]int{}
	for i := range n {
		op := ops[rng.IntN(len(ops))]
		if i == n-1 && !slices.ContainsFunc(s.tasks, func(t *simTask) bool { return t.sink }) {
			op = "sink"
		}
		id := TaskID{Operator: op, Subtask: count[op]}
		count[op]++
		s.tasks = append(s.tasks, &simTask{id: id, sink: strings.HasPrefix(op, "sink")})
		s.taskIDs = append(s.taskIDs, id)
	}
	s.restart("start")
	return s
}

func (s *sim) failf(format string, args ...any) {
	panic(simFailed{msg: fmt.Sprintf(format, args...)})
}

func (s *sim) header() string {
	return fmt.Sprintf("seed %d: options %+v, fault weight %d, tasks %v\n", s.seed, s.opts, s.faults, s.taskIDs)
}

func (s *sim) note(note string, task TaskID, id int64) {
	s.addLog(logEntry{note: note, task: task, id: id})
}

func (s *sim) addLog(e logEntry) {
	e.step, e.at, e.inc = s.stepN, s.now.Sub(t0), s.inc
	if !s.fullLog && len(s.log) >= 256 {
		// Keep the last 128 entries.
		s.log = append(s.log[:0], s.log[len(s.log)-128:]...)
	}
	s.log = append(s.log, e)
}

func (s *sim) logTail(n int) string {
	var b strings.Builder
	from := max(0, len(s.log)-n)
	if from > 0 {
		fmt.Fprintf(&b, "  … (%d earlier entries)\n", from)
	}
	for _, e := range s.log[from:] {
		fmt.Fprintf(&b, "  #%-4d t=%-10v inc=%d ", e.step, e.at, e.inc)
		if e.ev != nil {
			fmt.Fprintf(&b, "%s -> %s\n", fmtEvent(e.ev), fmtActions(e.acts))
		} else {
			fmt.Fprintf(&b, "[sim] %s %v %d\n", e.note, e.task, e.id)
		}
	}
	return b.String()
}

func fmtEvent(ev Event) string {
	switch e := ev.(type) {
	case Acked:
		var cs []string
		for _, c := range e.State.Committables {
			cs = append(cs, string(c.Data))
		}
		return fmt.Sprintf("Acked{%d %v pos=%d %v}", e.ID, e.State.Task, decodePos(e.State.Inline), cs)
	case Declined:
		return fmt.Sprintf("Declined{%d %v}", e.ID, e.Task)
	case MetadataWritten:
		if e.Err != nil {
			return fmt.Sprintf("MetadataWritten{%d err}", e.ID)
		}
		return fmt.Sprintf("MetadataWritten{%d}", e.ID)
	case Committed:
		if e.Err != nil {
			return fmt.Sprintf("Committed{%d err}", e.ID)
		}
		return fmt.Sprintf("Committed{%d}", e.ID)
	case TaskFailed:
		return fmt.Sprintf("TaskFailed{%v}", e.Task)
	}
	return fmt.Sprintf("%T", ev)
}

func encodePos(p int64) []byte { return binary.AppendVarint(nil, p) }

func decodePos(b []byte) int64 {
	p, _ := binary.Varint(b)
	return p
}

// --- Driving -----------------------------------------------------------------

// run plays a random schedule, then drives the job to its end reliably and
// checks that its output is exactly the records before the final cut.
func (s *sim) run() {
	steps := 100 + s.rng.IntN(500)
	for s.stepN = 0; s.stepN < steps && s.finished == 0; s.stepN++ {
		s.randomStep(s.stepN > steps/2)
	}
	s.drain()
	s.checkOutput()
	s.stats.Seeds++
	s.stats.Steps += s.stepN
}

const (
	kTick = iota
	kDeliver
	kNotifyEarly
	kAck
	kDecline
	kDrop
	kLate
	kDuplicate
	kStrayDecline
	kGhostAck
	kWriteOK
	kWriteFail
	kCommitOK
	kCommitFail
	kLedgerOK
	kLedgerFail
	kCrash
	kFinal
	numKinds
)

func (s *sim) randomStep(lateInRun bool) {
	s.now = s.now.Add(time.Duration(s.rng.IntN(50)) * time.Millisecond)
	if s.failJob {
		// The runtime acts on FailJob by restarting from the last complete checkpoint.
		s.crash()
		return
	}
	f := s.faults
	var w [numKinds]int
	w[kTick] = 20
	for _, t := range s.tasks {
		if len(t.inbox) > 0 {
			w[kDeliver] = 30
			if slices.ContainsFunc(t.inbox, func(m simMsg) bool { return m.notify }) {
				w[kNotifyEarly] = 3
			}
		}
	}
	if len(s.responses) > 0 {
		w[kAck] = 30
		w[kDecline] = f
		w[kDrop] = f
	}
	if len(s.withheld) > 0 {
		w[kLate] = 3
	}
	if len(s.delivered) > 0 {
		w[kDuplicate] = 2
	}
	if s.maxID > 0 {
		// Messages the coordinator must shrug off: a decline of any recent
		// checkpoint (possibly one being written or long gone), an ack from a
		// task that is not part of the job.
		w[kStrayDecline] = f
		w[kGhostAck] = 1
	}
	if len(s.writes) > 0 {
		w[kWriteOK] = 12
		w[kWriteFail] = f
	}
	if len(s.commits) > 0 {
		w[kCommitOK] = 12
		w[kCommitFail] = f / 2
	}
	if s.ledger != nil {
		w[kLedgerOK] = 12
		w[kLedgerFail] = f
	}
	if s.down {
		w[kCrash] = 20 // the runtime restarts the job soon after a task failed
	} else if f > 0 && s.rng.IntN(300) == 0 {
		// Rare, so that an incarnation lives long enough to complete,
		// retire and carry several checkpoints.
		if s.rng.IntN(2) == 0 {
			s.crash()
		} else {
			s.down = true
			s.stats.TaskFailed++
			s.step(TaskFailed{Task: s.taskIDs[s.rng.IntN(len(s.taskIDs))], Err: errBoom})
		}
		return
	}
	if lateInRun && !s.finalAsked && !s.down {
		w[kFinal] = 2
	}
	switch pickWeighted(s.rng, w[:]) {
	case kTick:
		var d time.Duration
		switch x := s.rng.IntN(20); {
		case x < 14:
			d = time.Duration(s.rng.IntN(2000)) * time.Millisecond
		case x < 19:
			d = time.Duration(s.rng.Int64N(int64(s.opts.Interval + time.Second)))
		default:
			d = s.opts.Timeout + time.Duration(s.rng.IntN(1000))*time.Millisecond
		}
		s.now = s.now.Add(d)
		s.step(Tick{})
	case kDeliver:
		s.deliverMsg(s.pickTask(func(t *simTask) bool { return len(t.inbox) > 0 }), false)
	case kNotifyEarly:
		s.deliverMsg(s.pickTask(func(t *simTask) bool {
			return slices.ContainsFunc(t.inbox, func(m simMsg) bool { return m.notify })
		}), true)
	case kAck:
		s.deliverAck(s.takeResponse(&s.responses))
	case kDecline:
		r := s.takeResponse(&s.responses)
		s.step(Declined{ID: r.id, Task: r.state.Task, Reason: errBoom})
	case kDrop:
		r := s.takeResponse(&s.responses)
		s.note("drop ack", r.state.Task, r.id)
		s.withheld = append(s.withheld, r)
	case kLate:
		s.deliverAck(s.takeResponse(&s.withheld))
	case kDuplicate:
		r := s.delivered[s.rng.IntN(len(s.delivered))]
		s.step(Acked{ID: r.id, State: r.state})
	case kStrayDecline:
		s.step(Declined{ID: s.maxID - s.rng.Int64N(min(s.maxID, 3)), Task: s.taskIDs[s.rng.IntN(len(s.taskIDs))], Reason: errBoom})
	case kGhostAck:
		s.step(Acked{ID: s.maxID - s.rng.Int64N(min(s.maxID, 3)), State: SubtaskState{Task: TaskID{Operator: "ghost", Subtask: 1}}})
	case kWriteOK:
		s.writeOK(s.rng.IntN(len(s.writes)))
	case kWriteFail:
		i := s.rng.IntN(len(s.writes))
		m := s.writes[i]
		s.writes = slices.Delete(s.writes, i, i+1)
		s.step(MetadataWritten{ID: m.ID, Err: errBoom})
	case kCommitOK:
		s.commitHead(nil)
	case kCommitFail:
		s.stats.CommitFailures++
		s.commitHead(errBoom)
	case kLedgerOK:
		s.ledgerResult(nil)
	case kLedgerFail:
		s.ledgerResult(errBoom)
	case kCrash:
		s.crash()
	case kFinal:
		s.finalAsked = true
		s.step(RequestFinal{})
	}
}

// drain drives the job to its end without faults: the sources are exhausted
// (RequestFinal), every message is delivered, every write and commit succeeds,
// and time advances past the timeout when nothing else can happen.
func (s *sim) drain() {
	for i := 0; s.finished == 0; i++ {
		s.stepN++
		if i > 5000 {
			s.failf("liveness: the job did not finish within 5000 fault-free steps (RequestFinal: \"retried until it completes\")")
		}
		s.now = s.now.Add(10 * time.Millisecond)
		switch {
		case s.failJob || s.down:
			s.crash()
		case !s.finalAsked:
			s.finalAsked = true
			s.step(RequestFinal{})
		case slices.ContainsFunc(s.tasks, func(t *simTask) bool { return len(t.inbox) > 0 }):
			for _, t := range s.tasks {
				if len(t.inbox) > 0 {
					s.deliverMsg(t, false)
					break
				}
			}
		case len(s.responses) > 0:
			s.deliverAck(s.takeResponse(&s.responses))
		case len(s.writes) > 0:
			s.writeOK(0)
		case s.ledger != nil:
			s.ledgerResult(nil)
		case len(s.commits) > 0:
			s.commitHead(nil)
		default:
			// Only withheld acks are missing: let the checkpoint time out.
			s.now = s.now.Add(s.opts.Timeout)
			s.step(Tick{})
		}
	}
}

func (s *sim) pickTask(ok func(*simTask) bool) *simTask {
	var c []*simTask
	for _, t := range s.tasks {
		if ok(t) {
			c = append(c, t)
		}
	}
	return c[s.rng.IntN(len(c))]
}

func (s *sim) takeResponse(from *[]simResponse) simResponse {
	i := s.rng.IntN(len(*from))
	r := (*from)[i]
	*from = slices.Delete(*from, i, i+1)
	return r
}

// deliverMsg makes t process the head of its inbox, or (early) its first
// completion notification.
func (s *sim) deliverMsg(t *simTask, early bool) {
	i := 0
	if early {
		i = slices.IndexFunc(t.inbox, func(m simMsg) bool { return m.notify })
	}
	m := t.inbox[i]
	t.inbox = slices.Delete(t.inbox, i, i+1)
	if m.notify {
		// NotifyComplete: "Sink subtasks stop reporting committables
		// prepared at or before ID."
		s.note("notify", t.id, m.id)
		t.pending = slices.DeleteFunc(t.pending, func(c Committable) bool { return c.PreparedAt <= m.id })
		return
	}
	// The barrier: consume the records before it, stage them (sinks) and
	// acknowledge with the replay position and every pending committable.
	t.pos += int64(s.rng.IntN(4))
	st := SubtaskState{Task: t.id, Inline: encodePos(t.pos), Watermark: t.pos}
	if t.sink {
		key := fmt.Sprintf("%v/inc%d@%d[%d,%d)", t.id, s.inc, m.id, t.staged, t.pos)
		s.prepared[key] = prepared{task: t.id, inc: s.inc, at: m.id, from: t.staged, to: t.pos}
		t.pending = append(t.pending, Committable{PreparedAt: m.id, Data: []byte(key)})
		t.staged = t.pos
		st.Committables = slices.Clone(t.pending)
	}
	s.shareState(&st, m.id)
	s.note("barrier", t.id, m.id)
	s.responses = append(s.responses, simResponse{id: m.id, state: st})
}

func (s *sim) deliverAck(r simResponse) {
	_, dup := s.acked[r.id][r.state.Task]
	fresh := !dup && !s.wrote[r.id] && slices.Contains(s.coord.Pending(), r.id)
	dh, isDangling := s.dangling(r)
	if s.acked[r.id] == nil {
		s.acked[r.id] = map[TaskID]SubtaskState{}
	}
	if _, ok := s.acked[r.id][r.state.Task]; !ok {
		s.acked[r.id][r.state.Task] = r.state
	}
	if len(s.delivered) < 32 {
		s.delivered = append(s.delivered, r)
	} else {
		s.delivered[s.rng.IntN(len(s.delivered))] = r
	}
	acts := s.step(Acked{ID: r.id, State: r.state})
	if fresh {
		s.checkDanglingAck(r, dh, isDangling, acts)
	}
}

// writeOK makes in-flight write i durable, then reports it.
func (s *sim) writeOK(i int) {
	m := s.writes[i]
	s.writes = slices.Delete(s.writes, i, i+1)
	s.persist(m)
	s.step(MetadataWritten{ID: m.ID})
}

// persist stores m durably, through Encode and DecodeMetadata as real
// storage does.
func (s *sim) persist(m *Metadata) {
	b, err := m.Encode()
	if err != nil {
		s.failf("encode metadata %d: %v", m.ID, err)
	}
	d, err := DecodeMetadata(b)
	if err != nil {
		s.failf("decode metadata %d: %v", m.ID, err)
	}
	if !reflect.DeepEqual(d.Commits, m.Commits) || len(d.Tasks) != len(m.Tasks) {
		s.failf("metadata %d changed in an Encode/Decode round trip", m.ID)
	}
	s.store[m.ID] = d
	s.complete[m.ID] = true
	s.files[m.ID] = map[string]bool{}
	for _, n := range ownFiles(m) {
		s.files[m.ID][n] = true
	}
	s.written[m.ID] = ownFiles(m)
}

// commitHead carries out the oldest CommitOutput. A failing commit may have
// published a prefix of its commits.
func (s *sim) commitHead(err error) {
	co := s.commits[0]
	s.commits = s.commits[1:]
	n := len(co.Commits)
	if err != nil {
		n = s.rng.IntN(n + 1)
	}
	for _, c := range co.Commits[:n] {
		s.publish(c, "commit")
	}
	s.step(Committed{ID: co.ID, Err: err})
}

// crash throws the coordinator away and restarts the job from durable
// storage, as the runtime's recovery does.
func (s *sim) crash() {
	s.stats.Crashes++
	// A metadata write in flight may have become durable just before the
	// crash, without anyone hearing of it.
	for _, m := range s.writes {
		if s.rng.IntN(2) == 0 {
			s.note("write durable at crash", TaskID{}, m.ID)
			s.persist(m)
			s.stats.DurableAtCrash++
		}
	}
	// The runtime waits for queued commits before restarting: each may have
	// published all or part of its commits.
	for _, co := range s.commits {
		n := s.rng.IntN(len(co.Commits) + 1)
		for _, c := range co.Commits[:n] {
			s.publish(c, "commit at crash")
		}
	}
	if latest := s.coord.LatestComplete(); latest != 0 && s.store[latest] == nil {
		s.failf("invariant 1: recovery point %d is not in storage at the crash", latest)
	}
	s.restart("crash")
}

// restart builds a coordinator from durable storage (the newest metadata, the
// stored ids, NextID above every id used) and re-commits the restored
// metadata's commits, as recovery does.
func (s *sim) restart(why string) {
	ids := make([]int64, 0, len(s.store))
	for id := range s.store {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var restored int64
	if len(ids) > 0 {
		restored = ids[len(ids)-1]
	}
	if s.coord != nil && restored < s.coord.LatestComplete() {
		s.failf("invariant 1: restart restores %d, older than the recovery point %d", restored, s.coord.LatestComplete())
	}
	s.note(why+": restore", TaskID{}, restored)
	var m *Metadata
	if restored != 0 {
		m = s.store[restored]
		s.checkAllTasks(m)
		s.assign(m)
		// Invariant 5: "re-committing N after a crash publishes nothing twice".
		for _, c := range m.Commits {
			s.publish(c, "recovery")
		}
	}
	// After recovery, the visible output is exactly the records before the
	// restored cut: the new attempt replays from there.
	s.checkCoverage(m, "after recovering from "+fmt.Sprint(restored))
	s.inc++
	for _, t := range s.tasks {
		t.inbox, t.pending = nil, nil
		t.pos = 0
		if m != nil {
			st, _ := m.Task(t.id)
			t.pos = decodePos(st.Inline)
		}
		t.staged = t.pos
	}
	s.responses, s.withheld, s.delivered, s.writes, s.commits = nil, nil, nil, nil, nil
	s.ledger, s.unrecorded = nil, nil
	s.down, s.failJob, s.finalAsked, s.started = false, false, false, false
	s.failures = 0
	s.triggeredAt = map[int64]time.Time{}
	s.acked = map[int64]map[TaskID]SubtaskState{}
	s.wrote = map[int64]bool{}
	s.writing = map[int64]bool{}
	s.aborted = map[int64]bool{}
	s.lastCommitOut = 0
	s.lastCompletion = time.Time{}
	tasks := slices.Clone(s.taskIDs)
	s.rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	s.base, s.protect = map[int64]int64{}, map[int64]map[int64]map[string]bool{}
	s.wholeAtTrigger = map[int64]map[int64]bool{}
	// The recovery's retention pass, as the runtime's (cleanStorage): the
	// newest Retain stay, those they reference of older ones is trimmed to
	// what they reference, every other older checkpoint goes.
	retained, held, refs := s.retainAtRecovery(restored)
	s.completeOrder = slices.Clone(retained)
	c, err := New(Config{Options: s.opts, Pipeline: "sim", JobID: "sim-job", Tasks: tasks,
		Restored: restored, Retained: retained, Held: held, References: refs, NextID: max(s.maxID, s.reserved) + 1, Reserved: s.reserved})
	if err != nil {
		s.failf("New after %s: %v", why, err)
	}
	s.coord = c
	s.checkReferences(nil)
}

// --- Checking ------------------------------------------------------------------

// step feeds ev to the coordinator, checks every action and the state after
// the step, carries the actions out and returns them.
func (s *sim) step(ev Event) []Action {
	c := s.coord
	prevRetained, prevHeld := c.Retained(), c.Held()
	if !s.started {
		s.started = true
		s.lastTrigger = s.now
	}
	prevLatest := c.LatestComplete()
	ledgerInFlight := false
	if lw, ok := ev.(LedgerWritten); ok && s.ledger != nil && lw.Reserved == s.ledger.Reserved && slices.Equal(lw.Failed, s.ledger.Failed) {
		ledgerInFlight = true
		s.ledger = nil
		if lw.Err == nil {
			// The ledger is durable: the reservation and the failures it
			// records hold from now on, across crashes.
			s.reserved = max(s.reserved, lw.Reserved)
			s.unrecorded = slices.DeleteFunc(s.unrecorded, func(id int64) bool { return slices.Contains(lw.Failed, id) })
		}
	}
	if mw, ok := ev.(MetadataWritten); ok && mw.Err != nil && s.writing[mw.ID] {
		s.unrecorded = append(s.unrecorded, mw.ID)
	}
	wasWriting := false
	if mw, ok := ev.(MetadataWritten); ok {
		wasWriting = s.writing[mw.ID]
	}
	acts := c.Step(s.now, ev)
	acts = s.retentionMutant(acts, prevRetained, prevHeld)
	s.addLog(logEntry{ev: ev, acts: acts})
	latest := c.LatestComplete()
	pending := c.Pending()

	// Invariant 1: the recovery point changes only when metadata became
	// durable, and only grows.
	if latest != prevLatest {
		mw, ok := ev.(MetadataWritten)
		if !ok || mw.Err != nil || mw.ID != latest || latest < prevLatest {
			s.failf("invariant 1: recovery point %d -> %d on %s", prevLatest, latest, fmtEvent(ev))
		}
		s.stats.Completions++
		s.lastCompletion = s.now
		s.completeOrder = append(s.completeOrder, latest)
		s.assign(s.store[latest])
		for _, id := range pending {
			if id < latest {
				s.failf("checkpoint %d still pending after newer %d completed (subsumption)", id, latest)
			}
		}
	}
	if mw, ok := ev.(MetadataWritten); ok {
		delete(s.writing, mw.ID)
		if mw.Err == nil && wasWriting && latest != mw.ID {
			s.failf("metadata of %d reported durable but the recovery point is %d", mw.ID, latest)
		}
	}
	if latest != 0 {
		m := s.store[latest]
		if m == nil {
			s.failf("recovery point %d has no durable metadata", latest)
		}
		s.checkAllTasks(m)
	}
	if len(pending) > s.opts.MaxConcurrent {
		s.failf("%d pending checkpoints %v exceed MaxConcurrent %d", len(pending), pending, s.opts.MaxConcurrent)
	}

	// Abort: the checkpoint "failed and will never complete"; its partial
	// state is deleted with it. A late ack of it deletes what it wrote.
	discarded := map[int64]bool{}
	for _, d := range find[Discard](acts) {
		discarded[d.ID] = true
	}
	for _, a := range find[Abort](acts) {
		if !discarded[a.ID] {
			s.failf("Abort{%d} without Discard{%d}", a.ID, a.ID)
		}
	}
	// (Not demanded in a step that failed the job: FailJob "emits nothing further".)
	if ak, ok := ev.(Acked); ok && s.aborted[ak.ID] && !s.complete[ak.ID] && !discarded[ak.ID] && len(find[FailJob](acts)) == 0 {
		s.failf("late ack of aborted checkpoint %d: no Discard{%d}", ak.ID, ak.ID)
	}
	// Options.TolerableFailures counts consecutive failures: declines,
	// timeouts and metadata write failures; a completion resets the count,
	// subsumed and task-failure aborts are not failures. Within a step the
	// coordinator times out first, then handles the event.
	failures := s.failures
	// A failed ledger write counts as a checkpoint failure, after the
	// timeouts of the step (their Aborts and Discards, and a FailJob they
	// caused).
	lw, ok := ev.(LedgerWritten)
	ledgerFailure := ok && lw.Err != nil && ledgerInFlight
	for _, a := range acts {
		if ledgerFailure {
			_, isAbort := a.(Abort)
			_, isDiscard := a.(Discard)
			_, isFailJob := a.(FailJob)
			if !isAbort && !isDiscard && (!isFailJob || failures == s.opts.TolerableFailures) {
				failures++
				ledgerFailure = false
			}
		}
		switch x := a.(type) {
		case Abort:
			if s.isFailure(ev, x.ID) {
				failures++
			}
		case FailJob:
			// A failed commit fails the job whatever the count (a timeout
			// within the tolerance may precede it in the same step).
			cm, ok := ev.(Committed)
			commitFailed := ok && cm.Err != nil && failures <= s.opts.TolerableFailures+1
			if !commitFailed && failures != s.opts.TolerableFailures+1 {
				s.failf("FailJob after %d consecutive failures, tolerance %d: want it with failure %d", failures, s.opts.TolerableFailures, s.opts.TolerableFailures+1)
			}
		}
		s.apply(ev, a, latest, pending, prevRetained, prevHeld)
	}
	if ledgerFailure {
		failures++
	}
	if latest != prevLatest {
		failures = 0
	}
	s.failures = failures
	s.checkReferences(pending)
	if s.failJob {
		// FailJob "emits nothing further": what the coordinator does with
		// the rest of this step is not checked, the job restarts.
		return acts
	}
	s.checkRetention(ev, acts, latest, pending, prevRetained, prevHeld)
	s.checkFiles(pending)
	if got := c.ConsecutiveFailures(); got != failures {
		s.failf("ConsecutiveFailures() = %d, want %d", got, failures)
	}
	if latest != prevLatest {
		// Options.Retain: "older ones are deleted once a newer one is
		// complete", or held while a kept one references them
		// (checkRetention).
		if r := c.Retained(); len(r) > s.opts.Retain {
			s.failf("%d complete checkpoints %v retained after %d completed, retain %d", len(r), r, latest, s.opts.Retain)
		}
		// A running job tells the tasks and publishes the output of every
		// checkpoint that completes ("only then are sinks told to commit N").
		if !s.down {
			if !slices.Contains(acts, Action(NotifyComplete{ID: latest})) {
				s.failf("checkpoint %d completed without NotifyComplete", latest)
			}
			if !slices.ContainsFunc(acts, func(a Action) bool { co, ok := a.(CommitOutput); return ok && co.ID == latest }) {
				s.failf("checkpoint %d completed without CommitOutput", latest)
			}
		}
	}

	for _, id := range pending {
		// Options.Timeout, and "a timeout no longer applies" once writing.
		if !s.writing[id] && s.now.Sub(s.triggeredAt[id]) >= s.opts.Timeout {
			s.failf("checkpoint %d collecting for %v, past the timeout %v", id, s.now.Sub(s.triggeredAt[id]), s.opts.Timeout)
		}
	}
	if f := c.ConsecutiveFailures(); f > s.opts.TolerableFailures && !s.failJob && !s.down {
		s.failf("%d consecutive failures exceed the tolerance %d without FailJob", f, s.opts.TolerableFailures)
	}
	return acts
}

// apply checks one action of the step that consumed ev and carries it out.
// latest and pending are the coordinator's state after the step.
func (s *sim) apply(ev Event, a Action, latest int64, pending, prevRetained, prevHeld []int64) {
	mw, isMW := ev.(MetadataWritten)
	switch x := a.(type) {
	case Trigger:
		s.stats.Triggers++
		if s.down || s.failJob {
			s.failf("Trigger{%d} after TaskFailed/FailJob", x.ID)
		}
		if x.ID <= s.maxID {
			s.failf("Trigger{%d} reuses an id <= %d (NextID: a new checkpoint never reuses an old one's files)", x.ID, s.maxID)
		}
		if x.ID > s.reserved {
			s.failf("Trigger{%d} above the durable ledger's reservation %d (Ledger: every id triggered was reserved first)", x.ID, s.reserved)
		}
		s.maxID = x.ID
		if !x.Timestamp.Equal(s.now) {
			s.failf("Trigger{%d} timestamp %v, step time %v", x.ID, x.Timestamp, s.now)
		}
		if x.Final {
			if !s.finalAsked {
				s.failf("final Trigger{%d} without RequestFinal", x.ID)
			}
			s.final[x.ID] = true
		} else {
			if s.finalAsked {
				s.failf("periodic Trigger{%d} after RequestFinal", x.ID)
			}
			if s.opts.Interval == 0 {
				s.failf("periodic Trigger{%d} with Interval 0", x.ID)
			}
			if s.now.Before(s.lastTrigger.Add(s.opts.Interval)) {
				s.failf("Trigger{%d} %v after the previous trigger, interval %v", x.ID, s.now.Sub(s.lastTrigger), s.opts.Interval)
			}
			if s.opts.MinPause > 0 {
				if len(pending) != 1 {
					s.failf("Trigger{%d} with MinPause while %v pending", x.ID, pending)
				}
				if !s.lastCompletion.IsZero() && s.now.Before(s.lastCompletion.Add(s.opts.MinPause)) {
					s.failf("Trigger{%d} %v after the last completion, min pause %v", x.ID, s.now.Sub(s.lastCompletion), s.opts.MinPause)
				}
			}
		}
		s.lastTrigger = s.now
		s.triggeredAt[x.ID] = s.now
		s.base[x.ID] = latest
		s.protect[x.ID] = s.snapshotFiles()
		s.wholeAtTrigger[x.ID] = map[int64]bool{}
		for id := range s.store {
			s.wholeAtTrigger[x.ID][id] = true
		}
		for _, t := range s.tasks {
			t.inbox = append(t.inbox, simMsg{id: x.ID})
		}

	case WriteMetadata:
		m := x.Metadata
		if len(s.unrecorded) > 0 {
			s.failf("WriteMetadata{%d} while the failed metadata writes of %v are not recorded in the ledger (WriteLedger)", m.ID, s.unrecorded)
		}
		if s.wrote[m.ID] {
			s.failf("WriteMetadata{%d} emitted twice", m.ID)
		}
		s.wrote[m.ID] = true
		s.writing[m.ID] = true
		acks := s.acked[m.ID]
		if len(acks) != len(s.tasks) {
			s.failf("WriteMetadata{%d} after %d of %d tasks acked", m.ID, len(acks), len(s.tasks))
		}
		if m.Version != MetadataVersion || m.ID == 0 || m.Final != s.final[m.ID] {
			s.failf("WriteMetadata{%d}: version %d, final %v (want %v)", m.ID, m.Version, m.Final, s.final[m.ID])
		}
		if len(m.Tasks) != len(s.tasks) {
			s.failf("metadata %d has %d tasks, want %d", m.ID, len(m.Tasks), len(s.tasks))
		}
		reported := map[string]bool{}
		for i, st := range m.Tasks {
			if i > 0 && m.Tasks[i-1].Task.Compare(st.Task) >= 0 {
				s.failf("metadata %d tasks not sorted", m.ID)
			}
			if want, ok := acks[st.Task]; !ok || !reflect.DeepEqual(st, want) {
				s.failf("metadata %d holds %v state %+v, acked %+v", m.ID, st.Task, st, want)
			}
			for _, c := range st.Committables {
				reported[string(c.Data)] = true
			}
		}
		sinks := map[string]bool{}
		for _, c := range m.Commits {
			switch {
			case c.Checkpoint == m.ID:
				// Invariant 4: output of N becomes visible "atomically across
				// all parallel sink subtasks": one Commit per sink and checkpoint.
				if sinks[c.Sink] {
					s.failf("metadata %d has two commits of sink %q for checkpoint %d", m.ID, c.Sink, m.ID)
				}
				sinks[c.Sink] = true
				for _, d := range c.Committables {
					if !reported[string(d)] {
						s.failf("metadata %d commits %s, which no acknowledgement of %d reported", m.ID, d, m.ID)
					}
				}
			case c.Checkpoint < m.ID:
				if !s.complete[c.Checkpoint] {
					s.failf("metadata %d carries commits of %d, which is not complete", m.ID, c.Checkpoint)
				}
				s.stats.Carried++
			default:
				s.failf("metadata %d holds commits of the later checkpoint %d", m.ID, c.Checkpoint)
			}
		}
		s.metaOf[m.ID] = m
		s.refsOf[m.ID] = m.SharedFiles()
		if refs := s.refsOf[m.ID]; len(refs) > 0 {
			s.stats.References++
			for _, r := range refs {
				if !s.files[r.Checkpoint][r.Name] {
					s.failf("retention: metadata %d references file %v, which is not in storage (never complete a checkpoint with a dangling reference)", m.ID, r)
				}
			}
		}
		s.writes = append(s.writes, m)
		if len(s.writing) > 1 {
			s.stats.ConcurrentWrites++
		}

	case NotifyComplete:
		if !isMW || mw.Err != nil || mw.ID != x.ID || latest != x.ID {
			s.failf("NotifyComplete{%d} on %s (recovery point %d)", x.ID, fmtEvent(ev), latest)
		}
		for _, t := range s.tasks {
			t.inbox = append(t.inbox, simMsg{notify: true, id: x.ID})
		}

	case CommitOutput:
		if !isMW || mw.Err != nil || mw.ID != x.ID || latest != x.ID {
			s.failf("CommitOutput{%d} on %s (recovery point %d)", x.ID, fmtEvent(ev), latest)
		}
		if x.ID <= s.lastCommitOut {
			s.failf("CommitOutput{%d} after CommitOutput{%d}: not in increasing order", x.ID, s.lastCommitOut)
		}
		s.lastCommitOut = x.ID
		for _, c := range x.Commits {
			if !s.complete[c.Checkpoint] || c.Checkpoint > x.ID {
				s.failf("CommitOutput{%d} publishes commits of %d, not a complete checkpoint <= %d", x.ID, c.Checkpoint, x.ID)
			}
		}
		s.commits = append(s.commits, x)

	case Abort:
		if s.writing[x.ID] {
			// "a timeout no longer applies" once WriteMetadata was emitted:
			// only the write's result, or a newer completion, ends it.
			failedWrite := isMW && mw.ID == x.ID && mw.Err != nil
			subsumed := isMW && mw.Err == nil && mw.ID > x.ID && latest == mw.ID
			if !failedWrite && !subsumed {
				s.failf("Abort{%d} of a checkpoint whose metadata is being written, on %s", x.ID, fmtEvent(ev))
			}
			delete(s.writing, x.ID)
		}
		if isMW && mw.Err == nil && latest == mw.ID && x.ID < latest {
			s.stats.Subsumed++
		}
		if x.ID == latest || s.complete[x.ID] && slices.Contains(s.completeOrder, x.ID) {
			s.failf("Abort{%d} of a complete checkpoint", x.ID)
		}
		if _, ok := ev.(Tick); ok {
			s.stats.Timeouts++
		}
		s.aborted[x.ID] = true
		s.dropWrite(x.ID)

	case Discard:
		if x.ID == latest {
			s.failf("Discard{%d} of the recovery point", x.ID)
		}
		if slices.Contains(pending, x.ID) {
			s.failf("Discard{%d} of a pending checkpoint", x.ID)
		}
		if i := slices.Index(s.completeOrder, x.ID); i >= 0 {
			// Options.Retain: only complete checkpoints beyond the newest
			// Retain are deleted.
			if i >= len(s.completeOrder)-s.opts.Retain {
				s.failf("Discard{%d} of a retained checkpoint (complete %v, retain %d)", x.ID, s.completeOrder, s.opts.Retain)
			}
			s.completeOrder = slices.Delete(s.completeOrder, i, i+1)
			s.stats.Retired++
		}
		if _, ok := ev.(Acked); ok {
			s.stats.LateDiscards++
		}
		if slices.Contains(prevHeld, x.ID) {
			s.stats.HeldDiscards++
		}
		delete(s.store, x.ID)
		delete(s.files, x.ID)
		s.checkDeleted(fmtAction(x), x.ID, nil, prevRetained)
		delete(s.writing, x.ID)
		s.dropWrite(x.ID)

	case Trim:
		s.applyTrim(x, latest, pending, prevRetained, prevHeld)

	case FailJob:
		s.stats.FailJobs++
		if s.failJob {
			s.failf("FailJob emitted twice")
		}
		s.failJob = true

	case WriteLedger:
		if s.ledger != nil {
			s.failf("WriteLedger%+v while WriteLedger%+v is in flight", x, *s.ledger)
		}
		if x.Reserved < s.reserved {
			s.failf("WriteLedger%+v lowers the reservation %d", x, s.reserved)
		}
		for _, id := range x.Failed {
			if !slices.Contains(s.unrecorded, id) {
				s.failf("WriteLedger%+v records %d, whose metadata write did not fail (unrecorded %v)", x, id, s.unrecorded)
			}
		}
		s.ledger = &x

	case Finished:
		cm, ok := ev.(Committed)
		if !ok || cm.Err != nil || cm.ID != x.ID || !s.final[x.ID] || !s.complete[x.ID] {
			s.failf("Finished{%d} on %s (final %v, complete %v)", x.ID, fmtEvent(ev), s.final[x.ID], s.complete[x.ID])
		}
		s.finished = x.ID
		s.stats.Finished++

	default:
		s.failf("unknown action %T", a)
	}
}

// isFailure reports whether an Abort of id in the step that consumed ev is a
// checkpoint failure: a timeout (expiry runs first in every step), the
// decline of id, an acknowledgement of id that references a checkpoint not in
// storage, or the failed metadata write of id. Aborts of subsumed
// checkpoints and on TaskFailed are not.
func (s *sim) isFailure(ev Event, id int64) bool {
	if !s.writing[id] && s.now.Sub(s.triggeredAt[id]) >= s.opts.Timeout {
		return true
	}
	switch e := ev.(type) {
	case Declined:
		return e.ID == id
	case Acked:
		return e.ID == id // an acknowledgement with a dangling reference
	case MetadataWritten:
		return e.ID == id && e.Err != nil
	}
	return false
}

// ledgerResult reports the WriteLedger in flight as written (err nil) or
// failed.
func (s *sim) ledgerResult(err error) {
	w := *s.ledger
	s.step(LedgerWritten{Reserved: w.Reserved, Failed: w.Failed, Err: err})
}

// dropWrite cancels the in-flight write of id: the runtime orders a Discard
// after the write, so it never resurrects the checkpoint.
func (s *sim) dropWrite(id int64) {
	s.writes = slices.DeleteFunc(s.writes, func(m *Metadata) bool { return m.ID == id })
}

// checkAllTasks: the recovery point "names a checkpoint whose metadata was
// durably written with an ack from every task".
func (s *sim) checkAllTasks(m *Metadata) {
	if len(m.Tasks) != len(s.taskIDs) {
		s.failf("metadata %d has %d tasks, the job %d", m.ID, len(m.Tasks), len(s.taskIDs))
	}
	for _, t := range s.taskIDs {
		if _, ok := m.Task(t); !ok {
			s.failf("metadata %d lacks task %v", m.ID, t)
		}
	}
}

// assign checks the Committable INVARIANT when m becomes a complete
// checkpoint the job goes on from: each committable is in exactly one
// complete checkpoint's own commits, and every committable the
// acknowledgements of m report is in m's or an earlier complete one's.
func (s *sim) assign(m *Metadata) {
	if s.assignedC[m.ID] {
		return
	}
	s.assignedC[m.ID] = true
	for _, c := range m.Commits {
		if c.Checkpoint != m.ID {
			continue
		}
		for _, d := range c.Committables {
			if prev, ok := s.assigned[string(d)]; ok && prev != m.ID {
				s.failf("exactly-once: committable %s is in the commits of complete checkpoints %d and %d", d, prev, m.ID)
			}
			s.assigned[string(d)] = m.ID
		}
	}
	for _, st := range m.Tasks {
		for _, c := range st.Committables {
			if q, ok := s.assigned[string(c.Data)]; !ok || q > m.ID {
				s.failf("exactly-once: committable %s reported in the ack of complete checkpoint %d is in no complete checkpoint's commits up to it", c.Data, m.ID)
			}
		}
	}
}

// publish records a sink's commit becoming visible and checks that no record
// becomes visible twice.
func (s *sim) publish(c Commit, how string) {
	for _, d := range c.Committables {
		key := string(d)
		p, ok := s.prepared[key]
		if !ok {
			s.failf("%s of checkpoint %d publishes unknown committable %q", how, c.Checkpoint, key)
		}
		if p.task.Operator != c.Sink {
			s.failf("%s: committable %s of %v published through sink %q", how, key, p.task, c.Sink)
		}
		if !s.complete[c.Checkpoint] {
			s.failf("invariant 4: %s publishes %s under checkpoint %d, which is not complete", how, key, c.Checkpoint)
		}
		if p.at > c.Checkpoint {
			s.failf("invariant 4: %s publishes %s (prepared at %d) under the earlier checkpoint %d", how, key, p.at, c.Checkpoint)
		}
		if prev, ok := s.published[key]; ok {
			if prev != c.Checkpoint {
				s.failf("exactly-once: %s publishes %s under checkpoint %d; it was published under %d", how, key, c.Checkpoint, prev)
			}
			continue // an idempotent re-commit of the same Commit
		}
		s.published[key] = c.Checkpoint
		s.stats.Published++
		offs := s.pubOffset[p.task]
		for int64(len(offs)) < p.to {
			offs = append(offs, "")
		}
		for o := p.from; o < p.to; o++ {
			if offs[o] != "" {
				s.failf("exactly-once: record %d of %v published twice: by %s and by %s (%s)", o, p.task, offs[o], key, how)
			}
			offs[o] = key
		}
		s.pubOffset[p.task] = offs
	}
}

// checkOutput checks the end state after Finished: for every sink task, the
// published records are exactly those before the final checkpoint's cut,
// each once (invariants 3, 5 and 6; checkpointing.txt: "A restart must not
// lose accepted data, repeat already-visible output").
func (s *sim) checkOutput() {
	m := s.store[s.finished]
	if m == nil {
		s.failf("final checkpoint %d is not in storage after Finished", s.finished)
	}
	s.checkCoverage(m, "after Finished")
}

// checkCoverage checks that every sink task's published records are exactly
// those before its cut in m (none when m is nil), each once.
func (s *sim) checkCoverage(m *Metadata, when string) {
	for _, t := range s.tasks {
		if !t.sink {
			continue
		}
		var cut int64
		if m != nil {
			st, _ := m.Task(t.id)
			cut = decodePos(st.Inline)
		}
		offs := s.pubOffset[t.id]
		for o := int64(0); o < cut; o++ {
			if o >= int64(len(offs)) || offs[o] == "" {
				s.failf("exactly-once: record %d of %v, before the cut %d, is not published %s", o, t.id, cut, when)
			}
		}
		for o := cut; o < int64(len(offs)); o++ {
			if offs[o] != "" {
				s.failf("exactly-once: record %d of %v, after the cut %d, is published %s (by %s)", o, t.id, cut, when, offs[o])
			}
		}
	}
}
