package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// Config describes the job a Coordinator coordinates.
type Config struct {
	Options  Options
	Pipeline string
	// JobID identifies the job across restarts; it is written into every
	// metadata file.
	JobID string
	// Tasks lists every subtask that must acknowledge a checkpoint.
	Tasks []TaskID
	// Restored is the id of the complete checkpoint the job was restored from,
	// 0 on a fresh start. It is the recovery point until a newer one completes.
	Restored int64
	// Retained lists the complete checkpoints kept in storage, increasing; it
	// includes Restored. Retention discards the oldest when newer ones complete.
	Retained []int64
	// References maps a checkpoint of Retained to the files of earlier
	// checkpoints its state builds on (Metadata.SharedFiles). The newest
	// Options.Retain of Retained (and Restored) are retained; an older one
	// that they reference (directly: the references of a checkpoint name
	// every file it reads) starts held (see Coordinator.Held) and is trimmed
	// to the files referenced at the first Step, every other one retained
	// until the next completion retires it. Such a leftover may have been
	// held before, for its files only, and miss what it referenced itself:
	// it is no recovery point. Nil means no checkpoint references another, as
	// with full snapshots. References to checkpoints neither in Retained nor
	// in Held are ignored: nothing of them is left to keep (an ack that still
	// names one fails its checkpoint).
	References map[int64][]storage.FileRef
	// Held lists the checkpoints present in storage without metadata because
	// they were trimmed (Trim, storage.Storage.Trim: a recovery's retention
	// pass, storage.Retain, trims the same way): each holds the files of it
	// that References name and nothing anyone needs besides. Each starts held
	// with those files and is discarded at the first Step if no retained
	// checkpoint references any of them. Ids in Retained or not below NextID
	// do not belong here.
	Held []int64
	// NextID is the id of the next checkpoint; it must be greater than every id
	// present in storage and every id the ledger reserved, so a new checkpoint
	// never reuses an old one's id.
	NextID int64
	// Reserved is the highest id the durable ledger reserves (Ledger.Reserved).
	// The coordinator triggers no id above the reservation of a durable ledger:
	// it asks for more with WriteLedger first.
	Reserved int64
}

