package aggregate_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// These tests drive one subtask of aggregate.Closing as the runtime
// would: batches of records, then watermarks, with checkpoints and
// restores in between.

// The input rows: a bid on an auction that closes at expires.
var bidSchema = &row.Schema{Fields: []row.Field{
	{Name: "auction", Kind: row.Int},
	{Name: "expires", Kind: row.Time},
	{Name: "price", Kind: row.Int},
}}

// base is a realistic event time.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

const ms = int64(time.Millisecond)

// groupKey encodes the key fields (auction, expires) as config's listKey
// does: a row.RowCodec row in a bytes value.
func groupKey(r row.Row) row.Value {
	return row.BytesValue(string(row.RowCodec{}.Append(nil, row.Row{r[0], r[1]})))
}

// closingConfig is GROUP BY auction, expires with n: count(),
// total: sum(price), hi: max(price), closing at expires; having, when set,
// filters the closed groups' results [auction, expires, n, total, hi].
func closingConfig(t testing.TB, having func(r row.Row, t int64) bool) aggregate.Config {
	t.Helper()
	agg, _, result, err := window.RowAggregates(bidSchema, []window.AggregateSpec{
		{Name: "n", Func: "count"}, {Name: "total", Func: "sum", Field: "price"}, {Name: "hi", Func: "max", Field: "price"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := aggregate.Config{
		Agg: agg,
		Key: func(k row.Value) row.Row {
			r, _, err := row.RowCodec{}.Decode([]byte(k.Str()))
			if err != nil {
				panic(err)
			}
			return r
		},
		Result: func(key row.Row, acc window.RowAcc) row.Row { return result(acc, append(make(row.Row, 0, 5), key...)) },
	}
	if having != nil {
		cfg.Having = func() (func(row.Row, int64) (bool, error), error) {
			return func(r row.Row, t int64) (bool, error) { return having(r, t), nil }, nil
		}
	}
	return cfg
}

type nopSource struct{}

func (nopSource) NewSubtask() runtime.SourceSubtask[row.Row] { return nil }
func (nopSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (nopSource) Describe() string { return "test" }

type discardSink struct{}

func (discardSink) NewSubtask() runtime.SinkSubtask[row.Row] { return nil }
func (discardSink) Committer() runtime.Committer             { return nil }
func (discardSink) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}
func (discardSink) Describe() string { return "discard" }

// newClosing plans in → key by (auction, expires) → Closing → sink and
// returns the aggregate's operator factory.
func newClosing(t testing.TB, cfg aggregate.Config) func() runtime.Operator {
	t.Helper()
	p := stream.New("test")
	ks := stream.KeyBy(stream.From[row.Row](p, "in", nopSource{}), groupKey)
	ks.KeyCodec = row.ValueCodec{}
	out := aggregate.Closing(ks, "agg", cfg, aggregate.CloseField{Index: 1, Key: 1, Name: "expires"})
	stream.To(out, "sink", discardSink{})
	if _, err := p.Plan(); err != nil {
		t.Fatalf("plan: %v", err)
	}
	return out.Node().NewOperator
}

// collector keeps every emitted record.
type collector struct{ recs []runtime.Record[row.Row] }

func (c *collector) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[row.Row])
	if !ok {
		return fmt.Errorf("collector: got %T", r)
	}
	c.recs = append(c.recs, b...)
	return nil
}

// lateLog counts the warnings Context.DroppedLate logs; the harness's
// clock moves two minutes at each reading, so each drop logs one.
type lateLog struct{ n *atomic.Int64 }

func (h lateLog) Enabled(context.Context, slog.Level) bool { return true }
func (h lateLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "dropped a late record") {
		h.n.Add(1)
	}
	return nil
}
func (h lateLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lateLog) WithGroup(string) slog.Handler      { return h }

// harness is one subtask of the aggregate.
type harness struct {
	op      runtime.Operator
	backend *state.Backend
	out     *collector
	late    *atomic.Int64
}

