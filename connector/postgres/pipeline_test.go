package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/internal/failpoint"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// The exactly-once tests run the contract pipelines with checkpoints every
// 15ms into the real server, inject a failure at a step of the protocol, let
// the job restart from its last complete checkpoint, and compare the table
// with the exact expected content, while a reader samples the table and
// checks it never sees part of a checkpoint.
const (
	pipeCount = 20000 // records
	pipeRate  = 20000 // records per second: a run lasts about a second
)

// failure is where a case injects failures.
type failure struct {
	name string
	// point is a failpoint failing at calls at (from 1); "" for none.
	point string
	at    []int64
	// failIn are the attempts in which the chaos operator fails once, after
	// a checkpoint completed.
	failIn []int
	// restarts says the failure restarts the job.
	restarts bool
}

var failures = []failure{
	{name: "none"},
	{name: "operator fails after checkpoints", failIn: []int{0, 1}, restarts: true},
	// The call numbers are low so that a loaded machine, which completes
	// fewer checkpoints per second, still reaches them.
	{name: "after snapshot before ack", point: "task/after-snapshot-before-ack", at: []int64{3, 8}, restarts: true},
	{name: "sink prepare fails", point: "sink/postgres/prepare", at: []int64{2, 5}, restarts: true},
	{name: "mid commit", point: "sink/postgres/mid-commit", at: []int64{1, 4}, restarts: true},
	{name: "after metadata before commit", point: "job/after-metadata-before-commit", at: []int64{1, 4}, restarts: true},
}

// inject enables the failure's failpoint and returns how often it was
// reached and the function that disables it.
func (f failure) inject() (calls *atomic.Int64, disable func()) {
	calls = &atomic.Int64{}
	if f.point == "" {
		return calls, func() {}
	}
	fail := map[int64]bool{}
	for _, n := range f.at {
		fail[n] = true
	}
	disable = failpoint.Enable(f.point, func() error {
		if fail[calls.Add(1)] {
			return fmt.Errorf("failpoint %s: %w", f.point, failpoint.ErrInjected)
		}
		return nil
	})
	return calls, disable
}

// check asserts the failure was injected and had its effect.
func (f failure) check(t *testing.T, calls int64, c *chaos, st runtime.Stats) {
	t.Helper()
	if f.point != "" && calls < slices.Min(f.at) {
		t.Fatalf("failpoint %s was reached %d times, never at %v: nothing was injected", f.point, calls, f.at)
	}
	if len(f.failIn) > 0 && c.injected.Load() == 0 {
		t.Fatal("the chaos operator never failed")
	}
	if f.restarts && st.Restarts == 0 {
		t.Fatalf("the failure did not restart the job; stats %+v", st)
	}
	if f.point == "sink/postgres/prepare" && st.Abandoned == 0 {
		t.Errorf("prepare failed after its rows were staged, yet the recovery abandoned none; stats %+v", st)
	}
}

// chaos fails its operator once in each listed attempt, after a checkpoint
// completed in that attempt.
type chaos struct {
	failIn   []int
	mu       sync.Mutex
	failed   map[int]bool
	injected atomic.Int64
}

func (c *chaos) node() *runtime.Node {
	return &runtime.Node{ID: "chaos", Describe: "chaos", NewOperator: func() runtime.Operator { return &chaosOp{c: c} }}
}

type chaosOp struct {
	stream.Stateless
	c         *chaos
	attempt   int
	completed bool
}

func (o *chaosOp) Open(ctx *runtime.Context) error {
	o.attempt = ctx.Attempt
	return o.Stateless.Open(ctx)
}

func (o *chaosOp) NotifyComplete(int64) error { o.completed = true; return nil }

func (o *chaosOp) ProcessBatch(_ int, r runtime.Records) error {
	if o.completed && slices.Contains(o.c.failIn, o.attempt) {
		o.c.mu.Lock()
		fail := !o.c.failed[o.attempt]
		if fail {
			if o.c.failed == nil {
				o.c.failed = map[int]bool{}
			}
			o.c.failed[o.attempt] = true
		}
		o.c.mu.Unlock()
		if fail {
			o.c.injected.Add(1)
			return fmt.Errorf("chaos: attempt %d: %w", o.attempt, failpoint.ErrInjected)
		}
	}
	return o.Out.Emit(r)
}

