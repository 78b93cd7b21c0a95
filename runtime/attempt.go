package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// channelCapacity is how many messages (batches or control events) a channel
// between two subtasks holds; a full channel is backpressure.
const channelCapacity = 8

// tickInterval is how often the coordinator is ticked.
const tickInterval = 10 * time.Millisecond

type eventKind uint8

const (
	evAck eventKind = iota
	evDecline
	evFailed
	evSourceFinished
	evExited
	evMetadataWritten
	evCommitted
	evLedgerWritten
)

// taskEvent is what subtasks and the job's workers report to the driver.
type taskEvent struct {
	kind  eventKind
	task  checkpoint.TaskID
	id    int64
	state checkpoint.SubtaskState
	err   error
	// took is a checkpoint's time from trigger to durable metadata
	// (evMetadataWritten).
	took time.Duration
	// ledger is the ledger write an evLedgerWritten reports.
	ledger checkpoint.WriteLedger
}

// attempt is one run of the job, from recovery to finish or failure.
type attempt struct {
	job    *Job
	n      int
	rec    *recovery
	ctx    context.Context
	cancel context.CancelCauseFunc
	events chan taskEvent
	tasks  []*task
	// sources are the tasks whose head is a source.
	sources []*task
	coord   *checkpoint.Coordinator
	// gate holds every task after Open until all have opened and their
	// states fit the recovery point (startgate.go).
	gate *startGate
	// writing maps each checkpoint whose metadata write is in flight to when
	// it started; driver goroutine only (see warnStalledWrites).
	writing map[int64]*metadataWrite
	// async tracks snapshot writers; store and commit run the job's storage
	// writes and sink commits one at a time, in order.
	async  sync.WaitGroup
	store  *serial
	commit *serial
	// ledger is the durable checkpoint ledger; the store goroutine only
	// (WriteLedger actions run there, one at a time).
	ledger checkpoint.Ledger
	// cleanups are the Discards and Trims that failed or wait for one
	// that failed, in emission order; the store goroutine only (cleanup).
	cleanups []pendingCleanup
	// backends are the subtasks' state backends, closed by shutdown (or
	// by build when it fails).
	backends []*state.Backend
}

