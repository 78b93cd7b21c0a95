package e2e

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
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
	// RandomFirst is how many runs at the start are never aimed: their kills
	// land at a random delay (a test that must kill inside a phase that
	// precedes the Aim failpoint, such as a snapshot, sets it).
	RandomFirst int
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
	// FinalYAML, when set, is the final run's pipeline file (the killed
	// runs' never ends, e.g. a source without stop_at), and BeforeFinal
	// runs after the kill phase, before the final run (stopping a load).
	FinalYAML   string
	BeforeFinal func()
	// OnLine, when set, sees every line every run writes to stdout and
	// stderr, from two goroutines at once.
	OnLine func(line string)
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
		aimed[s.RandomFirst+rng.IntN(s.Kills-s.RandomFirst)] = true
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
		p := knStartWatch(t, s.Bin, s.YAML, fp, latest > 0, s.OnLine)
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
	if s.BeforeFinal != nil {
		s.BeforeFinal()
	}
	final := s.YAML
	if s.FinalYAML != "" {
		final = s.FinalYAML
	}
	p := knStartWatch(t, s.Bin, final, "", latest > 0, s.OnLine)
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

// knMarker is a "failpoint NAME reached" line.
type knMarker struct {
	name       string
	at         time.Duration
	inRecovery bool
}

// knProc is one running ingest process.
type knProc struct {
	cmd     *exec.Cmd
	start   time.Time
	markers chan knMarker
	done    chan struct{} // closed when the process was waited for
	waitErr error
	// recovers is set when a complete checkpoint existed at start: the run
	// logs "restored from checkpoint" when its recovery is done.
	recovers bool
	// watch, when set, sees every output line (see killSchedule.OnLine).
	watch func(string)

	mu       sync.Mutex
	tail     []string // the last lines of stdout and stderr
	restored string
	restarts int
}

const knTailLines = 60

func (p *knProc) line(prefix, s string) {
	if p.watch != nil {
		p.watch(s)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.Contains(s, "restored from checkpoint") && p.restored == "" {
		p.restored = "restored from checkpoint " + knField(s, "checkpoint")
	}
	if strings.Contains(s, "job failed; restarting") {
		p.restarts++
	}
	if name, ok := strings.CutPrefix(s, "failpoint "); ok {
		if name, ok = strings.CutSuffix(name, " reached"); ok {
			select {
			case p.markers <- knMarker{name: name, at: time.Since(p.start), inRecovery: p.recovers && p.restored == ""}:
			default:
			}
		}
	}
	p.tail = append(p.tail, prefix+s)
	if len(p.tail) > knTailLines {
		p.tail = slices.Delete(p.tail, 0, len(p.tail)-knTailLines)
	}
}

func (p *knProc) tailText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// knField returns the value of key=value in a slog text line.
func knField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return "?"
}

// knStart starts `ingest run` on the pipeline file yaml in its directory,
// with INGEST_FAILPOINTS set to failpoints; recovers tells it whether a
// complete checkpoint exists (see knProc.recovers).
func knStart(t *testing.T, bin, yaml, failpoints string, recovers bool) *knProc {
	t.Helper()
	return knStartWatch(t, bin, yaml, failpoints, recovers, nil)
}

// knStartWatch is knStart with watch, when not nil, called with every line
// of the process's stdout and stderr (from two goroutines at once).
func knStartWatch(t *testing.T, bin, yaml, failpoints string, recovers bool, watch func(string)) *knProc {
	t.Helper()
	// No HTTP server: tests run side by side.
	return knLaunch(t, bin, filepath.Dir(yaml), []string{"run", "--http=", yaml}, failpoints, recovers, watch)
}

// knLaunch starts bin with args in dir ("": the test's) and INGEST_FAILPOINTS
// set to failpoints (and no other), collects its output lines and failpoint
// markers (and hands each line to watch, when not nil), and kills it when t
// ends if it still runs.
func knLaunch(t *testing.T, bin, dir string, args []string, failpoints string, recovers bool, watch func(string)) *knProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "INGEST_FAILPOINTS=") })
	if failpoints != "" {
		env = append(env, "INGEST_FAILPOINTS="+failpoints)
	}
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &knProc{cmd: cmd, markers: make(chan knMarker, 4096), done: make(chan struct{}), recovers: recovers, watch: watch}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	var readers sync.WaitGroup
	read := func(prefix string, r io.Reader) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.line(prefix, sc.Text())
		}
		_, _ = io.Copy(io.Discard, r) // an overlong line: keep the pipe drained
	}
	readers.Add(2)
	go read("stderr| ", stderr)
	go read("stdout| ", stdout)
	go func() {
		readers.Wait() // Wait must come after every read from the pipes
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kill sends SIGKILL; it reports false when the process had already exited.
func (p *knProc) kill() (time.Duration, bool) {
	at := time.Since(p.start)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return at, false
	}
	return at, true
}

