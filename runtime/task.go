package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/offheap"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
)

// task is one goroutine: a chain of node subtasks (links) fed either by a
// source or by the channels of its input gate.
type task struct {
	att   *attempt
	links []*link
	// fan is the output of the chain's last link: writers on its out edges.
	fan fanout
	mb  *mailbox

	// timed are the links whose operator has processing-time timers.
	timed []*link
	// wake fires at the earliest processing-time timer of the chain, wakeAt.
	wake   clock.Timer
	wakeAt int64

	// final is set once the task took the final checkpoint: nothing may
	// arrive after it but end-of-input, and no processing-time timer fires.
	final bool

	// What the chain's head reads. INVARIANT: exactly one is set: source
	// for a task headed by a source, in for one headed by an operator that
	// reads channels.
	source *sourceHead
	in     *channelHead
}

// sourceAs returns the task's source, nil for a task headed by an operator:
// for type assertions to the optional source interfaces.
func (t *task) sourceAs() Source {
	if t.source == nil {
		return nil
	}
	return t.source.src
}

// sourceHead is what a task headed by a source keeps.
type sourceHead struct {
	src       Source
	stopped   bool // no more reads: exhausted or asked to stop
	exhausted bool // the input ended (MaxWatermark was emitted)
}

// channelHead is what a task headed by an operator keeps: its input
// channels and their alignment.
type channelHead struct {
	gate      *gate
	chanInput []int   // logical input of the head operator per channel
	chanWM    []int64 // watermark per channel
	chanIdle  []bool  // channels whose producer said it is idle
	ended     int     // channels that delivered end-of-input
	aligner   *checkpoint.Aligner
	aligning  Barrier // the barrier being aligned
	// leader is the head operator as an InputLeader, nil when it is not;
	// lead and by are what it asked for.
	leader InputLeader
	lead   int
	by     int64
}

// preferInputs marks the channels the gate reads first (InputLeader): the
// lead input's while its watermark is at most by ahead of the others', the
// others' beyond that. Idle and ended channels do not count.
func (h *channelHead) preferInputs() {
	if h.leader == nil {
		return
	}
	lead, other := MaxWatermark, MaxWatermark
	for i, w := range h.chanWM {
		if h.gate.ended[i] || h.chanIdle[i] {
			continue
		}
		if h.chanInput[i] == h.lead {
			lead = min(lead, w)
		} else {
			other = min(other, w)
		}
	}
	limit := other + h.by
	if limit < other {
		limit = MaxWatermark // saturated
	}
	leading := lead <= limit
	if h.gate.first == nil {
		h.gate.first = make([]bool, len(h.chanWM))
	}
	for i := range h.gate.first {
		h.gate.first[i] = (h.chanInput[i] == h.lead) == leading
	}
}

// link is one node subtask within a task's chain.
type link struct {
	t    *task
	node *Node
	id   checkpoint.TaskID
	op   Operator // nil for the source link
	ctx  *Context
	next *link // nil: output goes to the task's out edges
	// wm is the watermark this link has processed and forwarded.
	// INVARIANT: wm never decreases.
	wm int64
	// obs are the link's counters for Job.Observe (observe_hooks.go).
	obs *subtaskObs
	// files are the handles of the state files this link wrote, by
	// checkpoint: what an incremental snapshot's Shared ids name.
	files stateFileSet
	// encoded is the size of the state file this link wrote last: how
	// large a buffer the next checkpoint's encoding borrows (written by the
	// goroutines that write checkpoints, several at once with
	// max_concurrent > 1).
	encoded atomic.Int64
}

// stateBuffers lends the buffers state files are encoded into, outside the
// Go heap and reused from one checkpoint to the next (internal/offheap).
var stateBuffers offheap.Pool

// Emit implements Output for the link's operator or source.
func (l *link) Emit(r Records) error {
	if r.Len() == 0 {
		return nil
	}
	l.obs.out.Add(int64(r.Len()))
	if l.next != nil {
		err := l.next.op.ProcessBatch(l.next.node.Inputs[0].Input, r)
		if tm := (*TypeMismatchError)(nil); err != nil && errors.As(err, &tm) && tm.Subtask == "" {
			// The error travels up the chain to its head: name the receiver.
			tm.Subtask = fmt.Sprint(l.next.id)
		}
		return err
	}
	return l.t.fan.emit(r)
}

