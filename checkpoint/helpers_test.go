package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Shared fixtures of the scenario tests: a virtual clock, a few task ids, and
// a scenario type that drives one Coordinator and records what it did.

// t0 is the virtual time a scenario starts at. It is far from the zero time
// on purpose: a coordinator that measured its first interval from time.Time{}
// would trigger at once and fail the interval tests.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	src0  = TaskID{Operator: "source", Subtask: 0}
	src1  = TaskID{Operator: "source", Subtask: 1}
	map0  = TaskID{Operator: "map", Subtask: 0}
	sink0 = TaskID{Operator: "sink", Subtask: 0}
	sink1 = TaskID{Operator: "sink", Subtask: 1}
	sinkB = TaskID{Operator: "sink-b", Subtask: 0}
	ghost = TaskID{Operator: "ghost", Subtask: 7}

	errBoom = errors.New("boom")
)

// testOptions are valid options with round numbers: a 10s interval, a 30s
// timeout, no min pause, one checkpoint at a time, no tolerated failure,
// one retained checkpoint.
func testOptions() Options {
	o := DefaultOptions()
	o.Interval = 10 * time.Second
	o.Timeout = 30 * time.Second
	o.MinPause = 0
	o.MaxConcurrent = 1
	o.TolerableFailures = 0
	o.Retain = 1
	return o
}

// scenario drives one coordinator through a scripted sequence of events.
type scenario struct {
	t     *testing.T
	c     *Coordinator
	now   time.Time
	tasks []TaskID
	opts  Options
	// triggered is the trigger time of every checkpoint triggered so far.
	triggered map[int64]time.Time
	// all is every action emitted so far, in order.
	all []Action
}

func newScenario(t *testing.T, o Options, tasks ...TaskID) *scenario {
	t.Helper()
	return newScenarioCfg(t, Config{Options: o, Pipeline: "p", JobID: "job", Tasks: tasks, NextID: 1})
}

// unreserved is the reservation of scenarios that are not about the ledger:
// more ids than any scenario triggers, so no WriteLedger interleaves.
const unreserved = 1 << 40