func open(t testing.TB, newOp func() runtime.Operator, restored *checkpoint.SubtaskState, snapshots ...[]byte) *harness {
	t.Helper()
	b := state.NewBackend("agg", 128, state.KeyGroupRange{Start: 0, End: 128})
	if len(snapshots) > 0 {
		if err := b.Restore(snapshots...); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	h := &harness{op: newOp(), backend: b, out: &collector{}, late: &atomic.Int64{}}
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	ctx := &runtime.Context{
		Task:           checkpoint.TaskID{Operator: "agg"},
		Parallelism:    1,
		MaxParallelism: 128,
		KeyGroups:      state.KeyGroupRange{Start: 0, End: 128},
		State:          b,
		Output:         h.out,
		Restored:       restored,
		JobID:          "job",
		Log:            slog.New(lateLog{h.late}),
		Clock:          func() time.Time { return time.Unix(0, now.Add(int64(2*time.Minute))) },
	}
	if err := h.op.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if u := b.Unclaimed(); len(u) > 0 {
		t.Fatalf("restored state not claimed: %v", u)
	}
	return h
}

func bid(auction, expires, price, ts int64) runtime.Record[row.Row] {
	return runtime.Record[row.Row]{Value: row.Row{row.IntValue(auction), row.TimeValue(expires), row.IntValue(price)}, Time: ts}
}

func (h *harness) records(t testing.TB, recs ...runtime.Record[row.Row]) []runtime.Record[row.Row] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessBatch(0, runtime.Batch[row.Row](recs)); err != nil {
		t.Fatalf("ProcessBatch: %v", err)
	}
	return h.out.recs[n:]
}

func (h *harness) watermark(t testing.TB, wm int64) []runtime.Record[row.Row] {
	t.Helper()
	n := len(h.out.recs)
	if err := h.op.ProcessWatermark(wm); err != nil {
		t.Fatalf("ProcessWatermark(%d): %v", wm, err)
	}
	return h.out.recs[n:]
}

// entries returns the number of keys (timers) per state of a snapshot.
func (h *harness) entries(t testing.TB, id int64) map[string]int {
	t.Helper()
	if _, err := h.op.Snapshot(id); err != nil {
		t.Fatal(err)
	}
	data, err := h.backend.Snapshot().Encode()
	if err != nil {
		t.Fatal(err)
	}
	info, err := state.Inspect(data)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, sec := range info.Sections {
		for _, st := range sec.States {
			n[st.Name] += st.Entries
		}
	}
	return n
}

// result is an emitted group as the tests compare them: the row as JSON
// and its event time.
type result struct {
	Row string
	T   int64
}

func resultsOf(recs []runtime.Record[row.Row]) []result {
	out := make([]result, len(recs))
	for i, r := range recs {
		out[i] = result{string(row.RowCodec{}.Append(nil, r.Value)), r.Time}
	}
	slices.SortFunc(out, func(a, b result) int { return cmp.Or(cmp.Compare(a.T, b.T), cmp.Compare(a.Row, b.Row)) })
	return out
}

// closed is the result row of auction closing at expires: count, sum and
// max of prices.
func closed(auction, expires int64, prices ...int64) result {
	var total, hi int64
	for _, p := range prices {
		total += p
		hi = max(hi, p)
	}
	r := row.Row{row.IntValue(auction), row.TimeValue(expires), row.IntValue(int64(len(prices))), row.IntValue(total), row.IntValue(hi)}
	return result{string(row.RowCodec{}.Append(nil, r)), expires}
}

// A group is emitted once, when the watermark passes its close time (not
// when it reaches it), with the close time as its event time, the key and
// aggregates and no operation field; a record whose close time equals the
// watermark still counts; then the group is forgotten, and a record of it
// that comes after is late: dropped, counted, and reopening nothing.
func TestClosingEmitsOnceWhenTheWatermarkPasses(t *testing.T) {
	h := open(t, newClosing(t, closingConfig(t, nil)), nil)
	c1, c2 := base+1000*ms, base+2000*ms
	h.records(t, bid(1, c1, 10, c1-500*ms), bid(2, c2, 7, c1-400*ms), bid(1, c1, 20, c1-100*ms))
	if got := h.watermark(t, c1-1); len(got) != 0 {
		t.Fatalf("watermark below the close time: emitted %v", resultsOf(got))
	}
	if got := h.watermark(t, c1); len(got) != 0 {
		t.Fatalf("watermark at the close time: emitted %v; a record at it is still on time", resultsOf(got))
	}
	// At watermark == close time, a record of the group is not late, even
	// one dated after its close (its event time is not the close time).
	h.records(t, bid(1, c1, 30, c1), bid(1, c1, 5, c1+50*ms))
	if n := h.late.Load(); n != 0 {
		t.Fatalf("%d records dropped as late at watermark == close time", n)
	}
	got := h.watermark(t, c1+1)
	if want := []result{closed(1, c1, 10, 20, 30, 5)}; !slices.Equal(resultsOf(got), want) {
		t.Fatalf("watermark 1ns past the close: %v, want %v", resultsOf(got), want)
	}
	if len(got[0].Value) != 5 {
		t.Fatalf("result row %v has %d fields, want 5 (key and aggregates, no operation)", got[0].Value, len(got[0].Value))
	}
	if n := h.entries(t, 1); n["closing-accumulators"] != 1 || n["event-timers"] != 1 {
		t.Fatalf("after group 1 closed: state %v, want group 2 only", n)
	}
	// Late for the closed group: dropped and counted, nothing reopens.
	h.records(t, bid(1, c1, 1000, c1+200*ms), bid(1, c1, 1000, c1-10*ms))
	if n := h.late.Load(); n != 2 {
		t.Fatalf("%d late records reported (Context.DropLate), want 2", n)
	}
	if got := h.watermark(t, c2+500*ms); !slices.Equal(resultsOf(got), []result{closed(2, c2, 7)}) {
		t.Fatalf("group 2: %v, want %v", resultsOf(got), []result{closed(2, c2, 7)})
	}
	if got := h.watermark(t, runtime.MaxWatermark); len(got) != 0 {
		t.Fatalf("at the end of input: emitted again %v", resultsOf(got))
	}
	if n := h.entries(t, 2); len(n) != 0 {
		t.Fatalf("state left after every group closed: %v", n)
	}
	if len(h.out.recs) != 2 {
		t.Fatalf("%d results, want 2", len(h.out.recs))
	}
}