// build creates channels, tasks and the coordinator for one attempt.
func (j *Job) build(ctx context.Context, n int, rec *recovery) (_ *attempt, err error) {
	if err := j.checkPlanMatches(rec); err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancelCause(ctx)
	a := &attempt{job: j, n: n, rec: rec, ctx: actx, cancel: cancel, events: make(chan taskEvent, 1024)}
	defer func() {
		if err != nil {
			a.closeBackends()
		}
	}()
	p := j.plan
	maxP := p.MaxParallelism

	// The physical plan says what to wire; this function only wires it.
	ph := p.Physical()
	// chans[node][input edge][producer subtask][consumer subtask]
	chans := map[*Node][][][]chan *message{}
	for _, x := range ph.Exchanges {
		prod := make([][]chan *message, x.From.Parallelism)
		for i := range prod {
			prod[i] = make([]chan *message, x.To.Parallelism)
			for k := range prod[i] {
				if x.Connects(i, k) {
					prod[i][k] = make(chan *message, channelCapacity)
				}
			}
		}
		if chans[x.To] == nil {
			chans[x.To] = make([][][]chan *message, len(x.To.Inputs))
		}
		chans[x.To][x.Index] = prod
	}

	restores, err := a.restoreAll(ctx, ph.Chains)
	if err != nil {
		cancel(err)
		return nil, err
	}
	var taskIDs []checkpoint.TaskID
	for _, chain := range ph.Chains {
		head, last := chain.Head(), chain.Last()
		for sub := 0; sub < chain.Parallelism(); sub++ {
			t := &task{att: a, mb: newMailbox()}
			var prev *link
			for _, node := range chain.Nodes {
				id := checkpoint.TaskID{Operator: node.ID, Subtask: sub}
				kgs := state.KeyGroupRangeFor(maxP, node.Parallelism, sub)
				r := restores[id]
				b, restored, union := r.backend, r.restored, r.union
				l := &link{t: t, node: node, id: id, wm: MinWatermark}
				l.ctx = &Context{Task: id, Parallelism: node.Parallelism, MaxParallelism: maxP, KeyGroups: kgs, State: b,
					Output: l, Restored: restored, RestoredUnion: union, JobID: rec.jobID, Attempt: n, Log: j.log.With("task", id.String()), Clock: j.clock.Now,
					CheckpointMode: j.opts.Checkpoint.Mode, sides: map[string]Output{}}
				if restored != nil {
					l.wm = restored.Watermark
					// The files restored from: the first checkpoint's
					// snapshot builds on them (state.Backend.ChainFiles).
					for _, h := range stateFiles(*restored) {
						l.files.add(h)
					}
				}
				// Every file the first snapshot may build on must be
				// one the checkpoint lists for this subtask: else each
				// checkpoint would decline. Never expected; say so.
				if _, err := l.files.handles(b.ChainFiles()); err != nil {
					err = fmt.Errorf("%v: restored state from checkpoint %d: %w", id, rec.meta.ID, err)
					cancel(err)
					return nil, err
				}
				if node.NewSource != nil {
					t.source = &sourceHead{src: node.NewSource()}
				} else {
					l.op = node.NewOperator()
				}
				if prev != nil {
					prev.next = l
				}
				prev = l
				t.links = append(t.links, l)
				l.obs = j.obs.subtask(t, l) // counters for Job.Observe (observe_hooks.go)
				taskIDs = append(taskIDs, id)
			}
			// A restored task announces its watermark again: the consumers'
			// per-channel watermarks start from the minimum after a restore.
			t.fan.sentWM = MinWatermark
			// Output writers for the chain's out edges, by output.
			var sides map[string]*sideOutput
			for _, oe := range p.outputs(last) {
				prod := chans[oe.to][oe.index][sub]
				chs := &channels{ctx: actx, maxParallelism: maxP, sent: &j.records, blocked: &t.links[0].obs.blocked}
				for _, c := range prod {
					if c != nil {
						chs.out = append(chs.out, c)
					}
				}
				w := oe.edge.Partitioner.newWriter(chs)
				t.fan.writers = append(t.fan.writers, w)
				if oe.edge.Output == "" {
					t.fan.main = append(t.fan.main, w)
					continue
				}
				if sides == nil {
					sides = map[string]*sideOutput{}
				}
				so := sides[oe.edge.Output]
				if so == nil {
					so = &sideOutput{}
					sides[oe.edge.Output] = so
				}
				so.writers = append(so.writers, w)
			}
			for name, so := range sides {
				t.links[len(t.links)-1].ctx.sides[name] = so
			}
			// Input gate for a chain that starts with an operator.
			if head.NewSource == nil {
				h := &channelHead{}
				var in []<-chan *message
				for ei, e := range head.Inputs {
					for _, prod := range chans[head][ei] {
						if prod[sub] == nil {
							continue // forward edge: only producer sub feeds consumer sub
						}
						in = append(in, prod[sub])
						h.chanInput = append(h.chanInput, e.Input)
					}
				}
				h.gate = newGate(in)
				h.chanIdle = make([]bool, len(in))
				h.chanWM = make([]int64, len(in))
				for i := range h.chanWM {
					h.chanWM[i] = MinWatermark
				}
				h.aligner = checkpoint.NewAligner(j.opts.Checkpoint.Mode, len(in))
				t.in = h
			} else {
				a.sources = append(a.sources, t)
			}
			a.tasks = append(a.tasks, t)
		}
	}
	if j.lsm != nil {
		// Every backend restored what it needed from the files the
		// verification pass fetched.
		if err := j.lsm.ClearFetched(); err != nil {
			j.log.Warn("removing fetched state files", "err", err)
		}
	}
	a.gate = newStartGate(len(a.tasks), a.checkStateSchemas)
	var retained, held []int64
	var references map[int64][]storage.FileRef
	var restored int64
	if rec.meta != nil {
		restored = rec.meta.ID
		retained, held, references = rec.retained, rec.held, rec.references
	}
	coord, err := checkpoint.New(checkpoint.Config{
		Options: j.opts.Checkpoint, Pipeline: p.Name, JobID: rec.jobID, Tasks: taskIDs,
		Restored: restored, Retained: retained, Held: held, References: references, NextID: rec.nextID, Reserved: rec.ledger.Reserved,
	})
	if err != nil {
		cancel(err)
		return nil, err
	}
	a.coord = coord
	a.ledger = rec.ledger
	a.store, a.commit = newSerial(), newSerial()
	return a, nil
}