func newScenarioCfg(t *testing.T, cfg Config) *scenario {
	t.Helper()
	if cfg.Reserved == 0 {
		cfg.Reserved = unreserved
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return &scenario{t: t, c: c, now: t0, tasks: cfg.Tasks, opts: cfg.Options, triggered: map[int64]time.Time{}}
}

// at sets the virtual clock to t0+d.
func (s *scenario) at(d time.Duration) *scenario {
	s.t.Helper()
	n := t0.Add(d)
	if n.Before(s.now) {
		s.t.Fatalf("scenario clock going backwards: %v -> %v", s.now.Sub(t0), d)
	}
	s.now = n
	return s
}

// step feeds ev at the current time and checks the invariants that hold
// after every step whatever the scenario.
func (s *scenario) step(ev Event) []Action {
	s.t.Helper()
	before := s.c.LatestComplete()
	acts := s.c.Step(s.now, ev)
	s.all = append(s.all, acts...)
	after := s.c.LatestComplete()
	// Invariant 1: the recovery point changes only when metadata became durable.
	if after != before {
		if mw, ok := ev.(MetadataWritten); !ok || mw.Err != nil || mw.ID != after || after < before {
			s.t.Fatalf("LatestComplete went %d -> %d on %T %+v", before, after, ev, ev)
		}
	}
	if n := len(s.c.Pending()); n > s.opts.MaxConcurrent {
		s.t.Fatalf("%d pending checkpoints exceed MaxConcurrent %d", n, s.opts.MaxConcurrent)
	}
	for _, tr := range find[Trigger](acts) {
		s.triggered[tr.ID] = tr.Timestamp
	}
	for _, d := range find[Discard](acts) {
		if d.ID == after {
			s.t.Fatalf("Discard{%d} of the recovery point", d.ID)
		}
	}
	return acts
}

// tick steps a Tick at t0+d.
func (s *scenario) tick(d time.Duration) []Action {
	s.t.Helper()
	return s.at(d).step(Tick{})
}

// ack steps an acknowledgement of checkpoint id by st.Task.
func (s *scenario) ack(id int64, st SubtaskState) []Action {
	s.t.Helper()
	return s.step(Acked{ID: id, State: st})
}

// ackAll acknowledges id from every task with an empty state, except for the
// tasks given explicit states in sts. It returns the actions of all the steps.
func (s *scenario) ackAll(id int64, sts ...SubtaskState) []Action {
	s.t.Helper()
	var out []Action
	for _, task := range s.tasks {
		st := SubtaskState{Task: task}
		for _, x := range sts {
			if x.Task == task {
				st = x
			}
		}
		out = append(out, s.ack(id, st)...)
	}
	return out
}

// complete acknowledges id from every task, reports its metadata durable and
// returns the metadata that was written and the actions of the last step.
func (s *scenario) complete(id int64, sts ...SubtaskState) (*Metadata, []Action) {
	s.t.Helper()
	w := one[WriteMetadata](s.t, s.ackAll(id, sts...))
	if w.Metadata.ID != id {
		s.t.Fatalf("WriteMetadata for %d, want %d", w.Metadata.ID, id)
	}
	acts := s.step(MetadataWritten{ID: id})
	if got := s.c.LatestComplete(); got != id {
		s.t.Fatalf("LatestComplete = %d after MetadataWritten{%d}, want %d", got, id, id)
	}
	return w.Metadata, acts
}

// triggerNext ticks in steps of a second from the current time until a
// Trigger appears (at most an hour) and returns it.
func (s *scenario) triggerNext() Trigger {
	s.t.Helper()
	start := s.now
	for s.now.Sub(start) <= time.Hour {
		if tr := find[Trigger](s.step(Tick{})); len(tr) > 0 {
			return tr[0]
		}
		s.now = s.now.Add(time.Second)
	}
	s.t.Fatalf("no Trigger within an hour after %v", start.Sub(t0))
	return Trigger{}
}

// nextFrom returns the checkpoint triggered by acts, the actions of the
// previous step, or triggers the next one with triggerNext.
func (s *scenario) nextFrom(acts []Action) int64 {
	s.t.Helper()
	if tr := find[Trigger](acts); len(tr) > 0 {
		return tr[len(tr)-1].ID
	}
	return s.triggerNext().ID
}

// failureKind is one of the ways a checkpoint fails within the protocol.
type failureKind string

const (
	byDecline  failureKind = "decline"
	byTimeout  failureKind = "timeout"
	byMetadata failureKind = "metadata write failure"
)

var failureKinds = []failureKind{byDecline, byTimeout, byMetadata}

// failCheckpoint makes pending checkpoint id fail by kind and returns the
// actions of the step in which it failed.
func (s *scenario) failCheckpoint(id int64, kind failureKind) []Action {
	s.t.Helper()
	switch kind {
	case byDecline:
		s.ack(id, SubtaskState{Task: s.tasks[0]})
		return s.step(Declined{ID: id, Task: s.tasks[len(s.tasks)-1], Reason: errBoom})
	case byTimeout:
		// One ack arrives; the others never do.
		s.ack(id, SubtaskState{Task: s.tasks[0]})
		triggered, ok := s.triggered[id]
		if !ok {
			s.t.Fatalf("checkpoint %d was never triggered", id)
		}
		s.now = triggered.Add(s.opts.Timeout - time.Nanosecond)
		if a := find[Abort](s.step(Tick{})); len(a) > 0 {
			s.t.Fatalf("checkpoint aborted before its timeout: %v", a)
		}
		s.now = triggered.Add(s.opts.Timeout)
		return s.step(Tick{})
	case byMetadata:
		one[WriteMetadata](s.t, s.ackAll(id))
		acts := s.step(MetadataWritten{ID: id, Err: errBoom})
		// The failure is recorded in the ledger before anything newer may
		// complete (unless the job fails); the ledger write succeeds here.
		if len(find[FailJob](acts)) > 0 {
			none[WriteLedger](s.t, acts)
			return acts
		}
		w := one[WriteLedger](s.t, acts)
		if !slices.Contains(w.Failed, id) {
			s.t.Fatalf("WriteLedger after the failed metadata write of %d records %v", id, w.Failed)
		}
		return append(acts, s.step(LedgerWritten{Reserved: w.Reserved, Failed: w.Failed})...)
	}
	panic(kind)
}

// find returns the actions of type T in acts, in order.
func find[T Action](acts []Action) []T {
	var out []T
	for _, a := range acts {
		if x, ok := a.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// one returns the single action of type T in acts and fails otherwise.
func one[T Action](t *testing.T, acts []Action) T {
	t.Helper()
	xs := find[T](acts)
	if len(xs) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d in %s", zero, len(xs), fmtActions(acts))
	}
	return xs[0]
}

// none fails when acts contain an action of type T.
func none[T Action](t *testing.T, acts []Action) {
	t.Helper()
	if xs := find[T](acts); len(xs) > 0 {
		var zero T
		t.Fatalf("want no %T, got %s", zero, fmtActions(acts))
	}
}

// discardIDs returns the ids of the Discard actions in acts, in order.
func discardIDs(acts []Action) []int64 {
	var out []int64
	for _, d := range find[Discard](acts) {
		out = append(out, d.ID)
	}
	return out
}

// abortIDs returns the ids of the Abort actions in acts, in order.
func abortIDs(acts []Action) []int64 {
	var out []int64
	for _, a := range find[Abort](acts) {
		out = append(out, a.ID)
	}
	return out
}

func fmtActions(acts []Action) string {
	s := "["
	for i, a := range acts {
		if i > 0 {
			s += " "
		}
		s += fmtAction(a)
	}
	return s + "]"
}

// fmtAction formats an action compactly and deterministically.
func fmtAction(a Action) string {
	switch x := a.(type) {
	case Trigger:
		if x.Final {
			return fmt.Sprintf("Trigger{%d final}", x.ID)
		}
		return fmt.Sprintf("Trigger{%d}", x.ID)
	case WriteMetadata:
		return fmt.Sprintf("WriteMetadata{%d commits=%s}", x.Metadata.ID, fmtCommits(x.Metadata.Commits))
	case NotifyComplete:
		return fmt.Sprintf("NotifyComplete{%d}", x.ID)
	case CommitOutput:
		return fmt.Sprintf("CommitOutput{%d %s}", x.ID, fmtCommits(x.Commits))
	case Abort:
		return fmt.Sprintf("Abort{%d}", x.ID)
	case Discard:
		return fmt.Sprintf("Discard{%d}", x.ID)
	case Trim:
		return fmt.Sprintf("Trim{%d keep=%v}", x.ID, x.Keep)
	case FailJob:
		return fmt.Sprintf("FailJob{%v}", x.Err)
	case Finished:
		return fmt.Sprintf("Finished{%d}", x.ID)
	case WriteLedger:
		return fmt.Sprintf("WriteLedger{reserved=%d failed=%v}", x.Reserved, x.Failed)
	}
	return fmt.Sprintf("%T%+v", a, a)
}

func fmtCommits(cs []Commit) string {
	s := "["
	for i, c := range cs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d/%s:", c.Checkpoint, c.Sink)
		for j, d := range c.Committables {
			if j > 0 {
				s += ","
			}
			s += string(d)
		}
	}
	return s + "]"
}

// cm makes a committable staged at checkpoint p with a readable payload.
func cm(p int64, data string) Committable { return Committable{PreparedAt: p, Data: []byte(data)} }

// sinkState is the acknowledgement of a sink subtask reporting cms.
func sinkState(task TaskID, cms ...Committable) SubtaskState {
	return SubtaskState{Task: task, Committables: cms}
}

// committablesByCheckpoint maps each committable payload to the set of
// checkpoints whose commits contain it.
func committablesByCheckpoint(commits ...[]Commit) map[string][]int64 {
	out := map[string][]int64{}
	for _, cs := range commits {
		for _, c := range cs {
			for _, d := range c.Committables {
				if !slices.Contains(out[string(d)], c.Checkpoint) {
					out[string(d)] = append(out[string(d)], c.Checkpoint)
				}
			}
		}
	}
	return out
}
