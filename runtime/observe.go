package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
)

// This file is the job's pull-based observation surface: Observe returns a
// snapshot of every signal the product description says to monitor, which
// exporters (package metrics, package httpapi) read when asked. The runtime
// imports no exporter; its hot path pays one atomic add per batch.

// Phase is where a job stands.
type Phase string

const (
	// PhaseStarting: Run has not begun its first attempt.
	PhaseStarting Phase = "starting"
	// PhaseRecovering: an attempt is recovering from the latest complete
	// checkpoint (verifying it, re-committing its output, restoring state).
	PhaseRecovering Phase = "recovering"
	// PhaseRunning: every subtask runs and checkpoints are taken.
	PhaseRunning Phase = "running"
	// PhaseStopping: Stop was called; the final checkpoint is on its way.
	PhaseStopping Phase = "stopping"
	// PhaseFinished: the final checkpoint is committed; Run returned nil.
	PhaseFinished Phase = "finished"
	// PhaseFailed: the last attempt failed. Run restarts after the restart
	// delay unless the failure cannot be cured or restarts are exhausted, in
	// which case Run has returned the error.
	PhaseFailed Phase = "failed"
)

// NodeKind says what a node of the graph is.
type NodeKind string

const (
	// KindSource: a node that reads an external input.
	KindSource NodeKind = "source"
	// KindOperator: a node with inputs and consumers.
	KindOperator NodeKind = "operator"
	// KindSink: a node with inputs and no consumer in the graph.
	KindSink NodeKind = "sink"
)

// Observation is a snapshot of a job's signals (Job.Observe). Counters
// count from the job's creation in this process; they do not survive a
// process restart.
type Observation struct {
	// Pipeline is the pipeline's name, JobID its id (empty until the first
	// recovery chose it).
	Pipeline, JobID string
	// At is when the snapshot was taken.
	At time.Time
	// Phase is where the job stands; StartedAt is when Run began (zero
	// before).
	Phase     Phase
	StartedAt time.Time
	// Delivery is the pipeline's effective delivery guarantee as derived
	// from the plan (Plan.Delivery); callers that know more (the YAML
	// builder's expression caveats) may override it for display.
	Delivery Delivery
	// Stats are the job's counters (Job.Stats).
	Stats Stats
	// Nodes are the graph's nodes in topological order, with their subtasks'
	// counters.
	Nodes []NodeObservation
	// Checkpoints sums up the checkpoints taken since the job was created.
	Checkpoints CheckpointSummary
	// CheckpointDuration is the distribution of completed checkpoints'
	// durations, trigger to durable metadata.
	CheckpointDuration Histogram
	// Alignment, Sync and Async are the distributions of the per-subtask
	// barrier alignment, synchronous snapshot and asynchronous state write
	// times of acknowledged checkpoints, by operator (node id). Every node
	// has one from the start (empty until its first checkpoint), and so has
	// every key of the maps below.
	Alignment, Sync, Async map[string]Histogram
	// StorageWrite is the distribution of checkpoint storage write times by
	// kind: "state" (a subtask's state file) and "metadata" (the file that
	// completes a checkpoint).
	StorageWrite map[string]Histogram
	// SinkPrepare is the distribution of sink subtasks' prepare times (their
	// synchronous snapshot, which stages the output since the previous
	// barrier) by sink; SinkCommit that of each committing sink's commit
	// (publication) of a complete checkpoint's output.
	SinkPrepare, SinkCommit map[string]Histogram
	// PendingCommittables counts, by sink, the staged items of complete
	// checkpoints whose commit is not yet confirmed.
	PendingCommittables map[string]int64
	// Recoveries counts recoveries by cause and error class, those that
	// happened (RestartClasses lists the classes a restart can have).
	Recoveries []RecoveryCount
	// ReplayedRecords counts the records sources read again after in-process
	// restarts: per source subtask, the records it had emitted between the
	// restored checkpoint's barrier and the failure, which it reads again
	// from the restored position. ReplayUnknown counts restarts whose replay
	// could not be measured (the restored checkpoint's barrier position was
	// not seen by this process: a fallback past a damaged checkpoint to one
	// taken before the process started). A start of a new process from a
	// checkpoint replays what the previous process read after it; that is
	// not known here and is not counted.
	ReplayedRecords, ReplayUnknown int64
	// AbandonedStaged counts staged sink items deleted at recoveries because
	// no checkpoint will publish them (Stats.Abandoned).
	AbandonedStaged int64
	// SweptStaged counts staged sink items deleted after completed
	// checkpoints because no checkpoint will publish them and they were
	// staged more than checkpoint.Options.StagingMaxAge before the
	// checkpoint's trigger (StagingSweeper).
	SweptStaged int64
	// RetentionDeleted counts the complete checkpoints that retention
	// deleted: those beyond Options.Retain, as newer ones complete, and
	// every checkpoint older than the kept ones that the retention pass at
	// each recovery removes (storage.Retain). The partial state of
	// checkpoints that failed or expired while running is not counted, nor
	// is staged sink output (AbandonedStaged, SweptStaged).
	RetentionDeleted int64
	// RetentionTrimmed counts the trims retention made while the job ran
	// (checkpoint.Trim): a complete checkpoint beyond Options.Retain of
	// which newer ones still reference some files loses its metadata and
	// every other file, and is trimmed again as references go. It is
	// counted in RetentionDeleted once it is discarded. The trims of the
	// retention pass at a recovery are not counted.
	RetentionTrimmed int64
	// LateRecords counts, by operator (node id), the late records the
	// operator dropped (Context.DroppedLate): every node that can drop them
	// (Node.DropsLate) is there from the job's creation, at 0 until its
	// first drop. Records an operator drops again after a recovery replays
	// them are counted again.
	LateRecords map[string]int64
	// LastFailure is the last attempt failure, nil when none.
	LastFailure *Failure
	// LastSlowCheckpoint is the newest completed checkpoint that took more
	// than SlowCheckpointShare of the interval, with its slowest part; nil
	// when none was slow. Its Count says how many were.
	LastSlowCheckpoint *SlowCheckpoint
}

