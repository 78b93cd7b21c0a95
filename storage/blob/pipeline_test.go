package blob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// totals is the window accumulator of the test pipeline.
type totals struct{ Count, Sum int64 }

type totalsCodec struct{}

func (totalsCodec) Name() string { return "blobtest.totals.v1" }

func (totalsCodec) Append(dst []byte, t totals) []byte {
	return state.Int64Codec{}.Append(state.Int64Codec{}.Append(dst, t.Count), t.Sum)
}

func (totalsCodec) Decode(src []byte) (totals, int, error) {
	c, n, err := state.Int64Codec{}.Decode(src)
	if err != nil {
		return totals{}, 0, err
	}
	s, m, err := state.Int64Codec{}.Decode(src[n:])
	return totals{Count: c, Sum: s}, n + m, err
}

// windowOut is one committed line, in the window output contract testkit checks.
type windowOut struct {
	Key         int64     `json:"key"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Count       int64     `json:"count"`
	Sum         int64     `json:"sum"`
}

const (
	pipeCount = 20000
	pipeRate  = 5000 // records/s: a run takes 4 s, long enough to be killed after several checkpoints
	pipeKeys  = 10
)

// windowJob builds the contract pipeline (datagen → per-key 1 s tumbling window with count and
// sum → file sink under out) with checkpoints in st every 15 ms.
func windowJob(t *testing.T, st storage.Storage, out string) *runtime.Job {
	t.Helper()
	return windowJobWith(t, st, out, nil)
}

// windowJobWith is windowJob with run options edited by edit (when not nil).
func windowJobWith(t *testing.T, st storage.Storage, out string, edit func(*stream.RunOptions)) *runtime.Job {
	t.Helper()
	p := stream.New("blob-pipeline", stream.DefaultParallelism(2))
	src, err := datagen.Events(datagen.Config{Count: pipeCount, Rate: pipeRate, Keys: pipeKeys})
	if err != nil {
		t.Fatal(err)
	}
	events := stream.From[datagen.Event](p, "events", src)
	byKey := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	agg := window.Aggregate[datagen.Event, totals]{
		Init:  func() totals { return totals{} },
		Add:   func(a totals, e datagen.Event) totals { return totals{Count: a.Count + 1, Sum: a.Sum + e.Value} },
		Codec: totalsCodec{},
	}
	perKey := window.Tumbling(byKey, "per_key", time.Second, agg, func(key int64, w window.Window, a totals) windowOut {
		return windowOut{Key: key, WindowStart: time.Unix(0, w.Start).UTC(), WindowEnd: time.Unix(0, w.End).UTC(), Count: a.Count, Sum: a.Sum}
	})
	stream.To(perKey, "out", file.JSONLines[windowOut](out))

	opts := checkpoint.DefaultOptions()
	opts.Interval = 15 * time.Millisecond
	opts.TolerableFailures = 1000
	opts.Retain = 2
	ro := stream.RunOptions{Checkpoint: opts, Storage: st, Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 100}}
	if testing.Verbose() {
		ro.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if edit != nil {
		edit(&ro)
	}
	job, err := p.NewJob(ro)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// readWindows returns the report of the committed output under out against the exact windows.
func readWindows(t *testing.T, out string) testkit.Report {
	t.Helper()
	lines, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	want := testkit.ExpectedWindows(pipeCount, pipeKeys, datagen.DefaultStartTime, time.Millisecond, time.Second)
	return testkit.CheckWindows(lines, want, time.Second)
}

// runUntil runs job until it completed at least n checkpoints and read at least half of the
// records, then cancels it (a kill as far as the job is concerned: no final checkpoint, staged
// output left behind). It returns the stats.
func runUntil(t *testing.T, job *runtime.Job, n int64) runtime.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	for st := job.Stats(); st.Completed < n || st.Records < pipeCount/2; st = job.Stats() {
		select {
		case err := <-done:
			t.Fatalf("the job ended before %d checkpoints: %v (stats %+v)", n, err, job.Stats())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("the job finished before it was cancelled (stats %+v): the test killed nothing", job.Stats())
	}
	return job.Stats()
}

// runToEnd runs job to completion and returns its stats.
func runToEnd(t *testing.T, job *runtime.Job) runtime.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatalf("run: %v (stats %+v)", err, job.Stats())
	}
	return job.Stats()
}

func openURL(t *testing.T, raw string) *Storage {
	t.Helper()
	s, err := Open(context.Background(), raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The pipeline tests do not run in parallel: the failpoint one enables is process-wide.

// The contract pipeline with checkpoints on S3 (gofakes3) is killed (its job cancelled) after a
// few checkpoints, while the store fails requests at random and an operator fails once; a second
// process opening the same URL resumes from the latest complete checkpoint, and the committed
// output is exactly the expected windows. While the first job runs, a second job on the same
// checkpoints is refused by the lock.
// (checkpointing.txt: "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream.")
func TestPipelineOnS3KilledAndRestarted(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	f := newFakeS3(t)
	url := f.url("jobs/" + uniqueName(t))
	out := filepath.Join(t.TempDir(), "out")

	// The store rejects 1% of requests (the SDK retries them, after up to a second) and loses the
	// answer of 1% after doing them (a retried conditional create then finds its own metadata).
	// The 30th request is always rejected and the 60th always loses its answer, so that each
	// kind of fault happens in every run (a run makes a few hundred requests, so at 1% alone a
	// run without one of them happens: CI met one without a lost answer).
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0))
	var requests, rejected, lost atomic.Int64
	f.setFaults(func(r *http.Request) (int, bool) {
		n := requests.Add(1)
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		switch {
		case n == 60:
			x = 0.015 // lost
		case n == 30:
			x = 0.005 // rejected
		}
		switch {
		case x < 0.01:
			rejected.Add(1)
			return http.StatusServiceUnavailable, false
		case x < 0.02:
			lost.Add(1)
			return 0, true
		}
		return 0, false
	})
	// One record batch fails in the first job: an in-process restart from the last checkpoint.
	var batches atomic.Int64
	disable := failpoint.Enable("task/process-batch", func() error {
		if batches.Add(1) == 40 {
			return fmt.Errorf("failpoint task/process-batch: %w", failpoint.ErrInjected)
		}
		return nil
	})
	defer disable()

	first := windowJob(t, openURL(t, url), out)
	second := windowJob(t, openURL(t, url), filepath.Join(t.TempDir(), "other"))
	secondDone := make(chan error, 1)
	go func() {
		// A second job on the same checkpoints while the first runs.
		for first.Stats().Completed < 1 {
			time.Sleep(time.Millisecond)
		}
		secondDone <- second.Run(context.Background())
	}()
	st1 := runUntil(t, first, 3)
	if err := <-secondDone; !errors.Is(err, storage.ErrLocked) {
		t.Errorf("a second job on the same checkpoints ran: %v", err)
	}
	t.Logf("first job: %+v", st1)
	if st1.Restarts == 0 {
		t.Errorf("the injected operator failure did not restart the first job")
	}
	if r := readWindows(t, out); r.Seen == r.Expected {
		t.Fatalf("the first job committed everything (%s): the kill came too late to test recovery", r)
	}

	st := openURL(t, url)
	latest, _, _, err := storage.Latest(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	st2 := runToEnd(t, windowJob(t, st, out))
	t.Logf("second job: %+v; store faults: %d rejected, %d answers lost", st2, rejected.Load(), lost.Load())
	if st2.RestoredFrom != latest {
		t.Errorf("the second job restored checkpoint %d, want the latest complete one, %d", st2.RestoredFrom, latest)
	}
	if rejected.Load() == 0 || lost.Load() == 0 {
		t.Errorf("no store faults were injected")
	}
	if r := readWindows(t, out); !r.OK() {
		t.Fatalf("committed output is not exact: %s", r)
	}
}

// Recovery skips a checkpoint whose metadata is corrupt or truncated in the object store and
// restores the one before, through the real runtime. The output is then complete and correct, but
// windows the skipped checkpoint had already published can be published again (docs/reliability.md,
// "Known limits"), so duplicates are allowed here and nothing else.
func TestPipelineOnS3SkipsCorruptMetadata(t *testing.T) {
	for _, damage := range []string{"corrupt", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			f := newFakeS3(t)
			url := f.url("jobs/" + uniqueName(t))
			out := filepath.Join(t.TempDir(), "out")
			runUntil(t, windowJob(t, openURL(t, url), out), 3)

			st := openURL(t, url)
			entries, err := st.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var complete []int64
			for _, e := range entries {
				if e.Complete {
					complete = append(complete, e.ID)
				}
			}
			if len(complete) < 2 {
				t.Fatalf("want two retained complete checkpoints, have %v", entries)
			}
			newest, previous := complete[len(complete)-1], complete[len(complete)-2]
			in := blobInstance(st)
			rel := fmt.Sprintf("chk-%010d/_metadata", newest)
			b, _ := in.get(t, rel)
			if damage == "corrupt" {
				b[len(b)/2] ^= 0x40
			} else {
				b = b[:len(b)-5]
			}
			in.put(t, rel, b)

			// The sink may have published the damaged checkpoint's output already: then only
			// AllowDuplicates lets the recovery fall back (the runtime refuses otherwise).
			st2 := runToEnd(t, windowJobWith(t, st, out, func(ro *stream.RunOptions) { ro.AllowDuplicates = true }))
			if st2.RestoredFrom != previous {
				t.Fatalf("restored checkpoint %d, want %d (the one before the %s %d)", st2.RestoredFrom, previous, damage, newest)
			}
			r := readWindows(t, out)
			if r.Missing != 0 || r.Wrong != 0 || r.Unexpected != 0 || r.Malformed != 0 {
				t.Fatalf("output after skipping a %s checkpoint: %s", damage, r)
			}
			t.Logf("restored %d, skipping %s %d; %d duplicated windows", previous, damage, newest, r.Duplicated)
		})
	}
}

// A job whose lock is taken over by another process stops: its checkpoints fail with
// storage.ErrLocked, and the job ends with an error wrapping it, without restarting (a restart
// would fail at its first List anyway, never reaching the recovery step that abandons staged sink
// output, which would be the new holder's).
func TestPipelineStopsWhenLockIsLost(t *testing.T) {
	f := newFakeS3(t)
	st := openURL(t, f.url("jobs/"+uniqueName(t), "lease=900ms"))
	out := filepath.Join(t.TempDir(), "out")
	job := windowJobWith(t, st, out, func(ro *stream.RunOptions) {
		ro.Checkpoint.TolerableFailures = 2
		ro.Restart = runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 3}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	for job.Stats().Completed < 2 {
		select {
		case err := <-done:
			t.Fatalf("the job ended early: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	// Another process takes the lock over.
	writeLockRecord(t, st, lockRecord{Owner: "usurper", Host: "other-host", PID: 7, Namespace: "x", Lease: "1m"})
	before := job.Stats()
	select {
	case err := <-done:
		if !errors.Is(err, storage.ErrLocked) {
			t.Fatalf("Run = %v, want an error wrapping ErrLocked", err)
		}
		t.Logf("Run ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the job still runs 30 s after losing its lock (stats %+v)", job.Stats())
	}
	after := job.Stats()
	if after.Restarts != 0 {
		t.Errorf("the job restarted %d times after losing its lock, want 0: a restart cannot get it back", after.Restarts)
	}
	if after.Abandoned != before.Abandoned {
		t.Errorf("the job abandoned staged output after losing its lock: %+v -> %+v", before, after)
	}
	if rec, _, err := st.readLock(context.Background(), st.loc.prefix+LeaseName); err != nil || rec.Owner != "usurper" {
		t.Errorf("the new holder's lock was touched: %+v, %v", rec, err)
	}
}
