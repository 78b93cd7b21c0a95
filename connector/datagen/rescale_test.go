package datagen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// This file checks rescaling (package documentation): the ids are striped
// into lanes fixed by the first run's parallelism S, and a restore at
// another parallelism P' gives subtask s' the lanes r with r % P' == s'.

// openUnion opens subtask s of p restored at another parallelism from the
// positions union, as the runtime does (Context.RestoredUnion).
func openUnion(src *datagen.Source[datagen.Event], s, p int, union [][]byte) (subtask, error) {
	out := &collector{}
	st := runtime.EraseSource(src.NewSubtask())
	restored := &checkpoint.SubtaskState{Task: checkpoint.TaskID{Operator: "events", Subtask: s}}
	return subtask{src: st, out: out}, st.Open(subtaskContext(s, p, out, restored, union))
}

func mustOpenUnion(t *testing.T, src *datagen.Source[datagen.Event], s, p int, union [][]byte) subtask {
	t.Helper()
	st, err := openUnion(src, s, p, union)
	if err != nil {
		t.Fatalf("Open subtask %d of %d from %d positions: %v", s, p, len(union), err)
	}
	t.Cleanup(func() { _ = st.src.Close() })
	return st
}

func mustPosition(t *testing.T, st subtask) []byte {
	t.Helper()
	pos, err := st.src.Position()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// readN reads until the subtask emitted at least n records in all or is
// exhausted, and checks on the way that its ids increase and that no record
// is at or behind a watermark it reported before.
func readN(t *testing.T, st subtask, n int) {
	t.Helper()
	wm := runtime.MinWatermark
	for range 100_000 {
		before := len(st.out.records())
		if before >= n {
			return
		}
		res, err := st.src.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		recs := st.out.records()
		for i := before; i < len(recs); i++ {
			if recs[i].Time <= wm {
				t.Fatalf("record %d (time %d) at or behind the watermark %d", recs[i].Value.ID, recs[i].Time, wm)
			}
			if i > 0 && recs[i].Value.ID <= recs[i-1].Value.ID {
				t.Fatalf("id %d after %d: not in increasing order", recs[i].Value.ID, recs[i-1].Value.ID)
			}
		}
		wm = max(wm, res.Watermark)
		if res.Exhausted {
			return
		}
	}
	t.Fatal("the source never emitted enough nor reported Exhausted")
}

// firstRun opens the s subtasks of a fresh run, lets subtask i emit
// reads[i] records (about: whole batches), and returns their positions and
// the ids they emitted.
func firstRun(t *testing.T, src *datagen.Source[datagen.Event], reads []int) ([][]byte, []int64) {
	t.Helper()
	var positions [][]byte
	var ids []int64
	for s, n := range reads {
		st := open(t, src, s, len(reads), nil)
		readN(t, st, n)
		pos, err := st.src.Position()
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, pos)
		for _, r := range st.out.records() {
			ids = append(ids, r.Value.ID)
		}
	}
	return positions, ids
}

// checkExactlyOnce fails unless ids are 0 … count-1, each once.
func checkExactlyOnce(t *testing.T, ids []int64, count int64) {
	t.Helper()
	seen := make([]int, count)
	for _, id := range ids {
		if id < 0 || id >= count {
			t.Fatalf("id %d outside [0,%d)", id, count)
		}
		seen[id]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("id %d emitted %d times, want once", id, n)
		}
	}
}