// Coordinator decides when checkpoints start, when they are complete, and what
// is published and deleted. It is a pure state machine: Step takes the current
// time and one event and returns the actions the caller must carry out (see
// each Action's obligations). It is not safe for concurrent use; one
// goroutine owns it.
//
// Retention is reference-counted per file (issue #14): a checkpoint's state
// may build on files of earlier checkpoints (SubtaskState.Shared,
// Metadata.SharedFiles), and an LSM backend's files may be referenced for
// thousands of checkpoints. The coordinator keeps the newest Options.Retain
// complete checkpoints whole (Retained), and of the complete checkpoints
// beyond them (Held) exactly the files still needed: those a retained
// checkpoint references (directly: a checkpoint's references name every file
// it reads, see live), those a failed metadata write not yet recorded in the
// ledger references, and everything a pending checkpoint may build on. A held
// checkpoint is trimmed (Trim: its metadata goes first, then every file not
// needed) when it becomes held and again whenever what is needed of it
// shrinks, and discarded when nothing of it is needed. Its invariants:
//   - no file that a retained checkpoint or an unrecorded failed write
//     references, or that a pending checkpoint may build on, is ever deleted
//     (by a Discard or a Trim);
//   - a pending checkpoint may build on any file in storage at its trigger:
//     a checkpoint retained or held then is neither trimmed further nor
//     discarded until it completes or fails (it is protected whole);
//   - an acknowledgement that references a file no longer kept (trimmed
//     away, or of a checkpoint discarded or never complete) fails its
//     checkpoint: no checkpoint completes with a dangling reference;
//   - a held checkpoint is no recovery point: it is trimmed, which deletes
//     its metadata, as soon as no pending checkpoint protects it whole, and
//     what it references itself is not kept for it;
//   - the Discard of a failed, abandoned or late-acknowledged checkpoint
//     never names a retained or held one;
//   - a held checkpoint is trimmed or discarded in the step that ends the
//     need for what goes, never before, and its Trim or Discard comes before
//     those of the checkpoints it references.
//
// Without references only pending checkpoints hold checkpoints: with
// MaxConcurrent > 1, a checkpoint leaving the retained set while a newer one
// is pending is discarded once the newer ones end.
type Coordinator struct {
	cfg   Config
	tasks map[TaskID]bool

	// nextID is the id the next Trigger uses.
	// INVARIANT: nextID > every id triggered by this coordinator or present in
	// storage when it was created.
	nextID int64
	// pending are the triggered checkpoints that are neither complete nor failed,
	// by id.
	// INVARIANT: len(pending) <= Options.MaxConcurrent.
	pending map[int64]*pendingCheckpoint
	// latest is the recovery point: the newest checkpoint whose metadata was
	// reported durable (or the restored one). It only grows.
	latest int64
	// retained are the complete checkpoints kept in storage as recovery
	// points, increasing: the newest Options.Retain of them once one
	// completed.
	// INVARIANT: latest is the last element when any checkpoint is complete.
	retained []int64
	// held are the complete checkpoints that left the retained set but of
	// which something stays in storage, increasing: a retained checkpoint
	// references some of their files (refs), a pending checkpoint may build
	// on them (pendingCheckpoint.protects), or a failed metadata write whose
	// outcome is unknown references some of their files (unrecordedRefs).
	// They are not recovery points, their own references keep nothing, and
	// they do not count against Options.Retain.
	// INVARIANT: every held checkpoint is live (see live); it is Discarded in
	// the step that makes it not live, and never before.
	// INVARIANT: retained and held are disjoint, and no pending id is in either.
	held []int64
	// trimmed are the files each held checkpoint keeps since its last Trim,
	// sorted; a held checkpoint without an entry is whole (its metadata and
	// every file are in storage).
	// INVARIANT: at the end of every Step, a held checkpoint that no pending
	// checkpoint protects whole is trimmed to exactly what live needs of it;
	// an entry never gains a name (what a Trim deleted is gone).
	trimmed map[int64][]string
	// refs are the files of earlier checkpoints (Metadata.SharedFiles) that
	// each retained or whole held checkpoint references, when it has any.
	refs map[int64][]storage.FileRef
	// unrecordedRefs are the references of each checkpoint of unrecorded: its
	// metadata may have landed, and until the ledger records it as failed a
	// recovery may restore it, so what it references stays in storage.
	unrecordedRefs map[int64][]storage.FileRef
	// uncommitted are the commits of complete checkpoints not yet confirmed
	// published, in checkpoint order. Every new metadata carries them, so a
	// recovery from any later checkpoint publishes them too.
	uncommitted []Commit
	// committing is the id of every CommitOutput emitted and not yet reported.
	committing []int64

	clockStarted   bool
	lastTrigger    time.Time
	lastCompletion time.Time
	failures       int // consecutive checkpoint failures

	finalRequested bool
	finalID        int64 // the final checkpoint in flight or complete, 0 if none
	finalComplete  bool
	stopped        bool // a task failed or FailJob was emitted: trigger nothing more
	// jobFailed is set once FailJob was emitted.
	// INVARIANT: once set, Step returns no actions.
	jobFailed bool

	// triggerRequested is set by TriggerNow until the next trigger.
	triggerRequested bool

	// reserved is the highest id a durable ledger reserves.
	// INVARIANT: every id triggered is <= reserved at the time of its trigger.
	reserved int64
	// ledgerWrite is the WriteLedger in flight, nil when none is.
	// INVARIANT: at most one is in flight.
	ledgerWrite *WriteLedger
	// unrecorded are the checkpoints whose metadata write failed and that no
	// durable ledger records as failed yet, increasing.
	// INVARIANT: no metadata write starts while unrecorded is not empty.
	unrecorded []int64
	// ledgerRetryAt is when a failed ledger write may be tried again.
	ledgerRetryAt time.Time
	// collectDue is set when something that keeps files in storage ended
	// (a pending checkpoint, a retirement, an unrecorded failure, the
	// startup state): Step then runs collect once, at its end.
	// INVARIANT: false between steps.
	collectDue bool
}

// ledgerRetryPause is how long the coordinator waits after a failed ledger
// write before it tries again (each failure counts among the tolerable
// checkpoint failures).
const ledgerRetryPause = time.Second

