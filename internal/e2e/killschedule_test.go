package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// killSchedule drives `ingest run` on one pipeline file through SIGKILLs
// until it has been killed Kills times, AimedKills of them while paused at
// the Aim failpoint (a pause(D) the process announces on stderr: the kill
// lands D·rand(0, 2/3) into it), then runs it once more uninterrupted to a
// clean exit. Each run restarts from what the previous one left: the
// checkpoint directory and the sink's output. The connector tests share it;
// each checks the committed output itself afterwards.
type killSchedule struct {
	Bin, YAML string
	// Ckpts is the checkpoint directory (local), read before each run to
	// log the recovery point.
	Ckpts string
	Seed  uint64

	Kills, AimedKills int
	// Aim is the failpoint the aimed kills wait for, Pause its pause.
	Aim   string
	Pause time.Duration
	// Throttle is the INGEST_FAILPOINTS of every killed run (slowing it so
	// the kills land before the bounded input ends); the final run has none.
	Throttle string
	// MinDelay and MaxDelay bound the random kills' delay after the start
	// (default 50 ms to 300 ms). An aimed kill ignores the markers before
	// such a delay too, so it lands later in the run than the first commit.
	MinDelay, MaxDelay time.Duration
	// Budget bounds the kill phase: no new run is drawn after it.
	Budget  time.Duration
	MaxRuns int
	// FinalWait bounds the final, uninterrupted run.
	FinalWait time.Duration
}

// run executes the schedule and returns how many SIGKILLs landed and how
// many of them at the Aim failpoint. It fails t when a run ends other than by
// the kill (or, for the final run, by exit 0), when a killed run reached the
// end of the input (the input is too short for the schedule), or when too
// few kills landed.
func (s killSchedule) run(t *testing.T) (kills, aimedKills int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(s.Seed, 0x6b696c6c))
	aimed := map[int]bool{}
	for len(aimed) < s.AimedKills {
		aimed[rng.IntN(s.Kills)] = true
	}
	var (
		log      []string
		finished bool
		phase    = time.Now()
		maxRuns  = s.MaxRuns
	)
	if maxRuns == 0 {
		maxRuns = 3 * s.Kills
	}
	if s.MaxDelay == 0 {
		s.MinDelay, s.MaxDelay = 50*time.Millisecond, 300*time.Millisecond
	}
	for run := 0; run < maxRuns && (kills < s.Kills || aimedKills < s.AimedKills); run++ {
		if s.Budget > 0 && time.Since(phase) > s.Budget {
			break
		}
		aim := aimed[run] || (run >= s.Kills && aimedKills < s.AimedKills)
		delay := s.MinDelay + time.Duration(rng.Int64N(int64(s.MaxDelay-s.MinDelay)+1))
		extra := time.Duration(rng.IntN(int(s.Pause*2/3/time.Millisecond)+1)) * time.Millisecond
		latest, err := nkLatest(s.Ckpts)
		if err != nil {
			t.Fatalf("run %d: reading checkpoints: %v", run, err)
		}
		fp, plan := s.Throttle, fmt.Sprintf("random kill after %v", delay)
		if aim {
			fp = strings.TrimPrefix(s.Throttle+";"+s.Aim+"=pause("+s.Pause.String()+")", ";")
			plan = fmt.Sprintf("kill %v into the %s pause", extra, s.Aim)
		}
		p := knStart(t, s.Bin, s.YAML, fp, latest > 0)
		timer := time.After(delay)
		if aim {
			timer = time.After(10 * time.Second) // no marker: kill anyway
		}
		killed, marker := false, ""
	wait:
		for {
			select {
			case <-p.done:
				break wait
			case m := <-p.markers:
				if m.name != s.Aim || marker != "" || !aim || m.at < delay {
					continue
				}
				marker = fmt.Sprintf("marker at %v", m.at.Round(time.Millisecond))
				if m.inRecovery {
					marker += " (during recovery)"
				}
				timer = time.After(extra)
			case <-timer:
				if aim && marker == "" {
					marker = "marker NOT seen"
				}
				if at, ok := p.kill(); ok {
					killed = true
					plan += fmt.Sprintf("; SIGKILL at %v", at.Round(time.Millisecond))
				}
				timer = nil
			}
		}
		desc, zero, byKill := p.status()
		restored := p.restored
		if restored == "" {
			restored = "not restored"
		}
		line := fmt.Sprintf("run %d (latest checkpoint %d, %s): %s", run, latest, restored, plan)
		if marker != "" {
			line += "; " + marker
		}
		log = append(log, line+"; "+desc)
		switch {
		case killed && byKill:
			kills++
			if strings.HasPrefix(marker, "marker at") {
				aimedKills++
			}
		case zero:
			finished = true
		default:
			t.Fatalf("%s\nrun %d ended unexpectedly: %s\n%s", strings.Join(log, "\n"), run, desc, p.tailText())
		}
		if finished {
			break
		}
	}
	t.Logf("kill phase %v:\n  %s", time.Since(phase).Round(time.Millisecond), strings.Join(log, "\n  "))
	if finished {
		t.Errorf("a run reached the end of the input after %d kills (%d at %s): the input is too short for the schedule (seed %d)", kills, aimedKills, s.Aim, s.Seed)
	}
	if kills < s.Kills || aimedKills < s.AimedKills {
		t.Errorf("only %d kills (%d paused at %s), want at least %d (%d): seed %d", kills, aimedKills, s.Aim, s.Kills, s.AimedKills, s.Seed)
	}
	if finished {
		return kills, aimedKills
	}
	latest, err := nkLatest(s.Ckpts)
	if err != nil {
		t.Fatal(err)
	}
	p := knStart(t, s.Bin, s.YAML, "", latest > 0)
	select {
	case <-p.done:
	case <-time.After(s.FinalWait):
		p.kill()
		<-p.done
		t.Fatalf("the final run did not finish in %v (seed %d):\n%s", s.FinalWait, s.Seed, p.tailText())
	}
	desc, zero, _ := p.status()
	t.Logf("final run (latest checkpoint %d, %s): %s after %v", latest, p.restored, desc, time.Since(p.start).Round(time.Millisecond))
	if !zero {
		t.Fatalf("the final run failed: %s (seed %d)\n%s", desc, s.Seed, p.tailText())
	}
	return kills, aimedKills
}