// A record whose close field is NULL fails with an error naming the
// field: its group would never close.
func TestClosingNullCloseTimeFails(t *testing.T) {
	h := open(t, newClosing(t, closingConfig(t, nil)), nil)
	h.records(t, bid(1, base+time.Second.Nanoseconds(), 1, base))
	err := h.op.ProcessBatch(0, runtime.Batch[row.Row]{{Value: row.Row{row.IntValue(2), {}, row.IntValue(3)}, Time: base}})
	if err == nil || !strings.Contains(err.Error(), "expires") {
		t.Fatalf("a NULL close time: %v, want an error naming expires", err)
	}
	t.Logf("refused: %v", err)
}

// HAVING decides whether a closed group is emitted, given its result and
// close time; a group it refuses is forgotten all the same.
func TestClosingHavingFiltersClosedGroups(t *testing.T) {
	var seen []int64
	having := func(r row.Row, at int64) bool {
		seen = append(seen, at)
		return r[3].Int() >= 50 // total
	}
	h := open(t, newClosing(t, closingConfig(t, having)), nil)
	c := base + time.Second.Nanoseconds()
	h.records(t, bid(1, c, 30, base), bid(1, c, 30, base), bid(2, c, 49, base), bid(3, c+1, 50, base))
	got := h.watermark(t, c+2)
	if want := []result{closed(1, c, 30, 30), closed(3, c+1, 50)}; !slices.Equal(resultsOf(got), want) {
		t.Fatalf("%v, want %v", resultsOf(got), want)
	}
	slices.Sort(seen)
	if want := []int64{c, c, c + 1}; !slices.Equal(seen, want) {
		t.Fatalf("HAVING saw close times %v, want %v", seen, want)
	}
	if n := h.entries(t, 1); len(n) != 0 {
		t.Fatalf("state left after the groups closed: %v", n)
	}
}

// step is a batch of records, then a watermark.
type step struct {
	recs []runtime.Record[row.Row]
	wm   int64
}

