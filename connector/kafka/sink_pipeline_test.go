package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/clock"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/internal/testkit/kafkatest"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// sinkCount is one output of the keyed running count: the n-th record of key.
type sinkCount struct {
	Key int64
	N   int64
}

// sinkCountValue is how a count is written to Kafka: "key:n". The expected
// output is every "k:n" for n in 1..(records of key k), exactly once,
// whatever the interleaving of the sources and however often the job
// restarts.
func sinkCountValue(c sinkCount) string {
	return strconv.FormatInt(c.Key, 10) + ":" + strconv.FormatInt(c.N, 10)
}

// sinkCounter is the keyed running count: keyed state, restored at recovery.
type sinkCounter struct {
	n *state.ValueState[int64, int64]
}

func (f *sinkCounter) Open(s process.Setup[int64]) error {
	var err error
	f.n, err = state.NewValueState[int64, int64](s.State, "n", s.KeyCodec, state.Int64Codec{})
	return err
}

func (f *sinkCounter) ProcessRecord(c *process.Context[int64, sinkCount], _ datagen.Event) error {
	n, _ := f.n.Get(c.Key())
	n++
	f.n.Update(c.Key(), n)
	c.Emit(sinkCount{Key: c.Key(), N: n})
	return nil
}

func (f *sinkCounter) OnTimer(*process.Context[int64, sinkCount], process.Domain) error { return nil }

// sinkFailAfterCheckpoint fails attempt 0 at its first batch after it was
// told a checkpoint completed: records are then written to the open
// transaction and not yet prepared.
type sinkFailAfterCheckpoint struct {
	stream.Stateless
	ctx       *runtime.Context
	completed bool
	failed    *atomic.Int64
}

func (o *sinkFailAfterCheckpoint) Open(ctx *runtime.Context) error {
	o.ctx, o.Out = ctx, ctx.Output
	return nil
}
func (o *sinkFailAfterCheckpoint) NotifyComplete(int64) error { o.completed = true; return nil }
func (o *sinkFailAfterCheckpoint) ProcessBatch(_ int, r runtime.Records) error {
	if o.ctx.Attempt == 0 && o.completed {
		o.failed.Add(1)
		return errors.New("injected failure after a checkpoint completed")
	}
	return o.Out.Emit(r)
}

// sinkPipeline is datagen → (optional failing map) → key by → keyed running
// count → Kafka sink, with checkpoints every 15ms.
type sinkPipeline struct {
	k        *sinkTestCluster
	dir      string
	prefix   string
	count    int64
	keys     int64
	rate     float64
	sinkPar  int
	failMap  bool
	failed   atomic.Int64
	interval time.Duration
	// sampler, when set, gets each new job before it runs.
	sampler *sinkSampler
	// name is the pipeline's name ("kafka-sink-<prefix>" when empty) and
	// topic the sink's topic (the cluster's when empty).
	name, topic string
	// allowDup runs with runtime.Options.AllowDuplicates.
	allowDup bool
	// fake is the clock of the job being built: each job runs on a fake
	// clock stepped one interval per protocol event (testkit.DriveClock),
	// so how many records an epoch carries, and so how many batches and
	// checkpoints a run has, does not depend on the machine's speed.
	fake *clock.Fake
}

func newSinkPipeline(t *testing.T, sinkPar int) *sinkPipeline {
	return &sinkPipeline{k: newSinkCluster(t, 3), dir: t.TempDir(), prefix: "pipe", count: 6000, keys: 7, rate: 20000, sinkPar: sinkPar, interval: 15 * time.Millisecond}
}

