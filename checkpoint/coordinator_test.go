package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scenario tests of the Coordinator. Each names the sentence of
// checkpointing.txt, the invariant of DESIGN.md §3 or the doc comment it
// checks. The seeded simulation (sim_test.go) checks the same properties over
// random interleavings; these pin each rule down with a readable script.

// --- Triggering: Options.Interval, MinPause, MaxConcurrent -----------------

// Options.Interval: "the time between the triggers of two periodic
// checkpoints"; coordinator.go: "the first periodic checkpoint comes one
// interval after the job starts" (the first Step).
func TestTrigger_FirstOneIntervalAfterFirstStep(t *testing.T) {
	o := testOptions()
	o.MaxConcurrent = 3
	o.Timeout = time.Hour
	s := newScenario(t, o, src0, sink0)
	start := time.Hour // the job starts long after t0: the interval counts from the first Step
	none[Trigger](t, s.tick(start))
	none[Trigger](t, s.tick(start+10*time.Second-time.Nanosecond))
	tr := one[Trigger](t, s.tick(start+10*time.Second))
	if tr.ID != 1 || tr.Final || !tr.Timestamp.Equal(t0.Add(start+10*time.Second)) {
		t.Fatalf("first trigger = %+v, want checkpoint 1, not final, at the step's time", tr)
	}
	// The next one comes one interval after the previous trigger.
	none[Trigger](t, s.tick(start+20*time.Second-time.Nanosecond))
	if tr := one[Trigger](t, s.tick(start+20*time.Second)); tr.ID != 2 {
		t.Fatalf("second trigger = %+v, want checkpoint 2", tr)
	}
}

// Options.Interval: "Zero disables periodic checkpoints; a bounded or stopped
// pipeline still takes its final checkpoint."
func TestTrigger_IntervalZeroNeverTriggersPeriodically(t *testing.T) {
	o := testOptions()
	o.Interval = 0
	s := newScenario(t, o, src0, sink0)
	for d := time.Duration(0); d <= 48*time.Hour; d += 17 * time.Minute {
		none[Trigger](t, s.tick(d))
	}
	tr := one[Trigger](t, s.at(49*time.Hour).step(RequestFinal{}))
	if !tr.Final {
		t.Fatalf("trigger after RequestFinal = %+v, want Final", tr)
	}
}

// Options.MaxConcurrent: "how many checkpoints may be pending at once";
// INVARIANT len(pending) <= MaxConcurrent.
func TestTrigger_MaxConcurrentBoundsPendingCheckpoints(t *testing.T) {
	for _, max := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("max=", max), func(t *testing.T) {
			o := testOptions()
			o.Interval = time.Second
			o.Timeout = time.Hour
			o.MaxConcurrent = max
			s := newScenario(t, o, src0, sink0)
			var triggered []int64
			for d := time.Duration(0); d <= 10*time.Second; d += time.Second {
				for _, tr := range find[Trigger](s.tick(d)) {
					triggered = append(triggered, tr.ID)
				}
			}
			if len(triggered) != max || len(s.c.Pending()) != max {
				t.Fatalf("triggered %v, pending %v; want %d of each", triggered, s.c.Pending(), max)
			}
			// Completing the oldest frees a slot: the interval has long
			// elapsed, so the next checkpoint starts in the same step.
			_, acts := s.complete(1)
			tr := one[Trigger](t, acts)
			if tr.ID != int64(max)+1 {
				t.Fatalf("trigger after completing 1 = %+v, want %d", tr, max+1)
			}
		})
	}
}

// Options.MinPause: "the least time between the completion of one checkpoint
// and the trigger of the next. When it is positive no checkpoint is triggered
// while another is pending."
func TestTrigger_MinPause(t *testing.T) {
	o := testOptions()
	o.Interval = time.Second
	o.Timeout = time.Hour
	o.MinPause = 5 * time.Second
	o.MaxConcurrent = 3 // MinPause wins over concurrency
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	if tr := one[Trigger](t, s.tick(time.Second)); tr.ID != 1 {
		t.Fatalf("trigger = %+v, want 1", tr)
	}
	for d := 2 * time.Second; d <= 30*time.Second; d += time.Second {
		none[Trigger](t, s.tick(d)) // 1 is pending
	}
	s.at(31 * time.Second)
	_, acts := s.complete(1)
	none[Trigger](t, acts)
	none[Trigger](t, s.tick(36*time.Second-time.Nanosecond))
	if tr := one[Trigger](t, s.tick(36*time.Second)); tr.ID != 2 {
		t.Fatalf("trigger after min pause = %+v, want 2", tr)
	}
}

// --- Completion: DESIGN §3 "Acks and completion" ---------------------------