// closingInput is bids on auctions 0..n-1, auction a open from base + a*10ms
// for 5 to 60ms (its close time), with bids during it out of order by up
// to 20ms, the watermark lagging the latest bid by 20ms; every 29th bid
// comes 30-80ms late. It returns the steps of n bids and the expected
// results: every group over its bids that were not late, which it counts.
func closingInput(rng *rand.Rand, auctions, bids, per int, having func(result) bool) (steps []step, want []result, late int) {
	closes := make([]int64, auctions)
	for a := range closes {
		closes[a] = base + int64(a)*10*ms + (5+rng.Int64N(56))*ms
	}
	type arrival struct {
		rec runtime.Record[row.Row]
		at  int64
	}
	var evs []arrival
	for i := range bids {
		a := int64(rng.IntN(auctions))
		ts := base + a*10*ms + rng.Int64N((closes[a]-base-a*10*ms)/ms+1)*ms
		delay := rng.Int64N(21) * ms
		if i%29 == 28 {
			delay = (30 + rng.Int64N(51)) * ms
		}
		evs = append(evs, arrival{bid(a, closes[a], int64(i), ts), ts + delay})
	}
	slices.SortStableFunc(evs, func(x, y arrival) int { return cmp.Compare(x.at, y.at) })
	prices := map[int64][]int64{}
	wm := runtime.MinWatermark
	for i := 0; i < len(evs); i += per {
		var s step
		for _, e := range evs[i:min(i+per, len(evs))] {
			s.recs = append(s.recs, e.rec)
			a, c := e.rec.Value[0].Int(), e.rec.Value[1].Int()
			if c < wm {
				late++
				continue
			}
			prices[a] = append(prices[a], e.rec.Value[2].Int())
		}
		next := evs[len(evs)-1].at
		if i+per < len(evs) {
			next = evs[i+per].at
		}
		wm = max(wm, next-20*ms)
		s.wm = wm
		steps = append(steps, s)
	}
	steps = append(steps, step{wm: runtime.MaxWatermark})
	for a, ps := range prices {
		r := closed(a, closes[a], ps...)
		if having == nil || having(r) {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, func(a, b result) int { return cmp.Or(cmp.Compare(a.T, b.T), cmp.Compare(a.Row, b.Row)) })
	return steps, want, late
}

func (h *harness) run(t testing.TB, s step) {
	t.Helper()
	if len(s.recs) > 0 {
		h.records(t, s.recs...)
	}
	h.watermark(t, s.wm)
}

// A checkpoint after any step, with processing going on after it (output
// an exactly-once sink would not commit, and a group closing in it),
// restored into a fresh subtask that replays from the cut: each group is
// emitted exactly once, with its bids that were not late, and every late
// one is counted, as in a failure-free run. With HAVING too.
func TestClosingRestoreAtEveryCut(t *testing.T) {
	for _, withHaving := range []bool{false, true} {
		t.Run(fmt.Sprintf("having=%v", withHaving), func(t *testing.T) {
			var having func(r row.Row, t int64) bool
			var keep func(result) bool
			if withHaving {
				having = func(r row.Row, _ int64) bool { return r[2].Int()%2 == 0 } // n even
				keep = func(r result) bool {
					v, _, _ := row.RowCodec{}.Decode([]byte(r.Row))
					return v[2].Int()%2 == 0
				}
			}
			steps, want, late := closingInput(rand.New(rand.NewPCG(5, 5)), 60, 800, 19, keep)
			if len(want) < 20 || late == 0 {
				t.Fatalf("%d results, %d late: the input does not exercise the aggregate", len(want), late)
			}
			newOp := newClosing(t, closingConfig(t, having))
			clean := open(t, newOp, nil)
			var emittedBeforeEnd int
			for _, s := range steps {
				clean.run(t, s)
				if s.wm != runtime.MaxWatermark {
					emittedBeforeEnd = len(clean.out.recs)
				}
			}
			if got := resultsOf(clean.out.recs); !slices.Equal(got, want) {
				t.Fatalf("failure-free: %d results, want %d\n got %v\nwant %v", len(got), len(want), got, want)
			}
			if int(clean.late.Load()) != late || emittedBeforeEnd == 0 {
				t.Fatalf("failure-free: %d late reported, want %d; %d emitted before the end of input", clean.late.Load(), late, emittedBeforeEnd)
			}
			for cut := range steps[:len(steps)-1] {
				h := open(t, newOp, nil)
				for _, s := range steps[:cut+1] {
					h.run(t, s)
				}
				if _, err := h.op.Snapshot(1); err != nil {
					t.Fatal(err)
				}
				captured := h.backend.Snapshot()
				committed := slices.Clone(h.out.recs)
				for _, s := range steps[cut+1 : min(cut+4, len(steps)-1)] {
					h.run(t, s) // lost in the crash: it changes accumulators the checkpoint holds
				}
				snap, err := captured.Encode()
				if err != nil {
					t.Fatal(err)
				}
				r := open(t, newOp, &checkpoint.SubtaskState{Watermark: steps[cut].wm}, snap)
				for _, s := range steps[cut+1:] {
					r.run(t, s)
				}
				if got := resultsOf(append(committed, r.out.recs...)); !slices.Equal(got, want) {
					t.Fatalf("checkpoint after step %d: %d results, want %d\n got %v\nwant %v", cut, len(got), len(want), got, want)
				}
			}
		})
	}
}

// Closing refuses a changelog's retraction (its input is append-only).
func TestClosingRefusesRetraction(t *testing.T) {
	cfg := closingConfig(t, nil)
	cfg.Retract = func(acc window.RowAcc, _ row.Row) window.RowAcc { return acc }
	p := stream.New("test")
	ks := stream.KeyBy(stream.From[row.Row](p, "in", nopSource{}), groupKey)
	ks.KeyCodec = row.ValueCodec{}
	stream.To(aggregate.Closing(ks, "agg", cfg, aggregate.CloseField{Index: 1, Key: 1, Name: "expires"}), "sink", discardSink{})
	if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("plan: %v, want an error saying the input must be append-only", err)
	}
}
