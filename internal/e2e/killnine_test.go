package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/storage"
)

var (
	killSeed = flag.Uint64("killseed", 0, "replay TestKillNine with this seed (0: random)")
	killKeep = flag.Bool("killkeep", false, "keep TestKillNine's working directory (it is always kept when the test fails)")
)

// The pipeline TestKillNine kills: the contract pipeline, bounded and
// rate limited. Uninterrupted it runs knCount/knRate = 20 s, more than the
// runs the kills cut short consume together (about 0.4 s of stream each), so
// no intermediate run reaches the end of the stream; the test also caps each
// kill at half of what the latest checkpoint says is left, whatever the timing.
const (
	knCount    = 400000
	knRate     = 20000
	knKeys     = 50
	knInterval = 150 * time.Millisecond
	knSource   = "events" // the datagen node; its replay position is {"next": i}

	knMinKills   = 20
	knMinPerKind = 4 // kills of each failpoint kind with the marker seen

	knPause        = 300 * time.Millisecond // pause(D) of the failpoints the kills aim at
	knEndgamePause = 120 * time.Millisecond // below the interval: commits do not queue up
	knMarkerWait   = 15 * time.Second       // a run that shows no marker in this time is killed anyway
	knExitWait     = 10 * time.Second       // SIGKILL to exit
	knFinalWait    = 60 * time.Second       // the final, uninterrupted run
)

func knYAML() string {
	return testkit.WindowPipeline{Name: "killnine", Interval: knInterval, Retain: 3,
		Count: knCount, Rate: knRate, Keys: knKeys, Parallelism: 2}.YAML()
}

// knKind is what a run's kill aims at.
type knKind int

const (
	knRandom     knKind = iota // a random delay after start
	knCheckpoint               // while a checkpoint is being written
	knCommit                   // while output is being committed
	knFinal                    // after the final checkpoint is complete, before its output is committed
)

func (k knKind) String() string {
	return [...]string{"random", "checkpoint-write", "commit", "final-commit"}[k]
}

// knPlan is one run and how it is killed. Every random value is drawn when the
// schedule is made, so a seed replays the same schedule; only the caps that
// keep a run from reaching the end of the stream depend on progress.
type knPlan struct {
	kind      knKind
	failpoint string        // the point paused and waited for; "" for random kills
	nth       int           // kill at the nth "failpoint ... reached" line
	extra     time.Duration // then wait this long (inside the pause) before the kill
	delay     time.Duration // random kills: after start
}

func (p knPlan) String() string {
	if p.kind == knRandom {
		return fmt.Sprintf("kind=%s delay=%v", p.kind, p.delay)
	}
	if p.kind == knFinal {
		return fmt.Sprintf("kind=%s fp=%s (kill when the latest complete checkpoint is final)", p.kind, p.failpoint)
	}
	return fmt.Sprintf("kind=%s fp=%s nth=%d extra=%v", p.kind, p.failpoint, p.nth, p.extra)
}

var (
	knCheckpointPoints = []string{"job/before-metadata-write", "task/after-snapshot-before-ack"}
	knCommitPoints     = []string{"sink/file/mid-commit", "job/after-metadata-before-commit"}
	// knOncePoints get one kill each per run of the test (the points above
	// three): the rest of the protocol's steps (docs/reliability.md,
	// "Failpoints").
	knOncePoints = map[string]knKind{
		"task/before-snapshot":             knCheckpoint,
		"task/after-sync-snapshot":         knCheckpoint,
		"task/during-async-write":          knCheckpoint,
		"task/after-ack":                   knCheckpoint,
		"sink/file/prepare":                knCheckpoint,
		"job/after-metadata-before-notify": knCommit,
		"job/after-commit-before-cleanup":  knCommit,
		"storage/discard-mid-delete":       knCommit,
		"sink/file/mid-abandon":            knCommit,
	}
)