// "When every subtask has acked, the coordinator writes the checkpoint's
// metadata … Only then is N a recovery point, and only then are sinks told to
// commit N." checkpointing.txt: "A checkpoint becomes a usable recovery point
// only after all required source, operator, and sink state has been durably
// recorded."
func TestCompletion_RequiresEveryAckAndDurableMetadata(t *testing.T) {
	s := newScenario(t, testOptions(), src0, map0, sink0)
	s.tick(0)
	id := s.triggerNext().ID
	for _, task := range []TaskID{src0, map0} {
		acts := s.ack(id, SubtaskState{Task: task})
		none[WriteMetadata](t, acts)
		none[NotifyComplete](t, acts)
		none[CommitOutput](t, acts)
	}
	w := one[WriteMetadata](t, s.ack(id, SubtaskState{Task: sink0}))
	if w.Metadata.ID != id {
		t.Fatalf("WriteMetadata for %d, want %d", w.Metadata.ID, id)
	}
	// Written but not yet durable: not complete, nothing published.
	if got := s.c.LatestComplete(); got != 0 {
		t.Fatalf("LatestComplete = %d before the metadata write returned, want 0", got)
	}
	acts := s.tick(s.now.Sub(t0) + time.Second)
	none[NotifyComplete](t, acts)
	none[CommitOutput](t, acts)
	acts = s.step(MetadataWritten{ID: id})
	if got := s.c.LatestComplete(); got != id {
		t.Fatalf("LatestComplete = %d after MetadataWritten{%d}, want %d", got, id, id)
	}
	if n := one[NotifyComplete](t, acts); n.ID != id {
		t.Fatalf("NotifyComplete = %+v, want %d", n, id)
	}
	if c := one[CommitOutput](t, acts); c.ID != id {
		t.Fatalf("CommitOutput = %+v, want %d", c, id)
	}
}

// WriteMetadata is emitted exactly once per checkpoint and only once every
// task acked; duplicate acknowledgements and those of tasks that are not part
// of the job are ignored ("Acks and completion", coordinator.acked).
func TestCompletion_WriteMetadataOnceAfterAllAcks_DuplicateAndUnknownAcksIgnored(t *testing.T) {
	s := newScenario(t, testOptions(), src0, sink0)
	s.tick(0)
	id := s.triggerNext().ID
	first := SubtaskState{Task: src0, Inline: []byte("first")}
	none[WriteMetadata](t, s.ack(id, first))
	// A duplicate from src0 must not stand in for sink0's missing ack.
	none[WriteMetadata](t, s.ack(id, SubtaskState{Task: src0, Inline: []byte("second")}))
	// Neither may an ack from a task that is not part of the job.
	acts := s.ack(id, SubtaskState{Task: ghost})
	none[WriteMetadata](t, acts)
	none[Discard](t, acts)
	w := one[WriteMetadata](t, s.ack(id, SubtaskState{Task: sink0}))
	got, _ := w.Metadata.Task(src0)
	if string(got.Inline) != "first" {
		t.Fatalf("metadata holds src0 state %q, want the first acknowledgement's", got.Inline)
	}
	if len(w.Metadata.Tasks) != 2 {
		t.Fatalf("metadata has %d tasks, want 2 (unknown task must not be in it): %+v", len(w.Metadata.Tasks), w.Metadata.Tasks)
	}
	// Duplicates after every task acked must not write the metadata again.
	for _, task := range []TaskID{src0, sink0, ghost} {
		acts := s.ack(id, SubtaskState{Task: task})
		none[WriteMetadata](t, acts)
		none[Discard](t, acts)
	}
	one[NotifyComplete](t, s.step(MetadataWritten{ID: id}))
	// And after completion: the checkpoint is the recovery point, an ack of
	// it must not discard it.
	for _, task := range []TaskID{src0, sink0} {
		acts := s.ack(id, SubtaskState{Task: task})
		if len(acts) != 0 {
			t.Fatalf("ack of the complete checkpoint produced %s", fmtActions(acts))
		}
	}
}

// --- Failures: invariant 1, Options.TolerableFailures -----------------------

// Invariant 1: "a failed or timed-out checkpoint leaves the recovery point
// unchanged and the pipeline running." checkpointing.txt: "An incomplete
// checkpoint never replaces the last successful one." Options.TolerableFailures:
// "A failure within the tolerance leaves the recovery point unchanged and the
// pipeline running."
func TestFailure_WithinToleranceAbortsDiscardsAndKeepsRunning(t *testing.T) {
	for _, kind := range failureKinds {
		t.Run(string(kind), func(t *testing.T) {
			o := testOptions()
			o.TolerableFailures = 1
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			_, acts := s.complete(s.triggerNext().ID) // checkpoint 1 is the recovery point
			id := s.nextFrom(acts)
			acts = s.failCheckpoint(id, kind)
			if !slices.Contains(abortIDs(acts), id) || !slices.Contains(discardIDs(acts), id) {
				t.Fatalf("failure of %d by %s: %s, want Abort{%d} and Discard{%d}", id, kind, fmtActions(acts), id, id)
			}
			if d := discardIDs(acts); slices.Contains(d, 1) {
				t.Fatalf("recovery point discarded: %s", fmtActions(acts))
			}
			none[FailJob](t, acts)
			none[NotifyComplete](t, acts)
			none[CommitOutput](t, acts)
			if got := s.c.LatestComplete(); got != 1 {
				t.Fatalf("LatestComplete = %d after a failed checkpoint, want 1", got)
			}
			if got := s.c.ConsecutiveFailures(); got != 1 {
				t.Fatalf("ConsecutiveFailures = %d, want 1", got)
			}
			if slices.Contains(s.c.Pending(), id) {
				t.Fatalf("failed checkpoint %d still pending", id)
			}
			// The pipeline keeps running: the next checkpoint is triggered and completes.
			next := s.nextFrom(acts)
			if next <= id {
				t.Fatalf("next checkpoint %d reuses an id <= %d", next, id)
			}
			s.complete(next)
		})
	}
}

