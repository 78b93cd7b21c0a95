package httpapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// This file judges a job's health from what it reports, so that every
// client (the dashboard first) shows trouble the same way: a job whose
// checkpoints keep failing is not "running" in any sense that matters to
// its operator, whatever its phase says.

// Health states, most severe first within each level. Health.State is the
// most severe problem's, or healthy (or the phase when it is not running:
// starting, recovering from a checkpoint at start, stopping, finished).
const (
	// stateFailed: the last attempt failed; the job restarts after the
	// restart delay unless restarts are exhausted.
	stateFailed = "failed"
	// stateCheckpointsFailing: the newest finished checkpoint failed.
	stateCheckpointsFailing = "checkpoints_failing"
	// stateRestarting: the job is recovering after a failure, or has not
	// completed a checkpoint since its latest restart.
	stateRestarting = "restarting"
	// stateCheckpointsStale: no checkpoint completed for more than twice the
	// interval, counting from the start when none has.
	stateCheckpointsStale = "checkpoints_stale"
	// stateCheckpointsSlow: the newest completed checkpoint took more than
	// runtime.SlowCheckpointShare of the interval.
	stateCheckpointsSlow = "checkpoints_slow"
	// stateHealthy: running, checkpoints completing.
	stateHealthy = "healthy"
)

// Health levels: ok, warning (amber), critical (red).
const (
	levelOK       = "ok"
	levelWarning  = "warning"
	levelCritical = "critical"
)

// staleFactor is how many intervals a complete checkpoint may age before it
// is stale.
const staleFactor = 2

// healthJSON is pipeline.health.
type healthJSON struct {
	// Level is ok, warning or critical: the worst of the problems'.
	Level string `json:"level"`
	// State is the most severe problem's state, else healthy or the
	// phase (starting, recovering, stopping, finished).
	State string `json:"state"`
	// Summary is the most severe problem's message, or a sentence saying
	// all is well.
	Summary  string        `json:"summary"`
	Problems []problemJSON `json:"problems"`
}

// problemJSON is one thing wrong with the job.
type problemJSON struct {
	State   string `json:"state"`
	Level   string `json:"level"`
	Message string `json:"message"`
	// Since is when the problem began, when that is known: the failure, the
	// first failed checkpoint in a row, the restart, the last complete
	// checkpoint (or the start).
	Since *string `json:"since"`
}

// healthInput is what health is judged from.
type healthInput struct {
	o        runtime.Observation
	history  []runtime.CheckpointRecord // newest first
	log      []runtime.RecoveryEvent    // newest first
	interval time.Duration              // 0: no periodic checkpoints
	tolerate int                        // consecutive checkpoint failures tolerated
}

// failedInARow returns the checkpoints that failed since the newest
// completed one, newest first (in-progress ones skipped).
func failedInARow(history []runtime.CheckpointRecord) []runtime.CheckpointRecord {
	var out []runtime.CheckpointRecord
	for _, r := range history {
		switch r.Status {
		case runtime.CheckpointCompleted:
			return out
		case runtime.CheckpointFailed:
			out = append(out, r)
		}
	}
	return out
}

