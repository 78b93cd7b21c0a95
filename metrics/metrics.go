// Package metrics exports a job's observation (runtime.Job.Observe) as
// Prometheus metrics: every signal the product description says to monitor,
// named ingest_*, labelled by pipeline and, where it applies, operator (or
// source, sink) and subtask. docs/metrics.md lists them with what to do when
// they move.
//
// The collector is pull-based: each scrape takes one Observation and turns
// it into constant metrics, so the runtime's hot path knows nothing of
// Prometheus. Every counter and histogram has a series for each known label
// value from the start, at 0 (Prometheus' convention, which increase() and
// absent() alerts need); only watermarks are absent until they exist.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector(job))
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingest-engine/ingest/runtime"
)

// Observer is what a Collector reads; *runtime.Job implements it.
type Observer interface {
	Observe() runtime.Observation
}

// Collector is a prometheus.Collector over one job's observation. Register
// one per job; the pipeline label tells jobs apart.
type Collector struct {
	job Observer
}

// NewCollector returns a collector of job's metrics.
func NewCollector(job Observer) *Collector { return &Collector{job: job} }

// desc declares a metric of the collector.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append([]string{"pipeline"}, labels...), nil)
}

// The collector's metrics; docs/metrics.md says what each means and what to
// do when it moves.
var (
	pipelineStatus = desc("ingest_pipeline_status",
		"1 for the pipeline's current status (starting, recovering, running, stopping, finished, failed), 0 for the others.", "status")
	pipelineStart = desc("ingest_pipeline_start_timestamp_seconds",
		"Unix time the job began running in this process.")

	checkpointDuration = desc("ingest_checkpoint_duration_seconds",
		"Duration of completed checkpoints, from trigger to durable metadata.")
	checkpointsTotal = desc("ingest_checkpoints_total",
		"Checkpoints that ended, by status: completed (a new recovery point) or failed (declined, timed out, storage error, subsumed, or in flight when the job failed).", "status")
	checkpointsInProgress = desc("ingest_checkpoints_in_progress",
		"Checkpoints triggered and neither complete nor failed.")
	lastCompletedTimestamp = desc("ingest_checkpoint_last_completed_timestamp_seconds",
		"Unix time the newest complete checkpoint (or the one the job restored) completed.")
	sinceLastCompleted = desc("ingest_checkpoint_seconds_since_last_completed",
		"Seconds since the newest complete checkpoint completed; since the job started when none has.")
	lastCompletedID = desc("ingest_checkpoint_last_completed_id",
		"Id of the newest complete checkpoint: the recovery point.")
	lastDuration = desc("ingest_checkpoint_last_duration_seconds",
		"Duration of the newest complete checkpoint, from trigger to durable metadata.")
	alignment = desc("ingest_checkpoint_alignment_seconds",
		"Per-subtask barrier alignment time (first to last barrier) of acknowledged checkpoints.", "operator")
	syncDuration = desc("ingest_checkpoint_sync_seconds",
		"Per-subtask synchronous snapshot time (processing is paused) of acknowledged checkpoints.", "operator")
	asyncDuration = desc("ingest_checkpoint_async_seconds",
		"Per-subtask asynchronous snapshot time (encoding and writing state off the task) of acknowledged checkpoints.", "operator")
	stateSize = desc("ingest_checkpoint_state_size_bytes",
		"State size of the newest complete checkpoint: full is everything it references; incremental is what it added (0: checkpoints are written in full).", "kind")
	storageWrite = desc("ingest_checkpoint_storage_write_seconds",
		"Checkpoint storage write latency, by kind: state (a subtask's state file) or metadata (the write that completes a checkpoint).", "kind")

	sinkPrepare = desc("ingest_sink_prepare_seconds",
		"Sink prepare latency: a sink subtask's snapshot at a barrier, which stages the output since the previous one.", "sink")
	sinkCommit = desc("ingest_sink_commit_seconds",
		"Sink commit latency: publishing one complete checkpoint's staged output of a sink.", "sink")
	pendingCommittables = desc("ingest_sink_pending_committables",
		"Staged sink items of complete checkpoints whose commit is not yet confirmed.", "sink")
	pendingCommit = desc("ingest_checkpoints_pending_commit",
		"Complete checkpoints whose output commit is not yet confirmed.")
	committedTotal = desc("ingest_checkpoints_committed_total",
		"Complete checkpoints whose output commit was confirmed.")

	recoveries = desc("ingest_recoveries_total",
		"Recoveries, by cause: restart (in-process, after a failure of class class) or checkpoint (the job started from an existing checkpoint).", "cause", "class")
	replayed = desc("ingest_replayed_records_total",
		"Records sources read a second time after in-process restarts: those between the restored checkpoint's barrier and the failure.")
	replayUnmeasured = desc("ingest_replay_unmeasured_total",
		"In-process restarts whose replayed records could not be counted (the restored checkpoint was taken before this process started).")
	abandoned = desc("ingest_abandoned_staged_total",
		"Staged sink items deleted because no checkpoint will publish them: at recoveries (at=recovery), or after a completed checkpoint when staged more than checkpoint.staging_max_age before its trigger (at=checkpoint).", "at")
	retentionDeleted = desc("ingest_retention_deleted_total",
		"Complete checkpoints deleted by retention: those beyond checkpoint.retain, and older ones the retention pass at a recovery removes.")
	retentionTrimmed = desc("ingest_retention_trimmed_total",
		"Trims by retention of checkpoints beyond checkpoint.retain that newer ones still reference files of: their metadata and every file nothing references deleted (again as references go).")

	recordsIn = desc("ingest_records_in_total",
		"Records a subtask received (for a source: read).", "operator", "subtask")
	recordsOut = desc("ingest_records_out_total",
		"Records a subtask emitted on its main output.", "operator", "subtask")
	backpressure = desc("ingest_backpressure_seconds_total",
		"Time a subtask's task waited to send on a full channel (backpressure from downstream).", "operator", "subtask")
	watermark = desc("ingest_watermark_timestamp_seconds",
		"Event-time watermark of a subtask, as Unix time (absent before its first watermark and after its input ended).", "operator", "subtask")
	watermarkLag = desc("ingest_watermark_lag_seconds",
		"Wall-clock time minus a source subtask's event-time watermark.", "source", "subtask")
	sinceRestore = desc("ingest_source_records_since_restore",
		"Records a source subtask read since the current attempt restored or started.", "source", "subtask")
	lateRecords = desc("ingest_late_records_total",
		"Late records an operator dropped (behind its watermark, with no side output to take them); 0 from the start for every operator that can drop them.", "operator")
)