// A restore at P' takes the lanes r with r % P' == s' into subtask s': for
// P' = 1, P' < S and P' > S, every subtask emits exactly its lanes' ids, in
// increasing order, never behind its watermark, and all subtasks together
// emit the rest of the records exactly once. A subtask without lanes is
// exhausted at once.
func TestRescaleAssignsLanes(t *testing.T) {
	const count = 20_011
	for _, tc := range []struct {
		reads []int // records the first run's subtasks emit (S = len(reads))
		p     int
	}{
		{[]int{1024, 3072, 0}, 1},
		{[]int{1024, 3072, 0, 2048}, 2},
		{[]int{1024, 3072, 0, 2048}, 3},
		{[]int{2048, 0}, 5},
		{[]int{4096, 1024, 0}, 7},
		{[]int{0, 0, 0}, 3},
		{[]int{count, count, 2048}, 2}, // two lanes exhausted
	} {
		t.Run(fmt.Sprintf("S=%d,P=%d", len(tc.reads), tc.p), func(t *testing.T) {
			cfg := datagen.Config{Count: count, Keys: 7}
			src := newEvents(t, cfg)
			cfg = src.Config()
			stride := int64(len(tc.reads))
			union, ids := firstRun(t, src, tc.reads)
			for s := range tc.p {
				st := mustOpenUnion(t, src, s, tc.p, union)
				readN(t, st, count)
				var lanes []int64
				for r := range stride {
					if r%int64(tc.p) == int64(s) {
						lanes = append(lanes, r)
					}
				}
				recs := st.out.records()
				for _, rec := range recs {
					if r := rec.Value.ID % stride; r%int64(tc.p) != int64(s) {
						t.Fatalf("subtask %d of %d emitted id %d of lane %d; its lanes are %v", s, tc.p, rec.Value.ID, r, lanes)
					}
					expect(t, cfg, rec.Value.ID, rec)
					ids = append(ids, rec.Value.ID)
				}
				if len(lanes) == 0 && len(recs) != 0 {
					t.Fatalf("subtask %d of %d owns no lane but emitted %d records", s, tc.p, len(recs))
				}
				res, err := st.src.Read()
				if err != nil || !res.Exhausted {
					t.Fatalf("subtask %d of %d after its records: %+v, %v; want exhausted", s, tc.p, res, err)
				}
			}
			checkExactlyOnce(t, ids, count)
		})
	}
}

// Positions round-trip in both formats: {"next": n} for a subtask with one
// lane whose stride is the parallelism, lanes otherwise, {"lanes":[]} for
// none. Restored at the same parallelism, a subtask continues exactly where
// its position says.
func TestRescalePositionsRoundTrip(t *testing.T) {
	const count = 10_000
	src := newEvents(t, datagen.Config{Count: count})
	// First run at S = 3; restore at 2: subtask 0 gets lanes 0 and 2,
	// subtask 1 lane 1.
	union, ids := firstRun(t, src, []int{1024, 2048, 0})
	lanesOf := [][]int64{{0, 2}, {1}}
	var positions [][]byte
	for s := range 2 {
		st := mustOpenUnion(t, src, s, 2, union)
		readN(t, st, 1500)
		pos, err := st.src.Position()
		if err != nil {
			t.Fatal(err)
		}
		// Each lane's next id is 3 past the last one emitted from it, in
		// either run.
		var lanes []string
		for _, r := range lanesOf[s] {
			next := r
			for _, id := range ids {
				if id%3 == r {
					next = max(next, id+3)
				}
			}
			for _, rec := range st.out.records() {
				if rec.Value.ID%3 == r {
					next = max(next, rec.Value.ID+3)
				}
			}
			lanes = append(lanes, fmt.Sprintf(`{"stride":3,"next":%d}`, next))
		}
		if want := `{"lanes":[` + strings.Join(lanes, ",") + `]}`; string(pos) != want {
			t.Fatalf("subtask %d of 2 from 3 lanes: position %s, want %s", s, pos, want)
		}
		for _, r := range st.out.records() {
			ids = append(ids, r.Value.ID)
		}
		positions = append(positions, pos)
	}
	// The same parallelism again: each subtask restores its own position.
	for s, pos := range positions {
		st := open(t, src, s, 2, &checkpoint.SubtaskState{Inline: pos})
		readN(t, st, count)
		again, err := st.src.Position()
		if err != nil {
			t.Fatal(err)
		}
		var decoded struct {
			Lanes []struct{ Stride, Next int64 }
		}
		if err := json.Unmarshal(again, &decoded); err != nil || len(decoded.Lanes) == 0 {
			t.Fatalf("final position %s: %v", again, err)
		}
		for _, l := range decoded.Lanes {
			if l.Stride != 3 || l.Next < count || l.Next >= count+3 {
				t.Fatalf("subtask %d at its end: position %s, want every lane just past %d", s, again, count)
			}
		}
		for _, r := range st.out.records() {
			ids = append(ids, r.Value.ID)
		}
	}
	checkExactlyOnce(t, ids, count)

	// Back to the first run's parallelism: the old format again.
	var lane1 struct{ Lanes []struct{ Next int64 } }
	if err := json.Unmarshal(positions[1], &lane1); err != nil || len(lane1.Lanes) != 1 {
		t.Fatalf("position %s: %v", positions[1], err)
	}
	st := mustOpenUnion(t, src, 1, 3, positions)
	if pos, want := mustPosition(t, st), fmt.Sprintf(`{"next":%d}`, lane1.Lanes[0].Next); string(pos) != want {
		t.Errorf("subtask 1 of 3 with lane 1 of stride 3: position %s, want %s", pos, want)
	}

	// More subtasks than lanes: subtask 3 of 4 from lanes of stride 3 owns
	// none, writes {"lanes":[]} and restores it.
	st = mustOpenUnion(t, src, 3, 4, positions)
	pos := mustPosition(t, st)
	if string(pos) != `{"lanes":[]}` {
		t.Fatalf("subtask 3 of 4 from 3 lanes: position %s, want {\"lanes\":[]}", pos)
	}
	none := open(t, src, 3, 4, &checkpoint.SubtaskState{Inline: pos})
	res, err := none.src.Read()
	if err != nil || !res.Exhausted || len(none.out.records()) != 0 {
		t.Fatalf("restored without lanes: %+v, %v, %d records; want exhausted, none", res, err, len(none.out.records()))
	}
}

