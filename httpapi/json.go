package httpapi

import (
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// This file is the API's JSON contract. The dashboard is built against these
// field names: add fields, never rename or remove one.

// pipelineJSON is GET /api/v1/pipeline.
type pipelineJSON struct {
	Name      string  `json:"name"`
	JobID     string  `json:"job_id"`
	Status    string  `json:"status"`
	StartedAt *string `json:"started_at"`
	// Restarts counts in-process restarts after failures.
	Restarts  int64         `json:"restarts"`
	Guarantee guaranteeJSON `json:"guarantee"`
	Nodes     []nodeJSON    `json:"nodes"`
	// LastCheckpoint is the newest complete checkpoint, null when none.
	LastCheckpoint             *lastCheckpointJSON `json:"last_checkpoint"`
	SecondsSinceLastCheckpoint *float64            `json:"seconds_since_last_checkpoint"`
	// CommittedCheckpoints counts complete checkpoints whose output commit
	// was confirmed.
	CommittedCheckpoints int64 `json:"committed_checkpoints"`

	Checkpoints     checkpointCountsJSON `json:"checkpoints"`
	Recoveries      []recoveryJSON       `json:"recoveries"`
	ReplayedRecords int64                `json:"replayed_records"`
	AbandonedStaged int64                `json:"abandoned_staged"`
	SweptStaged     int64                `json:"swept_staged"`
	LastFailure     *failureJSON         `json:"last_failure"`

	// ObservedAt is when the job was observed for this answer.
	ObservedAt string `json:"observed_at"`
	// Health judges the job from what it reports (health.go).
	Health healthJSON `json:"health"`
	// CheckpointIntervalMS (0: no periodic checkpoints), CheckpointTimeoutMS
	// and TolerableFailedCheckpoints are the job's checkpoint options.
	CheckpointIntervalMS       float64 `json:"checkpoint_interval_ms"`
	CheckpointTimeoutMS        float64 `json:"checkpoint_timeout_ms"`
	TolerableFailedCheckpoints int     `json:"tolerable_failed_checkpoints"`
	// ConsecutiveFailedCheckpoints counts the checkpoints of the history
	// that failed since the newest completed one.
	ConsecutiveFailedCheckpoints int `json:"consecutive_failed_checkpoints"`
	// LastFailedCheckpoint is the newest failed checkpoint of the history,
	// null when none.
	LastFailedCheckpoint *failedCheckpointJSON `json:"last_failed_checkpoint"`
	// RecoveryHistory are the job's last recoveries, newest first.
	RecoveryHistory []recoveryEventJSON `json:"recovery_history"`
	// LastCommit is the newest checkpoint whose output commit was
	// confirmed, null when none.
	LastCommit *commitJSON `json:"last_commit"`
	// Sinks are the sink nodes' commit figures, in the nodes' order.
	Sinks []sinkJSON `json:"sinks"`
	// Actions says whether each POST endpoint can act now, and why not.
	Actions actionsJSON `json:"actions"`
}

// failedCheckpointJSON is pipeline.last_failed_checkpoint.
type failedCheckpointJSON struct {
	ID             int64      `json:"id"`
	TriggerTime    string     `json:"trigger_time"`
	EndTime        *string    `json:"end_time"`
	Reason         string     `json:"reason"`
	Unacknowledged []taskJSON `json:"unacknowledged"`
}

// taskJSON names a subtask.
type taskJSON struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
}

// recoveryEventJSON is one recovery (runtime.RecoveryEvent).
type recoveryEventJSON struct {
	Time    string `json:"time"`
	Attempt int    `json:"attempt"`
	// Cause is "restart" or "checkpoint" (a start from an earlier
	// process's checkpoint); Class, Failure and FailedAt describe the
	// failure a restart followed.
	Cause    string  `json:"cause"`
	Class    string  `json:"class"`
	Failure  string  `json:"failure"`
	FailedAt *string `json:"failed_at"`
	// RestoredCheckpoint is the checkpoint restored; null when none existed
	// and the attempt started over from the sources' initial positions.
	RestoredCheckpoint *int64 `json:"restored_checkpoint"`
}

// commitJSON is pipeline.last_commit.
type commitJSON struct {
	Checkpoint  int64  `json:"checkpoint"`
	CommittedAt string `json:"committed_at"`
	// LatencyMS is the time from the checkpoint's completion to the
	// confirmation of its commit: how much later than the checkpoint the
	// output became visible.
	LatencyMS float64 `json:"latency_ms"`
}

