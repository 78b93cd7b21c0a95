package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/storage"
)

// This file holds the observer behind Job.Observe. It learns the checkpoint
// protocol from the driver loop alone: each coordinator step's event, actions
// and status (stepped), so it keeps no copy of what the coordinator decides.
// The other hooks are measurements the coordinator does not see — attempt
// boundaries, subtask counters, barrier positions, storage and commit times,
// deletions done — each a one-line call where it happens; all but the
// per-batch counters run once per checkpoint, subtask or attempt and take the
// observer's mutex.

// subtaskObs are the live counters of one node subtask. They are created at
// the job's first attempt and kept across restarts, so the totals only grow.
// The task goroutine adds to them once per batch; Observe reads them.
type subtaskObs struct {
	// out counts records emitted on the main output (link.Emit); in counts
	// records read from channels (the head of an operator chain only).
	out, in atomic.Int64
	// blocked is the time in ns the task waited on full channels; only the
	// head link's counter is written (a chain blocks as one).
	blocked atomic.Int64
	// wm is the link's watermark (link.advance).
	wm atomic.Int64

	// Set at build, under the observer's mutex.
	// head is the chain's first link (itself for the head), prev the link
	// before it in the chain (nil for the head): a chained link's input is
	// its predecessor's output.
	head, prev *subtaskObs
	source     bool
	// outAtRestore is out when the current attempt started (sources).
	outAtRestore int64
}

// observe returns the counters as a SubtaskObservation. The caller holds the
// observer's mutex.
func (c *subtaskObs) observe(id checkpoint.TaskID) SubtaskObservation {
	so := SubtaskObservation{Task: id, RecordsOut: c.out.Load(), Watermark: c.wm.Load(),
		Backpressure: time.Duration(c.head.blocked.Load())}
	switch {
	case c.source:
		so.RecordsIn = so.RecordsOut
		so.ReadSinceRestore = so.RecordsOut - c.outAtRestore
	case c.prev != nil:
		so.RecordsIn = c.prev.out.Load()
	default:
		so.RecordsIn = c.in.Load()
	}
	return so
}

// recoveryKey is a cause and error class of recoveries.
type recoveryKey struct{ cause, class string }

// triggerResult answers a TriggerCheckpoint.
type triggerResult struct {
	id  int64
	err error
}

// observer collects what Job.Observe reports. Its zero value is ready.
type observer struct {
	// clock is the job's clock: the times of the status are on it.
	clock clock.Clock
	mu    sync.Mutex
	// subtasks are the counters of every node subtask built so far.
	subtasks map[checkpoint.TaskID]*subtaskObs
	// late are the nodes' late-record counters (late.go), by node id.
	late map[string]*lateRecords
	// kinds are the nodes' kinds, set at the first attempt.
	kinds map[string]NodeKind

	jobID     string
	phase     Phase
	startedAt time.Time
	attempt   int
	// failClass is the origin of the current attempt's failure when the
	// driver saw it ("commit", "checkpoint"); "" otherwise.
	failClass   string
	lastFailure *Failure

	history                                     history
	triggeredN, completedN, failedN, committedN int64
	// committing are the complete checkpoints whose commit is not yet
	// confirmed, increasing: the coordinator's (checkpoint.Status), as of
	// the attempt's last step; none once a recovery published them.
	committing                        []int64
	last                              *CompletedCheckpoint
	lastSizeFull, lastSizeIncremental int64
	// stateWrites[id][task] is the state file write time of a subtask whose
	// acknowledgement has not arrived yet.
	stateWrites map[int64]map[checkpoint.TaskID]time.Duration

	duration                                  histogram
	alignment, sync, async                    histograms
	storageWrite, sinkPrepare, sinkCommit     histograms
	recoveries                                map[recoveryKey]int64
	replayed, replayUnknown, retentionDeleted int64
	retentionTrimmed                          int64
	sweptStaged                               int64
	// positions[id][task] is a source subtask's out counter at barrier id
	// (or, for the checkpoint an attempt restored, when the attempt
	// started): where the source resumes when a recovery restores id.
	positions map[int64]map[checkpoint.TaskID]int64
	// restored is the checkpoint the current attempt restored (0: none); its
	// positions are kept however many newer ones there are.
	restored int64
	// recoveryLog are the last RecoveryLogSize recoveries, oldest first
	// (observe_recoveries.go).
	recoveryLog []RecoveryEvent

	// slowN counts slow checkpoints (slow_checkpoint.go), slowSinceWarn
	// those since the last warning, logged at slowWarnedAt; lastSlow is the
	// newest.
	slowN, slowSinceWarn int64
	slowWarnedAt         time.Time
	lastSlow             *SlowCheckpoint

	// req signals the driver that waiters want a checkpoint now.
	reqOnce sync.Once
	req     chan struct{}
	waiters []chan triggerResult
}