// event reports ev to the driver unless the attempt is over.
func (a *attempt) event(ctx context.Context, ev taskEvent) {
	select {
	case a.events <- ev:
	case <-a.ctx.Done():
	case <-ctx.Done():
	}
}

// drive starts the tasks and runs the coordinator loop until the job finishes
// (nil) or fails (the error).
func (a *attempt) drive() error {
	// The coordinator's interval starts at its first step: take it now, at
	// the attempt's start, not at the first tick (one tick interval on the
	// job's clock later, which a fake clock may never reach by itself), and
	// before the attempt is observed as started, so that whoever drives the
	// clock from what it observes finds the interval and the tick running.
	initial := a.coord.Step(a.job.clock.Now(), checkpoint.Tick{}) // observed once the attempt is (below)
	ticker := a.job.clock.NewTicker(tickInterval)
	defer ticker.Stop()
	a.job.obs.started(a) // before any task runs (observe_hooks.go)
	a.job.obs.stepped(checkpoint.Tick{}, initial, a.coord.Status())
	a.job.attempts.Add(1)
	var wg sync.WaitGroup
	for _, t := range a.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.runGuarded(a.ctx)
			a.event(a.ctx, taskEvent{kind: evExited, task: t.links[0].id, err: err})
		}()
	}
	running := len(a.tasks)
	sourcesDone := map[checkpoint.TaskID]bool{}
	finished, stopSent := false, false
	stop := a.job.stop

	var failure error
	for _, act := range initial {
		if failure = a.act(act, &finished); failure != nil {
			break
		}
	}
	for failure == nil {
		var acts []checkpoint.Action
		select {
		case <-ticker.C():
			a.warnStalledWrites(a.job.clock.Now())
			acts = a.step(checkpoint.Tick{})
		case <-stop:
			stop = nil
			if !stopSent {
				stopSent = true
				for _, t := range a.sources {
					t.mb.put(control{kind: ctlStop})
				}
			}
		case <-a.ctx.Done():
			failure = context.Cause(a.ctx)
		case <-a.job.obs.requests():
			acts = a.requestCheckpoint() // Job.TriggerCheckpoint (observe_hooks.go)
		case ev := <-a.events:
			switch ev.kind {
			case evAck:
				acts = a.step(checkpoint.Acked{ID: ev.id, State: ev.state})
			case evDecline:
				if lockLost(ev.err) {
					failure = fmt.Errorf("%v: checkpoint %d: %w", ev.task, ev.id, ev.err)
					break
				}
				a.job.log.Warn("checkpoint declined", "checkpoint", ev.id, "task", ev.task.String(), "err", ev.err)
				acts = a.step(checkpoint.Declined{ID: ev.id, Task: ev.task, Reason: ev.err})
			case evFailed:
				failure = fmt.Errorf("%v: %w", ev.task, ev.err)
			case evSourceFinished:
				sourcesDone[ev.task] = true
				if len(sourcesDone) == len(a.sources) {
					acts = a.step(checkpoint.RequestFinal{})
				}
			case evExited:
				running--
				if ev.err != nil {
					failure = ev.err
				} else if running == 0 {
					if finished {
						a.shutdown(&wg)
						return nil
					}
					failure = errors.New("every task ended before the final checkpoint was committed")
				}
			case evMetadataWritten:
				delete(a.writing, ev.id)
				if lockLost(ev.err) {
					failure = fmt.Errorf("checkpoint %d: writing metadata: %w", ev.id, ev.err)
					break
				}
				acts = a.step(checkpoint.MetadataWritten{ID: ev.id, Err: ev.err})
				if ev.err == nil && a.coord.LatestComplete() == ev.id {
					// Only the coordinator decides completion: a write that
					// finished after a newer checkpoint subsumed it is not one.
					a.job.completed.Add(1)
					a.job.checkpointTime.Add(int64(ev.took))
					a.job.latest.Store(ev.id)
					if slow, n := a.job.obs.completed(ev.id, ev.took, a.job.opts.Checkpoint.Interval); slow != nil {
						warnSlow(a.job.log, slow, n)
					}
				}
			case evLedgerWritten:
				if lockLost(ev.err) {
					failure = fmt.Errorf("writing the checkpoint ledger: %w", ev.err)
					break
				}
				if ev.err != nil {
					a.job.log.Warn("writing the checkpoint ledger failed; checkpoints wait for it and it is retried", "err", ev.err)
				}
				acts = a.step(checkpoint.LedgerWritten{Reserved: ev.ledger.Reserved, Failed: ev.ledger.Failed, Err: ev.err})
			case evCommitted:
				acts = a.step(checkpoint.Committed{ID: ev.id, Err: ev.err})
			}
		}
		for _, act := range acts {
			if err := a.act(act, &finished); err != nil {
				failure = err
				break
			}
		}
	}
	// Not observed: the observer ends the attempt's checkpoints itself
	// (endAttempt), with the attempt's failure as their reason.
	a.coord.Step(a.job.clock.Now(), checkpoint.TaskFailed{Err: failure})
	a.cancel(failure)
	a.shutdown(&wg)
	return failure
}