// CheckpointSummary sums up a job's checkpoints.
type CheckpointSummary struct {
	// Triggered, Completed and Failed count checkpoints since the job was
	// created; InProgress are those in flight now.
	Triggered, Completed, Failed, InProgress int64
	// Committed counts complete checkpoints whose output commit was
	// confirmed; PendingCommit are complete ones whose commit is not yet.
	Committed, PendingCommit int64
	// LastCompleted is the newest completed checkpoint (or the one the job
	// restored, until a newer one completes); nil when none.
	LastCompleted *CompletedCheckpoint
	// LastStateSizeFull and LastStateSizeIncremental are the sizes of the
	// newest completed checkpoint (see CheckpointRecord).
	LastStateSizeFull, LastStateSizeIncremental int64
}

// CompletedCheckpoint names a complete checkpoint and its timing.
type CompletedCheckpoint struct {
	ID                       int64
	TriggeredAt, CompletedAt time.Time
	Duration                 time.Duration
	// Restored marks the checkpoint an attempt restored rather than one it
	// completed.
	Restored bool
}

// NodeObservation is one node of the graph and its subtasks' counters.
type NodeObservation struct {
	ID, Type, Describe string
	Kind               NodeKind
	Parallelism        int
	// Inputs are the edges feeding the node.
	Inputs []InputObservation
	// Subtasks are the node's subtasks, by index.
	Subtasks []SubtaskObservation
}

// InputObservation is one input edge of a node.
type InputObservation struct {
	// From is the producing node, Output its side output ("" for the main
	// output), Partitioning the partitioner ("forward", "hash", ...).
	From, Output, Partitioning string
	// Input is the consumer's logical input the edge feeds.
	Input int
	// Chained is set when the node runs in its producer's goroutine: no
	// channel between them.
	Chained bool
}

// SubtaskObservation are one node subtask's counters.
type SubtaskObservation struct {
	Task checkpoint.TaskID
	// RecordsIn counts records the subtask received: from its channels or
	// its chained predecessor; for a source, the records it read.
	// RecordsOut counts the records it emitted on its main output.
	RecordsIn, RecordsOut int64
	// Backpressure is the time the subtask's task (its chain) waited to send
	// on a full channel.
	Backpressure time.Duration
	// Watermark is the subtask's event-time watermark in Unix nanoseconds:
	// MinWatermark before any, MaxWatermark once its input ended.
	Watermark int64
	// ReadSinceRestore counts, for a source subtask, the records it read
	// since the current attempt restored (or started).
	ReadSinceRestore int64
}

// RecoveryCount counts recoveries of one cause and error class.
type RecoveryCount struct {
	// Cause is "restart" (an in-process restart after a failure) or
	// "checkpoint" (the job started from an existing checkpoint).
	Cause string
	// Class is the failure's class for restarts (see ErrorClass), "" for
	// starts from a checkpoint.
	Class string
	Count int64
}

// Failure is an attempt failure.
type Failure struct {
	At    time.Time
	Err   string
	Class string
}