// Options.TolerableFailures: "how many consecutive checkpoint failures … the
// job survives; one more fails the job". FailJob: "The coordinator emits
// nothing further" — at least no further Trigger and no second FailJob.
func TestFailure_BeyondToleranceFailsJobOnce(t *testing.T) {
	for _, kind := range failureKinds {
		for tol := 0; tol <= 2; tol++ {
			t.Run(fmt.Sprintf("%s/tolerable=%d", kind, tol), func(t *testing.T) {
				o := testOptions()
				o.TolerableFailures = tol
				s := newScenario(t, o, src0, sink0)
				s.tick(0)
				_, acts := s.complete(s.triggerNext().ID)
				for i := 0; i < tol; i++ {
					acts = s.failCheckpoint(s.nextFrom(acts), kind)
					none[FailJob](t, acts)
				}
				acts = s.failCheckpoint(s.nextFrom(acts), kind)
				one[FailJob](t, acts)
				none[Trigger](t, acts)
				if got := s.c.LatestComplete(); got != 1 {
					t.Fatalf("LatestComplete = %d, want 1", got)
				}
				for d := time.Duration(0); d < 10*time.Minute; d += 7 * time.Second {
					acts := s.tick(s.now.Sub(t0) + 7*time.Second)
					none[Trigger](t, acts)
					none[FailJob](t, acts)
				}
				none[Trigger](t, s.step(RequestFinal{}))
			})
		}
	}
}

// Options.TolerableFailures counts *consecutive* failures: "the number of
// checkpoints that failed since the last one completed".
func TestFailure_CompletedCheckpointResetsFailureCount(t *testing.T) {
	for _, kind := range failureKinds {
		t.Run(string(kind), func(t *testing.T) {
			o := testOptions()
			o.TolerableFailures = 1
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			acts := s.failCheckpoint(s.triggerNext().ID, kind)
			none[FailJob](t, acts)
			if got := s.c.ConsecutiveFailures(); got != 1 {
				t.Fatalf("ConsecutiveFailures = %d, want 1", got)
			}
			_, acts = s.complete(s.nextFrom(acts))
			if got := s.c.ConsecutiveFailures(); got != 0 {
				t.Fatalf("ConsecutiveFailures = %d after a completion, want 0", got)
			}
			acts = s.failCheckpoint(s.nextFrom(acts), kind)
			none[FailJob](t, acts)
			one[FailJob](t, s.failCheckpoint(s.nextFrom(acts), kind))
		})
	}
}

// Subsumed and task-failure aborts are not checkpoint failures: they must
// not count towards the tolerance.
func TestFailure_SubsumedCheckpointIsNotAFailure(t *testing.T) {
	o := testOptions()
	o.MaxConcurrent = 2
	o.TolerableFailures = 0
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	a := s.triggerNext().ID
	b := s.triggerNext().ID
	_, acts := s.complete(b)
	none[FailJob](t, acts)
	if !slices.Contains(abortIDs(acts), a) {
		t.Fatalf("completing %d did not abort older %d: %s", b, a, fmtActions(acts))
	}
	if got := s.c.ConsecutiveFailures(); got != 0 {
		t.Fatalf("ConsecutiveFailures = %d after a subsumption, want 0", got)
	}
}

// --- Late acknowledgements and Discard --------------------------------------

// Discard: "delete everything stored for checkpoint ID: … the late state of an
// expired one … It is only emitted for checkpoints that are not the recovery
// point." STYLE (Flink): the coordinator "discards the state such [late]
// acks carry".
func TestLateAck_DiscardsThatCheckpointOnly(t *testing.T) {
	for _, kind := range failureKinds {
		t.Run(string(kind), func(t *testing.T) {
			o := testOptions()
			o.TolerableFailures = 5
			o.Retain = 2
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			s.complete(s.triggerNext().ID) // 1
			s.complete(s.triggerNext().ID) // 2
			failed := s.triggerNext().ID   // 3
			s.failCheckpoint(failed, kind)
			acts := s.ack(failed, SubtaskState{Task: sink0})
			if got := discardIDs(acts); !slices.Equal(got, []int64{failed}) || len(acts) != 1 {
				t.Fatalf("late ack of failed %d: %s, want exactly [Discard{%d}]", failed, fmtActions(acts), failed)
			}
			// Late (duplicate) acks of retained checkpoints, the latest among
			// them, must never discard them.
			for _, id := range []int64{1, 2} {
				if acts := s.ack(id, SubtaskState{Task: sink0}); len(acts) != 0 {
					t.Fatalf("ack of retained checkpoint %d: %s, want nothing", id, fmtActions(acts))
				}
			}
			// An ack of a checkpoint never triggered is ignored.
			if acts := s.ack(99, SubtaskState{Task: sink0}); len(acts) != 0 {
				t.Fatalf("ack of untriggered 99: %s, want nothing", fmtActions(acts))
			}
		})
	}
}