// judge returns the health of the job in in.
func judge(in healthInput) healthJSON {
	o := in.o
	var problems []problemJSON
	add := func(state, level, msg string, since time.Time) {
		problems = append(problems, problemJSON{State: state, Level: level, Message: msg, Since: optTime(since)})
	}
	live := o.Phase == runtime.PhaseRunning || o.Phase == runtime.PhaseRecovering || o.Phase == runtime.PhaseFailed

	if o.Phase == runtime.PhaseFailed {
		msg := "the job failed"
		var at time.Time
		if f := o.LastFailure; f != nil {
			msg, at = "the job failed ("+f.Class+"): "+f.Err, f.At
		}
		add(stateFailed, levelCritical, msg+"; it restarts from the last complete checkpoint after the restart delay unless restarts are exhausted", at)
	}

	var last *runtime.CompletedCheckpoint
	if lc := o.Checkpoints.LastCompleted; lc != nil {
		last = lc
	}
	if failed := failedInARow(in.history); len(failed) > 0 && live {
		newest, first := failed[0], failed[len(failed)-1]
		level := levelWarning
		if len(failed) > 1 || last == nil {
			level = levelCritical
		}
		msg := "the last checkpoint failed"
		if len(failed) > 1 {
			msg = "the last " + strconv.Itoa(len(failed)) + " checkpoints failed"
		}
		msg += fmt.Sprintf(" (more than %d in a row restart the job)", in.tolerate)
		if last == nil {
			msg += "; none has completed, so there is no recovery point"
		}
		reason := newest.FailureReason
		if reason == "" {
			reason = "no reason given"
		}
		// The coordinator's reasons begin with the checkpoint's id already.
		if id := "checkpoint " + strconv.FormatInt(newest.ID, 10); !strings.HasPrefix(reason, id+":") {
			reason = id + ": " + reason
		}
		msg += "; " + reason
		add(stateCheckpointsFailing, level, msg, first.EndedAt)
	}

	if o.Stats.Restarts > 0 && o.Phase != runtime.PhaseFailed {
		var restart *runtime.RecoveryEvent
		for i := range in.log {
			if in.log[i].Cause == "restart" {
				restart = &in.log[i]
				break
			}
		}
		switch {
		case o.Phase == runtime.PhaseRecovering:
			msg := "recovering after restart " + strconv.FormatInt(o.Stats.Restarts, 10)
			var at time.Time
			if f := o.LastFailure; f != nil {
				msg += " (" + f.Class + "): " + f.Err
				at = f.At
			}
			add(stateRestarting, levelWarning, msg, at)
		case o.Phase == runtime.PhaseRunning && restart != nil && (last == nil || last.CompletedAt.Before(restart.At)):
			msg := "restarted " + plural(o.Stats.Restarts, "once", strconv.FormatInt(o.Stats.Restarts, 10)+" times") +
				" and has not completed a checkpoint since the last restart"
			if restart.Restored == 0 {
				msg += ", which started over: no complete checkpoint existed"
			} else {
				msg += ", which restored checkpoint " + strconv.FormatInt(restart.Restored, 10)
			}
			if restart.Failure != "" {
				msg += "; it followed a failure (" + restart.Class + "): " + restart.Failure
			}
			add(stateRestarting, levelWarning, msg, restart.At)
		}
	}

	if in.interval > 0 && live && !o.StartedAt.IsZero() {
		// A checkpoint restored from an earlier process is as old as that
		// process left it: count from the start then.
		since, what := o.StartedAt, "since the job started"
		if last != nil && last.CompletedAt.After(since) {
			since, what = last.CompletedAt, "since checkpoint "+strconv.FormatInt(last.ID, 10)
		}
		if age := o.At.Sub(since); age > staleFactor*in.interval {
			msg := fmt.Sprintf("no checkpoint completed for %v %s: more than %d × the %v interval",
				age.Round(time.Second), what, staleFactor, in.interval)
			add(stateCheckpointsStale, levelWarning, msg, since)
		}
	}

	if s := o.LastSlowCheckpoint; s != nil && last != nil && s.ID == last.ID && live {
		part := s.Phase
		if s.Task != (checkpoint.TaskID{}) {
			part += " of " + s.Task.String()
		}
		msg := fmt.Sprintf("checkpoint %d took %v of the %v interval (more than %.0f%%); its slowest part: %s, %v; %s slow since the job started: "+
			"reduce state pressure (less state, fewer keys, a shorter window or TTL, more parallelism) or lengthen the interval",
			s.ID, s.Duration.Round(time.Millisecond), s.Interval, 100*runtime.SlowCheckpointShare, part, s.PhaseDuration.Round(time.Millisecond),
			plural(s.Count, "1 checkpoint was", strconv.FormatInt(s.Count, 10)+" checkpoints were"))
		add(stateCheckpointsSlow, levelWarning, msg, s.At)
	}

	h := healthJSON{Level: levelOK, State: stateHealthy, Problems: []problemJSON{}}
	if len(problems) == 0 {
		switch o.Phase {
		case runtime.PhaseRunning:
			h.Summary = "running; checkpoints complete"
			if in.interval > 0 {
				h.Summary += " within " + strconv.Itoa(staleFactor) + " × the " + in.interval.String() + " interval"
			}
		default:
			h.State, h.Summary = string(o.Phase), string(o.Phase)
		}
		return h
	}
	h.Problems = problems
	best := 0
	for i, p := range problems {
		if rank(p.Level) > rank(problems[best].Level) {
			best = i
		}
	}
	h.Level, h.State, h.Summary = problems[best].Level, problems[best].State, problems[best].Message
	return h
}

func rank(level string) int {
	switch level {
	case levelCritical:
		return 2
	case levelWarning:
		return 1
	}
	return 0
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// actionsJSON is pipeline.actions: whether each POST endpoint can act now,
// and why not.
type actionsJSON struct {
	TriggerCheckpoint actionJSON `json:"trigger_checkpoint"`
	Stop              actionJSON `json:"stop"`
}

type actionJSON struct {
	Enabled bool `json:"enabled"`
	// Reason says why the action is disabled ("" when enabled): the answer
	// a POST would get.
	Reason string `json:"reason"`
}

// actions says what the POST endpoints would answer now.
func (h *handler) actions(ph runtime.Phase) actionsJSON {
	if h.opts.Token == "" {
		off := actionJSON{Reason: noTokenMessage}
		return actionsJSON{TriggerCheckpoint: off, Stop: off}
	}
	a := actionsJSON{TriggerCheckpoint: actionJSON{Enabled: true}, Stop: actionJSON{Enabled: true}}
	if ph != runtime.PhaseRunning {
		a.TriggerCheckpoint = actionJSON{Reason: "the job is " + string(ph) + ": a checkpoint can be triggered only while it runs"}
	}
	if ph == runtime.PhaseFinished || ph == runtime.PhaseFailed {
		a.Stop = actionJSON{Reason: "the job is " + string(ph) + ": nothing to stop"}
	}
	return a
}