// pendingCheckpoint is a triggered checkpoint collecting acknowledgements, or
// one whose metadata is being written.
type pendingCheckpoint struct {
	id          int64
	triggeredAt time.Time
	final       bool
	acks        map[TaskID]SubtaskState
	// acked is set once every task acknowledged; the checkpoint then waits
	// for its turn to write metadata.
	acked bool
	// writing is set once WriteMetadata was emitted: from then on only the
	// write's result decides the checkpoint's fate (the coordinator's timeout
	// no longer applies, since the write may already have made it complete;
	// the caller bounds the write by the same deadline, see WriteMetadata).
	// INVARIANT: at most one pending checkpoint is writing. Metadata is built
	// when the write starts, after every older write finished, so its commits
	// account for every checkpoint that completed before it.
	writing bool
	// meta is the metadata handed to WriteMetadata, once writing.
	meta *Metadata
	// protects are the files this one may build on, by checkpoint: every
	// file in storage when it was triggered (an incremental snapshot takes
	// its base from those: all of every retained and whole held checkpoint,
	// the files each trimmed one keeps), and every file its acknowledgements
	// reference.
	// INVARIANT: while p is pending, none of them is deleted, so an
	// acknowledgement that references one of them never dangles.
	protects map[int64]*fileSet
}

// New returns a coordinator for cfg.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint options: %w", err)
	}
	if len(cfg.Tasks) == 0 {
		return nil, errors.New("checkpoint coordinator needs at least one task")
	}
	if cfg.NextID <= cfg.Restored {
		return nil, fmt.Errorf("next checkpoint id %d must be greater than the restored id %d", cfg.NextID, cfg.Restored)
	}
	tasks := make(map[TaskID]bool, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		if tasks[t] {
			return nil, fmt.Errorf("task %v listed twice", t)
		}
		tasks[t] = true
	}
	kept := slices.Clone(cfg.Retained)
	if cfg.Restored != 0 {
		kept = append(kept, cfg.Restored)
	}
	slices.Sort(kept)
	kept = slices.Compact(kept)
	var trimmed []int64
	for _, id := range cfg.Held {
		if id >= cfg.NextID {
			return nil, fmt.Errorf("held checkpoint %d must be below the next checkpoint id %d", id, cfg.NextID)
		}
		if !slices.Contains(kept, id) {
			trimmed = append(trimmed, id)
		}
	}
	slices.Sort(trimmed)
	trimmed = slices.Compact(trimmed)
	c := &Coordinator{
		cfg:            cfg,
		tasks:          tasks,
		nextID:         cfg.NextID,
		pending:        map[int64]*pendingCheckpoint{},
		latest:         cfg.Restored,
		reserved:       cfg.Reserved,
		trimmed:        map[int64][]string{},
		refs:           map[int64][]storage.FileRef{},
		unrecordedRefs: map[int64][]storage.FileRef{},
	}
	for _, id := range kept {
		var rs []storage.FileRef
		for _, r := range cfg.References[id] {
			if r.Checkpoint != id && (slices.Contains(kept, r.Checkpoint) || slices.Contains(trimmed, r.Checkpoint)) {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			slices.SortFunc(rs, storage.FileRef.Compare)
			c.refs[id] = slices.Compact(rs)
		}
	}
	// The newest Retain (and the restored one) are retained; of the older
	// ones, those they reference are held (whole until the first Step trims
	// them), and the others stay retained until the next completion retires
	// them, as without references.
	newest := kept[max(0, len(kept)-cfg.Options.Retain):]
	roots := slices.Clone(newest)
	if cfg.Restored != 0 && !slices.Contains(roots, cfg.Restored) {
		roots = append(roots, cfg.Restored)
	}
	referenced := map[int64]bool{}
	for _, id := range roots {
		for _, r := range c.refs[id] {
			referenced[r.Checkpoint] = true
		}
	}
	for _, id := range kept {
		if !slices.Contains(roots, id) && referenced[id] {
			c.held = append(c.held, id)
		} else {
			c.retained = append(c.retained, id)
		}
	}
	// A trimmed checkpoint holds what the retained ones reference of it (the
	// first Step discards one they reference nothing of).
	for _, id := range trimmed {
		c.held = append(c.held, id)
		var names []string
		for _, r := range c.retained {
			for _, ref := range c.refs[r] {
				if ref.Checkpoint == id {
					names = append(names, ref.Name)
				}
			}
		}
		slices.Sort(names)
		c.trimmed[id] = slices.Compact(names)
	}
	slices.Sort(c.held)
	return c, nil
}