// Observe returns a snapshot of the job's signals. It is safe to call at any
// time, also before Run and after it returned.
func (j *Job) Observe() Observation {
	o := j.obs.snapshot(j)
	if o.Phase != PhaseFinished && o.Phase != PhaseFailed {
		select {
		case <-j.stop:
			o.Phase = PhaseStopping
		default:
		}
	}
	return o
}

// Checkpoints returns the history of the last HistorySize checkpoints the
// job triggered, newest first.
func (j *Job) Checkpoints() []CheckpointRecord {
	j.obs.mu.Lock()
	defer j.obs.mu.Unlock()
	return j.obs.history.newestFirst()
}

// Checkpoint returns checkpoint id from the history; ok is false when the
// history does not hold it.
func (j *Job) Checkpoint(id int64) (CheckpointRecord, bool) {
	j.obs.mu.Lock()
	defer j.obs.mu.Unlock()
	r := j.obs.history.get(id)
	if r == nil {
		return CheckpointRecord{}, false
	}
	return r.clone(), true
}

// ErrNotRunning is returned by TriggerCheckpoint when the job cannot take a
// checkpoint now.
var ErrNotRunning = errors.New("the job is not running")

// TriggerCheckpoint triggers a checkpoint now, ignoring the interval and the
// min pause, and returns its id once it is triggered: at once, or when a
// checkpoint in flight leaves room (Options.Checkpoint.MaxConcurrent). The
// checkpoint then completes or fails like any other (see Checkpoint). It
// fails with ErrNotRunning when the job is not running, stops, or fails
// before the checkpoint was triggered, or when none could be triggered
// within the checkpoint timeout.
func (j *Job) TriggerCheckpoint() (int64, error) {
	j.obs.mu.Lock()
	phase := j.obs.phase
	j.obs.mu.Unlock()
	select {
	case <-j.stop:
		phase = PhaseStopping
	default:
	}
	if phase != PhaseRunning {
		if phase == "" {
			phase = PhaseStarting
		}
		return 0, fmt.Errorf("%w (it is %s)", ErrNotRunning, phase)
	}
	w := j.obs.wantTrigger()
	timer := j.clock.NewTimer(j.opts.Checkpoint.Timeout)
	defer timer.Stop()
	select {
	case r := <-w:
		return r.id, r.err
	case <-timer.C():
		j.obs.dropWaiter(w)
		return 0, fmt.Errorf("%w: no checkpoint could be triggered within the checkpoint timeout %v", ErrNotRunning, j.opts.Checkpoint.Timeout)
	case <-j.stop:
		j.obs.dropWaiter(w)
		return 0, fmt.Errorf("%w: the job is stopping (its final checkpoint is taken anyway)", ErrNotRunning)
	}
}

// ErrorClass classifies an attempt failure for recoveries by cause:
// "incompatible" (ErrIncompatible), "unrecoverable" (ErrUnrecoverable),
// "lock" (storage.ErrLocked), "cancelled",
// "recovery" (recovering from the checkpoint failed), "commit" (publishing
// a complete checkpoint's output failed), "checkpoint" (more consecutive
// checkpoint failures than tolerated), "panic" (user or connector code
// panicked), "injected" (a failpoint), "corrupt" (storage.ErrCorrupt) and
// "task" (any other subtask error). Observation.LastFailure and
// Observation.Recoveries carry it.
func ErrorClass(err error) string { return classify(err, "") }

// RestartClasses are the classes (ErrorClass) of the failures the job
// restarts after, the class label values of the "restart" recoveries:
// incompatible, unrecoverable, lock and cancelled end the run instead. Observation lists
// every one of them from the start, at zero until it happens.
var RestartClasses = []string{"task", "panic", "recovery", "commit", "checkpoint", "corrupt", "injected"}

// nodeKinds returns each node's kind: sources read, sinks have no consumer.
func nodeKinds(p *Plan) map[string]NodeKind {
	consumed := map[*Node]bool{}
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			consumed[e.From] = true
		}
	}
	kinds := make(map[string]NodeKind, len(p.Nodes))
	for _, n := range p.Nodes {
		switch {
		case n.NewSource != nil:
			kinds[n.ID] = KindSource
		case !consumed[n]:
			kinds[n.ID] = KindSink
		default:
			kinds[n.ID] = KindOperator
		}
	}
	return kinds
}