// step hands ev to the coordinator, and the event, the actions it emitted
// and its status to the observer, before the caller carries the actions out.
// Every step of a running attempt goes through here.
func (a *attempt) step(ev checkpoint.Event) []checkpoint.Action {
	acts := a.coord.Step(a.job.clock.Now(), ev)
	a.job.obs.stepped(ev, acts, a.coord.Status())
	return acts
}

// metadataWrite is a metadata write in flight.
type metadataWrite struct {
	started time.Time
	warned  bool
}

// warnStalledWrites warns once about each metadata write in flight for
// longer than the checkpoint timeout (plus stallGrace). The write was told to
// give up at the checkpoint's deadline; one that is still running has passed
// its commit point (a local rename or directory fsync that hangs) or runs on
// storage that cannot abandon it, so it may still land, and a checkpoint
// whose metadata landed is complete: the coordinator waits for its outcome,
// and no later checkpoint completes meanwhile. The warning says so, so a
// stuck storage is not silent.
func (a *attempt) warnStalledWrites(now time.Time) {
	timeout := a.job.opts.Checkpoint.Timeout
	for id, w := range a.writing {
		if w.warned || now.Sub(w.started) < timeout+stallGrace {
			continue
		}
		w.warned = true
		a.job.log.Warn("the checkpoint metadata write has not returned within the checkpoint timeout; checkpointing waits for it (a write past its commit point may still land and cannot be abandoned): check the checkpoint storage",
			"checkpoint", id, "writing_for", now.Sub(w.started).Round(time.Millisecond), "timeout", timeout, "storage", a.job.storage.Location())
	}
}

// stallGrace is how long past the checkpoint timeout a metadata write may
// take to return its abandonment before warnStalledWrites reports it.
const stallGrace = time.Second

// lockLost reports whether a storage error says the job no longer holds its
// checkpoint storage (storage.ErrLocked: a lost lease, taken over by another
// process). The attempt fails at once instead of counting the checkpoint
// among the tolerable failures: the job must stop processing while another
// process may be running the pipeline, and the failure stops the job
// without a restart (Job.Run).
func lockLost(err error) bool { return err != nil && errors.Is(err, storage.ErrLocked) }

// shutdown waits for every task, snapshot writer and queued storage write and
// commit: the next attempt's recovery must not race this one's writes. (A
// metadata write the storage abandoned at its deadline may still be running
// inside it; it cannot complete a checkpoint any more, see
// Storage.WriteMetadata.)
func (a *attempt) shutdown(tasks *sync.WaitGroup) {
	tasks.Wait()
	a.async.Wait()
	a.closeBackends()
	a.store.close()
	a.commit.close()
	a.cancel(errors.New("attempt ended"))
}

