package e2e

import (
	"flag"
	"os"
	"path/filepath"
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

// TestSQLInjectedFailures runs the in-process contract pipeline written in
// SQL, failing it inside the checkpoint protocol (between a snapshot and its
// acknowledgement; after a checkpoint completed, before its commit), and
// checks the committed output is exactly the input's windows.
func TestSQLInjectedFailures(t *testing.T) {
	for _, c := range []struct {
		point string
		at    []int64
	}{
		{"task/after-snapshot-before-ack", []int64{3, 11}},
		{"job/after-metadata-before-commit", []int64{2, 5}},
	} {
		t.Run(c.point, func(t *testing.T) {
			calls, disable := failOn(c.point, c.at...)
			defer disable()
			dir := t.TempDir()
			fake := clock.NewFake(time.Unix(1_800_000_000, 0))
			job := fileJob(t, filepath.Join(dir, "p.sql"), injectedPipeline.SQL(), func(opts *stream.RunOptions) {
				opts.Clock = fake
			})
			runStepped(t, job, fake, injectedPipeline.Interval, 2*time.Minute)
			st := job.Stats()
			t.Logf("failpoint %s failed calls %v of %d; stats %+v", c.point, c.at, calls.Load(), st)
			if calls.Load() < c.at[len(c.at)-1] || st.Restarts == 0 {
				t.Fatalf("failpoint %s reached %d times, %d restarts: the test did not inject what it meant to", c.point, calls.Load(), st.Restarts)
			}
			checkExact(t, dir)
		})
	}
}