// maxPositions bounds the barrier positions kept for replay accounting: the
// newest complete checkpoints (and those in flight), which is where a
// recovery restores from.
const maxPositions = 16

// init allocates the maps; the caller holds mu.
func (ob *observer) init() {
	if ob.subtasks != nil {
		return
	}
	ob.subtasks = map[checkpoint.TaskID]*subtaskObs{}
	ob.alignment, ob.sync, ob.async = histograms{}, histograms{}, histograms{}
	ob.storageWrite, ob.sinkPrepare, ob.sinkCommit = histograms{}, histograms{}, histograms{}
	ob.recoveries = map[recoveryKey]int64{}
	ob.positions = map[int64]map[checkpoint.TaskID]int64{}
	ob.stateWrites = map[int64]map[checkpoint.TaskID]time.Duration{}
}

// recovering: attempt n begins its recovery (Job.runAttempt).
func (ob *observer) recovering(j *Job, n int) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	if ob.startedAt.IsZero() {
		ob.startedAt = ob.clock.Now()
	}
	if ob.kinds == nil {
		ob.kinds = nodeKinds(j.plan)
	}
	ob.phase, ob.attempt, ob.failClass = PhaseRecovering, n, ""
}

// endAttempt: an attempt ended with *errp (Job.runAttempt, deferred).
// Checkpoints still in flight failed with it.
func (ob *observer) endAttempt(errp *error) {
	err := *errp
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	now := ob.clock.Now()
	reason := "the job finished before it completed"
	if err == nil {
		ob.phase = PhaseFinished
	} else {
		origin := ob.failClass
		if ob.phase == PhaseRecovering {
			origin = "recovery"
		}
		ob.lastFailure = &Failure{At: now, Err: err.Error(), Class: classify(err, origin)}
		ob.phase = PhaseFailed
		reason = "the job failed before it completed: " + err.Error()
	}
	for _, r := range ob.history.inProgress() {
		r.end(CheckpointFailed, reason, now)
		ob.failedN++
	}
	clear(ob.stateWrites)
	for _, w := range ob.waiters {
		w <- triggerResult{err: fmt.Errorf("%w: the job attempt ended before a checkpoint was triggered", ErrNotRunning)}
	}
	ob.waiters = nil
}

// subtask returns the counters of link l, the last link of task t so far
// (build).
func (ob *observer) subtask(t *task, l *link) *subtaskObs {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	c := ob.subtasks[l.id]
	if c == nil {
		c = &subtaskObs{}
		ob.subtasks[l.id] = c
	}
	c.wm.Store(l.wm)
	c.source = l.node.NewSource != nil
	l.ctx.late = ob.lateOf(l.id.Operator)
	c.head, c.prev = c, nil
	if k := len(t.links); k > 1 {
		c.head, c.prev = t.links[0].obs, t.links[k-2].obs
	}
	return c
}

// started: attempt a recovered and its tasks start (attempt.drive). It
// counts the recovery and the records its sources will read again.
func (ob *observer) started(a *attempt) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	ob.phase, ob.jobID = PhaseRunning, a.rec.jobID
	var restored int64
	if m := a.rec.meta; m != nil {
		restored = m.ID
		ob.restoredCheckpoint(m)
	}
	ob.logRecovery(a.n, restored) // observe_recoveries.go
	switch {
	case a.n > 0:
		class := "unknown"
		if ob.lastFailure != nil {
			class = ob.lastFailure.Class
		}
		ob.recoveries[recoveryKey{"restart", class}]++
		if pos, ok := ob.positions[restored]; ok {
			for task, at := range pos {
				if c := ob.subtasks[task]; c != nil {
					ob.replayed += max(c.out.Load()-at, 0)
				}
			}
		} else {
			ob.replayUnknown++
		}
	case restored != 0:
		ob.recoveries[recoveryKey{"checkpoint", ""}]++
	}
	// The sources resume from the restored position now.
	pos := map[checkpoint.TaskID]int64{}
	for _, t := range a.sources {
		c := t.links[0].obs
		c.outAtRestore = c.out.Load()
		pos[t.links[0].id] = c.outAtRestore
	}
	ob.positions[restored], ob.restored = pos, restored
	ob.prunePositions()
	// The recovery published the recovery point's output and abandoned
	// everything staged after it: no commit is pending.
	ob.committing = nil
}