// The union of positions must be exactly the lanes of one first run; an
// error names what is wrong. A position restored at the same parallelism
// must hold lanes of the subtask.
func TestRescaleRejectsInconsistentPositions(t *testing.T) {
	src := newEvents(t, datagen.Config{Count: 100})
	for _, tc := range []struct {
		union []string
		want  string
	}{
		{[]string{`{"lanes":[{"stride":3,"next":0}]}`, `{"lanes":[{"stride":3,"next":2}]}`}, "missing lanes [1]"},
		{[]string{`{"lanes":[{"stride":2,"next":0}]}`, `{"lanes":[{"stride":3,"next":1}]}`}, "two strides, 2 and 3"},
		{[]string{`{"lanes":[{"stride":2,"next":0},{"stride":2,"next":1}]}`, `{"lanes":[{"stride":2,"next":3}]}`}, "lane 1 of stride 2 is in two positions"},
		{[]string{`{"next":0}`, `{"next":3}`, `{"next":2}`}, "lane 0 of stride 3 is in two positions"},
		{[]string{`{"next":0}`, `{"lanes":[]}`}, "missing lanes [1]"},
		{[]string{`{"lanes":[]}`, `{"lanes":[]}`}, "hold no lane"},
		{[]string{`{"next":0}`, `{"next":-1}`}, "next -1"},
		{[]string{`{"next":0}`, `{"lanes":[{"stride":0,"next":1}]}`}, "stride 0"},
		{[]string{`{"next":0}`, `{}`}, "neither next nor lanes"},
		{[]string{`{"next":0}`, `{"next":1,"lanes":[]}`}, "both next and lanes"},
		{[]string{`{"next":0}`, `not json`}, "position 2 of 2"},
	} {
		var union [][]byte
		for _, u := range tc.union {
			union = append(union, []byte(u))
		}
		_, err := openUnion(src, 0, 3, union)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("positions %s restored at 3: %v, want an error with %q", tc.union, err, tc.want)
		}
	}
	for _, tc := range []struct {
		pos  string
		want string
	}{
		{`{"lanes":[{"stride":4,"next":2}]}`, "lane 2 of stride 4 does not belong to subtask 1 of 2"},
		{`{"lanes":[{"stride":4,"next":1},{"stride":5,"next":3}]}`, "two strides"},
		{`{"lanes":[{"stride":4,"next":1},{"stride":4,"next":5}]}`, "lane 1 of stride 4 twice"},
		{`{"next":4}`, "restored position 4 does not belong to subtask 1 of 2"},
	} {
		st := runtime.EraseSource(src.NewSubtask())
		err := st.Open(&runtime.Context{
			Task: checkpoint.TaskID{Operator: "events", Subtask: 1}, Parallelism: 2, Output: &collector{},
			Restored: &checkpoint.SubtaskState{Inline: []byte(tc.pos)},
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("position %s at subtask 1 of 2: %v, want an error with %q", tc.pos, err, tc.want)
		}
	}
}

