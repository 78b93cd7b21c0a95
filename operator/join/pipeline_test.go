package join_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/storage"
	"github.com/ingest-engine/ingest/stream"
)

// --- a replayable source ----------------------------------------------------

// replay is a replayable source of prepared records: subtask s of P emits
// records i ≡ s (mod P) in order, perRead per Read, pausing wait between
// reads. Its watermark lags the largest time it emitted by delay, which the
// generated inputs respect. Its replay position is the next index.
type replay[T any] struct {
	recs    []runtime.Record[T]
	perRead int
	wait    time.Duration
	delay   int64
}

func (s *replay[T]) NewSubtask() runtime.SourceSubtask[T] { return &replaySub[T]{src: s} }
func (s *replay[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (s *replay[T]) Describe() string { return fmt.Sprintf("replay of %d records", len(s.recs)) }

// replayPos is a subtask's position: the next index and the largest time
// emitted, so the watermark continues where it was.
type replayPos struct {
	Next int64 `json:"next"`
	Max  int64 `json:"max"`
	Seen bool  `json:"seen"`
}

type replaySub[T any] struct {
	src     *replay[T]
	out     runtime.Emitter[T]
	p       int64
	pos     replayPos
	subtask int64
}

func (r *replaySub[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	r.out = out
	r.p = int64(ctx.Parallelism)
	r.subtask = int64(ctx.Task.Subtask)
	r.pos = replayPos{Next: r.subtask}
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		if err := json.Unmarshal(ctx.Restored.Inline, &r.pos); err != nil {
			return fmt.Errorf("replay: position %q: %w", ctx.Restored.Inline, err)
		}
		if r.pos.Next%r.p != r.subtask {
			return fmt.Errorf("replay: position %d is not subtask %d's", r.pos.Next, r.subtask)
		}
	}
	return nil
}

func (r *replaySub[T]) Read() (runtime.ReadResult, error) {
	var b runtime.Batch[T]
	for n := 0; n < r.src.perRead && r.pos.Next < int64(len(r.src.recs)); n++ {
		rec := r.src.recs[r.pos.Next]
		b = append(b, rec)
		if !r.pos.Seen || rec.Time > r.pos.Max {
			r.pos.Max, r.pos.Seen = rec.Time, true
		}
		r.pos.Next += r.p
	}
	if err := r.out.Emit(b); err != nil {
		return runtime.ReadResult{}, err
	}
	res := runtime.ReadResult{Watermark: runtime.MinWatermark, Wait: r.src.wait}
	if r.pos.Seen {
		res.Watermark = r.pos.Max - r.src.delay
	}
	res.Exhausted = r.pos.Next >= int64(len(r.src.recs))
	return res, nil
}

func (r *replaySub[T]) Position() ([]byte, error) { return json.Marshal(r.pos) }
func (r *replaySub[T]) Close() error              { return nil }

// stampOp turns each pair into a timed value holding the record's event
// time, so the committed output shows the time the join assigned.
type stampOp struct{ stream.Stateless }

func (o *stampOp) ProcessBatch(_ int, r runtime.Records) error {
	in := r.(runtime.Batch[pair])
	out := make(runtime.Batch[timed], len(in))
	for i, rec := range in {
		out[i] = runtime.Record[timed]{Value: timed{rec.Value.L, rec.Value.R, rec.Time}, Time: rec.Time}
	}
	return o.Out.Emit(out)
}

// --- the pipeline under test --------------------------------------------------

// job describes a pipeline: two replay sources → key by → join → stamp →
// transactional file sink.
type job struct {
	sp                  spec
	in                  input
	srcP, joinP         int
	leftRead, rightRead int
	leftWait, rightWait time.Duration
	interval            time.Duration // checkpoint interval, and the step of the job's clock (see run)
	retain              int
	mode                checkpoint.Mode
	restarts            int
	ckDir, outDir       string
	joinNode            *runtime.Node // set by build
	// stopAfter > 0 stops the job gracefully once that many checkpoints
	// completed.
	stopAfter int64
	// failAt lists, per failpoint, the completed checkpoint counts after
	// which it fails once (see failAfter); fired counts the failures run
	// injected. On run's stepped clock a failure and the restart from the
	// last checkpoint take a few steps, each a read of the paced sources:
	// failures after the first few checkpoints all fire before the sources
	// end, however slow the machine.
	failAt map[string][]int64
	fired  map[string]int64
}

// reads is how many reads a paced source subtask takes for its share of an
// input: one per step of the job's clock (see run), so about that many
// checkpoints complete while the sources still have input.
const reads = 20

// newJobSpec returns a job of sp on in whose source subtasks each read their
// share of the input in about reads reads, pausing 1ms of the job's clock
// between reads (one read per step of it), so about reads checkpoints
// happen while it runs.
func newJobSpec(t *testing.T, sp spec, in input, joinP int) *job {
	dir := t.TempDir()
	const srcP = 2
	perRead := func(n int) int { return max(1, n/(srcP*reads)) }
	return &job{sp: sp, in: in, srcP: srcP, joinP: joinP, leftRead: perRead(len(in.left)), rightRead: perRead(len(in.right)),
		leftWait: time.Millisecond, rightWait: time.Millisecond,
		interval: 10 * time.Millisecond, retain: 1, restarts: 200, ckDir: filepath.Join(dir, "ck"), outDir: filepath.Join(dir, "out")}
}

func (j *job) build() *stream.Pipeline {
	p := stream.New("join-test")
	ls := stream.From[lrec](p, "left", &replay[lrec]{recs: j.in.left, perRead: j.leftRead, wait: j.leftWait, delay: j.in.delay}, stream.Parallelism(j.srcP))
	rs := stream.From[rrec](p, "right", &replay[rrec]{recs: j.in.right, perRead: j.rightRead, wait: j.rightWait, delay: j.in.delay}, stream.Parallelism(j.srcP))
	opts := []join.Option{join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}), join.NodeOptions(stream.Parallelism(j.joinP))}
	joined := j.sp.build(stream.KeyBy(ls, keyL), stream.KeyBy(rs, keyR), "join", opts...)
	j.joinNode = joined.Node()
	stamp := &runtime.Node{ID: "stamp", Describe: "stamp event time", NewOperator: func() runtime.Operator { return &stampOp{} }}
	stamped := stream.Add[pair, timed](joined, stamp, stream.Parallelism(j.joinP))
	sink := file.New(j.outDir, func(dst []byte, v timed) ([]byte, error) {
		return fmt.Appendf(dst, `{"l":%d,"r":%d,"t":%d}`, v.L, v.R, v.T), nil
	})
	stream.To(stamped, "sink", stream.Sink[timed](sink), stream.Parallelism(2))
	return p
}