// restoredCheckpoint notes the checkpoint an attempt restored: the recovery
// point, complete even if this process saw its attempt fail before the
// metadata write was reported. The caller holds mu.
func (ob *observer) restoredCheckpoint(m *checkpoint.Metadata) {
	if r := ob.history.get(m.ID); r != nil && r.Status != CheckpointCompleted {
		if r.Status == CheckpointFailed {
			ob.failedN--
		}
		r.end(CheckpointCompleted, "", m.CompletedAt)
		ob.completedN++
		ob.duration.observe(r.Duration)
	}
	if ob.last == nil || ob.last.ID < m.ID {
		ob.last = &CompletedCheckpoint{ID: m.ID, TriggeredAt: m.TriggeredAt, CompletedAt: m.CompletedAt,
			Duration: m.CompletedAt.Sub(m.TriggeredAt), Restored: true}
		ob.lastSizeFull, ob.lastSizeIncremental = m.Size(), 0
	}
	// A recovery re-commits the recovery point's output: nothing of it or
	// before it is pending any more.
	ob.markCommitted(m.ID, ob.clock.Now())
}

// prunePositions keeps the newest maxPositions barrier positions and those
// of the restored checkpoint. The caller holds mu.
func (ob *observer) prunePositions() {
	for len(ob.positions) > maxPositions {
		oldest := int64(-1)
		for id := range ob.positions {
			if id != ob.restored && (oldest < 0 || id < oldest) {
				oldest = id
			}
		}
		delete(ob.positions, oldest)
	}
}

// barrier: source task t records its position for checkpoint id
// (task.checkpoint).
func (ob *observer) barrier(t *task, id int64) {
	if t.source == nil {
		return
	}
	head := t.links[0]
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	pos := ob.positions[id]
	if pos == nil {
		pos = map[checkpoint.TaskID]int64{}
		ob.positions[id] = pos
	}
	pos[head.id] = head.obs.out.Load()
	ob.prunePositions()
}

// stepped: the coordinator stepped ev, emitted acts and is now at st
// (attempt.step, before the actions are carried out). What the observer
// reports of the checkpoint protocol — triggers, acknowledgements,
// committables, failures, commits — it learns here, from the coordinator's
// own events, actions and status, and keeps no protocol state of its own.
func (ob *observer) stepped(ev checkpoint.Event, acts []checkpoint.Action, st checkpoint.Status) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	now := ob.clock.Now()
	switch e := ev.(type) {
	case checkpoint.Acked:
		ob.acked(e.ID, e.State)
	case checkpoint.Committed:
		if e.Err != nil {
			ob.failClass = "commit"
		} else {
			ob.markCommitted(e.ID, now)
		}
	}
	for _, act := range acts {
		switch x := act.(type) {
		case checkpoint.Trigger:
			ob.triggeredN++
			ob.history.add(&CheckpointRecord{ID: x.ID, Final: x.Final, Attempt: ob.attempt, Status: CheckpointInProgress,
				TriggeredAt: x.Timestamp, Tasks: st.Tasks})
			for _, w := range ob.waiters {
				w <- triggerResult{id: x.ID}
			}
			ob.waiters = nil
		case checkpoint.WriteMetadata:
			if r := ob.history.get(x.Metadata.ID); r != nil {
				r.Committables = map[string]int{}
				for _, c := range x.Metadata.Commits {
					if c.Checkpoint == x.Metadata.ID {
						r.Committables[c.Sink] += len(c.Committables)
					}
				}
			}
		case checkpoint.Abort:
			delete(ob.positions, x.ID)
			delete(ob.stateWrites, x.ID)
			if r := ob.history.get(x.ID); r != nil && r.Status == CheckpointInProgress {
				msg := "unknown"
				if x.Reason != nil {
					msg = x.Reason.Error()
				}
				r.end(CheckpointFailed, msg, now)
				ob.failedN++
			}
		case checkpoint.FailJob:
			// Too many consecutive checkpoint failures, unless a commit
			// failure came first.
			if ob.failClass == "" {
				ob.failClass = "checkpoint"
			}
		}
	}
	ob.committing = st.Committing
}

