package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

// slowYAML is a tiny bounded pipeline: three records at one a second over
// two source subtasks, so subtask 1 is exhausted (it emitted the maximum
// watermark) while subtask 0 still has a record to go.
var slowYAML = testkit.WindowPipeline{Name: "slow", Interval: 50 * time.Millisecond,
	RestartDelay: 10 * time.Millisecond, Count: 3, Rate: 1, Parallelism: 2}.YAML()

// runSlow runs the pipeline in dir, stopping it gracefully after stopAfter
// when that is positive.
func runSlow(t *testing.T, dir string, stopAfter time.Duration) {
	t.Helper()
	job := yamlJob(t, dir, slowYAML, nil)
	if stopAfter > 0 {
		timer := time.AfterFunc(stopAfter, job.Stop)
		defer timer.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func checkSlow(t *testing.T, dir string) {
	t.Helper()
	checkWindows(t, dir, 3, 100)
}

// A checkpoint in which one source subtask is exhausted and the other is not
// is restored after a graceful stop: the exhausted subtask must announce its
// (maximum) watermark again, or the windows never fire before the final
// checkpoint. (Found in review: 0 of 3 windows were committed.)
func TestRestoreWithOneSourceSubtaskExhausted(t *testing.T) {
	dir := t.TempDir()
	runSlow(t, dir, 700*time.Millisecond)
	runSlow(t, dir, 0)
	checkSlow(t, dir)
}

// The same after an in-process restart.
func TestRestartWithOneSourceSubtaskExhausted(t *testing.T) {
	_, disable := failOn("task/process-batch", 3)
	defer disable()
	dir := t.TempDir()
	runSlow(t, dir, 0)
	checkSlow(t, dir)
}

// Changing a window's aggregates or size between runs makes its saved state
// meaningless: the restore must fail with an error naming the operator
// instead of reading one aggregate's accumulator as another's (or panicking).
// (checkpointing.txt: "Stable processing contract - Schema and connector
// changes remain compatible with the saved state.")
func TestChangedWindowStateRefused(t *testing.T) {
	for _, c := range []struct{ name, from, to string }{
		{"aggregate added", "      sum: sum(value)\n", "      sum: sum(value)\n      max: max(value)\n"},
		{"size changed", "    size: 1s\n", "    size: 2s\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			runSlow(t, dir, 300*time.Millisecond) // stops with open windows in the checkpoint
			changed := strings.Replace(slowYAML, c.from, c.to, 1)
			if changed == slowYAML {
				t.Fatal("the edit did not apply")
			}
			job := yamlJob(t, dir, changed, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := job.Run(ctx)
			if !errors.Is(err, runtime.ErrIncompatible) || !strings.Contains(err.Error(), "per_key") {
				t.Fatalf("Run = %v; want an incompatible-state error naming per_key", err)
			}
			t.Log(err)
			if st := job.Stats(); st.Restarts != 0 {
				t.Fatalf("%d restarts for an error a restart cannot cure", st.Restarts)
			}
		})
	}
}