// status describes how the process ended; byKill reports a death by SIGKILL.
func (p *knProc) status() (desc string, exitedZero, byKill bool) {
	ps := p.cmd.ProcessState
	if ps == nil {
		return fmt.Sprintf("not waited for: %v", p.waitErr), false, false
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal()), false, ws.Signal() == syscall.SIGKILL
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode()), ps.ExitCode() == 0, false
}

// ---------------------------------------------------------------------------
// What the kill tests share: running the ingest binary, killing it at a
// moment or at a failpoint marker, the final uninterrupted run, and the checks
// of the committed file output after it.

// knKilled is how a kill of one run went.
type knKilled struct {
	markers  int      // markers of the aimed failpoint seen
	marker   knMarker // the marker the kill aimed at; marker.at == 0: not seen
	timedOut bool     // the aimed marker did not come before the deadline
	killed   bool     // SIGKILL sent while the process ran
	at       time.Duration
}

// killAfter kills p d after now, unless it exits first.
func (p *knProc) killAfter(d time.Duration) (k knKilled) {
	select {
	case <-time.After(d):
		k.at, k.killed = p.kill()
	case <-p.done:
	}
	return k
}

// knAim is a kill aimed at a failpoint marker.
type knAim struct {
	failpoint string
	// nth: kill at the nth marker of failpoint.
	nth int
	// final, instead: kill at the first marker seen once the latest
	// complete checkpoint under ckpts is the final one.
	final bool
	ckpts string
	// extra: wait this long after the marker (inside its pause) to kill.
	extra time.Duration
	// deadline: kill anyway when the marker did not come in this time.
	deadline time.Duration
}

// killAt kills p as a aims, unless it exits first.
func (p *knProc) killAt(a knAim) (k knKilled) {
	deadline := time.After(a.deadline)
	for {
		select {
		case m := <-p.markers:
			if m.name != a.failpoint {
				continue
			}
			k.markers++
			if a.final {
				if _, _, final, err := knProgress(a.ckpts); err != nil || !final {
					continue
				}
			} else if k.markers < a.nth {
				continue
			}
			k.marker = m
			if a.extra > 0 {
				select {
				case <-time.After(a.extra):
				case <-p.done:
					return k
				}
			}
			k.at, k.killed = p.kill()
			return k
		case <-deadline:
			k.timedOut = true
			k.at, k.killed = p.kill()
			return k
		case <-p.done:
			return k
		}
	}
}

// awaitExit waits up to wait for run i to exit after its SIGKILL.
func (p *knProc) awaitExit(t *testing.T, i int, wait time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Fatalf("run %d: the process did not exit %v after SIGKILL", i, wait)
	}
}

// restoredText is the "restored from checkpoint N" line's summary, "" when
// none was logged yet.
func (p *knProc) restoredText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restored
}

// knFinalRun waits up to wait for p, the final run i (no failpoints, no
// kill), logs "run i: final, no kill; " with about() and how it ended, and
// fails t unless it exited 0 on its own.
func knFinalRun(t *testing.T, i int, p *knProc, wait time.Duration, about func() string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Fatalf("final run %d did not exit within %v\nlast output:\n%s", i, wait, p.tailText())
	}
	desc, zero, _ := p.status()
	t.Logf("run %2d: final, no kill; %s %s after %v", i, about(), desc, time.Since(p.start).Round(time.Millisecond))
	if !zero {
		t.Fatalf("final run %d ended with %s, want exit code 0\nlast output:\n%s", i, desc, p.tailText())
	}
}

// knWatchTest starts knWatch(out, seed) for t, stopped when t ends unless
// concluded before; heading begins the messages of its failures.
func knWatchTest(t *testing.T, out string, seed uint64, heading string) *knWatcher {
	w := knWatch(out, seed)
	w.heading = heading
	t.Cleanup(w.halt)
	return w
}