// act carries out one coordinator action (see each action's obligations).
func (a *attempt) act(act checkpoint.Action, finished *bool) error {
	j := a.job
	switch x := act.(type) {
	case checkpoint.Trigger:
		j.triggered.Store(max(j.triggered.Load(), x.ID))
		b := Barrier{ID: x.ID, Timestamp: x.Timestamp.UnixNano(), Final: x.Final}
		for _, t := range a.sources {
			t.mb.put(control{kind: ctlTrigger, barrier: b})
		}
	case checkpoint.WriteMetadata:
		m := x.Metadata
		m.Topology = a.rec.topology // what the next restore checks the pipeline against (topology.go)
		if a.writing == nil {
			a.writing = map[int64]*metadataWrite{}
		}
		a.writing[m.ID] = &metadataWrite{started: j.clock.Now()}
		a.store.do(func() {
			err := failpoint.Inject("job/before-metadata-write")
			if err == nil {
				var data []byte
				if data, err = m.Encode(); err == nil {
					// The checkpoint timeout runs from the trigger to durable
					// metadata: a write still unfinished then is abandoned, and
					// the storage makes sure it never lands (Storage.WriteMetadata).
					// It does not end with the attempt: a stop or failure waits
					// for it up to that deadline. An abandoned write may still run
					// inside the storage, but it can no longer complete a
					// checkpoint, which is what the next recovery relies on.
					// The deadline is on the job's clock, as the coordinator's
					// timeout is: on a fake clock it passes when the clock
					// does, not after that much real time (a busy machine
					// would otherwise fail the checkpoint).
					wctx, cancel := clock.WithTimeoutCause(context.WithoutCancel(a.ctx), j.clock, m.TriggeredAt.Add(j.opts.Checkpoint.Timeout).Sub(j.clock.Now()),
						fmt.Errorf("timed out after %v: the metadata write did not finish", j.opts.Checkpoint.Timeout))
					start := j.clock.Now()
					err = j.storage.WriteMetadata(wctx, m.ID, data)
					cancel()
					j.obs.metadataWritten(m.ID, j.clock.Now().Sub(start))
				}
			}
			a.event(a.ctx, taskEvent{kind: evMetadataWritten, id: m.ID, err: err, took: j.clock.Now().Sub(m.TriggeredAt)})
		})
	case checkpoint.WriteLedger:
		a.store.do(func() {
			// Queued behind the metadata write that failed, if any: its
			// outcome is settled before the ledger says it failed.
			l := a.ledger.Apply(x)
			err := j.writeLedger(context.WithoutCancel(a.ctx), l)
			if err == nil {
				a.ledger = l
			}
			a.event(a.ctx, taskEvent{kind: evLedgerWritten, ledger: x, err: err})
		})
	case checkpoint.NotifyComplete:
		if err := failpoint.Inject("job/after-metadata-before-notify"); err != nil {
			return err
		}
		for _, t := range a.tasks {
			t.mb.put(control{kind: ctlComplete, id: x.ID})
		}
	case checkpoint.CommitOutput:
		a.commit.do(func() {
			err := a.publish(x)
			if err == nil {
				err = failpoint.Inject("job/after-commit-before-cleanup")
			}
			a.event(a.ctx, taskEvent{kind: evCommitted, id: x.ID, err: err})
			if err == nil {
				a.sweep(a.ctx, x) // after the event: a sweep never delays a commit's confirmation
			}
		})
	case checkpoint.Abort:
		j.failed.Add(1)
		j.log.Warn("checkpoint failed", "checkpoint", x.ID, "err", x.Reason)
		for _, t := range a.tasks {
			t.mb.put(control{kind: ctlAbort, id: x.ID})
		}
	case checkpoint.Discard:
		a.store.do(func() { a.cleanup(x.ID, x) })
	case checkpoint.Trim:
		a.store.do(func() { a.cleanup(x.ID, x) })
	case checkpoint.FailJob:
		return x.Err
	case checkpoint.Finished:
		*finished = true
		j.log.Info("final checkpoint committed", "checkpoint", x.ID)
		for _, t := range a.sources {
			t.mb.put(control{kind: ctlEnd})
		}
	}
	return nil
}

