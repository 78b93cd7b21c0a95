package httpapi

import (
	"time"

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
	// subtask has one and after the input ended.
	Watermark *string       `json:"watermark"`
	Subtasks  []subtaskJSON `json:"subtasks"`
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
	Status          string  `json:"status"`
	FailureReason   string  `json:"failure_reason"`
	Final           bool    `json:"final"`
	Attempt         int     `json:"attempt"`
	Tasks           int     `json:"tasks"`
	Acknowledged    int     `json:"acknowledged"`
	StorageWriteMS  float64 `json:"storage_write_max_ms"`
	MetadataWriteMS float64 `json:"metadata_write_ms"`
	Committed       bool    `json:"committed"`
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
	StorageWriteMS float64 `json:"storage_write_ms"`
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

func pipelineOf(o runtime.Observation, d runtime.Delivery, rates map[string]nodeRate) pipelineJSON {
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
	}
	for _, n := range o.Nodes {
		nj := nodeJSON{ID: n.ID, Kind: string(n.Kind), Type: n.Type, Describe: n.Describe, Parallelism: n.Parallelism,
			Inputs: []inputJSON{}, Subtasks: []subtaskJSON{}}
		for _, in := range n.Inputs {
			nj.Inputs = append(nj.Inputs, inputJSON{From: in.From, Output: in.Output, Partitioning: in.Partitioning, Chained: in.Chained})
		}
		wm, ok := runtime.MaxWatermark, true
		for _, s := range n.Subtasks {
			nj.RecordsIn += s.RecordsIn
			nj.RecordsOut += s.RecordsOut
			if s.Watermark == runtime.MinWatermark {
				ok = false
			}
			wm = min(wm, s.Watermark)
			nj.Subtasks = append(nj.Subtasks, subtaskJSON{Subtask: s.Task.Subtask, RecordsIn: s.RecordsIn, RecordsOut: s.RecordsOut,
				BackpressureSeconds: s.Backpressure.Seconds(), Watermark: watermarkTime(s.Watermark)})
		}
		if ok {
			nj.Watermark = watermarkTime(wm)
		}
		r := rates[n.ID]
		nj.RecordsInPerSecond, nj.RecordsOutPerSecond, nj.BackpressureRatio = r.in, r.out, r.backpressure
		p.Nodes = append(p.Nodes, nj)
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
	return p
}

func checkpointOf(r runtime.CheckpointRecord) checkpointJSON {
	d := r.Duration
	if r.Status == runtime.CheckpointInProgress {
		d = time.Since(r.TriggeredAt)
	}
	return checkpointJSON{
		ID: r.ID, TriggerTime: rfc3339(r.TriggeredAt), EndTime: optTime(r.EndedAt), DurationMS: ms(d),
		SyncMS: ms(r.SyncMax), AsyncMS: ms(r.AsyncMax), AlignmentMaxMS: ms(r.AlignmentMax),
		StateSizeBytes: r.StateSizeFull, IncrementalSize: r.StateSizeIncremental,
		Status: string(r.Status), FailureReason: r.FailureReason, Final: r.Final, Attempt: r.Attempt,
		Tasks: r.Tasks, Acknowledged: len(r.Subtasks), StorageWriteMS: ms(r.StateWriteMax), MetadataWriteMS: ms(r.MetadataWrite),
		Committed: r.Committed,
	}
}

func detailOf(r runtime.CheckpointRecord) checkpointDetail {
	d := checkpointDetail{checkpointJSON: checkpointOf(r), Subtasks: []subtaskCheckpointJSON{}, Committables: map[string]int{}}
	for _, s := range r.Subtasks {
		d.Subtasks = append(d.Subtasks, subtaskCheckpointJSON{Operator: s.Task.Operator, Subtask: s.Task.Subtask,
			SyncMS: ms(s.Sync), AsyncMS: ms(s.Async), AlignmentMS: ms(s.Alignment), StateSizeBytes: s.StateSize,
			StorageWriteMS: ms(s.StorageWrite)})
	}
	for k, v := range r.Committables {
		d.Committables[k] = v
	}
	return d
}