// acked: a subtask acknowledged checkpoint id with st. The caller holds mu.
func (ob *observer) acked(id int64, st checkpoint.SubtaskState) {
	r := ob.history.get(id)
	if r == nil || r.Status != CheckpointInProgress || slices.ContainsFunc(r.Subtasks, func(s SubtaskCheckpoint) bool { return s.Task == st.Task }) {
		return // a late or duplicate acknowledgement: the coordinator ignores it too
	}
	size := int64(len(st.Inline)) + st.StateWritten
	if st.State != nil {
		size += st.State.Size
	}
	reused := 0 // files of earlier checkpoints
	for _, h := range st.Shared {
		if h.Checkpoint != id {
			reused++
		}
	}
	r.ack(SubtaskCheckpoint{Task: st.Task, Sync: st.SyncDuration, Async: st.AsyncDuration, Alignment: st.Alignment,
		StateSize: size, StateReused: st.StateReused, SharedFiles: reused, StorageWrite: ob.stateWrites[id][st.Task]})
	delete(ob.stateWrites[id], st.Task)
	op := st.Task.Operator
	ob.alignment.observe(op, st.Alignment)
	ob.sync.observe(op, st.SyncDuration)
	ob.async.observe(op, st.AsyncDuration)
	if ob.kinds[op] == KindSink {
		ob.sinkPrepare.observe(op, st.SyncDuration)
	}
}

// stateWritten: a subtask's state file for checkpoint id was written in d
// (task.write).
func (ob *observer) stateWritten(id int64, task checkpoint.TaskID, d time.Duration) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	ob.storageWrite.observe("state", d)
	if r := ob.history.get(id); r == nil || r.Status != CheckpointInProgress {
		return
	}
	w := ob.stateWrites[id]
	if w == nil {
		w = map[checkpoint.TaskID]time.Duration{}
		ob.stateWrites[id] = w
	}
	w[task] = d
}

// metadataWritten: the metadata write of checkpoint id took d (attempt.act,
// on the storage goroutine).
func (ob *observer) metadataWritten(id int64, d time.Duration) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	ob.storageWrite.observe("metadata", d)
	if r := ob.history.get(id); r != nil {
		r.MetadataWrite = d
	}
}

// completed: checkpoint id is complete, took after its trigger
// (attempt.drive); interval is the checkpoint interval. It returns a slow
// checkpoint warning to log, if one is due (see slowCheckpoint).
func (ob *observer) completed(id int64, took, interval time.Duration) (warn *SlowCheckpoint, since int64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	ob.completedN++
	ob.duration.observe(took)
	delete(ob.stateWrites, id)
	r := ob.history.get(id)
	if r == nil {
		return nil, 0
	}
	r.end(CheckpointCompleted, "", r.TriggeredAt.Add(took))
	ob.last = &CompletedCheckpoint{ID: id, TriggeredAt: r.TriggeredAt, CompletedAt: r.EndedAt, Duration: took}
	ob.lastSizeFull, ob.lastSizeIncremental = r.StateSizeFull, r.StateSizeIncremental
	return ob.slowCheckpoint(r, took, interval)
}

// discarded: the data of checkpoint id was deleted (attempt.act, Discard).
// The coordinator discards complete checkpoints beyond the retention count
// and the partial state of failed or expired ones alike; only a checkpoint
// that completed counts as deleted by retention. One the history no longer
// knows (restored from an earlier process, or forgotten) can only have been
// retained, since a failed one is discarded when it fails.
func (ob *observer) discarded(id int64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if r := ob.history.get(id); r == nil || r.Status == CheckpointCompleted {
		ob.retentionDeleted++
	}
}