// After a restore, the restored and retained checkpoints are recovery data:
// a stray ack of one of them must not delete it (Config.Retained).
func TestLateAck_NeverDiscardsRestoredOrRetained(t *testing.T) {
	o := testOptions()
	o.Retain = 3
	s := newScenarioCfg(t, Config{Options: o, Tasks: []TaskID{src0, sink0}, Restored: 7, Retained: []int64{3, 5, 7}, NextID: 9})
	s.tick(0)
	for _, id := range []int64{3, 5, 7} {
		if acts := s.ack(id, SubtaskState{Task: src0}); len(acts) != 0 {
			t.Fatalf("ack of retained %d: %s, want nothing", id, fmtActions(acts))
		}
	}
	if got := s.c.LatestComplete(); got != 7 {
		t.Fatalf("LatestComplete = %d, want the restored 7", got)
	}
	if tr := s.triggerNext(); tr.ID != 9 {
		t.Fatalf("first trigger after restore = %d, want NextID 9", tr.ID)
	}
}

// --- Retention: Options.Retain, DESIGN §7 -----------------------------------

// Options.Retain: "how many complete checkpoints are kept; older ones are
// deleted once a newer one is complete." The recovery point is never deleted.
func TestRetention_DiscardsOldestBeyondRetainNeverLatest(t *testing.T) {
	for _, retain := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("retain=", retain), func(t *testing.T) {
			o := testOptions()
			o.Retain = retain
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			var kept []int64
			for i := 0; i < 6; i++ {
				id := s.triggerNext().ID
				_, acts := s.complete(id)
				kept = append(kept, id)
				var want []int64
				for len(kept) > retain {
					want = append(want, kept[0])
					kept = kept[1:]
				}
				if got := discardIDs(acts); !slices.Equal(got, want) {
					t.Fatalf("completing %d discarded %v, want %v (retain %d)", id, got, want, retain)
				}
			}
		})
	}
	t.Run("restored", func(t *testing.T) {
		o := testOptions()
		o.Retain = 2
		s := newScenarioCfg(t, Config{Options: o, Tasks: []TaskID{src0}, Restored: 7, Retained: []int64{3, 5, 7}, NextID: 8})
		s.tick(0)
		_, acts := s.complete(s.triggerNext().ID)
		if got := discardIDs(acts); !slices.Equal(got, []int64{3, 5}) {
			t.Fatalf("completing 8 after restoring [3 5 7] with retain 2 discarded %v, want [3 5]", got)
		}
	})
}

// --- Subsumption --------------------------------------------------------------

// metadataWritten: "Older pending checkpoints are subsumed … completions must
// stay in id order." A later MetadataWritten of a subsumed checkpoint must not
// move the recovery point backwards (it "only grows").
func TestSubsumption_CompletedCheckpointAbortsOlderPending(t *testing.T) {
	for _, olderWriting := range []bool{false, true} {
		t.Run(fmt.Sprint("older writing=", olderWriting), func(t *testing.T) {
			o := testOptions()
			o.MaxConcurrent = 3
			o.Timeout = time.Hour
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			a := s.triggerNext().ID
			b := s.triggerNext().ID
			c := s.triggerNext().ID
			var acts []Action
			if olderWriting {
				one[WriteMetadata](t, s.ackAll(a))
				if len(find[WriteMetadata](s.ackAll(b))) == 0 {
					t.Skip("this coordinator writes one metadata at a time: b cannot complete while a's write is in flight")
				}
				acts = s.step(MetadataWritten{ID: b})
			} else {
				_, acts = s.complete(b)
			}
			if got := abortIDs(acts); !slices.Equal(got, []int64{a}) {
				t.Fatalf("completing %d aborted %v, want [%d] (and not the newer %d)", b, got, a, c)
			}
			if !slices.Contains(discardIDs(acts), a) {
				t.Fatalf("subsumed %d not discarded: %s", a, fmtActions(acts))
			}
			if got := s.c.Pending(); !slices.Equal(got, []int64{c}) {
				t.Fatalf("pending %v, want [%d]", got, c)
			}
			acts = s.step(MetadataWritten{ID: a})
			if got := s.c.LatestComplete(); got != b {
				t.Fatalf("late MetadataWritten{%d} moved LatestComplete to %d, want %d", a, got, b)
			}
			none[NotifyComplete](t, acts)
			none[CommitOutput](t, acts)
		})
	}
}

// --- Timeouts -----------------------------------------------------------------

// pendingCheckpoint.writing: "from then on only the write's result decides the
// checkpoint's fate (a timeout no longer applies, since the write may already
// have made it complete)". Declines cannot fail it either.
func TestTimeout_DoesNotApplyOnceWriteMetadataEmitted(t *testing.T) {
	s := newScenario(t, testOptions(), src0, sink0)
	s.tick(0)
	id := s.triggerNext().ID
	one[WriteMetadata](t, s.ackAll(id))
	for _, d := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
		acts := s.tick(d)
		none[Abort](t, acts)
		none[Discard](t, acts)
	}
	none[Abort](t, s.step(Declined{ID: id, Task: src0, Reason: errBoom}))
	if got := s.c.Pending(); !slices.Equal(got, []int64{id}) {
		t.Fatalf("pending %v, want [%d]", got, id)
	}
	s.step(MetadataWritten{ID: id})
	if got := s.c.LatestComplete(); got != id {
		t.Fatalf("LatestComplete = %d, want %d", got, id)
	}
}