// knDraw draws a plan of kind; a failpoint kind aims at failpoint, or at a
// random one of the kind when failpoint is "".
func knDraw(rng *rand.Rand, kind knKind, failpoint string) knPlan {
	p := knPlan{kind: kind, failpoint: failpoint}
	switch kind {
	case knRandom:
		if rng.IntN(5) == 0 {
			// Early: while the process starts and recovers (re-commits the
			// recovery point's output, abandons staging).
			p.delay = time.Duration(5+rng.IntN(75)) * time.Millisecond
		} else {
			p.delay = time.Duration(50+rng.IntN(1450)) * time.Millisecond
		}
		return p
	case knCheckpoint:
		if p.failpoint == "" {
			p.failpoint = knCheckpointPoints[rng.IntN(len(knCheckpointPoints))]
		}
	case knCommit:
		if p.failpoint == "" {
			p.failpoint = knCommitPoints[rng.IntN(len(knCommitPoints))]
		}
	}
	p.nth = 1 + rng.IntN(3)
	switch p.failpoint {
	case "task/after-snapshot-before-ack", "task/before-snapshot", "task/after-sync-snapshot", "task/after-ack":
		p.nth = 1 + rng.IntN(8) // every subtask (5 of them) announces it per checkpoint
	case "sink/file/mid-abandon":
		p.nth = 1 // only at recovery, once per staged file after the first
	}
	if rng.IntN(3) > 0 {
		p.extra = time.Duration(rng.IntN(int(knPause*2/3/time.Millisecond))) * time.Millisecond
	}
	return p
}

// knResult is what happened to one run.
type knResult struct {
	plan       knPlan
	markers    int           // failpoint lines seen
	markerAt   time.Duration // when the marker the kill aimed at was seen
	inRecovery bool          // that marker came while the run recovered (before its "restored from checkpoint" line)
	killed     bool
	killedAt   time.Duration
	exited     string // exit status
	lifetime   time.Duration
	restored   string // "restored from checkpoint N" or "fresh start"
	restarts   int    // in-process restarts logged
}

func (r knResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s; %s", r.plan, r.restored)
	if r.plan.kind != knRandom {
		fmt.Fprintf(&b, "; markers %d", r.markers)
		if r.markerAt > 0 {
			fmt.Fprintf(&b, ", aimed marker at %v", r.markerAt.Round(time.Millisecond))
			if r.inRecovery {
				b.WriteString(" (during recovery)")
			}
		} else {
			b.WriteString(", aimed marker NOT seen")
		}
	}
	if r.killed {
		fmt.Fprintf(&b, "; SIGKILL at %v", r.killedAt.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; exit: %s after %v", r.exited, r.lifetime.Round(time.Millisecond))
	if r.restarts > 0 {
		fmt.Fprintf(&b, "; %d in-process restarts", r.restarts)
	}
	return b.String()
}

// knProgress reads the latest complete checkpoint: the lowest replay position
// of the datagen subtasks (every record below it is in the checkpoint) and
// whether it is the final one.
func knProgress(ckptDir string) (pos, id int64, final bool, err error) {
	if _, err := os.Stat(ckptDir); errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	st, err := storage.NewLocal(ckptDir)
	if err != nil {
		return 0, 0, false, err
	}
	id, data, _, err := storage.Latest(context.Background(), st)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	m, err := checkpoint.DecodeMetadata(data)
	if err != nil {
		return 0, id, false, err
	}
	pos = -1
	for _, s := range m.Tasks {
		if s.Task.Operator != knSource {
			continue
		}
		var p struct {
			Next *int64 `json:"next"`
		}
		if err := json.Unmarshal(s.Inline, &p); err != nil || p.Next == nil {
			return 0, id, m.Final, fmt.Errorf("checkpoint %d: position of %v is %q, not {\"next\": i}", id, s.Task, s.Inline)
		}
		if pos < 0 || *p.Next < pos {
			pos = *p.Next
		}
	}
	if pos < 0 {
		return 0, id, m.Final, fmt.Errorf("checkpoint %d has no state of source %q", id, knSource)
	}
	return pos, id, m.Final, nil
}

// knWatcher reads the sink's committed output at random moments while the
// runs are killed and restarted, as a consumer would, and checks atomic
// visibility: a committed checkpoint directory appears with all of its files,
// complete, and never changes after.
type knWatcher struct {
	out  string
	rng  *rand.Rand
	stop chan struct{}
	done chan struct{}
	// stopOnce closes stop; heading begins the messages of check and
	// conclude.
	stopOnce sync.Once
	heading  string

	mu         sync.Mutex
	entries    map[string]*knEntry // top-level committed entries of out
	violations []string
	passes     int
	lines      int
}

// knEntry is one committed top-level entry (a checkpoint directory) as first seen.
type knEntry struct {
	files map[string]int64 // path relative to out → size
	seen  time.Time
}

func newKnWatcher(out string, seed uint64) *knWatcher {
	return &knWatcher{out: out, rng: rand.New(rand.NewPCG(seed, 0x6b696c6c)), stop: make(chan struct{}), done: make(chan struct{}),
		entries: map[string]*knEntry{}}
}

// knWatch starts a watcher that passes over out every 0.5 to 6 ms.
func knWatch(out string, seed uint64) *knWatcher {
	w := newKnWatcher(out, seed)
	go func() {
		defer close(w.done)
		for {
			w.pass(false)
			select {
			case <-w.stop:
				return
			case <-time.After(time.Duration(500+w.rng.IntN(5500)) * time.Microsecond):
			}
		}
	}()
	return w
}

// halt stops the watcher's passes (at most once).
func (w *knWatcher) halt() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

// finish stops the watcher and makes one last, complete pass.
func (w *knWatcher) finish() {
	w.halt()
	w.pass(true)
}

func (w *knWatcher) violate(format string, args ...any) {
	if len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf(format, args...))
	}
}