// job builds the pipeline anew, with a new Sink as a new process would.
func (sp *sinkPipeline) job(t *testing.T) *runtime.Job {
	t.Helper()
	src, err := datagen.Events(datagen.Config{Count: sp.count, Rate: sp.rate, Keys: sp.keys})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sp.k.config(sp.prefix)
	if sp.topic != "" {
		cfg.Topic = sp.topic
	}
	cfg.CommitTimeout = 10 * time.Second
	cfg.TransactionTimeout = 0 // the default, 15m, fits the default 10m checkpoint timeout
	sink, err := NewSink(cfg, func(c sinkCount) ([]byte, []byte, error) {
		return strconv.AppendInt(nil, c.Key, 10), []byte(sinkCountValue(c)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = sp.interval
	ck.TolerableFailures = 3
	if err := sink.ConfigureCheckpointing(ck); err != nil {
		t.Fatal(err)
	}
	name := sp.name
	if name == "" {
		name = "kafka-sink-" + sp.prefix
	}
	p := stream.New(name)
	events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(2))
	if sp.failMap {
		events = stream.Add[datagen.Event, datagen.Event](events, &runtime.Node{ID: "fail", NewOperator: func() runtime.Operator {
			return &sinkFailAfterCheckpoint{failed: &sp.failed}
		}})
	}
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	counts := process.Keyed(keyed, "count", func() process.Function[datagen.Event, int64, sinkCount] { return &sinkCounter{} }, stream.Parallelism(2))
	stream.To(counts, "out", stream.Sink[sinkCount](sink), stream.Parallelism(sp.sinkPar))
	opts := stream.RunOptions{CheckpointDir: sp.dir, Checkpoint: ck, Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 20},
		AllowDuplicates: sp.allowDup}
	sp.fake = clock.NewFake(time.Unix(1_800_000_000, 0))
	opts.Clock = sp.fake
	if testing.Verbose() {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	job, err := p.NewJob(opts)
	if err != nil {
		t.Fatal(err)
	}
	if sp.sampler != nil {
		sp.sampler.watch(job)
	}
	return job
}

// run runs a new job until it ends or ctx is cancelled.
func (sp *sinkPipeline) run(t *testing.T, ctx context.Context) (runtime.Stats, error) {
	t.Helper()
	job := sp.job(t)
	err := sp.runJob(ctx, job)
	return job.Stats(), err
}

// runJob runs job, built by sp.job, until it ends or ctx is cancelled,
// stepping its fake clock.
func (sp *sinkPipeline) runJob(ctx context.Context, job *runtime.Job) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return testkit.RunStepped(ctx, sp.fake, sp.interval, job.Run, func() int64 { return job.Stats().Progress() })
}

// expected is the exact output: "k:n" for every key k and n in 1..records of k.
func (sp *sinkPipeline) expected() []string {
	var want []string
	for k := range sp.keys {
		n := sp.count / sp.keys
		if k < sp.count%sp.keys {
			n++
		}
		for i := int64(1); i <= n; i++ {
			want = append(want, sinkCountValue(sinkCount{Key: k, N: i}))
		}
	}
	slices.Sort(want)
	return want
}

// checkExact reads the topic as a read-committed consumer and compares it
// with the expected output: nothing missing, nothing twice, nothing else; and
// no open transaction is left to hold consumers back.
func (sp *sinkPipeline) checkExact(t *testing.T) {
	t.Helper()
	got := sinkValues(sp.k.readTopic(t, sp.k.topic, true))
	want := sp.expected()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var missing, dup, extra int
	for _, v := range want {
		switch seen[v] {
		case 0:
			missing++
		case 1:
		default:
			dup += seen[v] - 1
		}
		delete(seen, v)
	}
	extra = len(seen)
	if missing+dup+extra > 0 || len(got) != len(want) {
		t.Fatalf("read-committed output: %d records, want %d: %d missing, %d duplicated, %d unexpected", len(got), len(want), missing, dup, extra)
	}
	if sp.k.stuck(t, sp.k.topic) {
		t.Fatal("an open transaction still holds back read-committed consumers after the job finished")
	}
}

// sinkFailOn makes failpoint name fail on the calls numbered in at (from 1).
func sinkFailOn(name string, at ...int64) (calls *atomic.Int64, disable func()) {
	calls = &atomic.Int64{}
	disable = failpoint.Enable(name, func() error {
		if slices.Contains(at, calls.Add(1)) {
			return fmt.Errorf("failpoint %s: %w", name, failpoint.ErrInjected)
		}
		return nil
	})
	return calls, disable
}

// TestSinkExactlyOnceUnderFailures runs the pipeline with failures injected
// at every step of the sink's two-phase commit, lets the job restart from the
// last complete checkpoint, and checks that a read-committed consumer reads
// exactly the expected output; a sampler checks during the run that nothing
// of an incomplete checkpoint is ever visible. (checkpointing.txt: "A restart
// must not lose accepted data, repeat already-visible output, or combine
// state from different points in the stream.")
func TestSinkExactlyOnceUnderFailures(t *testing.T) {
	cases := []struct {
		name  string
		point string
		at    []int64
		// failMap inserts an operator failing after a checkpoint completed.
		failMap bool
	}{
		{name: "no failure"},
		// Records are in the open transaction, not yet prepared.
		{name: "before prepare: operator fails after a checkpoint", failMap: true},
		{name: "before prepare: random batches", point: "task/process-batch", at: []int64{20, 50}},
		// The sink flushed; the committable is not returned.
		{name: "at prepare", point: "sink/kafka/prepare", at: []int64{5, 17}},
		// Prepared, before the acknowledgement reaches the coordinator.
		{name: "after prepare before ack", point: "task/after-snapshot-before-ack", at: []int64{12, 45}},
		// The checkpoint is complete, nothing is committed: the recovery
		// commits the prepared transactions.
		{name: "after metadata before commit", point: "job/after-metadata-before-commit", at: []int64{3, 8}},
		// One subtask's transaction committed, the other's not.
		{name: "mid commit", point: "sink/kafka/mid-commit", at: []int64{2, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sp := newSinkPipeline(t, 2)
			sp.failMap = c.failMap
			sp.sampler = newSinkSampler(t, sp.k, sp.k.topic, sp.k.config(sp.prefix), false)
			var calls *atomic.Int64
			if c.point != "" {
				var disable func()
				calls, disable = sinkFailOn(c.point, c.at...)
				defer disable()
			}
			stats, err := sp.run(t, context.Background())
			sp.sampler.stop()
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("stats %+v", stats)
			switch {
			case c.point != "":
				t.Logf("failpoint %s reached %d times, failed at %v", c.point, calls.Load(), c.at)
				if calls.Load() < slices.Min(c.at) {
					t.Fatalf("failpoint %s was reached %d times, never at %v: nothing was injected", c.point, calls.Load(), c.at)
				}
				if stats.Restarts == 0 {
					t.Fatalf("the failure at %s did not restart the job", c.point)
				}
			case c.failMap:
				if sp.failed.Load() == 0 || stats.Restarts == 0 {
					t.Fatalf("the failing operator failed %d times, %d restarts", sp.failed.Load(), stats.Restarts)
				}
			}
			sp.checkExact(t)
			sp.sampler.verify(t)
		})
	}
}

// TestSinkEachCheckpointVisibleAtOnce: with one sink subtask, a checkpoint's
// output is one transaction, so a read-committed consumer sampling
// throughout the run (restarts included) sees each checkpoint's records all
// at once or not at all, and never a checkpoint that is not complete.
func TestSinkEachCheckpointVisibleAtOnce(t *testing.T) {
	sp := newSinkPipeline(t, 1)
	sp.sampler = newSinkSampler(t, sp.k, sp.k.topic, sp.k.config(sp.prefix), true)
	commits, disable := sinkFailOn("job/after-metadata-before-commit", 4)
	defer disable()
	batches, disable2 := sinkFailOn("task/process-batch", 30)
	defer disable2()
	st, err := sp.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sp.sampler.stop()
	if commits.Load() < 4 || batches.Load() < 30 || st.Restarts == 0 {
		t.Fatalf("not every failure was injected: %d commits, %d batches, %d restarts", commits.Load(), batches.Load(), st.Restarts)
	}
	sp.checkExact(t)
	sp.sampler.verify(t)
}

// TestSinkKillAndRestart cancels the job's context hard in the middle of
// processing (the process dies: no final checkpoint), and each time starts a
// new job — with new sink objects, as a new process — on the same checkpoint
// directory. The last run finishes; the output is exact. The kills come at
// the k-th batch a subtask processes, not after some time has passed, so
// every run but the last is killed however fast or slow the machine.
func TestSinkKillAndRestart(t *testing.T) {
	sp := newSinkPipeline(t, 2)
	sp.sampler = newSinkSampler(t, sp.k, sp.k.topic, sp.k.config(sp.prefix), false)
	kills := 0
	for run := 0; ; run++ {
		ctx, cancel := context.WithCancel(context.Background())
		disable := func() {}
		if run < 3 {
			var batches atomic.Int64
			killAt := int64(5 + 7*run)
			disable = failpoint.Enable("task/process-batch", func() error {
				if batches.Add(1) == killAt {
					cancel()
				}
				return nil
			})
		}
		stats, err := sp.run(t, ctx)
		disable()
		cancel()
		t.Logf("run %d: err %v, stats %+v", run, err, stats)
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", run, err)
		}
		kills++
	}
	sp.sampler.stop()
	if kills == 0 {
		t.Fatal("no run was killed")
	}
	sp.checkExact(t)
	sp.sampler.verify(t)
}