// Options.Timeout: "how long a checkpoint may take from trigger to durable
// metadata before it is declared failed and abandoned."
func TestTimeout_ExpiresCollectingCheckpointExactlyAtTimeout(t *testing.T) {
	o := testOptions()
	o.TolerableFailures = 1
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	id := s.triggerNext().ID
	acts := s.failCheckpoint(id, byTimeout) // checks nothing happens 1ns before
	if !slices.Contains(abortIDs(acts), id) {
		t.Fatalf("no Abort{%d} at the timeout: %s", id, fmtActions(acts))
	}
	none[FailJob](t, acts)
}

// --- TaskFailed -----------------------------------------------------------------

// TaskFailed: "The coordinator abandons every checkpoint still collecting
// acknowledgements and stops triggering." A checkpoint whose metadata is being
// written is left to the write's result (it may already be durable).
func TestTaskFailed_AbortsCollectingAndStopsTriggering(t *testing.T) {
	o := testOptions()
	o.MaxConcurrent = 3
	o.Interval = time.Second
	o.Timeout = time.Hour
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	writing := s.triggerNext().ID
	c1 := s.triggerNext().ID
	c2 := s.triggerNext().ID
	one[WriteMetadata](t, s.ackAll(writing))
	acts := s.step(TaskFailed{Task: src0, Err: errBoom})
	if got := abortIDs(acts); !slices.Equal(got, []int64{c1, c2}) {
		t.Fatalf("TaskFailed aborted %v, want [%d %d]", got, c1, c2)
	}
	if got := discardIDs(acts); !slices.Equal(got, []int64{c1, c2}) {
		t.Fatalf("TaskFailed discarded %v, want [%d %d]", got, c1, c2)
	}
	none[FailJob](t, acts)
	for d := time.Duration(0); d < time.Minute; d += time.Second {
		none[Trigger](t, s.tick(s.now.Sub(t0)+time.Second))
	}
	none[Trigger](t, s.step(RequestFinal{}))
	// The write in flight decides the fate of the writing checkpoint.
	s.step(MetadataWritten{ID: writing})
	if got := s.c.LatestComplete(); got != writing {
		t.Fatalf("LatestComplete = %d after its metadata became durable, want %d", got, writing)
	}
	none[Trigger](t, s.tick(s.now.Sub(t0)+time.Hour))
}

// --- Final checkpoint: invariant 6 ------------------------------------------------

// Invariant 6: "A bounded pipeline ends with a final checkpoint whose output
// is committed before the process exits 0." RequestFinal: "triggered as soon
// as concurrency allows, ignoring the interval and min pause". Finished: "the
// final checkpoint ID is complete and its output committed".
func TestFinal_TriggeredAtOnceAndFinishedOnlyAfterCommitted(t *testing.T) {
	o := testOptions()
	o.Interval = time.Hour
	o.MinPause = time.Hour
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	// A periodic checkpoint just completed: both the interval and the min
	// pause forbid a new periodic one for an hour.
	s.at(time.Hour)
	_, acts := s.complete(s.triggerNext().ID)
	// Commits are confirmed in emission order (CommitOutput's obligation).
	s.step(Committed{ID: one[CommitOutput](t, acts).ID})
	tr := one[Trigger](t, s.at(time.Hour+time.Second).step(RequestFinal{}))
	if !tr.Final || tr.ID != 2 {
		t.Fatalf("RequestFinal triggered %+v, want final checkpoint 2", tr)
	}
	none[Trigger](t, s.step(RequestFinal{})) // once
	w := one[WriteMetadata](t, s.ackAll(tr.ID))
	if !w.Metadata.Final {
		t.Fatalf("final checkpoint's metadata not marked Final")
	}
	acts = s.step(MetadataWritten{ID: tr.ID})
	none[Finished](t, acts)
	co := one[CommitOutput](t, acts)
	for _, d := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
		acts := s.tick(d)
		none[Finished](t, acts)
		none[Trigger](t, acts)
	}
	if f := one[Finished](t, s.step(Committed{ID: co.ID})); f.ID != tr.ID {
		t.Fatalf("Finished = %+v, want %d", f, tr.ID)
	}
	for _, ev := range []Event{Tick{}, RequestFinal{}} {
		none[Trigger](t, s.at(10*time.Hour).step(ev))
	}
}

// RequestFinal: "triggered as soon as concurrency allows".
func TestFinal_WaitsForConcurrencyThenIgnoresInterval(t *testing.T) {
	o := testOptions()
	o.Interval = time.Hour
	o.MinPause = time.Hour
	o.Timeout = 2 * time.Hour
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	s.at(time.Hour)
	id := s.triggerNext().ID
	none[Trigger](t, s.step(RequestFinal{}))
	_, acts := s.complete(id)
	tr := one[Trigger](t, acts)
	if !tr.Final {
		t.Fatalf("trigger after completion = %+v, want the requested final", tr)
	}
}

// RequestFinal: "retried until it completes"; a failed final checkpoint is
// triggered again as a final checkpoint, at once.
func TestFinal_FailedFinalIsRetriggered(t *testing.T) {
	for _, kind := range failureKinds {
		t.Run(string(kind), func(t *testing.T) {
			o := testOptions()
			o.Interval = 0
			o.TolerableFailures = 2
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			first := one[Trigger](t, s.step(RequestFinal{}))
			acts := s.failCheckpoint(first.ID, kind)
			again := one[Trigger](t, acts)
			if !again.Final || again.ID <= first.ID {
				t.Fatalf("after the final %d failed: %s, want a new final Trigger", first.ID, fmtActions(acts))
			}
			none[Finished](t, acts)
			_, acts = s.complete(again.ID)
			none[Finished](t, acts)
			co := one[CommitOutput](t, acts)
			if f := one[Finished](t, s.step(Committed{ID: co.ID})); f.ID != again.ID {
				t.Fatalf("Finished{%d}, want %d", f.ID, again.ID)
			}
		})
	}
}

