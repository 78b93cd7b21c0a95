package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/httpapi"
	"github.com/ingest-engine/ingest/httpapi/httpapitest"
	"github.com/ingest-engine/ingest/runtime"
)

// troubleAt is the observation time of the scripted job below.
var troubleAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// troubledJob is a source (two subtasks, one read three times as much as the
// other) into a committing sink (one subtask), restarted once after its
// checkpoints timed out, with no checkpoint ever completed: checkpoint 2
// was acknowledged by the first source subtask only.
func troubledJob() *httpapitest.Job {
	task := func(op string, i int) checkpoint.TaskID { return checkpoint.TaskID{Operator: op, Subtask: i} }
	wm := troubleAt.Add(-90 * time.Second).UnixNano()
	o := runtime.Observation{
		Pipeline: "troubled", At: troubleAt, Phase: runtime.PhaseRunning, StartedAt: troubleAt.Add(-10 * time.Second),
		Stats: runtime.Stats{Restarts: 1},
		Nodes: []runtime.NodeObservation{
			{ID: "src", Kind: runtime.KindSource, Parallelism: 2, Subtasks: []runtime.SubtaskObservation{
				{Task: task("src", 0), RecordsIn: 3000, RecordsOut: 3000, Watermark: wm, Backpressure: 5 * time.Second},
				{Task: task("src", 1), RecordsIn: 1000, RecordsOut: 1000, Watermark: wm + int64(30*time.Second)},
			}},
			{ID: "out", Kind: runtime.KindSink, Parallelism: 1, Inputs: []runtime.InputObservation{{From: "src", Partitioning: "rebalance"}},
				Subtasks: []runtime.SubtaskObservation{{Task: task("out", 0), RecordsIn: 4000, Watermark: runtime.MinWatermark}}},
		},
		SinkCommit:          map[string]runtime.Histogram{"out": {Count: 4, Sum: 0.2}},
		SinkPrepare:         map[string]runtime.Histogram{"out": {Count: 0}},
		PendingCommittables: map[string]int64{"out": 3},
		LastFailure: &runtime.Failure{At: troubleAt.Add(-4 * time.Second), Class: "checkpoint",
			Err: "2 consecutive checkpoint failures, more than the 1 tolerated"},
	}
	o.Checkpoints.Triggered, o.Checkpoints.Failed = 2, 2
	history := []runtime.CheckpointRecord{
		{ID: 2, Attempt: 1, Status: runtime.CheckpointFailed, FailureReason: "checkpoint 2: timed out after 1s with 1 of 3 acknowledgements",
			TriggeredAt: troubleAt.Add(-3 * time.Second), EndedAt: troubleAt.Add(-2 * time.Second), Duration: time.Second, Tasks: 3,
			Subtasks: []runtime.SubtaskCheckpoint{{Task: task("src", 0), Sync: time.Millisecond}}},
		{ID: 1, Status: runtime.CheckpointFailed, FailureReason: "checkpoint 1: timed out after 1s with 0 of 3 acknowledgements",
			TriggeredAt: troubleAt.Add(-8 * time.Second), EndedAt: troubleAt.Add(-7 * time.Second), Duration: time.Second, Tasks: 3},
	}
	log := []runtime.RecoveryEvent{{At: troubleAt.Add(-3500 * time.Millisecond), Attempt: 1, Cause: "restart", Class: "checkpoint",
		Failure: o.LastFailure.Err, FailedAt: o.LastFailure.At}}
	return httpapitest.NewJob(httpapitest.State{Observation: o, History: history, Recoveries: log,
		Options: checkpoint.Options{Interval: 2 * time.Second, Timeout: time.Second, TolerableFailures: 1}})
}