func (w *knWatcher) report() (violations []string, entries, lines, passes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.violations), len(w.entries), w.lines, w.passes
}

// pass lists the committed output once. New entries are read in full; a
// sample of known ones (all recent ones, or all when full) are listed again
// and must be unchanged. Committed entries never disappear.
func (w *knWatcher) pass(full bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.passes++
	des, err := os.ReadDir(w.out)
	if errors.Is(err, fs.ErrNotExist) {
		if len(w.entries) > 0 {
			w.violate("the sink directory %s disappeared after %d committed entries were seen", w.out, len(w.entries))
		}
		return
	}
	if err != nil {
		w.violate("listing %s: %v", w.out, err)
		return
	}
	present := map[string]bool{}
	now := time.Now()
	for _, de := range des {
		name := de.Name()
		if !testkit.IsCommitted(name) {
			continue
		}
		present[name] = true
		e := w.entries[name]
		if e == nil {
			files, err := w.list(name)
			if err != nil {
				w.violate("listing committed %s: %v", name, err)
				continue
			}
			for rel := range files {
				w.readFile(rel)
			}
			w.entries[name] = &knEntry{files: files, seen: now}
			continue
		}
		if !full && now.Sub(e.seen) > 2*time.Second && w.rng.IntN(16) != 0 {
			continue
		}
		files, err := w.list(name)
		if err != nil {
			w.violate("listing committed %s again: %v", name, err)
			continue
		}
		for rel, size := range files {
			old, ok := e.files[rel]
			switch {
			case !ok:
				w.violate("committed %s gained file %s %v after it was first seen with %d files: a reader saw part of a checkpoint's output",
					name, rel, now.Sub(e.seen).Round(time.Millisecond), len(e.files))
			case old != size:
				w.violate("committed file %s changed size from %d to %d %v after it was first seen", rel, old, size, now.Sub(e.seen).Round(time.Millisecond))
			}
		}
		for rel := range e.files {
			if _, ok := files[rel]; !ok {
				w.violate("committed file %s disappeared %v after it was first seen", rel, now.Sub(e.seen).Round(time.Millisecond))
			}
		}
		e.files = files // report each change once
	}
	for name := range w.entries {
		if !present[name] {
			w.violate("committed %s disappeared after it was seen", name)
			delete(w.entries, name)
		}
	}
}