// TestSinkRecoveryCommitsInNewProcess: the process dies after a checkpoint's
// metadata is durable and before the job tells anyone it is complete, so its
// transactions are not committed (hostileKillAfterMetadata). The prepared
// transactions stay open — their records invisible, read-committed consumers
// held back. A second job on the same checkpoint directory, with new sink
// objects (a new process), commits them from the restored checkpoint by
// transactional id, producer id and epoch, aborts the rest, and finishes with
// exact output.
func TestSinkRecoveryCommitsInNewProcess(t *testing.T) {
	sp := newSinkPipeline(t, 2)
	completed := hostileKillAfterMetadata(t, sp)
	before := len(sp.k.readTopic(t, sp.k.topic, true))
	job := sp.job(t)
	if err := sp.runJob(context.Background(), job); err != nil {
		t.Fatalf("second run: %v", err)
	}
	st := job.Stats()
	t.Logf("second run: stats %+v; %d records were visible before it", st, before)
	if st.RestoredFrom != completed {
		t.Errorf("the second run restored checkpoint %d, want %d", st.RestoredFrom, completed)
	}
	sp.checkExact(t)
}

// sinkSampler samples the sink's topic while jobs run (kafkatest.Sampler),
// with the newest complete checkpoint of the jobs it watches.
type sinkSampler struct {
	k      *sinkTestCluster
	marker string
	// whole: every visible transaction must be visible whole (one sink
	// subtask: a checkpoint's output is one transaction).
	whole bool
	s     *kafkatest.Sampler

	mu      sync.Mutex
	job     *runtime.Job
	latest  int64
	samples []kafkatest.Sample
	err     error
	once    sync.Once
}