// runJob runs p with checkpoints every 15ms and quick restarts, and samples
// the table with check until the job ends. It returns the job's stats and
// the number of samples.
func runJob(t *testing.T, p *stream.Pipeline, check func(conn *pgx.Conn) error) (runtime.Stats, int) {
	t.Helper()
	ck := checkpoint.DefaultOptions()
	ck.Interval = 15 * time.Millisecond
	ck.TolerableFailures = 1000
	job, err := p.NewJob(stream.RunOptions{
		CheckpointDir: filepath.Join(t.TempDir(), "checkpoints"), Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var samples int
	var sampleErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, realDSN())
		if err != nil {
			sampleErr = err
			return
		}
		defer conn.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := check(conn); err != nil {
				sampleErr = err
				return
			}
			samples++
			time.Sleep(time.Millisecond)
		}
	}()
	err = job.Run(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sampleErr != nil {
		t.Fatalf("concurrent reader: %v", sampleErr)
	}
	checkNoConnectionsLeft(t, p.Plan)
	return job.Stats(), samples
}

// checkNoConnectionsLeft asserts the sink closed every connection once the
// job ended (the server lists a closed one for a moment longer).
func checkNoConnectionsLeft(t *testing.T, plan func() (*runtime.Plan, error)) {
	t.Helper()
	pl, err := plan()
	if err != nil {
		t.Fatal(err)
	}
	conn := requireServer(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int64
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", "ingest "+pl.Name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of the sink are still open after the job ended", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errNotYet ends a sample taken before the sink created its tables.
var errNotYet = errors.New("tables not created yet")

// inSnapshot runs f in one repeatable-read, read-only transaction; a table
// that does not exist yet ends the sample without error.
func inSnapshot(conn *pgx.Conn, f func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		err := f(ctx, tx)
		if pgErrCode(err) == "42P01" {
			return errNotYet
		}
		return err
	})
	if errors.Is(err, errNotYet) {
		return nil
	}
	return err
}

// publishedRows is what the pipeline's progress rows say was published.
func publishedRows(ctx context.Context, tx pgx.Tx, f *fixture) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, "SELECT coalesce(sum(rows), 0) FROM "+f.quoted(postgres.ProgressTableName)+" WHERE pipeline = $1", f.pipeline).Scan(&n)
	return n, err
}

func pgErrCode(err error) string {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		return pgErr.SQLState()
	}
	return ""
}

// checkSampledMidRun fails the test when the reader never saw the table
// between empty and full although the job completed enough checkpoints for
// it to (a heavily loaded machine may complete only two or three, and then
// publish everything in the last; TestCommitIsAtomicForConcurrentReader
// covers atomicity deterministically).
func checkSampledMidRun(t *testing.T, partial int, st runtime.Stats) {
	t.Helper()
	if partial > 0 {
		return
	}
	if st.Completed >= 5 {
		t.Errorf("the reader never sampled the table while it was filling (%d checkpoints completed)", st.Completed)
	} else {
		t.Logf("the reader never sampled the table mid-run: only %d checkpoints completed (a loaded machine)", st.Completed)
	}
}

// --- append: datagen → per-key tumbling window → postgres -------------------

// windowRow is one window result as the sink writes it.
type windowRow struct {
	Key          int64
	Start, End   time.Time
	Count, Total int64
}

type countSum struct{ Count, Sum int64 }

var countSumAgg = window.Aggregate[datagen.Event, countSum]{
	Init:  func() countSum { return countSum{} },
	Add:   func(a countSum, e datagen.Event) countSum { return countSum{a.Count + 1, a.Sum + e.Value} },
	Codec: state.JSONCodec[countSum](),
}

var windowColumns = []postgres.Column{
	{Name: "key", Type: "bigint"}, {Name: "window_start", Type: "timestamptz"}, {Name: "window_end", Type: "timestamptz"},
	{Name: "count", Type: "bigint"}, {Name: "sum", Type: "bigint"},
}

func windowValues(dst []any, r windowRow) []any {
	return append(dst, r.Key, r.Start, r.End, r.Count, r.Total)
}

const windowKeys = 20

// windowPipeline is datagen → chaos → key by → 1s tumbling count and sum →
// postgres, at parallelism 2.
func windowPipeline(t *testing.T, name string, sink *postgres.Sink[windowRow], c *chaos) *stream.Pipeline {
	src, err := datagen.Events(datagen.Config{Count: pipeCount, Rate: pipeRate, Keys: windowKeys})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New(name, stream.DefaultParallelism(2))
	events := stream.From[datagen.Event](p, "events", src)
	events = stream.Add[datagen.Event, datagen.Event](events, c.node())
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	results := window.Tumbling(keyed, "per_key", time.Second, countSumAgg, func(k int64, w window.Window, a countSum) windowRow {
		return windowRow{Key: k, Start: time.Unix(0, w.Start).UTC(), End: time.Unix(0, w.End).UTC(), Count: a.Count, Total: a.Sum}
	})
	stream.To(results, "out", sink)
	return p
}

