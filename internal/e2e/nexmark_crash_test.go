package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// ---------------------------------------------------------------------------
// In process: failures injected at every step of the checkpoint protocol.

// nxInjectRate limits the source of the runs with failures, on the job's
// fake clock stepped one 50 ms interval per checkpoint (nxRun): nxEvents
// take 3.3 s of it, about 66 checkpoints, so the failures land throughout
// the stream, between checkpoints that completed, however slow the machine.
// The last failure may need some 34 completed checkpoints (armed after up
// to 30, then up to 4 hits).
const nxInjectRate = 12_000

// nxInjectPoints are the failpoints TestNexmarkInjectedFailures fails. Each
// failure is armed once a random number of checkpoints in [2, maxAfter]
// completed (of about 60 in a run without failures), then fails a random hit
// of its point in [1, maxNth]. Both stay well below how often the point is
// reached in the rest of the run (checked: every failure must fire).
var nxInjectPoints = []struct {
	name string
	// failures is how many failures of the point one run injects.
	failures int
	// maxAfter: armed after 2 to maxAfter completed checkpoints.
	maxAfter int64
	// maxNth: the n-th hit after arming fails, n random in [1, maxNth].
	maxNth int64
	// restarts is whether the failure restarts the job (else only the
	// checkpoint fails and the pipeline keeps running).
	restarts bool
}{
	// A subtask fails while processing a batch: on the stepped clock about 5
	// batches per checkpoint over all tasks (q11 armed after 29 checkpoints
	// saw 180 more), so at most 120 after arming.
	{"task/process-batch", 2, 30, 120, true},
	// A subtask wrote its snapshot and fails before it acknowledges.
	{"task/after-snapshot-before-ack", 1, 30, 24, true},
	// Every subtask acknowledged; the metadata write fails: the checkpoint
	// fails, the job keeps running.
	{"job/before-metadata-write", 1, 30, 4, false},
	// The checkpoint is complete; its commit fails before it starts: the
	// job restarts and the recovery commits it.
	{"job/after-metadata-before-commit", 1, 30, 4, true},
	// A sink subtask fails to stage its file at a barrier (q8 stages a
	// file at about every other checkpoint).
	{"sink/file/prepare", 1, 30, 3, true},
	// A commit fails after moving part of its files; the recovery finishes
	// it. q8 writes few rows: its commits have two files at 7 checkpoints
	// of 45 at 16,000 events/s, the last two after the 21st and 35th (at
	// the 12,000 used, about the 28th and 47th of 60).
	{"sink/file/mid-commit", 1, 20, 1, true},
}

// nxInjection is one scheduled failure.
type nxInjection struct {
	point    string
	restarts bool // the failure restarts the job
	// after: armed once the job completed this many checkpoints.
	after int64
	// nth: fails the nth hit of point after it was armed.
	nth int64
	// What happened, under nxInjector.mu.
	hits      int64
	fired     bool
	firedAt   int64 // completed checkpoints when it fired
	firedTime time.Duration
}

func (in *nxInjection) String() string {
	s := fmt.Sprintf("%s: armed after %d checkpoints, hit %d", in.point, in.after, in.nth)
	if !in.fired {
		return s + ": NOT FIRED (" + strconv.FormatInt(in.hits, 10) + " hits after arming)"
	}
	return s + fmt.Sprintf(": fired at %v with %d checkpoints complete", in.firedTime.Round(time.Millisecond), in.firedAt)
}

// nxInjector fails a job at its scheduled injections.
type nxInjector struct {
	mu      sync.Mutex
	job     *runtime.Job
	start   time.Time
	all     []*nxInjection
	disable []func()
}

// newNxInjector draws the schedule from rng.
func newNxInjector(rng *rand.Rand) *nxInjector {
	x := &nxInjector{}
	for _, p := range nxInjectPoints {
		for range p.failures {
			x.all = append(x.all, &nxInjection{point: p.name, restarts: p.restarts, after: 2 + rng.Int64N(p.maxAfter-1), nth: 1 + rng.Int64N(p.maxNth)})
		}
	}
	slices.SortStableFunc(x.all, func(a, b *nxInjection) int { return int(a.after - b.after) })
	return x
}

// arm enables the failpoints for job.
func (x *nxInjector) arm(job *runtime.Job) {
	x.job, x.start = job, time.Now()
	for _, p := range nxInjectPoints {
		name := p.name
		x.disable = append(x.disable, failpoint.Enable(name, func() error { return x.hit(name) }))
	}
}

func (x *nxInjector) disarm() {
	for _, d := range x.disable {
		d()
	}
	x.disable = nil
}