// epoch is where the jobs' fake clocks start.
var epoch = time.Unix(1_800_000_000, 0)

// run runs the job to its end (or its stop) on a fake clock and returns its
// stats. The clock moves one checkpoint interval at a time (see drive), so
// each step of the job's time is one checkpoint trigger and one read of each
// paced source subtask (whose pause is at most the interval): how much input
// lies between two checkpoints, and how many checkpoints and failures happen
// before a paced source is exhausted, does not depend on how fast or busy
// the machine is.
func (j *job) run(t *testing.T) (runtime.Stats, error) {
	t.Helper()
	ck := checkpoint.DefaultOptions()
	ck.Interval = j.interval
	ck.Retain = j.retain
	ck.Mode = j.mode
	ck.TolerableFailures = 1000
	fake := clock.NewFake(epoch)
	rj, err := j.build().NewJob(stream.RunOptions{CheckpointDir: j.ckDir, Checkpoint: ck, Clock: fake,
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: j.restarts}})
	if err != nil {
		t.Fatal(err)
	}
	j.fired = map[string]int64{}
	for name, after := range j.failAt {
		fired, disable := failAfter(name, func() int64 { return rj.Stats().Completed }, after...)
		defer func() { disable(); j.fired[name] = fired.Load() }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	driving, stopDriving := context.WithCancel(ctx)
	driven := make(chan struct{})
	go func() { defer close(driven); j.drive(driving, fake, rj) }()
	err = rj.Run(ctx)
	stopDriving()
	<-driven
	return rj.Stats(), err
}