// TestWindowAppendExactlyOnce: the window results in the table are exactly
// the expected ones, each once, whatever failed; a reader never sees part of
// a checkpoint (its row count always equals the published count) nor a
// duplicate. (checkpointing.txt: "consumers see either the complete
// checkpoint output or none of it"; "A restart must not lose accepted data,
// repeat already-visible output".)
func TestWindowAppendExactlyOnce(t *testing.T) {
	want := testkit.ExpectedWindows(pipeCount, windowKeys, datagen.DefaultStartTime, time.Millisecond, time.Second)
	for _, fl := range failures {
		t.Run(fl.name, func(t *testing.T) {
			f := newFixture(t)
			sink, err := postgres.NewSink(f.config("windows", postgres.Append), windowColumns, windowValues)
			if err != nil {
				t.Fatal(err)
			}
			c := &chaos{failIn: fl.failIn}
			calls, disable := fl.inject()
			defer disable()
			var partial int
			st, samples := runJob(t, windowPipeline(t, f.pipeline, sink, c), func(conn *pgx.Conn) error {
				return inSnapshot(conn, func(ctx context.Context, tx pgx.Tx) error {
					var rows, dups int64
					err := tx.QueryRow(ctx, "SELECT count(*), count(*) - count(DISTINCT (key, window_start)) FROM "+f.quoted("windows")).Scan(&rows, &dups)
					if err != nil {
						return err
					}
					published, err := publishedRows(ctx, tx, f)
					if err != nil {
						return err
					}
					if rows != published {
						return fmt.Errorf("the reader saw %d rows while the progress table says %d were published: part of a checkpoint", rows, published)
					}
					if dups != 0 {
						return fmt.Errorf("the reader saw %d duplicated windows", dups)
					}
					if rows > 0 && rows < int64(len(want)) {
						partial++
					}
					return nil
				})
			})
			disable()
			t.Logf("%d samples (%d mid-run); stats %+v", samples, partial, st)
			fl.check(t, calls.Load(), c, st)
			checkSampledMidRun(t, partial, st)
			checkWindows(t, f, want)
			if n := f.count("windows__ingest_staging"); n != 0 {
				t.Errorf("%d rows left in the staging table after the final commit", n)
			}
		})
	}
}