// hit runs on the engine's goroutines at every hit of point name.
func (x *nxInjector) hit(name string) error {
	completed := x.job.Stats().Completed
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, in := range x.all {
		if in.point != name || in.fired || completed < in.after {
			continue
		}
		in.hits++
		if in.hits == in.nth {
			in.fired, in.firedAt, in.firedTime = true, completed, time.Since(x.start)
			return fmt.Errorf("nexmark crash test: %s at hit %d after checkpoint %d: %w", name, in.nth, in.after, failpoint.ErrInjected)
		}
	}
	return nil
}

// report returns the schedule's outcome and how many injections fired, and
// of those how many restart the job (two failures in one attempt cause one
// restart).
func (x *nxInjector) report() (lines []string, fired, restarting int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, in := range x.all {
		lines = append(lines, in.String())
		if in.fired {
			fired++
			if in.restarts {
				restarting++
			}
		}
	}
	return lines, fired, restarting
}

// TestNexmarkInjectedFailures runs Nexmark queries with windows, sessions and
// joins in process, fails them at every step of the checkpoint protocol while
// windows are open (after checkpoints completed, mid-stream), lets them
// restart from the last complete checkpoint, and checks that the committed
// output is exactly the failure-free output: no row lost, none duplicated,
// none different. A restore of wrong window, session or join state changes
// rows (a count, a session's bounds, a missing match) and fails the test.
// (checkpointing.txt: "A restart must not lose accepted data, repeat
// already-visible output, or combine state from different points in the
// stream.")
func TestNexmarkInjectedFailures(t *testing.T) {
	seed := nxSeedFor(t)
	for qi, q := range nxQueries {
		t.Run(q.name, func(t *testing.T) {
			began := time.Now()
			ref := nxReference(t, q.name)
			rng := rand.New(rand.NewPCG(seed, uint64(qi)))
			x := newNxInjector(rng)
			st, logs, got := func() (runtime.Stats, *nxRestoreLog, []string) {
				defer x.disarm()
				return nxRun(t, q.name, q.stateful, t.TempDir(), nxRunOptions{Rate: nxInjectRate, Prepare: x.arm})
			}()
			schedule, fired, restarting := x.report()
			restores, failures := logs.report()
			t.Logf("%s (%s): %d of %d failures injected:\n  %s", q.name, q.what, fired, len(schedule), strings.Join(schedule, "\n  "))
			t.Logf("stats %+v; %d job failures; restores:\n  %s", st, len(failures), strings.Join(nxStrings(restores), "\n  "))

			if fired < len(schedule) {
				t.Errorf("%d of %d scheduled failures did not fire (the stream ended first): replay with -nexmarkseed=%d; the schedule needs a longer stream", len(schedule)-fired, len(schedule), seed)
			}
			if st.Restarts == 0 || st.RestoredFrom == 0 {
				t.Fatalf("no restart from a checkpoint: restarts %d, restored from %d (%d restarting failures fired)", st.Restarts, st.RestoredFrom, restarting)
			}
			// Windows were open across the failures: some recovery resumed
			// mid-stream with the windows', sessions' or join's keyed state
			// populated, so a wrong restore would change the output.
			mid := 0
			for _, r := range restores {
				if r.midStream(q.stateful[0], nxMinStateBytes) {
					mid++
				}
			}
			if mid == 0 {
				t.Fatalf("no recovery restored keyed state mid-stream: the test proves nothing about restored %s", q.what)
			}

			if d := nxCompare(got, ref); !d.OK() {
				t.Fatalf("%s: committed output is not exactly the failure-free output after %d restarts (replay with -nexmarkseed=%d): %s",
					q.name, st.Restarts, seed, d)
			}
			t.Logf("%s: committed output is exact: %d rows after %d injected failures, %d restarts, %d mid-stream restores of %s (%v)",
				q.name, len(got), fired, st.Restarts, mid, q.what, time.Since(began).Round(time.Millisecond))
		})
	}
}

// nxMinStateBytes is the keyed state size (summed over subtasks) above which
// an operator's state counts as populated: an empty state file of a subtask
// is about 40 bytes.
const nxMinStateBytes = 200

func nxStrings[T fmt.Stringer](s []T) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = v.String()
	}
	return out
}

// ---------------------------------------------------------------------------
// Out of process: `ingest bench nexmark` killed with SIGKILL.

var nxKills = flag.Int("nexmarkkills", 5, "SIGKILLs per query in TestNexmarkKillNine before the one after the final checkpoint (at least 5)")