// LatestComplete returns the recovery point: the newest complete checkpoint
// (0 if none).
func (c *Coordinator) LatestComplete() int64 { return c.latest }

// Pending returns the ids of the checkpoints in flight, increasing.
func (c *Coordinator) Pending() []int64 {
	ids := make([]int64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Retained returns the complete checkpoints kept as recovery points,
// increasing: the newest Options.Retain complete ones (after a restart,
// until the next completion, possibly more: older checkpoints of
// Config.Retained that no newer one references, which are kept as without
// references but, held before, may miss files they referenced; see
// Config.References). The last is LatestComplete.
func (c *Coordinator) Retained() []int64 { return slices.Clone(c.retained) }

// Held returns the complete checkpoints of which something is kept in
// storage although they left the retained set, increasing: a retained
// checkpoint references some of their files, a pending checkpoint may build
// on them, or a failed metadata write whose outcome is not yet recorded
// references some of their files. Each is trimmed to what is still needed of
// it (see Trimmed) and discarded in the step that ends the last need. A held
// checkpoint is no recovery point: what it references itself is not kept for
// it (see Coordinator).
func (c *Coordinator) Held() []int64 { return slices.Clone(c.held) }

// Trimmed returns the files held checkpoint id keeps since its last Trim,
// sorted, and true; false when id is not held, or held whole (a pending
// checkpoint may build on any of its files).
func (c *Coordinator) Trimmed(id int64) ([]string, bool) {
	names, ok := c.trimmed[id]
	return slices.Clone(names), ok
}

// ConsecutiveFailures returns the number of checkpoints that failed since the
// last one completed.
func (c *Coordinator) ConsecutiveFailures() int { return c.failures }

// Step advances the coordinator by one event at time now and returns the
// actions the caller must carry out, in order.
func (c *Coordinator) Step(now time.Time, ev Event) []Action {
	if c.jobFailed {
		return nil
	}
	var out []Action
	if !c.clockStarted {
		// The first periodic checkpoint comes one interval after the job starts.
		c.clockStarted = true
		c.lastTrigger = now
		// What Config left held is trimmed to what is needed of it, or
		// discarded, in this step.
		c.collectDue = true
	}
	out = c.expire(now, out)
	switch e := ev.(type) {
	case Tick:
	case RequestFinal:
		c.finalRequested = true
	case TriggerNow:
		c.triggerRequested = true
	case Acked:
		out = c.acked(now, e, out)
	case Declined:
		if p := c.pending[e.ID]; p != nil && !p.acked && c.tasks[e.Task] {
			out = c.fail(p, fmt.Errorf("declined by %v: %w", e.Task, e.Reason), out)
		}
	case TaskFailed:
		out = c.taskFailed(e, out)
	case MetadataWritten:
		out = c.metadataWritten(now, e, out)
	case Committed:
		out = c.committed(e, out)
	case LedgerWritten:
		out = c.ledgerWritten(now, e, out)
	}
	if len(c.unrecorded) > 0 {
		out = c.requestLedger(now, out)
	}
	if c.collectDue && !c.jobFailed {
		// Once per step, after everything that ends a need for files, and
		// before a trigger protects what is in storage.
		c.collectDue = false
		out = c.collect(out)
	}
	return c.maybeTrigger(now, out)
}

// requestLedger emits a WriteLedger that records every unrecorded failure
// and, when the next id is not reserved, reserves IDReservation more ids;
// unless a write is in flight, the job is stopping, or a failed write's
// retry pause has not passed.
func (c *Coordinator) requestLedger(now time.Time, out []Action) []Action {
	if c.ledgerWrite != nil || c.stopped || now.Before(c.ledgerRetryAt) {
		return out
	}
	w := WriteLedger{Reserved: c.reserved, Failed: slices.Clone(c.unrecorded)}
	if c.nextID > c.reserved {
		w.Reserved = c.nextID + IDReservation - 1
	}
	if w.Reserved == c.reserved && len(w.Failed) == 0 {
		return out
	}
	c.ledgerWrite = &w
	return append(out, w)
}

func (c *Coordinator) ledgerWritten(now time.Time, e LedgerWritten, out []Action) []Action {
	w := c.ledgerWrite
	if w == nil || w.Reserved != e.Reserved || !slices.Equal(w.Failed, e.Failed) {
		return out // a duplicate or stale result
	}
	c.ledgerWrite = nil
	if e.Err != nil {
		c.ledgerRetryAt = now.Add(ledgerRetryPause)
		return c.countFailure(fmt.Errorf("writing the checkpoint ledger: %w", e.Err), out)
	}
	c.reserved = max(c.reserved, e.Reserved)
	c.unrecorded = slices.DeleteFunc(c.unrecorded, func(id int64) bool { return slices.Contains(e.Failed, id) })
	for _, id := range e.Failed {
		// A recovery discards a recorded failure instead of restoring it:
		// what only it referenced may go.
		delete(c.unrecordedRefs, id)
	}
	c.collectDue = true
	return c.startWrite(now, out)
}

// expire fails every collecting checkpoint older than the timeout.
func (c *Coordinator) expire(now time.Time, out []Action) []Action {
	for _, id := range c.Pending() {
		p := c.pending[id]
		if !p.writing && now.Sub(p.triggeredAt) >= c.cfg.Options.Timeout {
			out = c.fail(p, fmt.Errorf("timed out after %v with %d of %d acknowledgements", c.cfg.Options.Timeout, len(p.acks), len(c.tasks)), out)
		}
	}
	return out
}

func (c *Coordinator) acked(now time.Time, e Acked, out []Action) []Action {
	p := c.pending[e.ID]
	if p == nil {
		// A late acknowledgement of a checkpoint that failed or expired: the
		// state it wrote belongs to no checkpoint and is deleted. Retained
		// and held checkpoints are never discarded (a duplicate ack of one is
		// ignored).
		if e.ID < c.nextID && !c.kept(e.ID) && e.ID != c.latest {
			out = append(out, Discard{ID: e.ID})
		}
		return out
	}
	if !c.tasks[e.State.Task] || p.acked {
		return out // unknown task, or a duplicate after every task acked
	}
	if _, dup := p.acks[e.State.Task]; dup {
		return out
	}
	// Every file the state builds on must still be in storage, and stay
	// there: a checkpoint with a dangling reference could not be restored.
	for _, h := range e.State.Shared {
		if h.Checkpoint == e.ID {
			continue
		}
		f := p.protects[h.Checkpoint]
		if f != nil && f.has(h.Name) {
			continue
		}
		if cur, ok := c.files(h.Checkpoint); !ok || !cur.has(h.Name) {
			return c.fail(p, fmt.Errorf("%v references file %q of checkpoint %d, which is not kept in storage (trimmed away, discarded, or never complete)",
				e.State.Task, h.Name, h.Checkpoint), out)
		}
		if f == nil {
			f = &fileSet{}
			p.protects[h.Checkpoint] = f
		}
		f.add(h.Name)
	}
	p.acks[e.State.Task] = e.State
	if len(p.acks) < len(c.tasks) {
		return out
	}
	p.acked = true
	return c.startWrite(now, out)
}

// startWrite emits WriteMetadata for the oldest fully acknowledged checkpoint
// when no other metadata write is in flight. Writes are serialised so each
// checkpoint's commits are computed knowing the fate of every older one: with
// two writes in flight, the newer metadata would list committables the older
// one also publishes.
func (c *Coordinator) startWrite(now time.Time, out []Action) []Action {
	var next *pendingCheckpoint
	for _, id := range c.Pending() {
		p := c.pending[id]
		if p.writing {
			return out
		}
		if p.acked && next == nil {
			next = p
		}
	}
	if next == nil || c.stopped || len(c.unrecorded) > 0 {
		return out
	}
	next.writing = true
	next.meta = c.buildMetadata(now, next)
	return append(out, WriteMetadata{Metadata: next.meta})
}

// buildMetadata assembles the metadata of p once every task acknowledged.
//
// Commits are: first the uncommitted commits of earlier complete checkpoints,
// then, per sink, the committables of this checkpoint's acknowledgements that
// no complete checkpoint published yet. A committable prepared at P is
// reported by its subtask until the subtask learns that a checkpoint >= P
// completed, so it is in the acknowledgements of the first complete checkpoint
// Q >= P; every committable with PreparedAt <= latest is therefore already in
// an earlier complete checkpoint's commits and is skipped here. This makes
// each staged output part of exactly one complete checkpoint.
func (c *Coordinator) buildMetadata(now time.Time, p *pendingCheckpoint) *Metadata {
	m := &Metadata{
		Version:     MetadataVersion,
		Pipeline:    c.cfg.Pipeline,
		JobID:       c.cfg.JobID,
		ID:          p.id,
		Final:       p.final,
		TriggeredAt: p.triggeredAt,
		CompletedAt: now,
	}
	for _, s := range p.acks {
		m.Tasks = append(m.Tasks, s)
	}
	slices.SortFunc(m.Tasks, func(a, b SubtaskState) int { return a.Task.Compare(b.Task) })
	m.Commits = slices.Clone(c.uncommitted)
	for _, s := range m.Tasks {
		var fresh [][]byte
		for _, cm := range s.Committables {
			if cm.PreparedAt > c.latest {
				fresh = append(fresh, cm.Data)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if n := len(m.Commits); n > 0 && m.Commits[n-1].Checkpoint == p.id && m.Commits[n-1].Sink == s.Task.Operator {
			m.Commits[n-1].Committables = append(m.Commits[n-1].Committables, fresh...)
			continue
		}
		m.Commits = append(m.Commits, Commit{Checkpoint: p.id, Sink: s.Task.Operator, Committables: fresh})
	}
	return m
}

func (c *Coordinator) metadataWritten(now time.Time, e MetadataWritten, out []Action) []Action {
	p := c.pending[e.ID]
	if p == nil || !p.writing {
		return out
	}
	if e.Err != nil {
		// The write may have landed although it reported failure (storage
		// undoes such a write, but the undo can fail too): p may be complete
		// on storage, and a recovery would restore it. An older checkpoint
		// must not complete and publish after it, as after p's completion:
		// abandon them too (TestCommitSimulation, -commitseed=369542).
		for _, id := range c.Pending() {
			if q := c.pending[id]; id < p.id && !q.writing {
				out = c.abandon(q, fmt.Errorf("the metadata write of newer checkpoint %d failed and may have landed: %w", p.id, e.Err), out)
			}
		}
		// Until the ledger records p as failed, no newer checkpoint may
		// complete (startWrite waits): a recovery after that would restore p.
		// For the same reason what p references stays in storage until then.
		c.unrecorded = append(c.unrecorded, p.id)
		if rs := p.meta.SharedFiles(); len(rs) > 0 {
			c.unrecordedRefs[p.id] = rs
		}
		out = c.fail(p, fmt.Errorf("writing metadata: %w", e.Err), out)
		return c.requestLedger(now, out)
	}
	// The metadata is durable: p is complete and the new recovery point.
	delete(c.pending, p.id)
	c.latest = p.id
	c.failures = 0
	c.lastCompletion = now
	c.retained = append(c.retained, p.id)
	if rs := p.meta.SharedFiles(); len(rs) > 0 {
		c.refs[p.id] = rs
	}
	c.retire()
	if p.final {
		c.finalComplete = true
	}
	// Older pending checkpoints are subsumed: p's commits include whatever they
	// staged, and completions must stay in id order.
	for _, id := range c.Pending() {
		if id < p.id {
			out = c.abandon(c.pending[id], fmt.Errorf("subsumed by complete checkpoint %d", p.id), out)
		}
	}
	if c.stopped {
		// A task failed while this metadata was being written. The checkpoint
		// is complete, but the recovery that follows publishes its output.
		return out
	}
	out = append(out, NotifyComplete{ID: p.id})
	for _, cm := range p.meta.Commits {
		if cm.Checkpoint == p.id {
			c.uncommitted = append(c.uncommitted, cm)
		}
	}
	c.committing = append(c.committing, p.id)
	out = append(out, CommitOutput{ID: p.id, Commits: slices.Clone(c.uncommitted), TriggeredAt: p.triggeredAt, Final: p.final})
	return c.startWrite(now, out)
}

func (c *Coordinator) committed(e Committed, out []Action) []Action {
	i := slices.Index(c.committing, e.ID)
	if i < 0 || c.stopped {
		return out
	}
	c.committing = slices.Delete(c.committing, i, i+1)
	if e.Err != nil {
		c.stopped, c.jobFailed = true, true
		return append(out, FailJob{Err: fmt.Errorf("committing output of checkpoint %d: %w", e.ID, e.Err)})
	}
	c.uncommitted = slices.DeleteFunc(c.uncommitted, func(cm Commit) bool { return cm.Checkpoint <= e.ID })
	if c.finalComplete && e.ID == c.finalID && len(c.committing) == 0 {
		out = append(out, Finished{ID: e.ID})
	}
	return out
}

func (c *Coordinator) taskFailed(e TaskFailed, out []Action) []Action {
	for _, id := range c.Pending() {
		if p := c.pending[id]; !p.writing {
			out = c.abandon(p, fmt.Errorf("task %v failed: %w", e.Task, e.Err), out)
		}
	}
	c.stopped = true
	return out
}

// fail records a checkpoint failure: the checkpoint is abandoned, the recovery
// point is unchanged, and the job fails only when the failures exceed the
// tolerance.
func (c *Coordinator) fail(p *pendingCheckpoint, reason error, out []Action) []Action {
	out = c.abandon(p, reason, out)
	return c.countFailure(fmt.Errorf("checkpoint %d: %w", p.id, reason), out)
}

// countFailure counts one checkpoint failure and fails the job when the
// failures exceed the tolerance.
func (c *Coordinator) countFailure(reason error, out []Action) []Action {
	c.failures++
	if c.failures > c.cfg.Options.TolerableFailures && !c.stopped {
		c.stopped, c.jobFailed = true, true
		out = append(out, FailJob{Err: fmt.Errorf("%d consecutive checkpoint failures exceed the tolerance of %d; last: %w",
			c.failures, c.cfg.Options.TolerableFailures, reason)})
	}
	return out
}

// abandon removes p without counting a failure: its partial state is
// discarded, and so, at the end of the step, is what of the held checkpoints
// only p kept live.
func (c *Coordinator) abandon(p *pendingCheckpoint, reason error, out []Action) []Action {
	delete(c.pending, p.id)
	if p.final {
		c.finalID = 0 // request it again
	}
	out = append(out, Abort{ID: p.id, Reason: reason})
	if !c.kept(p.id) { // INVARIANT: never, since ids are not reused; stated for the Discard
		out = append(out, Discard{ID: p.id})
	}
	c.collectDue = true
	return out
}

// maybeTrigger starts a checkpoint when the settings allow one.
func (c *Coordinator) maybeTrigger(now time.Time, out []Action) []Action {
	if c.stopped || c.finalID != 0 || len(c.pending) >= c.cfg.Options.MaxConcurrent {
		return out
	}
	o := c.cfg.Options
	final := c.finalRequested
	if !final && !c.triggerRequested {
		if o.Interval == 0 || now.Before(c.lastTrigger.Add(o.Interval)) {
			return out
		}
		if o.MinPause > 0 && (len(c.pending) > 0 || (!c.lastCompletion.IsZero() && now.Before(c.lastCompletion.Add(o.MinPause)))) {
			return out
		}
	}
	if c.nextID > c.reserved {
		// The id is not reserved yet: reserve it (and the next ones) first.
		return c.requestLedger(now, out)
	}
	id := c.nextID
	c.nextID++
	c.lastTrigger, c.triggerRequested = now, false
	// The new checkpoint may build on anything in storage now.
	c.pending[id] = &pendingCheckpoint{id: id, triggeredAt: now, final: final, acks: map[TaskID]SubtaskState{}, protects: c.protectAtTrigger()}
	if final {
		c.finalID = id
	}
	return append(out, Trigger{ID: id, Timestamp: now, Final: final})
}

// TriggerNow asks for a checkpoint as soon as the max concurrent checkpoints
// allow one, ignoring the interval and the min pause (an operator's manual
// checkpoint: Flink's triggerCheckpoint). The next trigger of any kind
// satisfies the request; none follows once the final checkpoint is
// requested or the job is failing.
type TriggerNow struct{}

func (TriggerNow) isEvent() {}