// cleanup carries out a Discard or Trim of checkpoint id, on the store
// goroutine, after retrying those that failed before. The coordinator emits
// them so that a checkpoint's comes before those of the checkpoints it
// references, and both delete the metadata first: so no complete checkpoint
// is ever left without a file it references. One that fails leaves its
// checkpoint's metadata in place (complete, though the coordinator goes on as
// if it was done), so the deletions of older checkpoints, whose files it may
// reference (references point to older checkpoints only), wait until it
// succeeds; newer ones go on. Whatever is still waiting when the attempt ends
// is redone by the next recovery's retention pass (storage.Retain).
func (a *attempt) cleanup(id int64, act checkpoint.Action) {
	j := a.job
	a.cleanups = append(a.cleanups, pendingCleanup{id: id, act: act})
	var left []pendingCleanup
	for _, c := range a.cleanups {
		if slices.ContainsFunc(left, func(l pendingCleanup) bool { return l.id > c.id }) {
			left = append(left, c) // a newer checkpoint that may reference its files is still complete
			continue
		}
		var err error
		switch x := c.act.(type) {
		case checkpoint.Discard:
			if err = j.storage.Discard(context.WithoutCancel(a.ctx), x.ID); err != nil {
				j.log.Warn("deleting checkpoint data failed; it is retried before older checkpoints are deleted, and at the next recovery", "checkpoint", x.ID, "err", err)
			} else {
				j.obs.discarded(x.ID) // counts it as deleted by retention if it completed
			}
		case checkpoint.Trim:
			if err = j.storage.Trim(context.WithoutCancel(a.ctx), x.ID, x.Keep); err != nil {
				j.log.Warn("trimming checkpoint data failed; it is retried before older checkpoints are deleted, and at the next recovery", "checkpoint", x.ID, "keep", len(x.Keep), "err", err)
			} else {
				j.obs.trimmed(x.ID) // counts it as trimmed by retention
			}
		}
		if err != nil {
			left = append(left, c)
		}
	}
	a.cleanups = left
}

// pendingCleanup is a Discard or Trim of checkpoint id not yet carried out.
type pendingCleanup struct {
	id  int64
	act checkpoint.Action
}

// publish commits one checkpoint's output through the sinks' committers.
func (a *attempt) publish(x checkpoint.CommitOutput) error {
	if err := failpoint.Inject("job/after-metadata-before-commit"); err != nil {
		return err
	}
	ctx := a.job.commitContext(context.WithoutCancel(a.ctx))
	if x.Final {
		ctx = withPublishNow(ctx)
	}
	for _, c := range x.Commits {
		var cm Committer
		for _, n := range a.job.plan.Nodes {
			if n.ID == c.Sink {
				cm = n.Committer
			}
		}
		if cm == nil {
			return fmt.Errorf("no committer for sink %s", c.Sink)
		}
		start := a.job.clock.Now()
		if err := cm.Commit(ctx, a.rec.jobID, c); err != nil {
			return fmt.Errorf("sink %s: %w", c.Sink, err)
		}
		a.job.obs.sinkCommitted(c.Sink, a.job.clock.Now().Sub(start))
	}
	return nil
}

// sweep lets each transactional sink delete staged output abandoned before
// checkpoint x was triggered (checkpoint.Options.StagingMaxAge), once x's
// output is published. A failed sweep is logged, and the next
// completed checkpoint sweeps again; staged output is also abandoned at
// every recovery.
func (a *attempt) sweep(ctx context.Context, x checkpoint.CommitOutput) {
	j := a.job
	age := j.opts.Checkpoint.StagingMaxAge
	if age < 0 || x.TriggeredAt.IsZero() {
		return
	}
	// Staged output carries wall-clock times: the trigger's time on the
	// job's clock is taken to the wall clock by its distance from now (on a
	// fake clock running ahead of real time that sweeps less, never more).
	before := time.Now().Add(-j.clock.Now().Sub(x.TriggeredAt)).Add(-age)
	for _, n := range j.plan.Nodes {
		s, ok := n.Committer.(StagingSweeper)
		if !ok {
			continue
		}
		k, err := s.Sweep(ctx, a.rec.jobID, before)
		if err != nil {
			j.log.Warn("deleting abandoned staged output failed; the next completed checkpoint tries again",
				"sink", n.ID, "checkpoint", x.ID, "err", err)
		}
		if k > 0 {
			j.obs.swept(int64(k))
			j.log.Info("deleted abandoned staged output", "sink", n.ID, "items", k,
				"staged_before", before.UTC().Format(time.RFC3339), "checkpoint", x.ID)
		}
	}
}

// serial runs functions one at a time, in order, on its own goroutine. Its
// queue is unbounded so the driver never blocks on it.
type serial struct {
	mu     sync.Mutex
	queue  []func()
	signal chan struct{}
	done   chan struct{}
	closed bool
}

func newSerial() *serial {
	s := &serial{signal: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *serial) do(f func()) {
	s.mu.Lock()
	s.queue = append(s.queue, f)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

func (s *serial) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		q, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		for _, f := range q {
			f()
		}
		if len(q) == 0 && closed {
			return
		}
		if len(q) == 0 {
			<-s.signal
		}
	}
}

// close runs what is queued, then stops the goroutine and waits for it.
func (s *serial) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	<-s.done
}