// reusesBatches implements ReusesBatches: the chain's next operator
// borrows, or every main out edge copies.
func (l *link) reusesBatches() bool {
	if l.next != nil {
		_, ok := l.next.op.(BatchBorrower)
		return ok
	}
	return shares(l.t.fan.main) == 0
}

// batchPool implements poolOf: at the end of a chain whose out edges
// hand batches themselves to consumers, the pool of the batches they are
// done with, made on the first request (an emitter that never asks gets
// none filled for it).
func (l *link) batchPool() *batchPool {
	if l.next != nil {
		return nil
	}
	return l.t.fan.newPool()
}

// shares returns how many consumers one emit on every writer hands the
// batch itself to (edgeWriter.shares).
func shares(ws []edgeWriter) int {
	n := 0
	for _, w := range ws {
		n += w.shares()
	}
	return n
}

// advance processes watermark wm at this link and forwards it down the chain.
func (l *link) advance(wm int64) error {
	for ; l != nil; l = l.next {
		if wm <= l.wm {
			return nil
		}
		l.wm = wm
		l.obs.wm.Store(wm)
		if l.op != nil {
			if err := l.op.ProcessWatermark(wm); err != nil {
				return fmt.Errorf("%v: processing watermark: %w", l.id, err)
			}
		}
	}
	return nil
}

// fanout is the output of a task: one writer per out edge.
type fanout struct {
	// writers are all out edges; control events go to each.
	writers []edgeWriter
	// main are the writers of the main output's edges.
	main []edgeWriter
	// sentWM is the last watermark sent downstream.
	sentWM int64
	// idle is set while the task told its consumers it is idle.
	idle bool
	// pool, once the chain's last emitter asked for it (BatchBuffer, in
	// Open) and when some main edge hands batches themselves to consumers
	// (forward, rebalance, broadcast), takes each batch back once every
	// consumer is done with it (sharedBatch), for that emitter to fill
	// again.
	pool *batchPool
	// sharing is how many consumers each batch goes to itself (shares of
	// main), set with pool.
	sharing int32
}

// newPool returns f's pool, made on the first call with room for every
// batch that can be in flight on the main edges; nil when no main edge
// shares batches. Called from Open, on the task goroutine, before any emit.
func (f *fanout) newPool() *batchPool {
	if f.pool != nil || shares(f.main) == 0 {
		return f.pool
	}
	room := 0
	for _, w := range f.main {
		if w.shares() > 0 {
			room += len(w.channels().out) * (channelCapacity + 1)
		}
	}
	f.pool, f.sharing = newBatchPool(room), int32(shares(f.main))
	return f.pool
}

func (f *fanout) emit(r Records) error {
	var from recycler
	if f.pool != nil {
		// Every consumer is counted before the first send: one that is
		// done early cannot free the batch while others are to get it.
		sb := &sharedBatch{pool: f.pool}
		sb.refs.Store(f.sharing)
		from = sb
	}
	for _, w := range f.main {
		if err := w.emit(r, from); err != nil {
			return err
		}
	}
	return nil
}

func (f *fanout) flush() error {
	for _, w := range f.writers {
		if err := w.flush(); err != nil {
			return err
		}
	}
	return nil
}

// sideOutput is the Output of one side output of a task's last link.
type sideOutput struct {
	writers []edgeWriter
}

// reusesBatches implements ReusesBatches: every edge copies.
func (s *sideOutput) reusesBatches() bool { return shares(s.writers) == 0 }

// Emit implements Output.
func (s *sideOutput) Emit(r Records) error {
	if r.Len() == 0 {
		return nil
	}
	for _, w := range s.writers {
		if err := w.emit(r, nil); err != nil {
			return err
		}
	}
	return nil
}