// sinkJSON is one sink's commit figures.
type sinkJSON struct {
	ID string `json:"id"`
	// Committer is set when the sink publishes output at checkpoint
	// completion (a two-phase commit sink).
	Committer bool `json:"committer"`
	// Commits counts its commits since the job was created;
	// CommitMeanMS is their mean duration, null before the first.
	Commits      uint64   `json:"commits"`
	CommitMeanMS *float64 `json:"commit_mean_ms"`
	// Prepares and PrepareMeanMS are the same for its prepares (the
	// staging of output at each barrier).
	Prepares      uint64   `json:"prepares"`
	PrepareMeanMS *float64 `json:"prepare_mean_ms"`
	// PendingCommittables counts the staged items of complete checkpoints
	// whose commit is not yet confirmed.
	PendingCommittables int64 `json:"pending_committables"`
}

type guaranteeJSON struct {
	Level   string   `json:"level"`
	Reasons []string `json:"reasons"`
}

type nodeJSON struct {
	ID          string      `json:"id"`
	Kind        string      `json:"kind"`
	Type        string      `json:"type"`
	Describe    string      `json:"describe"`
	Parallelism int         `json:"parallelism"`
	Inputs      []inputJSON `json:"inputs"`
	RecordsIn   int64       `json:"records_in"`
	RecordsOut  int64       `json:"records_out"`
	// Rates are per second over the last seconds (see sampler).
	RecordsInPerSecond  float64 `json:"records_in_per_second"`
	RecordsOutPerSecond float64 `json:"records_out_per_second"`
	// BackpressureRatio is the share of the last seconds the node's
	// subtasks spent waiting on full channels, 0..1.
	BackpressureRatio float64 `json:"backpressure_ratio"`
	// Watermark is the least of the subtasks' watermarks; null before every
	// subtask has one and after the input ended. WatermarkLagMS is how far
	// it is behind the time of the observation (null with it).
	Watermark      *string       `json:"watermark"`
	WatermarkLagMS *float64      `json:"watermark_lag_ms"`
	Subtasks       []subtaskJSON `json:"subtasks"`
}

type inputJSON struct {
	From         string `json:"from"`
	Output       string `json:"output,omitempty"`
	Partitioning string `json:"partitioning"`
	Chained      bool   `json:"chained"`
}

type subtaskJSON struct {
	Subtask             int     `json:"subtask"`
	RecordsIn           int64   `json:"records_in"`
	RecordsOut          int64   `json:"records_out"`
	BackpressureSeconds float64 `json:"backpressure_seconds"`
	Watermark           *string `json:"watermark"`
	// The subtask's rates, lag and backpressure as its node's (nodeJSON):
	// siblings far apart are skew.
	WatermarkLagMS      *float64 `json:"watermark_lag_ms"`
	RecordsInPerSecond  float64  `json:"records_in_per_second"`
	RecordsOutPerSecond float64  `json:"records_out_per_second"`
	BackpressureRatio   float64  `json:"backpressure_ratio"`
}

type lastCheckpointJSON struct {
	ID          int64   `json:"id"`
	CompletedAt string  `json:"completed_at"`
	DurationMS  float64 `json:"duration_ms"`
	// Restored marks the checkpoint the job restored, before it completed
	// one of its own.
	Restored bool `json:"restored"`
}

type checkpointCountsJSON struct {
	Triggered     int64 `json:"triggered"`
	Completed     int64 `json:"completed"`
	Failed        int64 `json:"failed"`
	InProgress    int64 `json:"in_progress"`
	PendingCommit int64 `json:"pending_commit"`
}

type recoveryJSON struct {
	Cause string `json:"cause"`
	Class string `json:"class"`
	Count int64  `json:"count"`
}

type failureJSON struct {
	Time  string `json:"time"`
	Error string `json:"error"`
	Class string `json:"class"`
}

// checkpointList is GET /api/v1/checkpoints.
type checkpointList struct {
	Checkpoints []checkpointJSON `json:"checkpoints"`
}