// trimmed: checkpoint id was trimmed to the files newer ones reference
// (attempt.act, Trim).
func (ob *observer) trimmed(int64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.retentionTrimmed++
}

// retained: retention at a recovery deleted n complete checkpoints
// (Job.cleanStorage, storage.Retain).
func (ob *observer) retained(n int) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.retentionDeleted += int64(n)
}

// swept: a sink deleted n abandoned staged items after a completed
// checkpoint (attempt.sweep).
func (ob *observer) swept(n int64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.sweptStaged += n
}

// sinkCommitted: sink published its part of a checkpoint's output in d
// (attempt.publish).
func (ob *observer) sinkCommitted(sink string, d time.Duration) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.init()
	ob.sinkCommit.observe(sink, d)
}

// markCommitted marks every complete checkpoint up to id committed: a
// commit publishes the output of every complete checkpoint up to its own. The
// caller holds mu.
func (ob *observer) markCommitted(id int64, now time.Time) {
	for _, r := range ob.history.byID {
		if r.ID <= id && r.Status == CheckpointCompleted && !r.Committed {
			r.Committed, r.CommittedAt = true, now
			ob.committedN++
		}
	}
}

// reqChan returns the channel that signals trigger requests to the driver.
func (ob *observer) reqChan() chan struct{} {
	ob.reqOnce.Do(func() { ob.req = make(chan struct{}, 1) })
	return ob.req
}

// requests is what the driver selects on for trigger requests.
func (ob *observer) requests() <-chan struct{} { return ob.reqChan() }

// wantTrigger registers a TriggerCheckpoint waiting for the next trigger
// and signals the driver.
func (ob *observer) wantTrigger() chan triggerResult {
	w := make(chan triggerResult, 1)
	ob.mu.Lock()
	ob.waiters = append(ob.waiters, w)
	ob.mu.Unlock()
	select {
	case ob.reqChan() <- struct{}{}:
	default: // a signal is pending already
	}
	return w
}

// dropWaiter forgets a waiter that gave up.
func (ob *observer) dropWaiter(w chan triggerResult) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.waiters = slices.DeleteFunc(ob.waiters, func(x chan triggerResult) bool { return x == w })
}

// requestCheckpoint asks the coordinator for a checkpoint now when a
// TriggerCheckpoint waits for one (attempt.drive).
func (a *attempt) requestCheckpoint() []checkpoint.Action {
	a.job.obs.mu.Lock()
	waiting := len(a.job.obs.waiters) > 0
	a.job.obs.mu.Unlock()
	if !waiting {
		return nil
	}
	return a.step(checkpoint.TriggerNow{})
}

// blockedSince adds the time since start to the backpressure counter
// (channels.send, deferred when it found the channel full). One producer
// writes each channel, so a channel with room cannot fill before the send:
// only sends that found it full can wait.
func (c *channels) blockedSince(start time.Time) { c.blocked.Add(int64(time.Since(start))) }

// classify returns the class of an attempt failure (ErrorClass); origin is
// where the driver saw it fail ("recovery", "commit", "checkpoint") or "".
// A new class of a failure the job restarts after belongs in RestartClasses,
// or its recoveries' series is absent until the first one.
func classify(err error, origin string) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrIncompatible):
		return "incompatible"
	case errors.Is(err, ErrUnrecoverable):
		return "unrecoverable"
	case errors.Is(err, storage.ErrLocked):
		return "lock"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case origin != "":
		return origin
	case strings.Contains(err.Error(), ": panic: "):
		return "panic"
	case errors.Is(err, failpoint.ErrInjected):
		return "injected"
	case errors.Is(err, storage.ErrCorrupt):
		return "corrupt"
	}
	return "task"
}

// sortedRecoveries returns the recovery counts by cause, then class.
func sortedRecoveries(m map[recoveryKey]int64) []RecoveryCount {
	out := make([]RecoveryCount, 0, len(m))
	for k, n := range m {
		out = append(out, RecoveryCount{Cause: k.cause, Class: k.class, Count: n})
	}
	slices.SortFunc(out, func(a, b RecoveryCount) int {
		return cmp.Or(cmp.Compare(a.Cause, b.Cause), cmp.Compare(a.Class, b.Class))
	})
	return out
}