// An unbounded subtask without lanes emits nothing and reports Idle, so it
// does not hold the watermark back; it is never exhausted.
func TestRescaleUnboundedWithoutLanesIsIdle(t *testing.T) {
	src := newEvents(t, datagen.Config{})
	union, _ := firstRun(t, src, []int{1024, 1024})
	st := mustOpenUnion(t, src, 2, 3, union)
	for range 3 {
		res, err := st.src.Read()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Idle || res.Exhausted || res.Wait <= 0 || res.Watermark != runtime.MinWatermark || len(st.out.records()) != 0 {
			t.Fatalf("subtask 2 of 3 without lanes: %+v, %d records; want idle, not exhausted, a wait, MinWatermark, none", res, len(st.out.records()))
		}
	}
	// Its lanes' owners go on from their positions.
	own := mustOpenUnion(t, src, 1, 3, union)
	readN(t, own, 10)
	if got := own.out.records()[0].Value.ID; got != 1+2*1024 {
		t.Fatalf("subtask 1 of 3 starts at id %d, want %d", got, 1+2*1024)
	}
}

// A subtask's rate is Rate × its lanes / S: after its first record, a
// subtask asks to wait one record period at that rate.
func TestRescaleRateFollowsLanes(t *testing.T) {
	const rate = 10.0
	src := newEvents(t, datagen.Config{Rate: rate})
	union, _ := firstRun(t, src, []int{1, 1, 1, 1}) // S = 4
	for _, tc := range []struct {
		s, p  int
		lanes float64
	}{
		{0, 3, 2}, // lanes 0 and 3
		{1, 3, 1},
		{0, 1, 4},
	} {
		st := mustOpenUnion(t, src, tc.s, tc.p, union)
		var res runtime.ReadResult
		for range 2 {
			var err error
			if res, err = st.src.Read(); err != nil {
				t.Fatal(err)
			}
		}
		want := time.Duration(float64(time.Second) / (rate * tc.lanes / 4))
		if n := len(st.out.records()); n != 1 || res.Wait != want {
			t.Errorf("subtask %d of %d with %v lanes of 4: %d records, wait %v; want 1 record, wait %v", tc.s, tc.p, tc.lanes, n, res.Wait, want)
		}
	}
}

// rescaleCount is how many records the pipeline tests generate.
const rescaleCount = 20_000

// rescalePipeline is datagen events at parallelism p → a transactional file
// sink (one subtask) under out. rate 0 runs as fast as possible.
func rescalePipeline(t *testing.T, p int, rate float64, out string) *stream.Pipeline {
	t.Helper()
	src := newEvents(t, datagen.Config{Count: rescaleCount, Rate: rate, Keys: 10})
	pl := stream.New("datagen-rescale")
	events := stream.From[datagen.Event](pl, "events", src, stream.Parallelism(p))
	stream.To(events, "out", stream.Sink[datagen.Event](file.JSONLines[datagen.Event](out)), stream.Parallelism(1))
	return pl
}