// drive steps the job's clock by the checkpoint interval until ctx ends,
// each time the job made protocol progress (runtime.Stats.Progress: a
// checkpoint completed or failed, a restart paused, an attempt started)
// since the last step: the checkpoint a step triggers completes before the
// next step lets the paced sources read again, however long a busy machine
// takes for it. Once stopAfter checkpoints completed it stops the job
// gracefully instead of stepping, so no read follows that checkpoint (the
// final checkpoint a stop takes needs no time to pass). The real-time
// patience only bounds a stall on an event the count misses; the outcome
// never depends on it.
func (j *job) drive(ctx context.Context, fake *clock.Fake, rj *runtime.Job) {
	const patience = 10 * time.Second
	poll := time.NewTicker(200 * time.Microsecond)
	defer poll.Stop()
	stopping := false
	for {
		st := rj.Stats()
		if j.stopAfter > 0 && !stopping && st.Completed >= j.stopAfter {
			rj.Stop()
			stopping = true
		} else {
			fake.Advance(j.interval)
		}
		deadline := time.Now().Add(patience)
		for rj.Stats().Progress() == st.Progress() && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return
			case <-poll.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// committed returns the committed output, sorted.
func (j *job) committed(t *testing.T) []timed {
	t.Helper()
	lines, err := testkit.ReadCommitted(j.outDir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]timed, 0, len(lines))
	for _, l := range lines {
		var v struct{ L, R, T int64 }
		if err := json.Unmarshal(l.Text, &v); err != nil {
			t.Fatalf("%s:%d: %v", l.File, l.Number, err)
		}
		out = append(out, timed(v))
	}
	slices.SortFunc(out, timed.compare)
	return out
}

// pipelineSpecs are the joins run through the runtime, at the inputs' scale
// (records every 1-2ms per side, out of order by up to 20ms).
func pipelineSpecs() []spec {
	return []spec{
		intervalSpec(-10*time.Millisecond, 15*time.Millisecond),
		windowSpec(50 * time.Millisecond),
		innerSpec(15 * time.Millisecond),
		innerSpec(0),
	}
}

// inputFor generates an input for sp; Inner without ttl gets a small one,
// since its result is quadratic.
func inputFor(seed uint64, sp spec) input {
	rng := randFor(seed)
	if sp.name == "inner[ttl=0s]" {
		return generate(rng, 300, 250, 10, time.Millisecond, 2*time.Millisecond, 20*time.Millisecond)
	}
	return generate(rng, 2000, 1500, 10, time.Millisecond, 2*time.Millisecond, 20*time.Millisecond)
}

// Through the real runtime, with checkpoints every 10ms of the job's clock,
// about one per read of the sources (see run), at join parallelism
// 1 and 3, the committed output of each join is exactly the brute-force
// result, with the event times the joins define.
func TestPipelineMatchesBruteForce(t *testing.T) {
	for _, sp := range pipelineSpecs() {
		for _, p := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/p=%d", sp.name, p), func(t *testing.T) {
				in := inputFor(uint64(p), sp)
				j := newJobSpec(t, sp, in, p)
				st, err := j.run(t)
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if st.Completed < 2 {
					t.Errorf("only %d checkpoints completed: the run did not exercise state across checkpoints", st.Completed)
				}
				want := sp.expect(in)
				if got := j.committed(t); !slices.Equal(got, want) {
					t.Fatalf("%s", diff(got, want))
				}
			})
		}
	}
}

