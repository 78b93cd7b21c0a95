package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/stream"
)

var sqlKillSeed = flag.Uint64("sqlkillseed", 0, "replay TestSQLKillNine with this seed (0: random)")

// TestSQLKillNine runs the windowed contract pipeline written in SQL
// (datagen → TUMBLE … GROUP BY key, window_start → file sink) as a separate
// process, kills it with SIGKILL at random moments and between a subtask's
// snapshot and its acknowledgement, restarts it until it exits 0, and checks
// that the committed output is exactly the input's windows and became
// visible atomically.
func TestSQLKillNine(t *testing.T) {
	serviceKillTest(t, "sqlkillseed", *sqlKillSeed, sqlScenario)
}

func sqlScenario(t *testing.T, bin string, seed uint64) soakResult {
	const (
		count = 20000
		keys  = 13
	)
	wp := testkit.WindowPipeline{Name: "sql-killnine", Interval: 100 * time.Millisecond, Retain: 2,
		Count: count, Rate: 2000, Keys: keys, Parallelism: 2, WindowParallelism: 2}
	work, _ := scenarioDir(t, "pipeline: unused\n")
	path := filepath.Join(work, "pipeline.sql")
	if err := os.WriteFile(path, []byte(wp.SQL()), 0o644); err != nil {
		t.Fatal(err)
	}
	ckpts, out := filepath.Join(work, "data", "checkpoints"), filepath.Join(work, "data", "out")
	w := knWatch(out, seed)
	var res soakResult
	res.Kills, res.Aimed = killSchedule{
		Bin: bin, YAML: path, Ckpts: ckpts, Seed: seed,
		Kills: 6, AimedKills: 2, Aim: "task/after-snapshot-before-ack", Pause: 300 * time.Millisecond,
		MinDelay: 600 * time.Millisecond, MaxDelay: 3 * time.Second, Budget: 30 * time.Second, FinalWait: 90 * time.Second,
	}.run(t)
	checkFileOutput(t, w, out, testkit.ExpectedWindows(count, keys, datagen.DefaultStartTime, time.Millisecond, time.Second), &res)
	return res
}

// injectedFailure is a failpoint and the calls of it that fail.
type injectedFailure struct {
	point string
	at    []int64
}

// runSQLFailing writes the SQL script text in a new directory and runs it
// on a fake clock stepped by step, failing c's calls, and returns the
// directory. It fails t unless the calls were reached and restarted the job.
func runSQLFailing(t *testing.T, text string, step time.Duration, c injectedFailure) string {
	t.Helper()
	calls, disable := failOn(c.point, c.at...)
	defer disable()
	dir := t.TempDir()
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	job := fileJob(t, filepath.Join(dir, "p.sql"), text, func(opts *stream.RunOptions) { opts.Clock = fake })
	runStepped(t, job, fake, step, 2*time.Minute)
	st := job.Stats()
	t.Logf("failpoint %s failed calls %v of %d; stats %+v", c.point, c.at, calls.Load(), st)
	if calls.Load() < c.at[len(c.at)-1] || st.Restarts == 0 {
		t.Fatalf("failpoint %s reached %d times, %d restarts: the test did not inject what it meant to", c.point, calls.Load(), st.Restarts)
	}
	return dir
}

// TestSQLInjectedFailures runs the in-process contract pipeline written in
// SQL, failing it inside the checkpoint protocol (between a snapshot and its
// acknowledgement; after a checkpoint completed, before its commit), and
// checks the committed output is exactly the input's windows.
func TestSQLInjectedFailures(t *testing.T) {
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{3, 11}},
		{"job/after-metadata-before-commit", []int64{2, 5}},
	} {
		t.Run(c.point, func(t *testing.T) {
			checkExact(t, runSQLFailing(t, injectedPipeline.SQL(), injectedPipeline.Interval, c))
		})
	}
}