// check fails t if the watcher saw a violation so far; when says when.
func (w *knWatcher) check(t *testing.T, when string) {
	t.Helper()
	if v, _, _, _ := w.report(); len(v) > 0 {
		t.Fatalf("%s (%s):\n  %s", w.heading, when, strings.Join(v, "\n  "))
	}
}

// conclude stops the watcher after its last, complete pass, logs what it
// read and fails t if it saw a violation.
func (w *knWatcher) conclude(t *testing.T) {
	t.Helper()
	w.finish()
	violations, entries, seenLines, passes := w.report()
	t.Logf("reader: %d passes over the output, %d committed checkpoint directories, %d lines read as they appeared", passes, entries, seenLines)
	if len(violations) > 0 {
		t.Fatalf("%s:\n  %s", w.heading, strings.Join(violations, "\n  "))
	}
}

// knNoStaged fails t if the file sink left staged files under out.
func knNoStaged(t *testing.T, out string) {
	t.Helper()
	var leftovers []string
	_ = filepath.WalkDir(filepath.Join(out, "_staging"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, path)
			leftovers = append(leftovers, rel)
		}
		return nil
	})
	if len(leftovers) > 0 {
		t.Fatalf("%d staged files left after the final run: %v", len(leftovers), leftovers[:min(len(leftovers), 10)])
	}
}

// knTrees writes a listing of the files under each root to b (the first 400
// entries of each, with sizes), for a failure's diagnosis.
func knTrees(b *strings.Builder, roots ...string) {
	for _, root := range roots {
		fmt.Fprintf(b, "find %s:\n", root)
		n := 0
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(b, "  %v\n", err)
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			n++
			if n > 400 {
				if n == 401 {
					b.WriteString("  ... (more)\n")
				}
				return nil
			}
			if info, err := d.Info(); err == nil && !d.IsDir() {
				fmt.Fprintf(b, "  %s (%d B)\n", rel, info.Size())
			} else {
				fmt.Fprintf(b, "  %s/\n", rel)
			}
			return nil
		})
	}
}

// knSeed returns flag's value, or a random seed when it is 0.
func knSeed(flag uint64) uint64 {
	if flag == 0 {
		return rand.Uint64()
	}
	return flag
}

// serviceKillTest is the body of a service kill test: skipped with -short;
// the seed is seed (the value of flag -flagName), or random, logged with
// how to replay it; one cycle of scenario on a freshly built binary must
// find the committed output exact.
func serviceKillTest(t *testing.T, flagName string, seed uint64, scenario func(*testing.T, string, uint64) soakResult) {
	t.Helper()
	if testing.Short() {
		t.Skip("kill -9 test; not in -short")
	}
	seed = knSeed(seed)
	t.Logf("seed %d (replay with -%s=%d)", seed, flagName, seed)
	requireExact(t, scenario(t, knBuild(t, t.TempDir()), seed), seed)
}

// scenarioDir writes doc as pipeline.yaml in a new temporary directory work,
// whose ckpts and out subdirectories (or data/checkpoints, data/out and
// data/state, those of testkit.WindowPipeline) are logged when t fails, and
// returns work and the pipeline file.
func scenarioDir(t *testing.T, doc string) (work, yaml string) {
	t.Helper()
	work = t.TempDir()
	yaml = filepath.Join(work, "pipeline.yaml")
	if err := os.WriteFile(yaml, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			for _, dir := range []string{"ckpts", "out", "data/checkpoints", "data/out", "data/state"} {
				if _, err := os.Stat(filepath.Join(work, dir)); err == nil {
					knTrees(&b, filepath.Join(work, dir))
				}
			}
			t.Log(b.String())
		}
	})
	return work, yaml
}

// checkFileOutput stops the reader w and adds to res what it saw (a reader
// violation counts as partial output) and how the committed file output
// under out compares with the windows want.
func checkFileOutput(t *testing.T, w *knWatcher, out string, want map[testkit.WindowKey]testkit.WindowAgg, res *soakResult) {
	t.Helper()
	w.finish()
	violations, entries, lines, passes := w.report()
	t.Logf("reader: %d passes, %d committed entries, %d lines", passes, entries, lines)
	res.Samples = passes
	for _, v := range violations {
		res.partial("reader: %s", v)
	}
	got, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	res.addReport(testkit.CheckWindows(got, want, time.Second))
}