// inspect calls check for every subtask of the join in every complete
// checkpoint left in j.ckDir, with the subtask's operator opened on the
// checkpoint's state, its watermark, and the replay positions of both
// sources in that checkpoint.
func (j *job) inspect(t *testing.T, check func(id int64, subtask int, op runtime.Operator, wm int64, leftPos, rightPos []int64)) int {
	t.Helper()
	ctx := context.Background()
	st, err := storage.NewLocal(j.ckDir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.Complete {
			continue
		}
		data, err := st.ReadMetadata(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := checkpoint.DecodeMetadata(data)
		if err != nil {
			t.Fatal(err)
		}
		positions := func(op string) []int64 {
			pos := make([]int64, j.srcP)
			for s := range j.srcP {
				sst, ok := m.Task(checkpoint.TaskID{Operator: op, Subtask: s})
				if !ok {
					t.Fatalf("checkpoint %d has no %s[%d]", m.ID, op, s)
				}
				var p replayPos
				if err := json.Unmarshal(sst.Inline, &p); err != nil {
					t.Fatalf("checkpoint %d %s[%d]: %v", m.ID, op, s, err)
				}
				pos[s] = p.Next
			}
			return pos
		}
		lp, rp := positions("left"), positions("right")
		for s := range j.joinP {
			sst, ok := m.Task(checkpoint.TaskID{Operator: "join", Subtask: s})
			if !ok {
				t.Fatalf("checkpoint %d has no join[%d]", m.ID, s)
			}
			kg := state.KeyGroupRangeFor(128, j.joinP, s)
			// The subtask's file and the earlier files its incremental
			// snapshot builds on.
			var files [][]byte
			if sst.State != nil {
				for _, h := range append([]storage.Handle{*sst.State}, sst.Shared...) {
					f, err := st.ReadFile(ctx, h)
					if err != nil {
						t.Fatal(err)
					}
					files = append(files, f)
				}
			}
			h, err := tryOpen[lrec, rrec, pair](j.joinNode.NewOperator, kg, &sst, files...)
			if err != nil {
				t.Fatalf("checkpoint %d join[%d]: %v", m.ID, s, err)
			}
			check(m.ID, s, h.op, sst.Watermark, lp, rp)
			n++
		}
	}
	return n
}

// routedTo returns the join subtask (of p) that key goes to.
func routedTo(key int64, p int) int {
	return state.SubtaskForKeyGroup(128, p, state.KeyGroupFor(state.HashKey(key), 128))
}

// stored returns the ids of the records of one side the subtask keeps, by
// probing the bucket of every record routed to it (a stored record is in the
// bucket of its own key and time).
func stored[T any](t *testing.T, recs []runtime.Record[T], key func(T) int64, subtask, p int, probe func(key, ts int64) ([]int64, error)) map[int64]bool {
	t.Helper()
	ids := map[int64]bool{}
	for _, r := range recs {
		k := key(r.Value)
		if routedTo(k, p) != subtask {
			continue
		}
		got, err := probe(k, r.Time)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			ids[g] = true
		}
	}
	return ids
}

// checkCut asserts that a join subtask's snapshot holds exactly the cut:
// every stored record came before the barrier (id below its source subtask's
// replay position), and every record before the barrier that can still
// match something (needed) is stored.
func checkCut[T any](t *testing.T, id int64, subtask int, side string, recs []runtime.Record[T], idOf func(T) int64, keyOf func(T) int64,
	have map[int64]bool, pos []int64, p int, needed func(ts int64) bool) (leaked int) {
	t.Helper()
	srcP := int64(len(pos))
	for rid := range have {
		if rid >= pos[rid%srcP] {
			leaked++
			if leaked <= 3 {
				t.Errorf("checkpoint %d join[%d]: %s record %d is in the snapshot but its source's position is %d: it came after the barrier",
					id, subtask, side, rid, pos[rid%srcP])
			}
		}
	}
	for _, r := range recs {
		rid := idOf(r.Value)
		if rid < pos[rid%srcP] && routedTo(keyOf(r.Value), p) == subtask && needed(r.Time) && !have[rid] {
			t.Errorf("checkpoint %d join[%d]: %s record %d (time %d) came before the barrier and can still match, but is not in the snapshot",
				id, subtask, side, rid, r.Time)
		}
	}
	return leaked
}