// CommitOutput: "The caller carries out CommitOutput actions one at a time in
// emission order". Finished must wait for the final checkpoint's own commit,
// not an earlier checkpoint's.
func TestFinal_FinishedWaitsForFinalCommitNotEarlierOne(t *testing.T) {
	o := testOptions()
	o.Interval = time.Second
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	_, acts := s.complete(s.triggerNext().ID)
	first := one[CommitOutput](t, acts)
	final := one[Trigger](t, s.step(RequestFinal{}))
	_, acts = s.complete(final.ID)
	last := one[CommitOutput](t, acts)
	none[Finished](t, s.step(Committed{ID: first.ID}))
	if f := one[Finished](t, s.step(Committed{ID: last.ID})); f.ID != final.ID {
		t.Fatalf("Finished{%d}, want %d", f.ID, final.ID)
	}
}

// FailJob: "too many consecutive checkpoint failures, or a commit failed".
func TestCommitted_ErrorFailsJob(t *testing.T) {
	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprint("final=", final), func(t *testing.T) {
			o := testOptions()
			o.TolerableFailures = 3 // a commit failure is not a tolerated checkpoint failure
			s := newScenario(t, o, src0, sink0)
			s.tick(0)
			var id int64
			if final {
				id = one[Trigger](t, s.step(RequestFinal{})).ID
			} else {
				id = s.triggerNext().ID
			}
			_, acts := s.complete(id)
			co := one[CommitOutput](t, acts)
			acts = s.step(Committed{ID: co.ID, Err: errBoom})
			f := one[FailJob](t, acts)
			if !errors.Is(f.Err, errBoom) {
				t.Fatalf("FailJob error %v does not wrap the commit error", f.Err)
			}
			none[Finished](t, acts)
			for d := time.Minute; d < time.Hour; d += time.Minute {
				acts := s.tick(d)
				none[Trigger](t, acts)
				none[Finished](t, acts)
			}
		})
	}
}

// FailJob: "The coordinator emits nothing further." After FailJob the
// runtime restarts the job from the last complete checkpoint; a coordinator
// that keeps changing the recovery point and deleting checkpoints after
// FailJob would have the restart race with those deletions.
//
// Known to fail: Step keeps emitting Abort/Discard (timeouts, declines) and
// even completes a writing checkpoint and discards the previous recovery
// point after FailJob (see the report).
func TestFailJob_EmitsNothingFurther(t *testing.T) {
	t.Run("metadata written after FailJob", func(t *testing.T) {
		o := testOptions()
		o.MaxConcurrent = 2
		o.Retain = 1
		o.Timeout = time.Hour
		s := newScenario(t, o, src0, sink0)
		s.tick(0)
		s.complete(s.triggerNext().ID) // 1: the recovery point the restart will use
		writing := s.triggerNext().ID  // 2
		failing := s.triggerNext().ID  // 3
		one[WriteMetadata](t, s.ackAll(writing))
		one[FailJob](t, s.step(Declined{ID: failing, Task: src0, Reason: errBoom}))
		if acts := s.step(MetadataWritten{ID: writing}); len(acts) != 0 {
			t.Errorf("after FailJob, MetadataWritten{%d} produced %s; want nothing (the restart may be restoring checkpoint 1)", writing, fmtActions(acts))
		}
	})
	t.Run("timeout after FailJob", func(t *testing.T) {
		o := testOptions()
		o.MaxConcurrent = 2
		s := newScenario(t, o, src0, sink0)
		s.tick(0)
		a := s.triggerNext().ID
		b := s.triggerNext().ID
		one[FailJob](t, s.step(Declined{ID: a, Task: src0, Reason: errBoom}))
		if acts := s.tick(s.triggered[b].Sub(t0) + o.Timeout); len(acts) != 0 {
			t.Errorf("after FailJob, a Tick produced %s; want nothing", fmtActions(acts))
		}
	})
}

// --- Committables: invariants 4 and 5, Committable's INVARIANT -------------------

// Committable: "the coordinator then includes it in exactly one complete
// checkpoint's commits"; buildMetadata: a committable prepared at P is in the
// commits of the first complete checkpoint Q >= P, and of no later one, even
// when the sink reports it again (it had not yet heard of Q's completion).
func TestCommittables_InFirstCompleteCheckpointAtOrAfterPreparedAt(t *testing.T) {
	s := newScenario(t, testOptions(), src0, sink0)
	s.tick(0)
	c1, c2 := cm(1, "c1"), cm(2, "c2")
	s.triggerNext()
	_, acts := s.complete(1, sinkState(sink0, c1))
	co := one[CommitOutput](t, acts)
	if got, want := fmtCommits(co.Commits), "[1/sink:c1]"; got != want {
		t.Fatalf("CommitOutput(1) = %s, want %s", got, want)
	}
	s.step(Committed{ID: 1})
	s.triggerNext()
	m2, acts := s.complete(2, sinkState(sink0, c1, c2)) // c1 reported again
	if got, want := fmtCommits(m2.Commits), "[2/sink:c2]"; got != want {
		t.Fatalf("metadata(2) commits = %s, want %s: c1 belongs to checkpoint 1 only", got, want)
	}
	if got, want := fmtCommits(one[CommitOutput](t, acts).Commits), "[2/sink:c2]"; got != want {
		t.Fatalf("CommitOutput(2) = %s, want %s", got, want)
	}
}