// committedIDs counts the committed output of the file sink under out by id.
func committedIDs(t *testing.T, out string) []int64 {
	t.Helper()
	lines, err := testkit.ReadCommitted(out)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 0, len(lines))
	for _, l := range lines {
		var e datagen.Event
		if err := json.Unmarshal(l.Text, &e); err != nil {
			t.Fatalf("%s:%d: %v", l.File, l.Number, err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// runRescaled runs the pipeline at parallelism p on st, whose newest
// checkpoint is last (0: none). stopped: rate-limited, and stopped gracefully
// (a final checkpoint) after a few checkpoints; with failAt, the failpoint
// before snapshots fails its failAt-th call, so the job also restarts once at
// the same parallelism. Otherwise it runs to the end as fast as possible. It
// returns the newest checkpoint.
func runRescaled(t *testing.T, st storage.Storage, out string, p int, last int64, stopped bool, failAt int64) int64 {
	t.Helper()
	rate := 0.0
	if stopped {
		rate = 4000
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 10 * time.Millisecond
	job, err := rescalePipeline(t, p, rate, out).NewJob(stream.RunOptions{
		Storage: st, Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if failAt > 0 {
		var calls atomic.Int64
		defer failpoint.Enable("task/before-snapshot", func() error {
			if calls.Add(1) == failAt {
				return fmt.Errorf("snapshot %d: %w", failAt, failpoint.ErrInjected)
			}
			return nil
		})()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !stopped {
		if err := job.Run(ctx); err != nil {
			t.Fatalf("run at parallelism %d: %v (stats %+v)", p, err, job.Stats())
		}
	} else {
		done := make(chan error, 1)
		go func() { done <- job.Run(ctx) }()
		// A few checkpoints, after the restart when one is injected.
		base := int64(-1)
		for {
			s := job.Stats()
			if base < 0 && (failAt == 0 || s.Restarts > 0) {
				base = s.Completed
			}
			if base >= 0 && s.Completed >= base+3 && s.Records >= 500 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("run at parallelism %d ended before it was stopped: %v (stats %+v)", p, err, job.Stats())
			case <-time.After(time.Millisecond):
			}
		}
		job.Stop()
		if err := <-done; err != nil {
			t.Fatalf("run at parallelism %d, stopped: %v (stats %+v)", p, err, job.Stats())
		}
	}
	s := job.Stats()
	switch {
	case failAt == 0 && s.RestoredFrom != last:
		t.Fatalf("run at parallelism %d restored checkpoint %d, want %d (stats %+v)", p, s.RestoredFrom, last, s)
	case failAt > 0 && (s.Restarts != 1 || s.RestoredFrom <= last):
		t.Fatalf("run at parallelism %d: stats %+v, want the injected restart, from a checkpoint after %d", p, s, last)
	}
	return s.Latest
}

// The source's parallelism may change at every restore: a bounded run at
// parallelism 2 is stopped part-way, one at 3 (with a failure and a restart
// at 3) is stopped part-way, one at 1 runs to the end; another goes 2 → 5
// (more subtasks than lanes) → 2. Every id is committed exactly once.
func TestRescalePipelineExactlyOnce(t *testing.T) {
	for _, chain := range [][]int{{2, 3, 1}, {2, 5, 2}} {
		t.Run(fmt.Sprint(chain), func(t *testing.T) {
			st, err := storage.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			var last int64
			for i, p := range chain[:len(chain)-1] {
				failAt := int64(0)
				if i == 1 {
					failAt = 3 * int64(p+1) // the third checkpoint's snapshots
				}
				last = runRescaled(t, st, out, p, last, true, failAt)
				t.Logf("after the run at parallelism %d: %d ids committed, checkpoint %d", p, len(committedIDs(t, out)), last)
			}
			if n := len(committedIDs(t, out)); n == 0 || n >= rescaleCount {
				t.Fatalf("%d of %d ids committed before the last run: the runs must stop part-way", n, rescaleCount)
			}
			runRescaled(t, st, out, chain[len(chain)-1], last, false, 0)
			checkExactlyOnce(t, committedIDs(t, out), rescaleCount)
		})
	}
}