// checkpointJSON is one checkpoint of the history.
type checkpointJSON struct {
	ID          int64   `json:"id"`
	TriggerTime string  `json:"trigger_time"`
	EndTime     *string `json:"end_time"`
	// DurationMS is trigger to end; for a checkpoint in progress, the time
	// since its trigger.
	DurationMS      float64 `json:"duration_ms"`
	SyncMS          float64 `json:"sync_ms"`
	AsyncMS         float64 `json:"async_ms"`
	AlignmentMaxMS  float64 `json:"alignment_max_ms"`
	StateSizeBytes  int64   `json:"state_size_bytes"`
	IncrementalSize int64   `json:"incremental_size_bytes"`
	// FilesReused counts the earlier checkpoints' state files its
	// incremental snapshots build on.
	FilesReused     int     `json:"files_reused"`
	Status          string  `json:"status"`
	FailureReason   string  `json:"failure_reason"`
	Final           bool    `json:"final"`
	Attempt         int     `json:"attempt"`
	Tasks           int     `json:"tasks"`
	Acknowledged    int     `json:"acknowledged"`
	StorageWriteMS  float64 `json:"storage_write_max_ms"`
	MetadataWriteMS float64 `json:"metadata_write_ms"`
	Committed       bool    `json:"committed"`
	// CommittedAt is when its output commit was confirmed and
	// CommitLatencyMS how long after its completion; null until then.
	CommittedAt     *string  `json:"committed_at"`
	CommitLatencyMS *float64 `json:"commit_latency_ms"`
	// Unacknowledged are the subtasks whose acknowledgement had not arrived
	// when it ended (or, in progress, has not yet): for a failed checkpoint,
	// the subtasks that never acknowledged it. Empty once completed.
	Unacknowledged []taskJSON `json:"unacknowledged"`
}

// checkpointDetail is GET /api/v1/checkpoints/{id}.
type checkpointDetail struct {
	checkpointJSON
	Subtasks     []subtaskCheckpointJSON `json:"subtasks"`
	Committables map[string]int          `json:"committables"`
}