// joinSQL is an interval join of two rate-limited generators written in
// SQL, into a file sink; its output does not depend on timing (each pair
// once, none late: each source is one ordered subtask).
func joinSQL(rate int) string {
	return fmt.Sprintf(`SET pipeline = 'sql-join';
SET checkpoint.interval = '50ms';
SET checkpoint.dir = 'data/checkpoints';
SET checkpoint.retain = 2;
SET checkpoint.tolerable_failures = 1000;
SET restart.delay = '5ms';
SET restart.multiplier = 1;
SET restart.max_attempts = 1000;
CREATE SOURCE clicks WITH (connector = 'datagen', count = 6000, keys = 40, rate = %d);
CREATE SOURCE views WITH (connector = 'datagen', count = 4000, keys = 40, event_interval = '2ms', rate = %d);
CREATE SINK out AS
  SELECT c.key AS k, c.id AS click, v.id AS view
  FROM clicks AS c JOIN views AS v ON c.key = v.key
    AND v.event_time BETWEEN c.event_time - INTERVAL '40 milliseconds' AND c.event_time + INTERVAL '10 milliseconds'
  WITH (connector = 'file', path = 'data/out', parallelism = 2);
`, rate, rate*2/3)
}

// committedSorted returns the lines committed under dir/data/out, sorted.
func committedSorted(t *testing.T, dir string) []string {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "data", "out"))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	slices.Sort(out)
	return out
}

// joinReference runs the join without failures and returns its output.
func joinReference(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	job := fileJob(t, filepath.Join(dir, "p.sql"), joinSQL(15000), func(opts *stream.RunOptions) { opts.Clock = fake })
	runStepped(t, job, fake, 50*time.Millisecond, 2*time.Minute)
	out := committedSorted(t, dir)
	if len(out) < 1000 {
		t.Fatalf("the reference join committed %d rows", len(out))
	}
	return out
}

// compareJoin fails t unless got is exactly want, naming what is lost and
// repeated.
func compareJoin(t *testing.T, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	for _, l := range got {
		count[l]--
	}
	var lost, repeated int
	var example string
	for l, n := range count {
		if n > 0 {
			lost += n
		} else if n < 0 {
			repeated -= n
		}
		if n != 0 && example == "" {
			example = l
		}
	}
	t.Fatalf("committed %d rows, want %d: %d missing, %d repeated or unexpected (e.g. %s)", len(got), len(want), lost, repeated, example)
}

// TestSQLJoinInjectedFailures fails the SQL interval join in process inside
// the checkpoint protocol and requires exactly the output of a run without
// failures.
func TestSQLJoinInjectedFailures(t *testing.T) {
	want := joinReference(t)
	for _, c := range []injectedFailure{
		{"task/after-snapshot-before-ack", []int64{4, 13}},
		{"job/after-metadata-before-commit", []int64{2, 4}},
		{"task/process-batch", []int64{7, 19}},
	} {
		t.Run(c.point, func(t *testing.T) {
			compareJoin(t, committedSorted(t, runSQLFailing(t, joinSQL(15000), 50*time.Millisecond, c)), want)
		})
	}
}

var sqlJoinKillSeed = flag.Uint64("sqljoinkillseed", 0, "replay TestSQLJoinKillNine with this seed (0: random)")

// TestSQLJoinKillNine runs the SQL interval join as a separate process,
// kills it with SIGKILL at random moments and between a snapshot and its
// acknowledgement, restarts it until it exits 0, and requires exactly the
// output of a run without failures.
func TestSQLJoinKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test; not in -short")
	}
	seed := knSeed(*sqlJoinKillSeed)
	t.Logf("seed %d (replay with -sqljoinkillseed=%d)", seed, seed)
	want := joinReference(t)
	bin := knBuild(t, t.TempDir())
	work, _ := scenarioDir(t, "pipeline: unused\n")
	path := filepath.Join(work, "pipeline.sql")
	if err := os.WriteFile(path, []byte(joinSQL(1200)), 0o644); err != nil {
		t.Fatal(err)
	}
	kills, aimed := killSchedule{
		Bin: bin, YAML: path, Ckpts: filepath.Join(work, "data", "checkpoints"), Seed: seed,
		Kills: 5, AimedKills: 2, Aim: "task/after-snapshot-before-ack", Pause: 300 * time.Millisecond,
		MinDelay: 600 * time.Millisecond, MaxDelay: 2500 * time.Millisecond, Budget: 30 * time.Second, FinalWait: 90 * time.Second,
	}.run(t)
	t.Logf("%d SIGKILLs (%d aimed)", kills, aimed)
	if kills == 0 {
		t.Fatal("no run was killed: the test tested nothing")
	}
	compareJoin(t, committedSorted(t, work), want)
}