// The runs TestNexmarkKillNine kills: nxEvents at nxKillRate take 4 s
// uninterrupted. The random kills spread over the stream (each after a
// random share of twice the time left per kill left, capped at half of what
// the latest checkpoint says is left), so the stream outlasts them.
const (
	nxKillRate     = 10_000
	nxKillInterval = 100 * time.Millisecond

	nxKillPause        = 300 * time.Millisecond // pause(D) of the failpoints the kills aim at
	nxKillEndgamePause = 60 * time.Millisecond  // below the interval: commits do not queue up
	nxKillMarkerWait   = 2 * time.Second        // a run that shows no marker in this time is killed anyway
	nxKillExitWait     = 10 * time.Second       // SIGKILL to exit
	nxKillFinalWait    = 60 * time.Second       // the final, uninterrupted run
)

// nxKillPoints are the failpoints a third of the kills aim at, while paused
// there; besides, every query is killed at least once inside a commit
// (sink/file/mid-commit).
var nxKillPoints = []string{"job/before-metadata-write", "task/after-snapshot-before-ack", "job/after-metadata-before-commit", "sink/file/mid-commit"}

// nxKillPlan is one run and how it is killed.
type nxKillPlan struct {
	failpoint string        // the point paused and waited for; "" kills after delay
	nth       int           // kill at the nth "failpoint ... reached" line
	extra     time.Duration // then wait this long (inside the pause) before the kill
	early     bool          // a random kill while the process starts and recovers
	share     float64       // other random kills: after this share of twice the stream left per run left
	delay     time.Duration // random kills: after start (set when the run starts)
	final     bool          // kill once the final checkpoint is complete
}

func (p nxKillPlan) String() string {
	switch {
	case p.final:
		return fmt.Sprintf("at %s once the final checkpoint is complete", p.failpoint)
	case p.failpoint == "" && p.early:
		return fmt.Sprintf("random (early), after %v", p.delay)
	case p.failpoint == "":
		return fmt.Sprintf("random, after %v", p.delay.Round(time.Millisecond))
	}
	return fmt.Sprintf("at %s, marker %d, +%v", p.failpoint, p.nth, p.extra)
}

func nxDrawKill(rng *rand.Rand, point string) nxKillPlan {
	if point == "" {
		if rng.IntN(5) == 0 {
			// Early: while the process starts and recovers (publishes the
			// recovery point's output, abandons staging).
			return nxKillPlan{early: true, delay: time.Duration(5+rng.IntN(75)) * time.Millisecond}
		}
		return nxKillPlan{share: 0.1 + 0.9*rng.Float64()}
	}
	p := nxKillPlan{failpoint: point, nth: 1 + rng.IntN(2)}
	if point == "task/after-snapshot-before-ack" {
		p.nth = 1 + rng.IntN(8) // every subtask announces it per checkpoint
	}
	if rng.IntN(3) > 0 {
		p.extra = time.Duration(rng.IntN(int(nxKillPause*2/3/time.Millisecond))) * time.Millisecond
	}
	return p
}

// nxStart starts `ingest bench nexmark` with args and INGEST_FAILPOINTS set
// to failpoints; its output lines and failpoint markers are collected as in
// TestKillNine.
func nxStart(t *testing.T, bin string, args []string, failpoints string) *knProc {
	t.Helper()
	return knLaunch(t, bin, "", args, failpoints, false, nil)
}

// nxKillRun is what happened to one run.
type nxKillRun struct {
	plan      nxKillPlan
	from      int64 // the recovery point at start (0: fresh start) and its position
	fromPos   int64
	markers   int
	markerAt  time.Duration // when the aimed marker was seen (0: not seen)
	killed    bool
	killedAt  time.Duration
	exited    string
	exitZero  bool
	lifetime  time.Duration
	nextPos   int64 // the position of the recovery point after the run
	nextFinal bool
}