// list returns the committed files under the top-level entry name with their sizes.
func (w *knWatcher) list(name string) (map[string]int64, error) {
	files := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(w.out, name), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.out, path)
		if !testkit.IsCommitted(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files[rel] = info.Size()
		return nil
	})
	return files, err
}

// readFile checks that a committed file is whole: every line a JSON object,
// the last one terminated.
func (w *knWatcher) readFile(rel string) {
	data, err := os.ReadFile(filepath.Join(w.out, rel))
	if err != nil {
		w.violate("reading committed %s: %v", rel, err)
		return
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		w.violate("committed %s ends in a partial line: %q", rel, data[max(0, len(data)-80):])
	}
	if len(data) == 0 {
		return
	}
	for n, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		w.lines++
		var obj map[string]any
		if err := json.Unmarshal(line, &obj); err != nil {
			w.violate("committed %s:%d is not a JSON object (%v): %q", rel, n+1, err, line)
		}
	}
}

// knBuild returns the ingest binary the kill tests run: built once per test
// process (pkBinary) and shared, since a build costs tens of seconds on a
// busy machine and the package's tests must fit go test's default timeout.
// dir is unused: kept so that callers say where they work.
func knBuild(t *testing.T, dir string) string {
	t.Helper()
	_ = dir
	return pkBinary(t)
}

// knDump logs what is on disk, for a failure's diagnosis.
func knDump(t *testing.T, bin, yaml, work string) {
	t.Helper()
	var b strings.Builder
	knTrees(&b, filepath.Join(work, "data/checkpoints"), filepath.Join(work, "data/out"))
	out, err := exec.Command(bin, "checkpoints", "list", yaml).CombinedOutput()
	fmt.Fprintf(&b, "ingest checkpoints list (err %v):\n%s", err, out)
	t.Log(b.String())
}