func checkWindows(t *testing.T, f *fixture, want map[testkit.WindowKey]testkit.WindowAgg) {
	t.Helper()
	rows, err := f.conn.Query(context.Background(), "SELECT key, window_start, window_end, count, sum FROM "+f.quoted("windows"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (windowRow, error) {
		var w windowRow
		err := r.Scan(&w.Key, &w.Start, &w.End, &w.Count, &w.Total)
		return w, err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[testkit.WindowKey]bool{}
	var missing, dup, wrong, unexpected int
	var examples []string
	for _, r := range got {
		k := testkit.WindowKey{Key: r.Key, Start: r.Start.UTC()}
		exp, ok := want[k]
		switch {
		case seen[k]:
			dup++
			examples = append(examples, fmt.Sprintf("duplicate %+v", r))
		case !ok:
			unexpected++
			examples = append(examples, fmt.Sprintf("unexpected %+v", r))
		case exp.Count != r.Count || exp.Sum != r.Total || r.End.Sub(r.Start) != time.Second:
			wrong++
			examples = append(examples, fmt.Sprintf("wrong %+v, want %+v", r, exp))
		}
		seen[k] = true
	}
	for k := range want {
		if !seen[k] {
			missing++
			examples = append(examples, fmt.Sprintf("missing %+v", k))
		}
	}
	if missing+dup+wrong+unexpected > 0 {
		t.Fatalf("%d rows, want %d windows: %d missing, %d duplicated, %d wrong, %d unexpected; e.g. %q",
			len(got), len(want), missing, dup, wrong, unexpected, examples[:min(5, len(examples))])
	}
}

// --- upsert: datagen → keyed running count → postgres upsert ----------------

// keyCount is a key's running count and sum after a record.
type keyCount struct{ Key, Count, Sum int64 }

// runningCount emits, for every record, its key's count and sum so far.
type runningCount struct {
	cs *state.ValueState[int64, countSum]
}

func (r *runningCount) Open(s process.Setup[int64]) error {
	var err error
	r.cs, err = state.NewValueState[int64, countSum](s.State, "count_sum", s.KeyCodec, state.JSONCodec[countSum]())
	return err
}

func (r *runningCount) ProcessRecord(c *process.Context[int64, keyCount], e datagen.Event) error {
	a, _ := r.cs.Get(c.Key())
	a = countSum{a.Count + 1, a.Sum + e.Value}
	r.cs.Update(c.Key(), a)
	c.Emit(keyCount{Key: c.Key(), Count: a.Count, Sum: a.Sum})
	return nil
}

func (r *runningCount) OnTimer(*process.Context[int64, keyCount], process.Domain) error { return nil }

const countKeys = 10

var countColumns = []postgres.Column{{Name: "key", Type: "bigint"}, {Name: "count", Type: "bigint"}, {Name: "sum", Type: "bigint"}}

func countValues(dst []any, k keyCount) []any { return append(dst, k.Key, k.Count, k.Sum) }

// countPipeline is datagen (one subtask, so a checkpoint's cut is a prefix
// of the record ids) → chaos → key by → running count (2 subtasks) →
// postgres upsert on key (2 subtasks).
func countPipeline(t *testing.T, name string, sink *postgres.Sink[keyCount], c *chaos) *stream.Pipeline {
	src, err := datagen.Events(datagen.Config{Count: pipeCount, Rate: pipeRate, Keys: countKeys})
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New(name, stream.DefaultParallelism(2))
	events := stream.From[datagen.Event](p, "events", src, stream.Parallelism(1))
	events = stream.Add[datagen.Event, datagen.Event](events, c.node(), stream.Parallelism(1))
	keyed := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	counts := process.Keyed(keyed, "count", func() process.Function[datagen.Event, int64, keyCount] { return &runningCount{} })
	stream.To(counts, "out", sink)
	return p
}

// expectedCounts returns each key's count and sum over records [0, m).
func expectedCounts(m int64) map[int64]countSum {
	want := map[int64]countSum{}
	for i := range m {
		a := want[i%countKeys]
		want[i%countKeys] = countSum{a.Count + 1, a.Sum + i%1000}
	}
	return want
}

// prefixCounts reports whether counts are those of a prefix [0, m) of the
// records: what the table holds at every checkpoint boundary.
func prefixCounts(counts map[int64]int64) (m int64, ok bool) {
	for _, n := range counts {
		m += n
	}
	for k := range int64(countKeys) {
		want := int64(0)
		if m > k {
			want = (m - k + countKeys - 1) / countKeys
		}
		if counts[k] != want {
			return m, false
		}
	}
	return m, true
}

// TestKeyedCountUpsertExactlyOnce: after the run every key holds its exact
// final count and sum, the published staged rows number exactly the records
// (each record's update published once), and a reader only ever sees the
// counts of a checkpoint's prefix of the input, never part of a checkpoint.
func TestKeyedCountUpsertExactlyOnce(t *testing.T) {
	want := expectedCounts(pipeCount)
	for _, fl := range failures {
		t.Run(fl.name, func(t *testing.T) {
			f := newFixture(t)
			sink, err := postgres.NewSink(f.config("counts", postgres.Upsert, "key"), countColumns, countValues)
			if err != nil {
				t.Fatal(err)
			}
			c := &chaos{failIn: fl.failIn}
			calls, disable := fl.inject()
			defer disable()
			var partial int
			st, samples := runJob(t, countPipeline(t, f.pipeline, sink, c), func(conn *pgx.Conn) error {
				return inSnapshot(conn, func(ctx context.Context, tx pgx.Tx) error {
					rows, err := tx.Query(ctx, "SELECT key, count FROM "+f.quoted("counts"))
					if err != nil {
						return err
					}
					counts := map[int64]int64{}
					var k, n int64
					if _, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { counts[k] = n; return nil }); err != nil {
						return err
					}
					if m, ok := prefixCounts(counts); !ok {
						return fmt.Errorf("the reader saw counts %v, which are not those of a prefix of the input (%d records): part of a checkpoint", counts, m)
					} else if m > 0 && m < pipeCount {
						partial++
					}
					return nil
				})
			})
			disable()
			t.Logf("%d samples (%d mid-run); stats %+v", samples, partial, st)
			fl.check(t, calls.Load(), c, st)
			checkSampledMidRun(t, partial, st)
			rows, err := f.conn.Query(context.Background(), "SELECT key, count, sum FROM "+f.quoted("counts"))
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]countSum{}
			var k int64
			var a countSum
			if _, err := pgx.ForEachRow(rows, []any{&k, &a.Count, &a.Sum}, func() error { got[k] = a; return nil }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Errorf("%d keys, want %d: %v", len(got), len(want), got)
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("key %d: count %d sum %d, want count %d sum %d", k, got[k].Count, got[k].Sum, w.Count, w.Sum)
				}
			}
			if n := f.int64("SELECT sum(rows) FROM "+f.quoted(postgres.ProgressTableName)+" WHERE pipeline = $1", f.pipeline); n != pipeCount {
				t.Errorf("the commits published %d staged rows, want exactly one per record (%d)", n, pipeCount)
			}
			if n := f.count("counts__ingest_staging"); n != 0 {
				t.Errorf("%d rows left in the staging table after the final commit", n)
			}
		})
	}
}