// control flushes buffered records, then sends m on every channel, so the
// control event follows every record emitted before it.
func (f *fanout) control(m *message) error {
	if err := f.flush(); err != nil {
		return err
	}
	for _, w := range f.writers {
		if err := w.channels().control(m); err != nil {
			return err
		}
	}
	return nil
}

// runGuarded runs the task and turns a panic in user or connector code into
// a task error: the job restarts instead of the process dying.
func (t *task) runGuarded(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v: panic: %v\n%s", t.links[0].id, r, debug.Stack())
		}
	}()
	return t.run(ctx)
}

// run opens the chain, runs the task loop and closes the chain.
func (t *task) run(ctx context.Context) (err error) {
	defer func() {
		for _, l := range t.links {
			var cerr error
			if l.op != nil {
				cerr = l.op.Close()
			} else if t.source != nil {
				cerr = t.source.src.Close()
			}
			if cerr != nil && err == nil {
				err = fmt.Errorf("%v: close: %w", l.id, cerr)
			}
		}
	}()
	for _, l := range t.links {
		if err := t.open(l); err != nil {
			return err
		}
		if _, ok := l.op.(ProcessingTimer); ok {
			t.timed = append(t.timed, l)
		}
	}
	// No subtask reads or processes a record before every subtask has
	// opened and the registered states fit the recovery point.
	if err := t.att.gate.arrive(ctx, t.links); err != nil {
		return err
	}
	defer func() {
		if t.wake != nil {
			t.wake.Stop()
		}
	}()
	if t.source != nil {
		return t.runSource(ctx)
	}
	return t.runOperator(ctx)
}

func (t *task) open(l *link) error {
	var err error
	if l.op != nil {
		err = l.op.Open(l.ctx)
	} else {
		err = t.source.src.Open(l.ctx)
	}
	if err != nil {
		err = fmt.Errorf("%v: open: %w", l.id, err)
		if errors.Is(err, state.ErrStateMismatch) {
			err = incompatible(err)
		}
		return err
	}
	if un := l.ctx.State.Unclaimed(); len(un) > 0 {
		return incompatible(fmt.Errorf("%v: the restored checkpoint holds state %q that the operator no longer registers", l.id, un))
	}
	return nil
}

// handleControl serves the mailbox.
func (t *task) handleControl(ctx context.Context) (end bool, err error) {
	for _, c := range t.mb.take() {
		switch c.kind {
		case ctlTrigger:
			if err := t.checkpoint(ctx, c.barrier, 0); err != nil {
				return false, err
			}
		case ctlComplete:
			if n, ok := t.sourceAs().(CompletionNotified); ok {
				if err := n.NotifyComplete(c.id); err != nil {
					return false, fmt.Errorf("%v: checkpoint %d complete: %w", t.links[0].id, c.id, err)
				}
			}
			for _, l := range t.links {
				l.ctx.State.Complete(c.id)
				l.files.keep(c.id, l.ctx.State.ChainFiles())
				if l.op != nil {
					if err := l.op.NotifyComplete(c.id); err != nil {
						return false, fmt.Errorf("%v: checkpoint %d complete: %w", l.id, c.id, err)
					}
				}
			}
		case ctlAbort:
			for _, l := range t.links {
				l.ctx.State.Abort(c.id)
				l.files.drop(c.id)
			}
			if t.in != nil {
				t.in.aligner.Abort(c.id)
			}
		case ctlStop:
			if t.source != nil && !t.source.stopped {
				t.source.stopped = true
				t.att.event(ctx, taskEvent{kind: evSourceFinished, task: t.links[0].id})
			}
		case ctlEnd:
			return true, nil
		}
	}
	return false, nil
}