// get fetches path from h and decodes its JSON into out.
func get(t *testing.T, h http.Handler, path string, out any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// The pipeline answer of a job in trouble carries what a person needs to
// see it: the health with its problems, the failed checkpoint with the
// subtasks that never acknowledged it, the restart that found no checkpoint
// to restore, the watermark's lag, each subtask's rates (the skew), the
// sink's commits and what the POST endpoints would answer.
func TestPipelineOfATroubledJob(t *testing.T) {
	job := troubledJob()
	var p struct {
		ObservedAt string `json:"observed_at"`
		Health     struct {
			Level, State, Summary string
			Problems              []struct{ State, Level, Message string }
		} `json:"health"`
		IntervalMS  float64 `json:"checkpoint_interval_ms"`
		Tolerable   int     `json:"tolerable_failed_checkpoints"`
		Consecutive int     `json:"consecutive_failed_checkpoints"`
		LastFailed  *struct {
			ID             int64
			Reason         string
			Unacknowledged []struct {
				Operator string
				Subtask  int
			}
		} `json:"last_failed_checkpoint"`
		Recoveries []struct {
			Cause, Class, Failure string
			Restored              *int64 `json:"restored_checkpoint"`
		} `json:"recovery_history"`
		Nodes []struct {
			ID       string
			LagMS    *float64 `json:"watermark_lag_ms"`
			Subtasks []struct {
				In    float64  `json:"records_in_per_second"`
				BP    float64  `json:"backpressure_ratio"`
				LagMS *float64 `json:"watermark_lag_ms"`
			}
		} `json:"nodes"`
		Sinks []struct {
			ID        string
			Committer bool
			Commits   uint64
			MeanMS    *float64 `json:"commit_mean_ms"`
			PrepareMS *float64 `json:"prepare_mean_ms"`
			Pending   int64    `json:"pending_committables"`
		} `json:"sinks"`
		Actions struct {
			Trigger struct {
				Enabled bool
				Reason  string
			} `json:"trigger_checkpoint"`
		} `json:"actions"`
	}
	get(t, httpapi.New(job, httpapi.Options{}), "/api/v1/pipeline", &p)

	var states []string
	for _, pr := range p.Health.Problems {
		states = append(states, pr.State)
	}
	if p.Health.Level != "critical" || p.Health.State != "checkpoints_failing" ||
		!slices.Equal(states, []string{"checkpoints_failing", "restarting", "checkpoints_stale"}) {
		t.Errorf("health %+v: want critical, checkpoints failing, restarting and stale", p.Health)
	}
	if !strings.Contains(p.Health.Summary, "the last 2 checkpoints failed") || !strings.Contains(p.Health.Summary, "no recovery point") {
		t.Errorf("summary %q", p.Health.Summary)
	}
	if p.ObservedAt != "2026-03-01T12:00:00Z" || p.IntervalMS != 2000 || p.Tolerable != 1 || p.Consecutive != 2 {
		t.Errorf("observed_at %s, interval %v ms, tolerable %d, consecutive %d", p.ObservedAt, p.IntervalMS, p.Tolerable, p.Consecutive)
	}
	if lf := p.LastFailed; lf == nil || lf.ID != 2 || !strings.Contains(lf.Reason, "1 of 3") || len(lf.Unacknowledged) != 2 ||
		lf.Unacknowledged[0].Operator != "src" || lf.Unacknowledged[0].Subtask != 1 || lf.Unacknowledged[1].Operator != "out" || lf.Unacknowledged[1].Subtask != 0 {
		t.Errorf("last failed checkpoint %+v: want 2, not acknowledged by src#1 and out#0", lf)
	}
	if len(p.Recoveries) != 1 || p.Recoveries[0].Cause != "restart" || p.Recoveries[0].Restored != nil || p.Recoveries[0].Class != "checkpoint" {
		t.Errorf("recovery history %+v: want one restart that restored nothing", p.Recoveries)
	}
	src := p.Nodes[0]
	// The node's watermark is the least of its subtasks': 90 s behind.
	if src.LagMS == nil || *src.LagMS != 90000 || src.Subtasks[1].LagMS == nil || *src.Subtasks[1].LagMS != 60000 {
		t.Errorf("source lag %v, subtask 1 lag %v: want 90000 and 60000 ms", src.LagMS, src.Subtasks[1].LagMS)
	}
	// The first answer's rates are since the start, 10 s before.
	if src.Subtasks[0].In != 300 || src.Subtasks[1].In != 100 || src.Subtasks[0].BP != 0.5 || src.Subtasks[1].BP != 0 {
		t.Errorf("source subtasks %+v: want 300/s and 100/s in, half and none of the time blocked", src.Subtasks)
	}
	if p.Nodes[1].LagMS != nil {
		t.Errorf("sink lag %v without a watermark, want null", *p.Nodes[1].LagMS)
	}
	if len(p.Sinks) != 1 || p.Sinks[0].ID != "out" || !p.Sinks[0].Committer || p.Sinks[0].Commits != 4 || p.Sinks[0].MeanMS == nil ||
		*p.Sinks[0].MeanMS != 50 || p.Sinks[0].PrepareMS != nil || p.Sinks[0].Pending != 3 {
		t.Errorf("sinks %+v: want out with 4 commits of 50 ms on average, no prepare yet, 3 committables pending", p.Sinks)
	}
	if p.Actions.Trigger.Enabled || !strings.Contains(p.Actions.Trigger.Reason, "no token is configured") {
		t.Errorf("trigger action %+v without a token: want disabled with the 403's reason", p.Actions.Trigger)
	}

	get(t, httpapi.New(job, httpapi.Options{Token: "t"}), "/api/v1/pipeline", &p)
	if !p.Actions.Trigger.Enabled || p.Actions.Trigger.Reason != "" {
		t.Errorf("trigger action %+v with a token: want enabled", p.Actions.Trigger)
	}
	job.Set(func(s *httpapitest.State) { s.Observation.Phase = runtime.PhaseRecovering })
	get(t, httpapi.New(job, httpapi.Options{Token: "t"}), "/api/v1/pipeline", &p)
	if p.Actions.Trigger.Enabled || !strings.Contains(p.Actions.Trigger.Reason, "recovering") {
		t.Errorf("trigger action %+v while recovering: want disabled, saying so", p.Actions.Trigger)
	}

	// The history names the subtasks of every checkpoint that did not
	// acknowledge it.
	var list struct {
		Checkpoints []struct {
			ID             int64
			Unacknowledged []struct {
				Operator string
				Subtask  int
			}
		}
	}
	get(t, httpapi.New(job, httpapi.Options{}), "/api/v1/checkpoints", &list)
	if len(list.Checkpoints) != 2 || len(list.Checkpoints[0].Unacknowledged) != 2 || len(list.Checkpoints[1].Unacknowledged) != 3 {
		t.Errorf("history %+v: want checkpoint 2 missing two acknowledgements and 1 all three", list.Checkpoints)
	}
}