type subtaskCheckpointJSON struct {
	Operator       string  `json:"operator"`
	Subtask        int     `json:"subtask"`
	SyncMS         float64 `json:"sync_ms"`
	AsyncMS        float64 `json:"async_ms"`
	AlignmentMS    float64 `json:"alignment_ms"`
	StateSizeBytes int64   `json:"state_size_bytes"`
	// StateReusedBytes are taken from SharedFiles earlier state files.
	StateReusedBytes int64   `json:"state_reused_bytes"`
	SharedFiles      int     `json:"shared_files"`
	StorageWriteMS   float64 `json:"storage_write_ms"`
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rfc3339 formats t in UTC with the precision it has.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// optTime is t formatted, or nil when zero.
func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

// watermarkTime formats an event-time watermark, nil when there is none
// yet or the input ended.
func watermarkTime(wm int64) *string {
	if wm == runtime.MinWatermark || wm == runtime.MaxWatermark {
		return nil
	}
	return optTime(time.Unix(0, wm))
}

// watermarkLag is how far watermark wm is behind at, nil when there is
// none.
func watermarkLag(wm int64, at time.Time) *float64 {
	if wm == runtime.MinWatermark || wm == runtime.MaxWatermark {
		return nil
	}
	lag := ms(at.Sub(time.Unix(0, wm)))
	return &lag
}

// view is everything a pipeline answer is made of.
type view struct {
	o        runtime.Observation
	delivery runtime.Delivery
	rates    map[string]nodeRate
	history  []runtime.CheckpointRecord // newest first
	log      []runtime.RecoveryEvent    // newest first
	opts     checkpoint.Options
	actions  actionsJSON
}

func pipelineOf(v view) pipelineJSON {
	o, d := v.o, v.delivery
	lines := d.Lines()
	p := pipelineJSON{
		Name: o.Pipeline, JobID: o.JobID, Status: string(o.Phase), StartedAt: optTime(o.StartedAt), Restarts: o.Stats.Restarts,
		Guarantee:            guaranteeJSON{Level: d.Level.String(), Reasons: append([]string{}, lines[1:]...)},
		Nodes:                []nodeJSON{},
		CommittedCheckpoints: o.Checkpoints.Committed,
		Checkpoints: checkpointCountsJSON{Triggered: o.Checkpoints.Triggered, Completed: o.Checkpoints.Completed,
			Failed: o.Checkpoints.Failed, InProgress: o.Checkpoints.InProgress, PendingCommit: o.Checkpoints.PendingCommit},
		Recoveries:      []recoveryJSON{},
		ReplayedRecords: o.ReplayedRecords, AbandonedStaged: o.AbandonedStaged, SweptStaged: o.SweptStaged,
		ObservedAt:           rfc3339(o.At),
		CheckpointIntervalMS: ms(v.opts.Interval), CheckpointTimeoutMS: ms(v.opts.Timeout), TolerableFailedCheckpoints: v.opts.TolerableFailures,
		RecoveryHistory: []recoveryEventJSON{},
		Sinks:           []sinkJSON{},
		Actions:         v.actions,
	}
	for _, n := range o.Nodes {
		nj := nodeJSON{ID: n.ID, Kind: string(n.Kind), Type: n.Type, Describe: n.Describe, Parallelism: n.Parallelism,
			Inputs: []inputJSON{}, Subtasks: []subtaskJSON{}}
		for _, in := range n.Inputs {
			nj.Inputs = append(nj.Inputs, inputJSON{From: in.From, Output: in.Output, Partitioning: in.Partitioning, Chained: in.Chained})
		}
		r := v.rates[n.ID]
		wm, ok := runtime.MaxWatermark, true
		for i, s := range n.Subtasks {
			nj.RecordsIn += s.RecordsIn
			nj.RecordsOut += s.RecordsOut
			if s.Watermark == runtime.MinWatermark {
				ok = false
			}
			wm = min(wm, s.Watermark)
			sj := subtaskJSON{Subtask: s.Task.Subtask, RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut,
				BackpressureSeconds: s.Backpressure.Seconds(), Watermark: watermarkTime(s.Watermark), WatermarkLagMS: watermarkLag(s.Watermark, o.At)}
			if i < len(r.subtasks) {
				sr := r.subtasks[i]
				sj.RecordsInPerSecond, sj.RecordsOutPerSecond, sj.BackpressureRatio = sr.in, sr.out, sr.backpressure
			}
			nj.Subtasks = append(nj.Subtasks, sj)
		}
		if ok {
			nj.Watermark, nj.WatermarkLagMS = watermarkTime(wm), watermarkLag(wm, o.At)
		}
		nj.RecordsInPerSecond, nj.RecordsOutPerSecond, nj.BackpressureRatio = r.in, r.out, r.backpressure
		p.Nodes = append(p.Nodes, nj)
		if n.Kind == runtime.KindSink {
			p.Sinks = append(p.Sinks, sinkOf(n.ID, o))
		}
	}
	if lc := o.Checkpoints.LastCompleted; lc != nil {
		p.LastCheckpoint = &lastCheckpointJSON{ID: lc.ID, CompletedAt: rfc3339(lc.CompletedAt), DurationMS: ms(lc.Duration), Restored: lc.Restored}
		since := o.At.Sub(lc.CompletedAt).Seconds()
		p.SecondsSinceLastCheckpoint = &since
	}
	for _, r := range o.Recoveries {
		p.Recoveries = append(p.Recoveries, recoveryJSON{Cause: r.Cause, Class: r.Class, Count: r.Count})
	}
	if f := o.LastFailure; f != nil {
		p.LastFailure = &failureJSON{Time: rfc3339(f.At), Error: f.Err, Class: f.Class}
	}
	p.ConsecutiveFailedCheckpoints = len(failedInARow(v.history))
	tasks := taskSet(o)
	for _, r := range v.history {
		if r.Status == runtime.CheckpointFailed {
			p.LastFailedCheckpoint = &failedCheckpointJSON{ID: r.ID, TriggerTime: rfc3339(r.TriggeredAt), EndTime: optTime(r.EndedAt),
				Reason: r.FailureReason, Unacknowledged: unacknowledged(r, tasks)}
			break
		}
	}
	for _, r := range v.history {
		if r.Committed && !r.CommittedAt.IsZero() {
			p.LastCommit = &commitJSON{Checkpoint: r.ID, CommittedAt: rfc3339(r.CommittedAt), LatencyMS: ms(r.CommittedAt.Sub(r.EndedAt))}
			break
		}
	}
	for _, e := range v.log {
		ej := recoveryEventJSON{Time: rfc3339(e.At), Attempt: e.Attempt, Cause: e.Cause, Class: e.Class, Failure: e.Failure, FailedAt: optTime(e.FailedAt)}
		if e.Restored != 0 {
			id := e.Restored
			ej.RestoredCheckpoint = &id
		}
		p.RecoveryHistory = append(p.RecoveryHistory, ej)
	}
	p.Health = judge(healthInput{o: o, history: v.history, log: v.log, interval: v.opts.Interval, tolerate: v.opts.TolerableFailures})
	return p
}

// sinkOf returns sink id's commit figures.
func sinkOf(id string, o runtime.Observation) sinkJSON {
	s := sinkJSON{ID: id, PendingCommittables: o.PendingCommittables[id]}
	mean := func(h runtime.Histogram) *float64 {
		if h.Count == 0 {
			return nil
		}
		m := h.Sum / float64(h.Count) * 1000
		return &m
	}
	if h, ok := o.SinkCommit[id]; ok {
		s.Committer, s.Commits, s.CommitMeanMS = true, h.Count, mean(h)
	}
	if h, ok := o.SinkPrepare[id]; ok {
		s.Prepares, s.PrepareMeanMS = h.Count, mean(h)
	}
	return s
}

// taskSet lists every subtask of the graph, in the nodes' order.
func taskSet(o runtime.Observation) []checkpoint.TaskID {
	var out []checkpoint.TaskID
	for _, n := range o.Nodes {
		for _, s := range n.Subtasks {
			out = append(out, s.Task)
		}
	}
	return out
}

// unacknowledged returns the subtasks of tasks that did not acknowledge r:
// none once it completed.
func unacknowledged(r runtime.CheckpointRecord, tasks []checkpoint.TaskID) []taskJSON {
	out := []taskJSON{}
	if r.Status == runtime.CheckpointCompleted {
		return out
	}
	acked := make(map[checkpoint.TaskID]bool, len(r.Subtasks))
	for _, s := range r.Subtasks {
		acked[s.Task] = true
	}
	for _, t := range tasks {
		if !acked[t] {
			out = append(out, taskJSON{Operator: t.Operator, Subtask: t.Subtask})
		}
	}
	return out
}

// checkpointOf is r as the history lists it at now (the in-progress
// duration counts to now); tasks are the graph's subtasks.
func checkpointOf(r runtime.CheckpointRecord, now time.Time, tasks []checkpoint.TaskID) checkpointJSON {
	d := r.Duration
	if r.Status == runtime.CheckpointInProgress {
		d = now.Sub(r.TriggeredAt)
	}
	c := checkpointJSON{
		ID: r.ID, TriggerTime: rfc3339(r.TriggeredAt), EndTime: optTime(r.EndedAt), DurationMS: ms(d),
		SyncMS: ms(r.SyncMax), AsyncMS: ms(r.AsyncMax), AlignmentMaxMS: ms(r.AlignmentMax),
		StateSizeBytes: r.StateSizeFull, IncrementalSize: r.StateSizeIncremental, FilesReused: r.FilesReused,
		Status: string(r.Status), FailureReason: r.FailureReason, Final: r.Final, Attempt: r.Attempt,
		Tasks: r.Tasks, Acknowledged: len(r.Subtasks), StorageWriteMS: ms(r.StateWriteMax), MetadataWriteMS: ms(r.MetadataWrite),
		Committed: r.Committed, Unacknowledged: unacknowledged(r, tasks),
	}
	if r.Committed && !r.CommittedAt.IsZero() {
		c.CommittedAt = optTime(r.CommittedAt)
		lat := ms(r.CommittedAt.Sub(r.EndedAt))
		c.CommitLatencyMS = &lat
	}
	return c
}

func detailOf(r runtime.CheckpointRecord, now time.Time, tasks []checkpoint.TaskID) checkpointDetail {
	d := checkpointDetail{checkpointJSON: checkpointOf(r, now, tasks), Subtasks: []subtaskCheckpointJSON{}, Committables: map[string]int{}}
	for _, s := range r.Subtasks {
		d.Subtasks = append(d.Subtasks, subtaskCheckpointJSON{Operator: s.Task.Operator, Subtask: s.Task.Subtask,
			SyncMS: ms(s.Sync), AsyncMS: ms(s.Async), AlignmentMS: ms(s.Alignment), StateSizeBytes: s.StateSize,
			StateReusedBytes: s.StateReused, SharedFiles: s.SharedFiles, StorageWriteMS: ms(s.StorageWrite)})
	}
	for k, v := range r.Committables {
		d.Committables[k] = v
	}
	return d
}