func (r nxKillRun) String() string {
	var b strings.Builder
	b.WriteString(r.plan.String())
	if r.from > 0 {
		fmt.Fprintf(&b, "; resumed from checkpoint %d at event %d", r.from, r.fromPos)
	} else {
		b.WriteString("; fresh start")
	}
	if r.plan.failpoint != "" {
		if r.markerAt > 0 {
			fmt.Fprintf(&b, "; aimed marker at %v", r.markerAt.Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, "; aimed marker NOT seen (%d markers)", r.markers)
		}
	}
	if r.killed {
		fmt.Fprintf(&b, "; SIGKILL at %v", r.killedAt.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; %s after %v; next position %d", r.exited, r.lifetime.Round(time.Millisecond), r.nextPos)
	if r.nextFinal {
		b.WriteString(" (final)")
	}
	return b.String()
}

// TestNexmarkKillNine runs `ingest bench nexmark` for queries with sliding
// windows, sessions, a window join and a regular join as a separate process,
// kills it with SIGKILL at least -nexmarkkills times per query (at random
// moments and while paused at failpoints: inside a commit, around a
// checkpoint's metadata write, and once after the final checkpoint
// completed), restarts it with the same checkpoint and output directories
// each time until it exits 0, and checks the committed output is exactly the
// failure-free output of the same query in process. Meanwhile a reader
// samples the committed output and checks that committed checkpoint
// directories appear whole and never change (no partial checkpoint is ever
// visible).
func TestNexmarkKillNine(t *testing.T) {
	began := time.Now()
	seed := nxSeedFor(t)
	kills := max(*nxKills, 5)
	work, err := os.MkdirTemp("", "nexmark-killnine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *nxKeep {
			t.Logf("working directory kept: %s", work)
			return
		}
		_ = os.RemoveAll(work)
	})
	bin := knBuild(t, work)
	t.Logf("built the ingest binary in %v", time.Since(began).Round(time.Millisecond))
	// The references first, one query after the other: the kill subtests
	// then run in parallel (each is mostly waiting for its process).
	for _, q := range nxQueries {
		nxReference(t, q.name)
	}
	for qi, q := range nxQueries {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			nxKillNine(t, bin, filepath.Join(work, q.name), q.name, q.what, kills, seed, uint64(qi))
		})
	}
}