func newSinkSampler(t *testing.T, k *sinkTestCluster, topic string, cfg SinkConfig, whole bool) *sinkSampler {
	cfg, _ = cfg.withDefaults()
	s := &sinkSampler{k: k, marker: cfg.MarkerTopic, whole: whole}
	s.s = kafkatest.StartSampler(k.cl, topic, 10*time.Millisecond, func() (int64, error) { return s.known(), nil })
	t.Cleanup(s.stop)
	return s
}

// watch makes the sampler read the newest complete checkpoint from job.
func (s *sinkSampler) watch(job *runtime.Job) {
	s.mu.Lock()
	if s.job != nil {
		// The job watched so far is over: its last word counts, also when
		// no sample read it (a commit it made while shutting down may be
		// visible to the next sample, which reads the new job, still at 0).
		s.latest = max(s.latest, s.job.Stats().Latest)
	}
	s.job = job
	s.mu.Unlock()
}

// known is the newest complete checkpoint of any job watched so far.
func (s *sinkSampler) known() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job != nil {
		s.latest = max(s.latest, s.job.Stats().Latest)
	}
	return s.latest
}

func (s *sinkSampler) stop() {
	s.once.Do(func() { s.samples, s.err = s.s.Stop() })
}

// verify checks every sample against the committed markers: each visible
// transaction is committed (its marker is), belongs to a checkpoint that was
// complete when the sample was taken, and (whole) was visible entirely.
func (s *sinkSampler) verify(t *testing.T) {
	t.Helper()
	s.stop()
	if s.err != nil {
		t.Fatalf("sampler: %v", s.err)
	}
	markers, err := kafkatest.Markers(context.Background(), s.k.cl, s.marker)
	if err != nil {
		t.Fatal(err)
	}
	problems, partial := kafkatest.Check(s.samples, markers, s.whole)
	if len(problems) > 0 {
		t.Fatalf("the read-committed sampler saw:\n  %s", strings.Join(problems, "\n  "))
	}
	nonEmpty := 0
	for _, smp := range s.samples {
		if len(smp.Counts) > 0 {
			nonEmpty++
		}
	}
	t.Logf("sampler: %d samples (%d saw output), %d transactions committed; %d times a transaction was partly visible (records behind another subtask's open transaction in a partition)",
		len(s.samples), nonEmpty, len(markers), partial)
	if nonEmpty < 3 {
		t.Fatalf("only %d samples saw output: the sampler did not watch the run", nonEmpty)
	}
}