func lid(l lrec) int64 { return l.ID }
func rid(r rrec) int64 { return r.ID }

// inspectInterval checks the cut of every retained checkpoint of an interval
// or inner join with bounds [lower, upper] and returns how many records
// leaked past a barrier and the most records one subtask stored.
func (j *job) inspectInterval(t *testing.T, lower, upper int64) (leaked, maxStored int) {
	t.Helper()
	n := j.inspect(t, func(id int64, s int, op runtime.Operator, wm int64, lp, rp []int64) {
		ls := stored(t, j.in.left, keyL, s, j.joinP, func(k, ts int64) ([]int64, error) {
			recs, err := join.BufferedLeft[lrec, rrec, int64, pair](op, k, ts)
			return idsOf(recs, lid), err
		})
		rs := stored(t, j.in.right, keyR, s, j.joinP, func(k, ts int64) ([]int64, error) {
			recs, err := join.BufferedRight[lrec, rrec, int64, pair](op, k, ts)
			return idsOf(recs, rid), err
		})
		// A left record can match a right to come while the watermark
		// has not passed l.Time+upper; a right one while it has not passed
		// r.Time-lower.
		leaked += checkCut(t, id, s, "left", j.in.left, lid, keyL, ls, lp, j.joinP, func(ts int64) bool { return join.SatAdd(ts, upper) >= wm })
		leaked += checkCut(t, id, s, "right", j.in.right, rid, keyR, rs, rp, j.joinP, func(ts int64) bool { return join.SatAdd(ts, -lower) >= wm })
		maxStored = max(maxStored, len(ls)+len(rs))
	})
	if n == 0 {
		t.Fatal("no checkpoint to inspect")
	}
	return leaked, maxStored
}

func idsOf[T any](recs []runtime.Record[T], id func(T) int64) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = id(r.Value)
	}
	return out
}

// skewed returns a job of sp whose left input has 100 times the records of
// the right over the same event time. paced: both sources pause 1ms of the
// job's clock between reads (one read per step of it, see run), the left
// emitting 1500 records per read, the right 15, so both run for the whole
// job, about reads steps; unpaced: the left reads as fast as it can, running
// far ahead while the right is rate limited.
func skewed(t *testing.T, sp spec, seed uint64, paced bool, joinP int) *job {
	in := generate(randFor(seed), 60000, 600, 10, 50*time.Microsecond, 5*time.Millisecond, 20*time.Millisecond)
	j := newJobSpec(t, sp, in, joinP)
	j.leftRead, j.rightRead = 1500, 15 // reads reads per source subtask
	j.leftWait, j.rightWait = time.Millisecond, time.Millisecond
	if !paced {
		j.leftWait = 0
	}
	j.retain = 10000 // keep every checkpoint for inspection
	return j
}

