package join_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
)

// failAfter makes failpoint name fail once at its first call after the
// job completed each of the checkpoint counts in after (so every failure
// restarts the job from a checkpoint holding join state), and returns how
// many failures it injected.
func failAfter(name string, completed func() int64, after ...int64) (fired *atomic.Int64, disable func()) {
	fired = &atomic.Int64{}
	var next atomic.Int64 // index into after of the next failure
	disable = failpoint.Enable(name, func() error {
		k := next.Load()
		if k >= int64(len(after)) || completed() < after[k] || !next.CompareAndSwap(k, k+1) {
			return nil
		}
		fired.Add(1)
		return fmt.Errorf("failpoint %s after checkpoint %d: %w", name, after[k], failpoint.ErrInjected)
	})
	return fired, disable
}

// Exactly-once under failure (checkpointing.txt: "A restart must not lose
// accepted data, repeat already-visible output, or combine state from
// different points in the stream"): each join runs once without failure,
// then with failures injected while it processes records and at each step
// of the checkpoint protocol, each after some checkpoints completed; every
// failure restarts the job from its last complete checkpoint, and the
// committed output equals the failure-free output (and the brute-force
// result) exactly: nothing lost, nothing duplicated.
func TestExactlyOnceUnderFailures(t *testing.T) {
	for _, sp := range pipelineSpecs() {
		t.Run(sp.name, func(t *testing.T) {
			in := inputFor(41, sp)
			want := sp.expect(in)
			clean := newJobSpec(t, sp, in, 3)
			st, err := clean.run(t)
			if err != nil {
				t.Fatalf("failure-free run: %v", err)
			}
			reference := clean.committed(t)
			if !slices.Equal(reference, want) {
				t.Fatalf("failure-free run: %s", diff(reference, want))
			}
			t.Logf("failure-free run: %d checkpoints", st.Completed)
			for _, c := range []struct {
				name   string
				points map[string][]int64 // failpoint: checkpoint counts after which it fails
			}{
				// A subtask (join or sink) fails between two batches.
				{"while processing", map[string][]int64{"task/process-batch": {1, 2, 3}}},
				// Failures at the checkpoint protocol's steps: after a
				// snapshot was written but before its ack, after the
				// metadata made a checkpoint complete but before its
				// output was committed, when the sink stages its output,
				// between the moves of one commit.
				{"at protocol steps", map[string][]int64{
					"task/after-snapshot-before-ack":   {1},
					"job/after-metadata-before-commit": {1},
					"sink/file/prepare":                {2},
					"sink/file/mid-commit":             {3},
				}},
			} {
				t.Run(c.name, func(t *testing.T) {
					j := newJobSpec(t, sp, in, 3)
					j.failAt = c.points
					st, err := j.run(t)
					if err != nil {
						t.Fatalf("run: %v", err)
					}
					t.Logf("stats %+v", st)
					for name, at := range c.points {
						if n := j.fired[name]; n != int64(len(at)) {
							t.Fatalf("failpoint %s failed %d times, want %d: the job ended first", name, n, len(at))
						}
					}
					if st.Restarts == 0 || st.RestoredFrom == 0 {
						t.Fatalf("stats %+v: the failures did not restart the job from a checkpoint", st)
					}
					if got := j.committed(t); !slices.Equal(got, reference) {
						t.Fatalf("differs from the failure-free run: %s", diff(got, reference))
					}
				})
			}
		})
	}
}

// A job stopped gracefully keeps its buffers in the final checkpoint and the
// next run continues from them with exact output. Restoring with a changed
// parameter that gives the state another meaning is refused at once (no
// restarts), wrapping runtime.ErrIncompatible and state.ErrStateMismatch and
// naming the parameter; the original pipeline can still resume afterwards.
func TestStopResumeAndChangedParameters(t *testing.T) {
	for _, c := range []struct {
		sp, changed spec
		want        string
	}{
		{intervalSpec(-10*time.Millisecond, 15*time.Millisecond), intervalSpec(-10*time.Millisecond, 20*time.Millisecond), "upper=20ms"},
		{windowSpec(50 * time.Millisecond), windowSpec(40 * time.Millisecond), "size=40ms"},
		{innerSpec(15 * time.Millisecond), innerSpec(30 * time.Millisecond), "ttl=30ms"},
	} {
		t.Run(c.sp.name, func(t *testing.T) {
			in := inputFor(31, c.sp)
			j := newJobSpec(t, c.sp, in, 2)
			// run stops the job once 3 checkpoints completed, before its
			// clock steps on: after about 3 of each source subtask's
			// reads (of about 20), midway however slow the machine.
			j.stopAfter = 3
			if st, err := j.run(t); err != nil {
				t.Fatalf("first run: %v (stats %+v)", err, st)
			}
			if n := len(j.committed(t)); n == 0 || n == len(c.sp.expect(in)) {
				t.Fatalf("the first run committed %d results: it was not stopped midway", n)
			}

			changed := *j
			changed.sp = c.changed
			st, err := changed.run(t)
			if !errors.Is(err, runtime.ErrIncompatible) || !errors.Is(err, state.ErrStateMismatch) {
				t.Fatalf("run with %s = %v, want an error wrapping ErrIncompatible and ErrStateMismatch", c.changed.name, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the error does not name the changed parameter %q: %v", c.want, err)
			}
			if st.Restarts != 0 {
				t.Fatalf("%d restarts: an incompatible checkpoint must stop the job at once", st.Restarts)
			}
			t.Logf("refused: %v", err)

			j.stopAfter = 0
			if _, err := j.run(t); err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			want := c.sp.expect(in)
			if got := j.committed(t); !slices.Equal(got, want) {
				t.Fatalf("after stop and resume: %s", diff(got, want))
			}
		})
	}
}