// Invariant 5: "staged output of checkpoints that never completed is
// abandoned" — but not lost: the sink still reports it, and the next complete
// checkpoint (the first complete one >= PreparedAt) publishes it.
func TestCommittables_OfFailedCheckpointCarriedIntoNextComplete(t *testing.T) {
	for _, kind := range []failureKind{byDecline, byTimeout} {
		t.Run(string(kind), func(t *testing.T) {
			o := testOptions()
			o.TolerableFailures = 1
			s := newScenario(t, o, sink0, src0) // sink acks first: its committable is in the failed checkpoint's acks
			s.tick(0)
			id := s.triggerNext().ID
			s.ack(id, sinkState(sink0, cm(id, "a")))
			next := s.nextFrom(s.failCheckpoint(id, kind))
			m, _ := s.complete(next, sinkState(sink0, cm(id, "a"), cm(next, "b")))
			if got, want := fmtCommits(m.Commits), fmt.Sprintf("[%d/sink:a,b]", next); got != want {
				t.Fatalf("commits of %d = %s, want %s", next, got, want)
			}
		})
	}
	t.Run(string(byMetadata), func(t *testing.T) {
		o := testOptions()
		o.TolerableFailures = 1
		s := newScenario(t, o, src0, sink0)
		s.tick(0)
		id := s.triggerNext().ID
		w := one[WriteMetadata](t, s.ackAll(id, sinkState(sink0, cm(id, "a"))))
		if got, want := fmtCommits(w.Metadata.Commits), fmt.Sprintf("[%d/sink:a]", id); got != want {
			t.Fatalf("commits of %d = %s, want %s", id, got, want)
		}
		acts := s.step(MetadataWritten{ID: id, Err: errBoom})
		lw := one[WriteLedger](t, acts)
		acts = append(acts, s.step(LedgerWritten{Reserved: lw.Reserved, Failed: lw.Failed})...)
		next := s.nextFrom(acts)
		m, _ := s.complete(next, sinkState(sink0, cm(id, "a"), cm(next, "b")))
		if got, want := fmtCommits(m.Commits), fmt.Sprintf("[%d/sink:a,b]", next); got != want {
			t.Fatalf("commits of %d = %s, want %s", next, got, want)
		}
	})
}

// Commit: "a checkpoint's metadata may carry commits of earlier complete
// checkpoints whose publication was not yet confirmed, so a recovery publishes
// them too"; uncommitted: "Every new metadata carries them".
func TestCommittables_UncommittedCarriedUntilCommitted(t *testing.T) {
	o := testOptions()
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	s.triggerNext()
	_, acts := s.complete(1, sinkState(sink0, cm(1, "a")))
	one[CommitOutput](t, acts) // not yet Committed
	s.triggerNext()
	m2, acts := s.complete(2, sinkState(sink0, cm(2, "b")))
	if got, want := fmtCommits(m2.Commits), "[1/sink:a 2/sink:b]"; got != want {
		t.Fatalf("metadata(2) commits = %s, want %s", got, want)
	}
	if got, want := fmtCommits(one[CommitOutput](t, acts).Commits), "[1/sink:a 2/sink:b]"; got != want {
		t.Fatalf("CommitOutput(2) = %s, want %s", got, want)
	}
	s.step(Committed{ID: 1})
	s.triggerNext()
	m3, _ := s.complete(3, sinkState(sink0, cm(3, "c")))
	if got, want := fmtCommits(m3.Commits), "[2/sink:b 3/sink:c]"; got != want {
		t.Fatalf("metadata(3) commits = %s, want %s (1 was confirmed)", got, want)
	}
	s.step(Committed{ID: 2})
	s.step(Committed{ID: 3})
	s.triggerNext()
	m4, _ := s.complete(4)
	if len(m4.Commits) != 0 {
		t.Fatalf("metadata(4) commits = %s, want none", fmtCommits(m4.Commits))
	}
}

// Invariant 4: output "becomes visible only after N is complete, atomically
// across all parallel sink subtasks": one Commit per sink and checkpoint,
// holding every subtask's committables in task order.
func TestCommittables_OneCommitPerSinkAcrossSubtasks(t *testing.T) {
	s := newScenario(t, testOptions(), sinkB, src0, sink1, sink0)
	s.tick(0)
	id := s.triggerNext().ID
	// Acks arrive out of task order.
	s.ack(id, sinkState(sink1, cm(id, "s1")))
	s.ack(id, sinkState(sinkB, cm(id, "b0")))
	s.ack(id, SubtaskState{Task: src0})
	w := one[WriteMetadata](t, s.ack(id, sinkState(sink0, cm(id, "s0"))))
	if got, want := fmtCommits(w.Metadata.Commits), "[1/sink:s0,s1 1/sink-b:b0]"; got != want {
		t.Fatalf("commits = %s, want %s", got, want)
	}
}