// Barrier alignment with one input far faster than the other (see skewed):
// the join's two inputs deliver barriers at very different times, and the
// input that delivered one waits until the other did. Every retained
// checkpoint holds exactly the records before its barriers: none after (had
// one leaked into the snapshot, the replay after a recovery would deliver
// it again and duplicate its pairs) and all that can still match. Failures
// are injected while records are processed; the committed output is exact.
func TestAlignmentWithSkewedInputs(t *testing.T) {
	const lower, upper = -10 * time.Millisecond, 15 * time.Millisecond
	for _, c := range []struct {
		sp      spec
		paced   bool
		inspect func(j *job) (leaked, maxStored int)
	}{
		{intervalSpec(lower, upper), true, func(j *job) (int, int) { return j.inspectInterval(t, int64(lower), int64(upper)) }},
		{intervalSpec(lower, upper), false, func(j *job) (int, int) { return j.inspectInterval(t, int64(lower), int64(upper)) }},
		{windowSpec(50 * time.Millisecond), true, func(j *job) (int, int) { return j.inspectWindow(t, int64(50*time.Millisecond)) }},
	} {
		t.Run(fmt.Sprintf("%s/paced=%v", c.sp.name, c.paced), func(t *testing.T) {
			j := skewed(t, c.sp, 11, c.paced, 3)
			want := j.sp.expect(j.in)
			j.failAt = map[string][]int64{"task/process-batch": {1, 2, 3}}
			st, err := j.run(t)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("stats %+v", st)
			if j.fired["task/process-batch"] != 3 || st.RestoredFrom == 0 {
				t.Fatalf("%d failures injected, stats %+v: want 3, each restoring from a checkpoint", j.fired["task/process-batch"], st)
			}
			if got := j.committed(t); !slices.Equal(got, want) {
				t.Fatalf("%s", diff(got, want))
			}
			leaked, maxStored := c.inspect(j)
			if leaked > 0 {
				t.Fatalf("%d records after a barrier were in snapshots", leaked)
			}
			t.Logf("at most %d records stored by one subtask at a checkpoint", maxStored)
		})
	}
}

// inspectWindow checks the cut of every retained checkpoint of a window
// join of size: a record is needed while its window has not fired.
func (j *job) inspectWindow(t *testing.T, size int64) (leaked, maxStored int) {
	t.Helper()
	needed := func(wm int64) func(ts int64) bool {
		return func(ts int64) bool { _, last := join.WindowOf(ts, size); return last > wm }
	}
	n := j.inspect(t, func(id int64, s int, op runtime.Operator, wm int64, lp, rp []int64) {
		ls := stored(t, j.in.left, keyL, s, j.joinP, func(k, ts int64) ([]int64, error) {
			l, _, err := join.WindowBuffered[lrec, rrec, int64, pair](op, k, ts)
			ids := make([]int64, len(l))
			for i, v := range l {
				ids[i] = v.ID
			}
			return ids, err
		})
		rs := stored(t, j.in.right, keyR, s, j.joinP, func(k, ts int64) ([]int64, error) {
			_, r, err := join.WindowBuffered[lrec, rrec, int64, pair](op, k, ts)
			ids := make([]int64, len(r))
			for i, v := range r {
				ids[i] = v.ID
			}
			return ids, err
		})
		leaked += checkCut(t, id, s, "left", j.in.left, lid, keyL, ls, lp, j.joinP, needed(wm))
		leaked += checkCut(t, id, s, "right", j.in.right, rid, keyR, rs, rp, j.joinP, needed(wm))
		maxStored = max(maxStored, len(ls)+len(rs))
	})
	if n == 0 {
		t.Fatal("no checkpoint to inspect")
	}
	return leaked, maxStored
}

// The check above has teeth: without alignment (at-least-once mode) records
// that arrive after a barrier on the input that delivered it first do get
// into the snapshot.
func TestUnalignedSnapshotsLeakRecordsAfterTheBarrier(t *testing.T) {
	for attempt := range 3 {
		j := skewed(t, intervalSpec(-10*time.Millisecond, 15*time.Millisecond), uint64(13+attempt), true, 1)
		j.mode = checkpoint.AtLeastOnce
		if _, err := j.run(t); err != nil {
			t.Fatalf("run: %v", err)
		}
		leaked := j.countLeaks(t)
		t.Logf("attempt %d: %d records after a barrier in at-least-once snapshots", attempt, leaked)
		if leaked > 0 {
			return
		}
	}
	t.Fatal("no record after a barrier ever reached an unaligned snapshot: the alignment check could not tell")
}