// TestKillNine runs the bounded contract pipeline as a separate process and
// kills it with SIGKILL at least knMinKills times (at random moments, while a
// checkpoint is being written, while output is being committed, and once
// after the final checkpoint completed), restarting it each time; then lets
// it finish and checks the committed output is exactly the expected windows.
// Meanwhile a reader checks that committed output becomes visible atomically.
func TestKillNine(t *testing.T) {
	began := time.Now()
	seed := knSeed(*killSeed)
	t.Logf("seed %d (replay with -killseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6e696e65))

	work, err := os.MkdirTemp("", "killnine-")
	if err != nil {
		t.Fatal(err)
	}
	var bin, yaml string
	t.Cleanup(func() {
		if t.Failed() {
			if bin != "" {
				knDump(t, bin, yaml, work)
			}
			t.Logf("FAILED with seed %d: replay with go test ./internal/e2e -run TestKillNine -v -killseed=%d; working directory kept: %s", seed, seed, work)
			return
		}
		if *killKeep {
			t.Logf("working directory kept: %s", work)
			return
		}
		_ = os.RemoveAll(work)
	})
	bin = knBuild(t, work)
	built := time.Since(began)
	yaml = filepath.Join(work, "pipeline.yaml")
	if err := os.WriteFile(yaml, []byte(knYAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(work, "data", "out")
	ckptDir := filepath.Join(work, "data", "checkpoints")

	watcher := knWatchTest(t, outDir, seed, "atomic visibility violated")

	// The schedule: random kills and kills inside each failpoint, shuffled.
	var schedule []knPlan
	for range 10 {
		schedule = append(schedule, knDraw(rng, knRandom, ""))
	}
	for range 3 {
		for _, fp := range knCheckpointPoints {
			schedule = append(schedule, knDraw(rng, knCheckpoint, fp))
		}
		for _, fp := range knCommitPoints {
			schedule = append(schedule, knDraw(rng, knCommit, fp))
		}
	}
	once := slices.Sorted(maps.Keys(knOncePoints)) // map order must not change the schedule of a seed
	for _, fp := range once {
		schedule = append(schedule, knDraw(rng, knOncePoints[fp], fp))
	}
	rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
	// After a kill in a commit, the next start re-commits the recovery point's
	// output; half the time, kill that run at its first mid-commit marker,
	// which then often comes during the recovery's re-commit.
	// The abandon of staged output runs at a recovery, when a kill left
	// staged files: aim at it right after a random kill, past the first
	// checkpoints.
	if k := slices.IndexFunc(schedule, func(p knPlan) bool { return p.failpoint == "sink/file/mid-abandon" }); k >= 0 {
		p := schedule[k]
		schedule = slices.Delete(schedule, k, k+1)
		r := slices.IndexFunc(schedule[2:], func(p knPlan) bool { return p.kind == knRandom })
		schedule = slices.Insert(schedule, 2+r+1, p)
	}
	for k := 0; k < len(schedule); k++ {
		if schedule[k].kind == knCommit && rng.IntN(2) == 0 {
			f := knDraw(rng, knCommit, "sink/file/mid-commit")
			f.nth = 1
			schedule = slices.Insert(schedule, k+1, f)
			k++
		}
	}

	var (
		kills    int
		perKind  = map[knKind]int{}
		perPoint = map[string]int{}
		// kills in a failpoint during the recovery's re-commit, and kills
		// whose marker did not come
		inRecovery, missed int
		pos                int64 // replay position of the latest complete checkpoint
		latest             int64 // its id
		posOK              = true
		lived              time.Duration // total lifetime of the runs, an upper bound of progress when pos is unknown
	)
	refresh := func() {
		p, id, final, err := knProgress(ckptDir)
		if err != nil {
			if posOK {
				t.Logf("cannot read progress from the checkpoints (%v); capping kills by elapsed time instead", err)
			}
			posOK = false
			return
		}
		if final {
			t.Fatalf("the latest complete checkpoint %d is the final one after %d kills: the stream is too short for the schedule; raise knCount", id, kills)
		}
		pos, latest = p, id
	}
	// remaining is how much of the stream (in time at knRate) is left at most.
	remaining := func() time.Duration {
		left := knCount - pos
		if !posOK {
			left = knCount - int64(lived.Seconds()*knRate)
		}
		return time.Duration(float64(max(left, 0)) / knRate * float64(time.Second))
	}

	run := func(i int, plan knPlan) knResult {
		t.Helper()
		res := knResult{plan: plan}
		fp := ""
		switch plan.kind {
		case knFinal:
			fp = fmt.Sprintf("%s=pause(%v)", plan.failpoint, knEndgamePause)
		case knCheckpoint, knCommit:
			fp = fmt.Sprintf("%s=pause(%v)", plan.failpoint, knPause)
		}
		p := knStart(t, bin, yaml, fp, latest > 0)
		var k knKilled
		switch plan.kind {
		case knRandom:
			k = p.killAfter(plan.delay - time.Since(p.start))
		default:
			// A marker that does not come must not let the run reach the
			// end of the stream.
			aim := knAim{failpoint: plan.failpoint, nth: plan.nth, extra: plan.extra,
				final: plan.kind == knFinal, ckpts: ckptDir, deadline: max(300*time.Millisecond, min(knMarkerWait, remaining()/2))}
			if plan.failpoint == "sink/file/mid-abandon" {
				aim.deadline = 2 * time.Second // it comes during the recovery or not at all
			}
			if plan.kind == knFinal {
				aim.deadline = remaining() + knFinalWait
			}
			k = p.killAt(aim)
			if k.timedOut {
				t.Logf("run %d: %s: the aimed marker did not come; killing anyway", i, plan)
			}
		}
		res.markers, res.markerAt, res.inRecovery = k.markers, k.marker.at, k.marker.inRecovery
		res.killed, res.killedAt = k.killed, k.at
		p.awaitExit(t, i, knExitWait)
		res.lifetime = time.Since(p.start)
		p.mu.Lock()
		res.restored, res.restarts = p.restored, p.restarts
		p.mu.Unlock()
		switch {
		case res.restored != "":
		case latest > 0:
			res.restored = fmt.Sprintf("killed before its recovery from checkpoint %d finished", latest)
		default:
			res.restored = "fresh start"
		}
		desc, zero, byKill := p.status()
		res.exited = desc
		switch {
		case byKill && res.killed:
		case zero && plan.kind == knFinal:
			// The final commit finished before the kill: no harm, the
			// next run restarts a finished pipeline.
			t.Logf("run %d: the final checkpoint's commit ended before the kill", i)
		case zero:
			t.Fatalf("run %d (%s) exited 0 by itself before the kill: the pipeline finished after %d kills, fewer than the %d required; the stream is too short for the schedule (raise knCount or kill earlier)\n%s",
				i, res, kills, knMinKills, p.tailText())
		default:
			t.Fatalf("run %d (%s) ended with %s, not by our SIGKILL: the engine failed\nlast output:\n%s", i, res, desc, p.tailText())
		}
		return res
	}

	record := func(i int, res knResult) {
		kills++
		switch {
		case res.plan.kind == knRandom:
			perKind[knRandom]++
		case res.markerAt > 0:
			perKind[res.plan.kind]++
			perPoint[res.plan.failpoint]++
			if res.inRecovery {
				inRecovery++
			}
		default:
			missed++
		}
		lived += res.lifetime
		refresh()
		t.Logf("run %2d: %s; next position %d/%d", i, res, pos, knCount)
		watcher.check(t, fmt.Sprintf("seen after run %d", i))
	}

	i, abandonRetries := 0, 0
	for len(schedule) > 0 || kills < knMinKills || perKind[knCheckpoint] < knMinPerKind || perKind[knCommit] < knMinPerKind {
		if i >= 60 {
			t.Fatalf("after %d runs: %d kills, %d while a checkpoint was written, %d while output was committed: the failpoint markers do not come",
				i, kills, perKind[knCheckpoint], perKind[knCommit])
		}
		var plan knPlan
		switch {
		case len(schedule) > 0:
			plan, schedule = schedule[0], schedule[1:]
		case perKind[knCheckpoint] < knMinPerKind:
			plan = knDraw(rng, knCheckpoint, "")
		case perKind[knCommit] < knMinPerKind:
			plan = knDraw(rng, knCommit, "")
		default:
			plan = knDraw(rng, knRandom, "")
		}
		// Keep every run short of the end of the stream: a random kill comes
		// before half of what is left, a failpoint kill at an early marker.
		left := remaining()
		if plan.kind == knRandom {
			plan.delay = min(plan.delay, max(left/2, 5*time.Millisecond))
		} else if left < 3*time.Second {
			plan.nth = 1
		}
		res := run(i, plan)
		record(i, res)
		i++
		// The abandon runs only when the previous kill left staged files;
		// aim again after the next random kill when it did not come.
		if plan.failpoint == "sink/file/mid-abandon" && res.markerAt == 0 && abandonRetries < 3 {
			abandonRetries++
			if r := slices.IndexFunc(schedule, func(p knPlan) bool { return p.kind == knRandom }); r >= 0 {
				schedule = slices.Insert(schedule, r+1, plan)
			} else {
				schedule = append(schedule, knDraw(rng, knRandom, ""), plan)
			}
		}
	}

	// Endgame: let the run reach the end of the stream and kill it once the
	// final checkpoint is complete, before its output is committed.
	endgame := run(i, knPlan{kind: knFinal, failpoint: "job/after-metadata-before-commit"})
	if endgame.killed {
		kills++
	}
	if endgame.killed && endgame.markerAt > 0 {
		perKind[knFinal]++
		perKind[knCommit]++
		perPoint[endgame.plan.failpoint]++
	}
	t.Logf("run %2d: %s", i, endgame)
	watcher.check(t, fmt.Sprintf("seen after run %d", i))
	i++

	// The final run: no failpoints, no kill; it must finish on its own.
	p := knStart(t, bin, yaml, "", latest > 0)
	knFinalRun(t, i, p, knFinalWait, func() string { return p.restoredText() + "; exit:" })

	watcher.conclude(t)

	t.Logf("%d kills: %d random, %d while a checkpoint was written, %d while output was committed (%d of them after the final checkpoint completed), %d with the marker missed; %d during a recovery; by failpoint: %v",
		kills, perKind[knRandom], perKind[knCheckpoint], perKind[knCommit], perKind[knFinal], missed, inRecovery, perPoint)
	if kills < knMinKills || perKind[knCheckpoint] < knMinPerKind || perKind[knCommit] < knMinPerKind {
		t.Fatalf("too few kills: %d (want %d), %d while writing a checkpoint, %d while committing (want %d each)",
			kills, knMinKills, perKind[knCheckpoint], perKind[knCommit], knMinPerKind)
	}

	// Exactly once: every (key, window) once, with the exact count and sum.
	lines, err := testkit.ReadCommitted(outDir)
	if err != nil {
		t.Fatalf("reading committed output: %v", err)
	}
	want := testkit.ExpectedWindows(knCount, knKeys, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond, time.Second)
	report := testkit.CheckWindows(lines, want, time.Second)
	if !report.OK() {
		t.Fatalf("committed output is not exactly the expected windows: %s", report)
	}
	t.Logf("committed output is exact: %d windows", report.Expected)

	// Nothing staged is left behind.
	knNoStaged(t, outDir)

	out, err := exec.Command(bin, "checkpoints", "list", yaml).CombinedOutput()
	if err != nil {
		t.Fatalf("ingest checkpoints list: %v\n%s", err, out)
	}
	complete := 0
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == "complete" {
			complete++
		}
	}
	if complete == 0 {
		t.Fatalf("ingest checkpoints list shows no complete checkpoint:\n%s", out)
	}
	t.Logf("ingest checkpoints list:\n%s", out)
	t.Logf("took %v (build %v)", time.Since(began).Round(time.Millisecond), built.Round(time.Millisecond))
}

// TestKillNineReader checks that TestKillNine's reader is not vacuous: it
// reports a committed directory that gains a file, a torn line, a line that
// is not JSON and committed output that disappears, and ignores staging.
func TestKillNineReader(t *testing.T) {
	out := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		path := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := newKnWatcher(out, 1)
	check := func(want ...string) {
		t.Helper()
		w.pass(true)
		v, _, _, _ := w.report()
		if len(v) != len(want) {
			t.Fatalf("violations %q, want %d matching %q", v, len(want), want)
		}
		for i := range want {
			if !strings.Contains(v[i], want[i]) {
				t.Fatalf("violation %q, want one about %q", v[i], want[i])
			}
		}
		w.violations = nil
	}

	write("_staging/pending/part-0.jsonl", "{\"torn\":")
	write("ckpt-1/part-0.jsonl", "{\"key\":1}\n{\"key\":2}\n")
	check()
	write("ckpt-1/part-1.jsonl", "{\"key\":3}\n")
	check("gained file")
	write("ckpt-2/part-0.jsonl", "{\"key\":1}\n{\"key\":")
	check("partial line", "not a JSON object")
	write("ckpt-3/part-0.jsonl", "{\"key\":1}\nnot json\n")
	check("not a JSON object")
	write("ckpt-3/part-0.jsonl", "{\"key\":1}\nnot json, longer\n")
	check("changed size")
	if err := os.RemoveAll(filepath.Join(out, "ckpt-2")); err != nil {
		t.Fatal(err)
	}
	check("disappeared")
	check()
}