// Committable's INVARIANT: "the coordinator then includes it in exactly one
// complete checkpoint's commits"; invariant 5: "re-committing N after a
// crash publishes nothing twice".
//
// With MaxConcurrent > 1, checkpoint 2's metadata can be assembled while
// checkpoint 1's metadata is being written. buildMetadata filters the sink's
// committables with PreparedAt > latest, but latest is still 0 then, so c1
// (prepared at 1, still reported in the ack of 2 because the sink has not
// heard of 1's completion) goes into checkpoint 2's own commits as well as
// checkpoint 1's. Both complete: c1 is published under 1 and again under 2.
//
// The test answers every WriteMetadata successfully in emission order, so it
// also holds for a coordinator that defers 2's write until 1's resolved.
//
// Known to fail (see the report).
func TestCommittables_ConcurrentCheckpointsPublishEachOnce(t *testing.T) {
	o := testOptions()
	o.MaxConcurrent = 2
	o.Timeout = time.Hour
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	one[Trigger](t, s.tick(10*time.Second)) // 1
	one[Trigger](t, s.tick(20*time.Second)) // 2
	// The sink processes barrier 1 (stages c1) then barrier 2 (stages c2);
	// NotifyComplete(1) does not exist yet, so its ack of 2 reports both.
	c1, c2 := cm(1, "c1"), cm(2, "c2")
	acts := s.ackAll(1, sinkState(sink0, c1))
	acts = append(acts, s.ackAll(2, sinkState(sink0, c1, c2))...)
	var complete [][]Commit // own and carried commits of each complete checkpoint, and each CommitOutput
	var trace []string
	for len(acts) > 0 {
		var next []Action
		for _, w := range find[WriteMetadata](acts) {
			res := s.step(MetadataWritten{ID: w.Metadata.ID})
			trace = append(trace, fmtAction(w), fmtActions(res))
			if s.c.LatestComplete() == w.Metadata.ID {
				complete = append(complete, w.Metadata.Commits)
			}
			for _, co := range find[CommitOutput](res) {
				complete = append(complete, co.Commits)
			}
			next = append(next, res...)
		}
		acts = next
	}
	in := committablesByCheckpoint(complete...)
	for _, d := range []string{"c1", "c2"} {
		if len(in[d]) != 1 {
			t.Errorf("committable %s is in the commits of complete checkpoints %v, want exactly one:\n%s", d, in[d], strings.Join(trace, "\n"))
		}
	}
}

// The same race, observed through a recovery: 1 completes and its output is
// confirmed, the job crashes before learning that 2's write succeeded, and the
// recovery from 2 re-commits 2's metadata — which publishes c1 a second time
// under a different checkpoint id, so idempotent commit cannot recognise it.
//
// Known to fail (same cause as above).
func TestCommittables_RecoveryFromConcurrentCheckpointRepublishes(t *testing.T) {
	o := testOptions()
	o.MaxConcurrent = 2
	o.Timeout = time.Hour
	s := newScenario(t, o, src0, sink0)
	s.tick(0)
	s.tick(10 * time.Second)
	s.tick(20 * time.Second)
	c1, c2 := cm(1, "c1"), cm(2, "c2")
	acts := s.ackAll(1, sinkState(sink0, c1))
	acts = append(acts, s.ackAll(2, sinkState(sink0, c1, c2))...)
	writes := find[WriteMetadata](acts)
	if len(writes) == 0 || writes[0].Metadata.ID != 1 {
		t.Fatalf("want the write of 1 first, got %s", fmtActions(acts))
	}
	acts = s.step(MetadataWritten{ID: 1})
	co1 := one[CommitOutput](t, acts)
	writes = append(writes, find[WriteMetadata](acts)...) // a coordinator may write 2 only now
	s.step(Committed{ID: co1.ID})                         // c1 is published as checkpoint 1's output
	var w2 *Metadata
	for _, w := range writes {
		if w.Metadata.ID == 2 {
			w2 = w.Metadata
		}
	}
	if w2 == nil {
		t.Fatalf("checkpoint 2's metadata was never written")
	}
	// 2's write succeeds, then the job crashes before hearing of it.
	// Recovery restores the newest durable metadata, 2, and publishes its commits.
	published := committablesByCheckpoint(co1.Commits, w2.Commits)
	if got := published["c1"]; len(got) != 1 {
		t.Errorf("c1 published under checkpoints %v across the recovery, want one (metadata of 2: %s)", got, fmtCommits(w2.Commits))
	}
	if got := published["c2"]; len(got) != 1 {
		t.Errorf("c2 published under checkpoints %v across the recovery, want one", got)
	}
}

// --- Config validation ----------------------------------------------------------

// New: NextID "must be greater than every id present in storage so a new
// checkpoint never reuses an old one's files"; a coordinator needs tasks.
func TestNew_RejectsInvalidConfig(t *testing.T) {
	bad := testOptions()
	bad.MaxConcurrent = 0
	for name, cfg := range map[string]Config{
		"bad options":        {Options: bad, Tasks: []TaskID{src0}, NextID: 1},
		"no tasks":           {Options: testOptions(), NextID: 1},
		"duplicate task":     {Options: testOptions(), Tasks: []TaskID{src0, src0}, NextID: 1},
		"next id = restored": {Options: testOptions(), Tasks: []TaskID{src0}, Restored: 4, Retained: []int64{4}, NextID: 4},
		"next id 0":          {Options: testOptions(), Tasks: []TaskID{src0}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