// countLeaks counts stored records that came after their checkpoint's
// barrier, without failing the test.
func (j *job) countLeaks(t *testing.T) int {
	t.Helper()
	leaked := 0
	j.inspect(t, func(id int64, s int, op runtime.Operator, wm int64, lp, rp []int64) {
		ls := stored(t, j.in.left, keyL, s, j.joinP, func(k, ts int64) ([]int64, error) {
			recs, err := join.BufferedLeft[lrec, rrec, int64, pair](op, k, ts)
			return idsOf(recs, lid), err
		})
		rs := stored(t, j.in.right, keyR, s, j.joinP, func(k, ts int64) ([]int64, error) {
			recs, err := join.BufferedRight[lrec, rrec, int64, pair](op, k, ts)
			return idsOf(recs, rid), err
		})
		for id := range ls {
			if id >= lp[id%int64(j.srcP)] {
				leaked++
			}
		}
		for id := range rs {
			if id >= rp[id%int64(j.srcP)] {
				leaked++
			}
		}
	})
	return leaked
}

// Inner with a ttl keeps state bounded: in every checkpoint each stored
// record is younger than ttl plus one bucket behind the watermark, and the
// most any subtask stores is a small part of the input; pairs further apart
// than the ttl are not produced (the output is the brute-force |Δ| < ttl).
func TestInnerTTLBoundsState(t *testing.T) {
	const ttl = 10 * time.Millisecond
	sp := innerSpec(ttl)
	in := generate(randFor(21), 4000, 4000, 10, time.Millisecond, time.Millisecond, 20*time.Millisecond)
	j := newJobSpec(t, sp, in, 2)
	j.retain = 10000
	if _, err := j.run(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := sp.expect(in)
	if got := j.committed(t); !slices.Equal(got, want) {
		t.Fatalf("%s", diff(got, want))
	}
	width := int64(-1)
	tooOld := 0
	checkpoints := j.inspect(t, func(ck int64, s int, op runtime.Operator, wm int64, lp, rp []int64) {
		width = join.BucketWidth(op)
		horizon := join.SatAdd(wm, -int64(ttl)-width)
		for _, side := range []struct {
			n   map[int64]bool
			rec func(id int64) int64
		}{
			{stored(t, in.left, keyL, s, j.joinP, func(k, ts int64) ([]int64, error) {
				recs, err := join.BufferedLeft[lrec, rrec, int64, pair](op, k, ts)
				return idsOf(recs, lid), err
			}), func(id int64) int64 { return in.left[id].Time }},
			{stored(t, in.right, keyR, s, j.joinP, func(k, ts int64) ([]int64, error) {
				recs, err := join.BufferedRight[lrec, rrec, int64, pair](op, k, ts)
				return idsOf(recs, rid), err
			}), func(id int64) int64 { return in.right[id].Time }},
		} {
			for id := range side.n {
				if ts := side.rec(id); ts <= horizon {
					tooOld++
					if tooOld <= 3 {
						t.Errorf("checkpoint %d join[%d]: record %d at %d is stored at watermark %d, older than ttl %v plus a bucket (%v)",
							ck, s, id, ts, wm, ttl, time.Duration(width))
					}
				}
			}
		}
	})
	leaked, maxStored := j.inspectInterval(t, -int64(ttl-1), int64(ttl-1))
	t.Logf("%d subtask snapshots inspected; at most %d of %d records stored by one subtask", checkpoints, maxStored, len(in.left)+len(in.right))
	if leaked > 0 {
		t.Fatalf("%d records after a barrier were in snapshots", leaked)
	}
	// ttl+bucket ≈ 20ms of 4s of input on each side: bounded far below it.
	if maxStored > (len(in.left)+len(in.right))/10 {
		t.Fatalf("a subtask stored %d records at a checkpoint: state is not bounded by the ttl", maxStored)
	}
}

// randFor returns a generator seeded with seed.
func randFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
