package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// t0 is the observation time of the health cases.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// completed and failed are history records that ended at t0 - ago.
func completed(id int64, ago time.Duration) runtime.CheckpointRecord {
	return runtime.CheckpointRecord{ID: id, Status: runtime.CheckpointCompleted, TriggeredAt: t0.Add(-ago - time.Millisecond), EndedAt: t0.Add(-ago)}
}

func failed(id int64, ago time.Duration, reason string) runtime.CheckpointRecord {
	return runtime.CheckpointRecord{ID: id, Status: runtime.CheckpointFailed, FailureReason: reason, TriggeredAt: t0.Add(-ago - time.Second), EndedAt: t0.Add(-ago)}
}

// running is an observation at t0 of a job running since started ago whose
// newest complete checkpoint is last (nil: none).
func running(started time.Duration, last *runtime.CompletedCheckpoint) runtime.Observation {
	o := runtime.Observation{At: t0, Phase: runtime.PhaseRunning, StartedAt: t0.Add(-started)}
	o.Checkpoints.LastCompleted = last
	return o
}

func lastAt(id int64, ago time.Duration) *runtime.CompletedCheckpoint {
	return &runtime.CompletedCheckpoint{ID: id, CompletedAt: t0.Add(-ago)}
}

// Each case is a state of a job and the health the API must report: the
// level, the state, the problems in order, and words the summary must have.
func TestJudgeHealth(t *testing.T) {
	s := time.Second
	restartAt := func(ago time.Duration, restored int64) []runtime.RecoveryEvent {
		return []runtime.RecoveryEvent{{At: t0.Add(-ago), Attempt: 1, Cause: "restart", Class: "checkpoint",
			Failure: "5 consecutive checkpoint failures", FailedAt: t0.Add(-ago - s), Restored: restored}}
	}
	withRestarts := func(o runtime.Observation, n int64, ph runtime.Phase) runtime.Observation {
		o.Stats.Restarts, o.Phase = n, ph
		o.LastFailure = &runtime.Failure{At: t0.Add(-3 * s), Err: "task enrich#1: connection reset", Class: "task"}
		return o
	}
	cases := []struct {
		name     string
		in       healthInput
		level    string
		state    string
		problems []string
		summary  []string
		since    time.Time
	}{
		{name: "healthy", in: healthInput{o: running(time.Minute, lastAt(9, s)), history: []runtime.CheckpointRecord{completed(9, s)}, interval: 2 * s},
			level: "ok", state: "healthy", summary: []string{"running", "2s interval"}},
		{name: "exactly two intervals old is not stale yet", in: healthInput{o: running(time.Minute, lastAt(9, 4*s)), interval: 2 * s},
			level: "ok", state: "healthy"},
		{name: "stale", in: healthInput{o: running(time.Minute, lastAt(9, 5*s)), history: []runtime.CheckpointRecord{completed(9, 5*s)}, interval: 2 * s},
			level: "warning", state: "checkpoints_stale", problems: []string{"checkpoints_stale"},
			summary: []string{"no checkpoint completed for 5s since checkpoint 9", "2 × the 2s interval"}, since: t0.Add(-5 * s)},
		{name: "none completed within two intervals of the start", in: healthInput{o: running(5*s, nil), interval: 2 * s},
			level: "warning", state: "checkpoints_stale", problems: []string{"checkpoints_stale"}, summary: []string{"since the job started"}, since: t0.Add(-5 * s)},
		{name: "young job without a checkpoint", in: healthInput{o: running(3*s, nil), interval: 2 * s},
			level: "ok", state: "healthy"},
		{name: "a checkpoint restored from an earlier process counts from the start",
			in:    healthInput{o: running(s, &runtime.CompletedCheckpoint{ID: 4, CompletedAt: t0.Add(-time.Hour), Restored: true}), interval: 2 * s},
			level: "ok", state: "healthy"},
		{name: "no interval, no staleness", in: healthInput{o: running(time.Hour, nil)}, level: "ok", state: "healthy"},
		{name: "one checkpoint failed after completed ones",
			in: healthInput{o: running(time.Minute, lastAt(11, 3*s)), interval: 2 * s, tolerate: 3,
				history: []runtime.CheckpointRecord{failed(12, s, "checkpoint 12: timed out after 1s with 4 of 5 acknowledgements"), completed(11, 3*s)}},
			level: "warning", state: "checkpoints_failing", problems: []string{"checkpoints_failing"},
			summary: []string{"the last checkpoint failed", "more than 3 in a row restart the job", "checkpoint 12: timed out"}, since: t0.Add(-s)},
		{name: "in progress checkpoints do not hide a failure",
			in: healthInput{o: running(time.Minute, lastAt(11, 3*s)), interval: 2 * s,
				history: []runtime.CheckpointRecord{{ID: 14, Status: runtime.CheckpointInProgress}, failed(13, s, "x"), failed(12, 2*s, "y"), completed(11, 3*s)}},
			level: "critical", state: "checkpoints_failing", problems: []string{"checkpoints_failing"},
			summary: []string{"the last 2 checkpoints failed", "checkpoint 13: x"}, since: t0.Add(-2 * s)},
		{name: "failing without a recovery point",
			in:    healthInput{o: running(3*s, nil), interval: 2 * s, history: []runtime.CheckpointRecord{failed(1, s, "timed out")}},
			level: "critical", state: "checkpoints_failing", problems: []string{"checkpoints_failing"}, summary: []string{"none has completed, so there is no recovery point"}},
		{name: "the job failed",
			in:    healthInput{o: withRestarts(running(time.Minute, lastAt(3, 4*s)), 1, runtime.PhaseFailed), interval: 10 * s},
			level: "critical", state: "failed", problems: []string{"failed"}, summary: []string{"the job failed (task): task enrich#1: connection reset"}, since: t0.Add(-3 * s)},
		{name: "recovering after a restart",
			in:    healthInput{o: withRestarts(running(time.Minute, lastAt(3, 4*s)), 2, runtime.PhaseRecovering), interval: 10 * s},
			level: "warning", state: "restarting", problems: []string{"restarting"}, summary: []string{"recovering after restart 2 (task)"}},
		{name: "recovering from a checkpoint at the start is not trouble",
			in:    healthInput{o: runtime.Observation{At: t0, Phase: runtime.PhaseRecovering, StartedAt: t0.Add(-s)}, interval: 10 * s},
			level: "ok", state: "recovering"},
		{name: "restarted from nothing and no checkpoint since",
			in:    healthInput{o: withRestarts(running(time.Minute, nil), 1, runtime.PhaseRunning), log: restartAt(s, 0), interval: time.Minute},
			level: "warning", state: "restarting", problems: []string{"restarting"},
			summary: []string{"restarted once", "started over: no complete checkpoint existed", "5 consecutive checkpoint failures"}, since: t0.Add(-s)},
		{name: "restarted from a checkpoint and none since",
			in:    healthInput{o: withRestarts(running(time.Minute, lastAt(7, 10*s)), 3, runtime.PhaseRunning), log: restartAt(s, 7), interval: time.Minute},
			level: "warning", state: "restarting", problems: []string{"restarting"}, summary: []string{"restarted 3 times", "restored checkpoint 7"}},
		{name: "a checkpoint completed since the restart",
			in:    healthInput{o: withRestarts(running(time.Minute, lastAt(8, s)), 1, runtime.PhaseRunning), log: restartAt(2*s, 7), interval: time.Minute},
			level: "ok", state: "healthy"},
		{name: "finished", in: healthInput{o: runtime.Observation{At: t0, Phase: runtime.PhaseFinished, StartedAt: t0.Add(-time.Hour)}, interval: s,
			history: []runtime.CheckpointRecord{failed(2, s, "x")}}, level: "ok", state: "finished"},
		// The state the issue reported: checkpoints forced to time out, 0
		// completed, 15 failed, 5 restarts, the job running again.
		{name: "timeouts, restarts, nothing completed",
			in: func() healthInput {
				var h []runtime.CheckpointRecord
				for id := int64(15); id >= 1; id-- {
					h = append(h, failed(id, time.Duration(16-id)*2*s, "timed out after 1s with 4 of 5 acknowledgements"))
				}
				return healthInput{o: withRestarts(running(40*s, nil), 5, runtime.PhaseRunning), history: h, log: restartAt(3*s, 0), interval: 2 * s, tolerate: 2}
			}(),
			level: "critical", state: "checkpoints_failing", problems: []string{"checkpoints_failing", "restarting", "checkpoints_stale"},
			summary: []string{"the last 15 checkpoints failed", "no recovery point", "checkpoint 15: timed out"}, since: t0.Add(-30 * s)},
		{name: "the newest checkpoint took most of the interval",
			in: func() healthInput {
				o := running(time.Minute, lastAt(9, s))
				o.LastSlowCheckpoint = &runtime.SlowCheckpoint{ID: 9, At: t0.Add(-s), Duration: 1700 * time.Millisecond, Interval: 2 * s,
					Phase: "async", Task: checkpoint.TaskID{Operator: "q5-counts", Subtask: 1}, PhaseDuration: 1200 * time.Millisecond, Count: 4}
				return healthInput{o: o, history: []runtime.CheckpointRecord{completed(9, s)}, interval: 2 * s}
			}(),
			level: "warning", state: "checkpoints_slow", problems: []string{"checkpoints_slow"},
			summary: []string{"checkpoint 9 took 1.7s of the 2s interval (more than 80%)", "async of q5-counts[1], 1.2s", "4 checkpoints were slow", "reduce state pressure"},
			since:   t0.Add(-s)},
		{name: "a slow checkpoint followed by a quick one is history",
			in: func() healthInput {
				o := running(time.Minute, lastAt(10, s))
				o.LastSlowCheckpoint = &runtime.SlowCheckpoint{ID: 9, At: t0.Add(-3 * s), Duration: 1700 * time.Millisecond, Interval: 2 * s, Phase: "sync", Count: 1}
				return healthInput{o: o, history: []runtime.CheckpointRecord{completed(10, s), completed(9, 3*s)}, interval: 2 * s}
			}(),
			level: "ok", state: "healthy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := judge(c.in)
			var states []string
			for _, p := range h.Problems {
				states = append(states, p.State)
			}
			if h.Level != c.level || h.State != c.state || strings.Join(states, ",") != strings.Join(c.problems, ",") {
				t.Fatalf("health %s/%s with problems %v, want %s/%s with %v; %+v", h.Level, h.State, states, c.level, c.state, c.problems, h)
			}
			for _, w := range c.summary {
				if !strings.Contains(h.Summary, w) {
					t.Errorf("summary %q lacks %q", h.Summary, w)
				}
			}
			if !c.since.IsZero() {
				want := rfc3339(c.since)
				if p := h.Problems[0]; p.Since == nil || *p.Since != want {
					t.Errorf("problem %s since %v, want %s", p.State, p.Since, want)
				}
			}
		})
	}
}