var allDescs = []*prometheus.Desc{
	pipelineStatus, pipelineStart,
	checkpointDuration, checkpointsTotal, checkpointsInProgress, lastCompletedTimestamp, sinceLastCompleted, lastCompletedID,
	lastDuration, alignment, syncDuration, asyncDuration, stateSize, storageWrite,
	sinkPrepare, sinkCommit, pendingCommittables, pendingCommit, committedTotal,
	recoveries, replayed, replayUnmeasured, abandoned, retentionDeleted, retentionTrimmed,
	recordsIn, recordsOut, backpressure, watermark, watermarkLag, sinceRestore,
	lateRecords,
}

// phases are the values of ingest_pipeline_status's status label.
var phases = []runtime.Phase{runtime.PhaseStarting, runtime.PhaseRecovering, runtime.PhaseRunning,
	runtime.PhaseStopping, runtime.PhaseFinished, runtime.PhaseFailed}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Observation per scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	o := c.job.Observe()
	p := o.Pipeline
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{p}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{p}, labels...)...)
	}
	hist := func(d *prometheus.Desc, h runtime.Histogram, labels ...string) {
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Cumulative(), append([]string{p}, labels...)...)
	}
	hists := func(d *prometheus.Desc, m map[string]runtime.Histogram) {
		for k, h := range m {
			hist(d, h, k)
		}
	}

	for _, ph := range phases {
		v := 0.0
		if o.Phase == ph {
			v = 1
		}
		gauge(pipelineStatus, v, string(ph))
	}
	if !o.StartedAt.IsZero() {
		gauge(pipelineStart, seconds(o.StartedAt))
	}

	ck := o.Checkpoints
	hist(checkpointDuration, o.CheckpointDuration)
	counter(checkpointsTotal, float64(ck.Completed), "completed")
	counter(checkpointsTotal, float64(ck.Failed), "failed")
	gauge(checkpointsInProgress, float64(ck.InProgress))
	if lc := ck.LastCompleted; lc != nil {
		gauge(lastCompletedTimestamp, seconds(lc.CompletedAt))
		gauge(sinceLastCompleted, o.At.Sub(lc.CompletedAt).Seconds())
		gauge(lastCompletedID, float64(lc.ID))
		gauge(lastDuration, lc.Duration.Seconds())
	} else if !o.StartedAt.IsZero() {
		gauge(sinceLastCompleted, o.At.Sub(o.StartedAt).Seconds())
	}
	hists(alignment, o.Alignment)
	hists(syncDuration, o.Sync)
	hists(asyncDuration, o.Async)
	gauge(stateSize, float64(ck.LastStateSizeFull), "full")
	gauge(stateSize, float64(ck.LastStateSizeIncremental), "incremental")
	hists(storageWrite, o.StorageWrite)

	hists(sinkPrepare, o.SinkPrepare)
	hists(sinkCommit, o.SinkCommit)
	gauge(pendingCommit, float64(ck.PendingCommit))
	counter(committedTotal, float64(ck.Committed))

	// Every cause and class from the start, at 0 until it happens.
	seen := map[[2]string]bool{}
	for _, r := range o.Recoveries {
		counter(recoveries, float64(r.Count), r.Cause, r.Class)
		seen[[2]string{r.Cause, r.Class}] = true
	}
	for _, k := range knownRecoveries() {
		if !seen[k] {
			counter(recoveries, 0, k[0], k[1])
		}
	}
	counter(replayed, float64(o.ReplayedRecords))
	counter(replayUnmeasured, float64(o.ReplayUnknown))
	counter(abandoned, float64(o.AbandonedStaged), "recovery")
	counter(abandoned, float64(o.SweptStaged), "checkpoint")
	counter(retentionDeleted, float64(o.RetentionDeleted))
	counter(retentionTrimmed, float64(o.RetentionTrimmed))
	for op, n := range o.LateRecords {
		counter(lateRecords, float64(n), op)
	}

	for _, n := range o.Nodes {
		if n.Kind == runtime.KindSink {
			gauge(pendingCommittables, float64(o.PendingCommittables[n.ID]), n.ID)
		}
		for _, s := range n.Subtasks {
			sub := strconv.Itoa(s.Task.Subtask)
			counter(recordsIn, float64(s.RecordsIn), n.ID, sub)
			counter(recordsOut, float64(s.RecordsOut), n.ID, sub)
			counter(backpressure, s.Backpressure.Seconds(), n.ID, sub)
			hasWM := s.Watermark != runtime.MinWatermark && s.Watermark != runtime.MaxWatermark
			if hasWM {
				gauge(watermark, float64(s.Watermark)/1e9, n.ID, sub)
			}
			if n.Kind == runtime.KindSource {
				gauge(sinceRestore, float64(s.ReadSinceRestore), n.ID, sub)
				if hasWM {
					gauge(watermarkLag, o.At.Sub(time.Unix(0, s.Watermark)).Seconds(), n.ID, sub)
				}
			}
		}
	}
}

// knownRecoveries are the cause and class label values of
// ingest_recoveries_total: a start from a checkpoint (no class), and a
// restart of each class.
func knownRecoveries() [][2]string {
	out := [][2]string{{"checkpoint", ""}}
	for _, c := range runtime.RestartClasses {
		out = append(out, [2]string{"restart", c})
	}
	return out
}

// seconds is t as Unix seconds with a fraction.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