// runSource reads the source until it is exhausted or stopped, serving
// checkpoint triggers between reads, then waits for the final checkpoint.
func (t *task) runSource(ctx context.Context) error {
	head := t.links[0]
	clk := t.att.job.clock
	timer := clk.NewTimer(time.Hour)
	defer timer.Stop()
	var readyAt time.Time
	for {
		end, err := t.handleControl(ctx)
		if err != nil {
			return err
		}
		if end {
			return t.fan.control(&message{kind: kindEnd})
		}
		if !t.source.stopped && !clk.Now().Before(readyAt) {
			res, err := t.source.src.Read()
			if err != nil {
				return fmt.Errorf("%v: read: %w", head.id, err)
			}
			if !res.Idle || res.Exhausted {
				if err := t.setIdle(false); err != nil {
					return err
				}
			}
			if err := head.advance(res.Watermark); err != nil {
				return err
			}
			if res.Exhausted {
				t.source.stopped, t.source.exhausted = true, true
				if err := head.advance(MaxWatermark); err != nil {
					return err
				}
				if err := t.forwardWatermark(); err != nil {
					return err
				}
				t.att.event(ctx, taskEvent{kind: evSourceFinished, task: head.id})
			} else if err := t.forwardWatermark(); err != nil {
				return err
			}
			if res.Idle && !res.Exhausted {
				if err := t.setIdle(true); err != nil {
					return err
				}
			}
			if _, err := t.fireProcessingTimers(); err != nil {
				return err
			}
			if err := t.fan.flush(); err != nil {
				return err
			}
			readyAt = time.Time{}
			if res.Wait > 0 {
				readyAt = clk.Now().Add(res.Wait)
			}
			continue
		}
		next, err := t.fireProcessingTimers()
		if err != nil {
			return err
		}
		if err := t.fan.flush(); err != nil {
			return err
		}
		var tick <-chan time.Time
		if !t.source.stopped || next != 0 {
			wait := time.Duration(math.MaxInt64)
			if !t.source.stopped {
				wait = readyAt.Sub(clk.Now())
			}
			if next != 0 {
				wait = min(wait, time.Unix(0, next).Sub(clk.Now()))
			}
			timer.Reset(wait)
			tick = timer.C()
		}
		select {
		case <-t.mb.signal:
		case <-tick:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// forwardWatermark sends the chain's watermark downstream when it advanced
// past what was sent.
func (t *task) forwardWatermark() error {
	last := t.links[len(t.links)-1]
	if last.wm <= t.fan.sentWM || len(t.fan.writers) == 0 {
		return nil
	}
	t.fan.sentWM = last.wm
	return t.fan.control(&message{kind: kindWatermark, watermark: last.wm})
}

// runOperator reads the input gate until every channel ended.
func (t *task) runOperator(ctx context.Context) error {
	head := t.links[0]
	blocked := t.in.aligner.Blocked
	// headBorrows: the head is done with a batch when ProcessBatch returns,
	// so the writer that sent it may fill it again.
	_, headBorrows := head.op.(BatchBorrower)
	if l, ok := head.op.(InputLeader); ok {
		lead, by := l.InputLead()
		t.in.leader, t.in.lead, t.in.by = l, lead, int64(max(by, 0))
		t.in.preferInputs()
	}
	for {
		if _, err := t.handleControl(ctx); err != nil {
			return err
		}
		next, err := t.fireProcessingTimers()
		if err != nil {
			return err
		}
		if err := t.fan.flush(); err != nil {
			return err
		}
		var wake <-chan time.Time
		if next != 0 {
			// Reset only for a new deadline (or one already due), not per
			// message: a fired, unread timer keeps its tick in the channel.
			d := time.Unix(0, next).Sub(t.att.job.clock.Now())
			switch {
			case t.wake == nil:
				t.wake = t.att.job.clock.NewTimer(d)
			case next != t.wakeAt || d <= 0:
				t.wake.Reset(d)
			}
			t.wakeAt = next
			wake = t.wake.C()
		}
		m, ch, err := t.in.gate.read(ctx, blocked, t.mb, wake)
		if err != nil {
			return err
		}
		if m == nil {
			continue // the mailbox signalled or a timer is due
		}
		switch m.kind {
		case kindRecords:
			if t.in.chanIdle[ch] {
				// Records end the producer's idleness: its watermark holds
				// the minimum back again.
				t.in.chanIdle[ch] = false
				if err := t.advanceInputWatermark(); err != nil {
					return err
				}
			}
			if t.final {
				return fmt.Errorf("%v: %d records arrived after the final checkpoint and would be lost", head.id, m.records.Len())
			}
			if err := failpoint.Inject("task/process-batch"); err != nil {
				return fmt.Errorf("%v: %w", head.id, err)
			}
			head.obs.in.Add(int64(m.records.Len()))
			if err := head.op.ProcessBatch(t.in.chanInput[ch], m.records); err != nil {
				return fmt.Errorf("%v: %w", head.id, err)
			}
			if m.from != nil && headBorrows {
				m.from.recycle(m.records)
			}
			for _, l := range t.links {
				if err := l.ctx.State.Err(); err != nil {
					return fmt.Errorf("%v: %w", l.id, err)
				}
			}
		case kindWatermark:
			t.in.chanWM[ch] = m.watermark
			if err := t.advanceInputWatermark(); err != nil {
				return err
			}
		case kindStatus:
			t.in.chanIdle[ch] = m.idle
			if err := t.advanceInputWatermark(); err != nil {
				return err
			}
		case kindBarrier:
			// Notifications sent before this barrier's checkpoint was triggered
			// are in the mailbox now; serve them first (NotifyComplete's
			// obligation).
			if _, err := t.handleControl(ctx); err != nil {
				return err
			}
			if t.in.aligner.Aligning() == 0 {
				t.in.aligning = m.barrier
			}
			res := t.in.aligner.Barrier(t.att.job.clock.Now(), ch, m.barrier.ID)
			if err := t.afterAlignment(ctx, res, m.barrier); err != nil {
				return err
			}
		case kindEnd:
			t.in.gate.ended[ch] = true
			t.in.ended++
			t.in.preferInputs()
			res := t.in.aligner.EndOfInput(t.att.job.clock.Now(), ch)
			if err := t.afterAlignment(ctx, res, t.in.aligning); err != nil {
				return err
			}
			if t.in.ended == len(t.in.gate.in) {
				return t.fan.control(&message{kind: kindEnd})
			}
			// End-of-input only follows the final checkpoint, so it does not
			// advance the watermark: what fired now would belong to no
			// checkpoint.
		}
		if err := t.fan.flush(); err != nil {
			return err
		}
	}
}

func (t *task) afterAlignment(ctx context.Context, res checkpoint.Alignment, b Barrier) error {
	if res.Abandoned != 0 {
		for _, l := range t.links {
			t.att.event(ctx, taskEvent{kind: evDecline, task: l.id, id: res.Abandoned,
				err: fmt.Errorf("barrier %d arrived before barrier %d completed alignment", b.ID, res.Abandoned)})
		}
		t.in.aligning = b
	}
	if !res.Complete {
		return nil
	}
	if b.ID != res.ID {
		b = t.in.aligning
	}
	return t.checkpoint(ctx, b, res.Duration)
}

// advanceInputWatermark moves the chain's watermark to the minimum over the
// channels that have neither ended nor gone idle. When every open channel is
// idle, the task is idle: it says so downstream and its watermark stays.
func (t *task) advanceInputWatermark() error {
	t.in.preferInputs()
	wm := MaxWatermark
	open, active := false, false
	for i, w := range t.in.chanWM {
		if t.in.gate.ended[i] {
			continue
		}
		open = true
		if t.in.chanIdle[i] {
			continue
		}
		active = true
		wm = min(wm, w)
	}
	if !open {
		return nil
	}
	if !active {
		return t.setIdle(true)
	}
	if err := t.setIdle(false); err != nil {
		return err
	}
	if err := t.links[0].advance(wm); err != nil {
		return err
	}
	return t.forwardWatermark()
}

// setIdle tells consumers when the task becomes idle or active again. An
// active status goes out before the watermark that follows it.
func (t *task) setIdle(idle bool) error {
	if t.fan.idle == idle {
		return nil
	}
	t.fan.idle = idle
	if len(t.fan.writers) == 0 {
		return nil
	}
	return t.fan.control(&message{kind: kindStatus, idle: idle})
}

// fireProcessingTimers fires the chain's due processing-time timers and
// returns the earliest pending one (Unix nanoseconds; 0 when none). After the
// final checkpoint nothing fires: its output would belong to no checkpoint.
func (t *task) fireProcessingTimers() (next int64, err error) {
	if len(t.timed) == 0 || t.final {
		return 0, nil
	}
	now := t.att.job.clock.Now().UnixNano()
	for _, l := range t.timed {
		pt := l.op.(ProcessingTimer)
		at, ok := pt.NextProcessingTime()
		if ok && at <= now {
			// An idle task's consumers ignore its watermark; what a timer
			// emits must not make them wait for it. Announce the task active
			// for the output, then idle again.
			wasIdle := t.fan.idle
			if err := t.setIdle(false); err != nil {
				return 0, err
			}
			if err := pt.OnProcessingTime(now); err != nil {
				return 0, fmt.Errorf("%v: processing-time timers: %w", l.id, err)
			}
			if wasIdle {
				if err := t.setIdle(true); err != nil {
					return 0, err
				}
			}
			at, ok = pt.NextProcessingTime()
		}
		if ok && (next == 0 || at < next) {
			next = max(at, 1)
		}
	}
	return next, nil
}

// capture is one link's synchronous snapshot, waiting to be written.
type capture struct {
	link  *link
	keyed *state.Snapshot
	snap  Snapshot
	wm    int64
	sync  time.Duration
}

// checkpoint takes the snapshot for barrier b: the synchronous capture of
// every link in chain order, then the barrier goes downstream, then the
// captures are encoded, written and acknowledged off the task goroutine.
func (t *task) checkpoint(ctx context.Context, b Barrier, alignment time.Duration) error {
	if err := failpoint.Inject("task/before-snapshot"); err != nil {
		return err
	}
	t.att.job.obs.barrier(t, b.ID) // a source's position, for replay accounting (observe_hooks.go)
	caps := make([]capture, 0, len(t.links))
	for _, l := range t.links {
		start := t.att.job.clock.Now()
		var s Snapshot
		var err error
		if l.op != nil {
			s, err = l.op.Snapshot(b.ID)
		} else if pa, ok := t.source.src.(PositionedAt); ok {
			s.Inline, err = pa.PositionAt(b.ID)
		} else {
			s.Inline, err = t.source.src.Position()
		}
		if err != nil {
			// The task fails and the job restarts from the last complete
			// checkpoint. A decline would let the job go on, but a sink whose
			// prepare failed may have lost staged output that a later
			// checkpoint, with source positions past it, would not replay.
			return fmt.Errorf("%v: snapshot for checkpoint %d: %w", l.id, b.ID, err)
		}
		var keyed *state.Snapshot
		if l.ctx.State.HasState() {
			keyed = l.ctx.State.CheckpointSnapshot(b.ID, b.Final)
		}
		caps = append(caps, capture{link: l, keyed: keyed, snap: s, wm: l.wm, sync: t.att.job.clock.Now().Sub(start)})
	}
	if err := failpoint.Inject("task/after-sync-snapshot"); err != nil {
		return err
	}
	if err := t.fan.control(&message{kind: kindBarrier, barrier: b}); err != nil {
		return err
	}
	t.final = t.final || b.Final
	t.att.async.Add(1)
	go func() {
		defer t.att.async.Done()
		for _, c := range caps {
			ev := t.write(ctx, b.ID, c, alignment)
			t.att.event(ctx, ev)
			if ev.kind != evAck {
				continue
			}
			if err := failpoint.Inject("task/after-ack"); err != nil {
				t.att.event(ctx, taskEvent{kind: evFailed, task: c.link.id, err: err})
			}
		}
	}()
	return nil
}

// write encodes and stores one capture and returns the acknowledgement (or
// the decline when it failed).
func (t *task) write(ctx context.Context, id int64, c capture, alignment time.Duration) taskEvent {
	clk := t.att.job.clock
	start := clk.Now()
	st := checkpoint.SubtaskState{
		Task:         c.link.id,
		Inline:       c.snap.Inline,
		Watermark:    c.wm,
		Committables: c.snap.Committables,
		Alignment:    alignment,
		SyncDuration: c.sync,
	}
	if c.keyed != nil && c.keyed.IsLSM() {
		st.States = stateSchemas(c.keyed.Schemas())
		start := clk.Now()
		err := t.uploadLSM(ctx, id, c, &st)
		t.att.job.obs.stateWritten(id, c.link.id, clk.Now().Sub(start))
		if err == nil {
			err = failpoint.Inject("task/during-async-write")
		}
		if err != nil {
			return taskEvent{kind: evDecline, task: c.link.id, id: id, err: fmt.Errorf("writing state: %w", err)}
		}
	} else if c.keyed != nil {
		st.States = stateSchemas(c.keyed.Schemas())
		// Room for a file half again as large as the last one, and at
		// least 8 MiB: pages not written cost address space, not memory,
		// and one that outgrows the buffer moves to the Go heap.
		last := c.link.encoded.Load()
		buf := stateBuffers.Get(int(max(last+last/2, 8<<20)))
		// The storage has written enc.Data (which may share buf) when
		// this returns; nothing reads buf after.
		defer stateBuffers.Put(buf)
		enc, err := c.keyed.EncodeCheckpointInto(buf)
		c.keyed.Release() // encoded once: its tables may reclaim what it pinned
		if err == nil {
			c.link.encoded.Store(int64(len(enc.Data)))
		}
		if err == nil {
			err = failpoint.Inject("task/during-async-write")
		}
		if err == nil {
			st.Shared, err = c.link.files.handles(enc.Shared)
			st.StateReused = enc.Reused
		}
		if err == nil {
			var h storage.Handle
			start := clk.Now()
			h, err = t.att.job.storage.WriteFile(ctx, id, stateFileName(c.link.id), enc.Data)
			t.att.job.obs.stateWritten(id, c.link.id, clk.Now().Sub(start))
			st.State = &h
			if err == nil {
				c.link.files.add(h)
			}
		}
		if err != nil {
			return taskEvent{kind: evDecline, task: c.link.id, id: id, err: fmt.Errorf("writing state: %w", err)}
		}
	}
	if err := failpoint.Inject("task/after-snapshot-before-ack"); err != nil {
		return taskEvent{kind: evFailed, task: c.link.id, err: err}
	}
	st.AsyncDuration = clk.Now().Sub(start)
	return taskEvent{kind: evAck, task: c.link.id, id: id, state: st}
}

// stateFileName names a subtask's state file within a checkpoint.
func stateFileName(t checkpoint.TaskID) string {
	return fmt.Sprintf("state-%s-%d", t.Operator, t.Subtask)
}

// stateFileSet holds the handles of the state files one link wrote that a
// later incremental snapshot may reference: those of its chain and those of
// checkpoints still in flight. The task goroutine prunes it (at completion
// and abort); the goroutine that writes a checkpoint adds to it and reads it.
type stateFileSet struct {
	mu sync.Mutex
	m  map[int64]storage.Handle
}

// add records the handle of a file just written.
func (f *stateFileSet) add(h storage.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int64]storage.Handle{}
	}
	f.m[h.Checkpoint] = h
}

// handles returns the handles of the files of checkpoints ids, or an error
// naming one this link has no file of (a snapshot referencing a file the
// link did not write: never expected, and never acknowledged).
func (f *stateFileSet) handles(ids []int64) ([]storage.Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]storage.Handle, 0, len(ids))
	for _, id := range ids {
		h, ok := f.m[id]
		if !ok {
			return nil, fmt.Errorf("incremental state builds on the file of checkpoint %d, which this subtask did not write", id)
		}
		out = append(out, h)
	}
	return out, nil
}

// keep forgets the files of checkpoints up to completed that are not in
// chain; files of later checkpoints may still become a base.
func (f *stateFileSet) keep(completed int64, chain []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.m {
		if id <= completed && !slices.Contains(chain, id) {
			delete(f.m, id)
		}
	}
}

// drop forgets the file of a failed checkpoint.
func (f *stateFileSet) drop(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
}