// nodes returns the graph's nodes with their subtasks' counters. The caller
// holds the observer's mutex.
func (ob *observer) nodes(p *Plan) []NodeObservation {
	kinds := nodeKinds(p)
	chained := map[*Node]bool{}
	for _, c := range p.Physical().Chains {
		for _, n := range c.Nodes[1:] {
			chained[n] = true
		}
	}
	out := make([]NodeObservation, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		no := NodeObservation{ID: n.ID, Type: n.Type, Describe: n.Describe, Kind: kinds[n.ID], Parallelism: n.Parallelism}
		for _, e := range n.Inputs {
			no.Inputs = append(no.Inputs, InputObservation{From: e.From.ID, Output: e.Output, Partitioning: e.Partitioner.String(),
				Input: e.Input, Chained: chained[n]})
		}
		for sub := 0; sub < n.Parallelism; sub++ {
			id := checkpoint.TaskID{Operator: n.ID, Subtask: sub}
			so := SubtaskObservation{Task: id, Watermark: MinWatermark}
			if c := ob.subtasks[id]; c != nil {
				so = c.observe(id)
			}
			no.Subtasks = append(no.Subtasks, so)
		}
		out = append(out, no)
	}
	return out
}

// snapshot assembles the Observation of j.
func (ob *observer) snapshot(j *Job) Observation {
	st := j.Stats()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	o := Observation{
		Pipeline: j.plan.Name, JobID: ob.jobID, At: ob.clock.Now(), Phase: ob.phase, StartedAt: ob.startedAt,
		Delivery: j.plan.Delivery(j.opts.Checkpoint.Mode), Stats: st,
		Nodes:              ob.nodes(j.plan),
		CheckpointDuration: ob.duration.snapshot(),
		Alignment:          ob.alignment.snapshot(), Sync: ob.sync.snapshot(), Async: ob.async.snapshot(),
		StorageWrite: ob.storageWrite.snapshot(),
		SinkPrepare:  ob.sinkPrepare.snapshot(), SinkCommit: ob.sinkCommit.snapshot(),
		PendingCommittables: map[string]int64{},
		ReplayedRecords:     ob.replayed, ReplayUnknown: ob.replayUnknown,
		AbandonedStaged: st.Abandoned, SweptStaged: ob.sweptStaged, RetentionDeleted: ob.retentionDeleted, RetentionTrimmed: ob.retentionTrimmed,
		LateRecords: ob.lateRecords(j.plan),
	}
	if o.Phase == "" {
		o.Phase = PhaseStarting
	}
	c := &o.Checkpoints
	c.Triggered, c.Completed, c.Failed, c.Committed = ob.triggeredN, ob.completedN, ob.failedN, ob.committedN
	c.InProgress = int64(len(ob.history.inProgress()))
	for _, id := range ob.committing {
		c.PendingCommit++
		if r := ob.history.get(id); r != nil {
			for sink, n := range r.Committables {
				o.PendingCommittables[sink] += int64(n)
			}
		}
	}
	if ob.last != nil {
		last := *ob.last
		c.LastCompleted = &last
	}
	c.LastStateSizeFull, c.LastStateSizeIncremental = ob.lastSizeFull, ob.lastSizeIncremental
	o.Recoveries = sortedRecoveries(ob.recoveries)
	o.zeroKnownLabels(j.plan)
	if ob.lastFailure != nil {
		f := *ob.lastFailure
		o.LastFailure = &f
	}
	if ob.lastSlow != nil {
		s := *ob.lastSlow
		o.LastSlowCheckpoint = &s
	}
	return o
}

// zeroKnownLabels adds, at zero, every label value of the distributions the
// plan and the runtime know of that has no observation yet: each node's
// alignment, sync and async times, each sink's prepare time and each
// committing sink's commit time, and both storage write kinds. Prometheus
// exporters then publish each series from the start, as its convention
// asks: a series that appears with its first increment escapes increase()
// and absent() alerts. (Recoveries lists what happened; RestartClasses
// names the rest.)
func (o *Observation) zeroKnownLabels(p *Plan) {
	zero := func(m map[string]Histogram, key string) {
		if _, ok := m[key]; !ok {
			m[key] = (&histogram{}).snapshot()
		}
	}
	kinds := nodeKinds(p)
	for _, n := range p.Nodes {
		zero(o.Alignment, n.ID)
		zero(o.Sync, n.ID)
		zero(o.Async, n.ID)
		if kinds[n.ID] == KindSink {
			zero(o.SinkPrepare, n.ID)
		}
		if n.Committer != nil {
			zero(o.SinkCommit, n.ID)
		}
	}
	zero(o.StorageWrite, "state")
	zero(o.StorageWrite, "metadata")
}