func nxKillNine(t *testing.T, bin, work, name, what string, kills int, seed, stream uint64) {
	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 0x6e780000+stream))
	ref := nxReference(t, name)
	out, ck := filepath.Join(work, "out"), filepath.Join(work, "ck")
	args := []string{"bench", "nexmark", "--query", name, "--events", strconv.Itoa(nxEvents), "--parallelism", strconv.Itoa(nxParallelism),
		"--checkpoint-interval", nxKillInterval.String(), "--checkpoint-dir", ck, "--output", out,
		"--rate", strconv.Itoa(nxKillRate), "--events-per-second", strconv.Itoa(nxEventsPerSecond)}
	t.Logf("%s (%s): ingest %s", name, what, strings.Join(args, " "))

	watcher := knWatchTest(t, out, seed^stream, "a reader saw a partial checkpoint")

	// The schedule: a third of the kills paused at a random failpoint, the
	// rest at random moments, shuffled; and one kill inside a commit in the
	// first half, while much of the stream is left for its marker to come.
	var schedule []nxKillPlan
	for len(schedule) < max(1, kills/3-1) {
		schedule = append(schedule, nxDrawKill(rng, nxKillPoints[rng.IntN(len(nxKillPoints))]))
	}
	for len(schedule) < kills-1 {
		schedule = append(schedule, nxDrawKill(rng, ""))
	}
	rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	schedule = slices.Insert(schedule, rng.IntN(kills/2), nxDrawKill(rng, "sink/file/mid-commit"))

	var (
		pos, latest int64 // the recovery point's source position and id
		final       bool
	)
	refresh := func() {
		t.Helper()
		p, id, f, err := knProgress(ck)
		if err != nil {
			t.Fatalf("reading the latest checkpoint: %v", err)
		}
		pos, latest, final = p, id, f
	}
	// remaining is how much of the stream is left at most, at nxKillRate.
	remaining := func() time.Duration {
		return time.Duration(float64(max(nxEvents-pos, 0)) / nxKillRate * float64(time.Second))
	}

	run := func(i int, plan nxKillPlan) nxKillRun {
		t.Helper()
		r := nxKillRun{plan: plan, from: latest, fromPos: pos}
		fp := ""
		switch {
		case plan.final:
			fp = fmt.Sprintf("%s=pause(%v)", plan.failpoint, nxKillEndgamePause)
		case plan.failpoint != "":
			fp = fmt.Sprintf("%s=pause(%v)", plan.failpoint, nxKillPause)
		}
		p := nxStart(t, bin, args, fp)
		var k knKilled
		if plan.failpoint == "" {
			k = p.killAfter(plan.delay)
		} else {
			// A marker that does not come must not let the run reach the
			// end of the stream.
			aim := knAim{failpoint: plan.failpoint, nth: plan.nth, extra: plan.extra, final: plan.final, ckpts: ck,
				deadline: max(5*time.Millisecond, min(nxKillMarkerWait, remaining()/2))}
			if plan.final {
				aim.deadline = remaining() + nxKillFinalWait
			}
			k = p.killAt(aim)
		}
		r.markers, r.markerAt, r.killed, r.killedAt = k.markers, k.marker.at, k.killed, k.at
		p.awaitExit(t, i, nxKillExitWait)
		r.lifetime = time.Since(p.start)
		desc, zero, byKill := p.status()
		r.exited, r.exitZero = desc, zero
		if !zero && !(byKill && r.killed) {
			t.Fatalf("run %d (%s) ended with %s, not by our SIGKILL: the engine failed\nlast output:\n%s", i, plan, desc, p.tailText())
		}
		if zero {
			r.killed = false // it finished before the kill
		}
		refresh()
		r.nextPos, r.nextFinal = pos, final
		return r
	}

	var (
		done        int // kills
		atPoint     = map[string]int{}
		missed      int // failpoint kills whose marker did not come
		midRestores int // runs that resumed mid-stream
		retries     int
	)
	i := 0 // runs so far
	for ; len(schedule) > 0; i++ {
		plan := schedule[0]
		schedule = schedule[1:]
		// Spread the random kills over the stream, and keep every run short
		// of its end: near it, a failpoint kill comes at the first marker.
		switch {
		case plan.failpoint == "" && !plan.early:
			plan.delay = max(50*time.Millisecond, time.Duration(plan.share*2*float64(remaining())/float64(len(schedule)+2)))
			fallthrough
		case plan.failpoint == "":
			plan.delay = min(plan.delay, max(remaining()/2, 5*time.Millisecond))
		case remaining() < 2*time.Second:
			plan.nth = 1
		}
		r := run(i, plan)
		t.Logf("run %2d: %s", i, r)
		watcher.check(t, fmt.Sprintf("after run %d", i))
		if r.exitZero {
			t.Fatalf("run %d exited 0 before its kill: the stream ended after %d kills, fewer than the %d required; lower -nexmarkkills or raise nxEvents", i, done, kills)
		}
		done++
		if r.from > 0 && r.fromPos > 0 && r.fromPos < nxEvents {
			midRestores++
		}
		switch {
		case plan.failpoint == "":
		case r.markerAt > 0:
			atPoint[plan.failpoint]++
		default:
			missed++
			// The commit kill is required: try again at once (a query that
			// writes few rows has a commit of two files every few
			// checkpoints only).
			if plan.failpoint == "sink/file/mid-commit" && atPoint[plan.failpoint] == 0 && retries < 4 {
				retries++
				retry := nxDrawKill(rng, plan.failpoint)
				retry.nth = 1
				schedule = slices.Insert(schedule, 0, retry)
			}
		}
	}
	if atPoint["sink/file/mid-commit"] == 0 {
		t.Fatalf("no kill while paused inside a commit (sink/file/mid-commit) in %d runs", done)
	}

	// Endgame: let the run reach the end of the stream and kill it once the
	// final checkpoint is complete, before its output is committed.
	endgame := run(i, nxKillPlan{failpoint: "job/after-metadata-before-commit", final: true})
	t.Logf("run %2d: %s", i, endgame)
	watcher.check(t, fmt.Sprintf("after run %d", i))
	if endgame.killed {
		done++
		if endgame.markerAt > 0 {
			atPoint["final "+endgame.plan.failpoint]++
		}
		if endgame.fromPos > 0 && endgame.fromPos < nxEvents {
			midRestores++
		}
	} else {
		t.Logf("run %d: the final checkpoint's commit ended before the kill", i)
	}
	i++

	// The final run: no failpoints, no kill; it must finish on its own.
	p := nxStart(t, bin, args, "")
	from := latest
	knFinalRun(t, i, p, nxKillFinalWait, func() string { return fmt.Sprintf("resumed from checkpoint %d;", from) })

	watcher.conclude(t)
	marked := 0
	for _, n := range atPoint {
		marked += n
	}
	t.Logf("%s: %d kills (%d paused at a failpoint: %v; %d aimed markers missed); %d runs resumed mid-stream",
		name, done, marked, atPoint, missed, midRestores)
	if done < kills {
		t.Fatalf("%d kills, want at least %d", done, kills)
	}
	if midRestores == 0 {
		t.Fatalf("no run resumed from a checkpoint mid-stream: the kills prove nothing about restored %s", what)
	}

	// Exactly once.
	got := nxCommitted(t, out)
	if d := nxCompare(got, ref); !d.OK() {
		t.Fatalf("%s: committed output after %d kills is not exactly the failure-free output (replay with -nexmarkseed=%d): %s", name, done, seed, d)
	}
	// Nothing staged is left behind.
	knNoStaged(t, out)
	t.Logf("%s: committed output is exact: %d rows after %d kills (%v)", name, len(got), done, time.Since(began).Round(time.Millisecond))
}
