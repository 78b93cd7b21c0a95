package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/storage/storagetest"
	"github.com/ingest-engine/ingest/stream"
)

// testEvents is the event count of the correctness tests: with Beam's
// default configuration (10 ms of event time per event) it spans 400 s of
// event time, 40 windows of 10 s, thousands of auctions.
const testEvents = 40_000

// generate returns events 0..n-1 of cfg, in event-number order.
func generate(t *testing.T, cfg nexmark.Config, n int64) []nexmark.Event {
	t.Helper()
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]nexmark.Event, n)
	for i := range evs {
		evs[i] = g.Event(int64(i))
	}
	return evs
}

// runQuery runs query name over events 0..n-1 of cfg with parallelism p,
// checkpoints every 10ms, and returns the committed result lines.
func runQuery(t *testing.T, name string, cfg nexmark.Config, n int64, p int) []string {
	t.Helper()
	q, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pl, err := Pipeline(q, nexmark.SourceConfig{Generator: cfg, Events: n, MaxDelay: WatermarkDelay}, p, dir+"/out")
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := pl.Run(ctx, stream.RunOptions{CheckpointDir: dir + "/ck", Checkpoint: ck, Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 1}, LSM: queryLSM}); err != nil {
		t.Fatal(err)
	}
	lines, err := testkit.ReadCommitted(dir + "/out")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	return out
}

// encode renders reference rows as the sink does.
func encode[T any](t *testing.T, rows []T) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// sameRows compares result lines as multisets and reports the first
// differences.
func sameRows(t *testing.T, name string, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if slices.Equal(got, want) {
		if len(want) == 0 {
			t.Fatalf("%s: the reference has no rows: the test proves nothing", name)
		}
		return
	}
	var missing, extra []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i++
			j++
		}
	}
	t.Fatalf("%s: %d rows, want %d: %d missing (e.g. %q), %d unexpected or duplicated (e.g. %q)",
		name, len(got), len(want), len(missing), first(missing), len(extra), first(extra))
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func bidsOf(evs []nexmark.Event) []nexmark.Bid {
	var out []nexmark.Bid
	for _, e := range evs {
		if e.Type == nexmark.BidEvent {
			out = append(out, e.Bid)
		}
	}
	return out
}

// wantStateless returns the rows q0, q1 and q2 produce from evs.
func wantStateless(evs []nexmark.Event) (q0 []Q0Row, q1 []Q1Row, q2 []Q2Row) {
	for _, b := range bidsOf(evs) {
		q0 = append(q0, Q0Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra})
		// 0.908 × price, exactly, in thousandths.
		q1 = append(q1, Q1Row{b.Auction, b.Bidder, Decimal3(b.Price * 908), b.DateTime, b.Extra})
		if b.Auction%123 == 0 {
			q2 = append(q2, Q2Row{b.Auction, b.Price})
		}
	}
	return q0, q1, q2
}

func TestStatelessQueries(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	q0, q1, q2 := wantStateless(evs)
	sameRows(t, "q0", runQuery(t, "q0", cfg, testEvents, 2), encode(t, q0))
	sameRows(t, "q1", runQuery(t, "q1", cfg, testEvents, 2), encode(t, q1))
	sameRows(t, "q2", runQuery(t, "q2", cfg, testEvents, 3), encode(t, q2))
}

func TestDecimal3(t *testing.T) {
	for v, want := range map[int64]string{0: "0.000", 908: "0.908", 90800: "90.800", -1: "-0.001", 123456789: "123456.789"} {
		b, _ := Decimal3(v).MarshalJSON()
		if string(b) != want {
			t.Errorf("Decimal3(%d) = %s, want %s", v, b, want)
		}
	}
}

// wantQ4 returns q4's final average per category and the number of
// auctions with a winning bid (q4 emits one row for each): the max
// qualifying bid per auction, then the average per category over auctions
// with at least one.
func wantQ4(evs []nexmark.Event) (final map[int64]int64, closed int) {
	auctions := map[int64]*nexmark.Auction{}
	for _, e := range evs {
		if e.Type == nexmark.AuctionEvent {
			auctions[e.Auction.ID] = e.Auction
		}
	}
	maxPrice := map[int64]int64{}
	for _, b := range bidsOf(evs) {
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		if m, ok := maxPrice[b.Auction]; !ok || b.Price > m {
			maxPrice[b.Auction] = b.Price
		}
	}
	type acc struct{ sum, n int64 }
	perCat := map[int64]*acc{}
	for id, m := range maxPrice {
		c := auctions[id].Category
		if perCat[c] == nil {
			perCat[c] = &acc{}
		}
		perCat[c].sum += m
		perCat[c].n++
		closed++
	}
	final = map[int64]int64{}
	for c, a := range perCat {
		final[c] = a.sum / a.n
	}
	return final, closed
}

// checkQ4 compares q4's result lines with wantQ4's: one row per closed
// auction; the last row of a category is its final average (a category's
// rows come from one subtask, in order, and committed files are read in
// checkpoint order).
func checkQ4(t *testing.T, name string, got []string, evs []nexmark.Event) {
	t.Helper()
	final, closed := wantQ4(evs)
	if closed == 0 {
		t.Fatalf("%s: no auction has a winning bid: the test proves nothing", name)
	}
	if len(got) != closed {
		t.Fatalf("%s: %d rows, want one per auction with a winning bid (%d)", name, len(got), closed)
	}
	last := map[int64]int64{}
	for _, l := range got {
		var r Q4Row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		last[r.ID] = r.Final
	}
	for c, want := range final {
		if last[c] != want {
			t.Errorf("%s category %d: final average %d, want %d", name, c, last[c], want)
		}
	}
	if len(last) != len(final) {
		t.Errorf("%s: %d categories, want %d", name, len(last), len(final))
	}
}

func TestQ4(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	checkQ4(t, "q4", runQuery(t, "q4", cfg, testEvents, 2), evs)
}

// wantQ7 returns q7's rows: per 10 s window, the bids of [start, end]
// (inclusive: BETWEEN) priced at the maximum of [start, end).
func wantQ7(evs []nexmark.Event) []Q7Row {
	bs := bidsOf(evs)
	const size = int64(10_000) // ms
	maxIn := map[int64]int64{}
	for _, b := range bs {
		w := b.DateTime - b.DateTime%size
		if m, ok := maxIn[w]; !ok || b.Price > m {
			maxIn[w] = b.Price
		}
	}
	var want []Q7Row
	for w, m := range maxIn {
		for _, b := range bs {
			if b.DateTime >= w && b.DateTime <= w+size && b.Price == m {
				want = append(want, Q7Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra})
			}
		}
	}
	return want
}

func TestQ7(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	sameRows(t, "q7", runQuery(t, "q7", cfg, testEvents, 2), encode(t, wantQ7(evs)))
}

// sliceSource replays a fixed list of events: subtask s of P emits the
// events with index % P == s; its position is the next index. Its watermark
// trails the largest time it emitted by WatermarkDelay (and 1ns).
type sliceSource struct {
	evs []nexmark.Event
	// batch is the most events one Read emits (0: 1), the watermark
	// following each batch.
	batch int
	// fail, when set, makes the source fail once (see failOnce).
	fail *failOnce
}

func (s sliceSource) NewSubtask() runtime.SourceSubtask[nexmark.Event] {
	return &sliceSubtask{evs: s.evs, batch: s.batch, fail: s.fail}
}
func (sliceSource) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (sliceSource) Describe() string { return "test events" }

type sliceSubtask struct {
	evs     []nexmark.Event
	batch   int
	fail    *failOnce
	ctx     *runtime.Context
	out     runtime.Emitter[nexmark.Event]
	next, p int
	// max is the watermark: the largest event time emitted, less the delay.
	max int64
}

func (s *sliceSubtask) Open(ctx *runtime.Context, out runtime.Emitter[nexmark.Event]) error {
	s.out = out
	s.ctx, s.p, s.next, s.max = ctx, ctx.Parallelism, ctx.Task.Subtask, runtime.MinWatermark
	if ctx.Restored != nil {
		if err := json.Unmarshal(ctx.Restored.Inline, &s.next); err != nil {
			return err
		}
		// The watermark the subtask had at its position.
		for i := ctx.Task.Subtask; i < s.next; i += s.p {
			s.max = max(s.max, s.evs[i].EventTimeNanos()-int64(WatermarkDelay)-1)
		}
	}
	return nil
}

// failOnce makes subtask 0 of a sliceSource fail once, when it reaches event
// index at and two checkpoints were triggered since (Position calls): with
// one checkpoint at a time, the first of them completed, so the job restores
// state taken with about that many events in it.
type failOnce struct {
	at        int
	positions atomic.Int32
	fired     atomic.Bool
}

// due says whether subtask s at index next is where the failure waits.
func (f *failOnce) due(s *sliceSubtask) bool {
	return f != nil && s.ctx.Task.Subtask == 0 && s.next >= f.at && !f.fired.Load()
}

func (s *sliceSubtask) Read() (runtime.ReadResult, error) {
	if s.fail.due(s) {
		if s.fail.positions.Load() < 2 {
			return runtime.ReadResult{Watermark: s.max, Wait: 100 * time.Microsecond}, nil
		}
		s.fail.fired.Store(true)
		return runtime.ReadResult{}, errors.New("test: injected source failure")
	}
	if s.next >= len(s.evs) {
		return runtime.ReadResult{Watermark: s.max, Exhausted: true}, nil
	}
	var b runtime.Batch[nexmark.Event]
	for range max(1, s.batch) {
		if s.next >= len(s.evs) || s.fail.due(s) {
			break
		}
		e := s.evs[s.next]
		s.next += s.p
		t := e.EventTimeNanos()
		s.max = max(s.max, t-int64(WatermarkDelay)-1)
		b = append(b, runtime.Record[nexmark.Event]{Value: e, Time: t})
	}
	err := s.out.Emit(b)
	return runtime.ReadResult{Watermark: s.max}, err
}

func (s *sliceSubtask) Position() ([]byte, error) {
	if s.fail.due(s) {
		s.fail.positions.Add(1)
	}
	return json.Marshal(s.next)
}
func (s *sliceSubtask) Close() error { return nil }

// runEvents runs query name over evs with parallelism p and returns the
// committed lines.
func runEvents(t *testing.T, name string, evs []nexmark.Event, p int) []string {
	t.Helper()
	lines, _ := runEventsWith(t, name, evs, p, 1, nil)
	return lines
}

// runEventsWith is runEvents with source batches of up to batch events and,
// when fail is set, the source failing once as fail says and the job
// restarting from its last complete checkpoint; it returns the job's stats
// too.
func runEventsWith(t *testing.T, name string, evs []nexmark.Event, p, batch int, fail *failOnce) ([]string, runtime.Stats) {
	t.Helper()
	q, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pl := stream.New("test-"+name, stream.DefaultParallelism(p))
	q.Build(pl, stream.From[nexmark.Event](pl, "events", sliceSource{evs: evs, batch: batch, fail: fail}), dir+"/out")
	// In-memory checkpoint storage: checkpoints cost no fsync, so they come
	// as often as the interval says.
	st, err := storagetest.NewCrashFS().NewLocal("/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = 20 * time.Millisecond
	jb, err := pl.NewJob(stream.RunOptions{Storage: st, Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: time.Millisecond, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := jb.Run(ctx); err != nil {
		t.Fatal(err)
	}
	lines, err := testkit.ReadCommitted(dir + "/out")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	return out, jb.Stats()
}

func bidAt(auction, price, ms int64) nexmark.Event {
	return nexmark.Event{Type: nexmark.BidEvent, Bid: nexmark.Bid{Auction: auction, Bidder: 7, Price: price, DateTime: ms, Extra: "x"}}
}

// TestQ7BoundaryTie: a bid at exactly a window's end instant joins that
// window too when its price equals the window's maximum (BETWEEN is
// inclusive), whether or not its partition has bids in that window. Beam's
// timelines rarely produce such a tie, so the events are crafted.
func TestQ7BoundaryTie(t *testing.T) {
	base := nexmark.BaseTime // a multiple of 10 s
	evs := []nexmark.Event{
		bidAt(1, 5, base+1000),
		bidAt(1, 9, base+3000),   // window 0 max, partition 1
		bidAt(2, 9, base+10_000), // boundary: ties window 0's max from partition 2; window 1's max
		bidAt(1, 9, base+10_000), // boundary, partition 1 (which has a window-0 partial)
		bidAt(3, 4, base+10_000), // boundary, below the max
		bidAt(1, 7, base+12_000),
		bidAt(1, 2, base+20_000), // boundary of window 1 below its max; window 2 max
	}
	row := func(e nexmark.Event) Q7Row {
		b := e.Bid
		return Q7Row{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra}
	}
	want := []Q7Row{row(evs[1]), row(evs[2]), row(evs[3]), // window 0
		row(evs[2]), row(evs[3]), // window 1
		row(evs[6])} // window 2
	for _, p := range []int{1, 2} {
		sameRows(t, fmt.Sprintf("q7 p=%d", p), runEvents(t, "q7", evs, p), encode(t, want))
	}
}

// checkQ12 checks q12's processing-time windows: each 10 s of wall-clock
// time, and over all of them every bid counted once for its bidder (which
// windows they fell into depends on when they were processed).
func checkQ12(t *testing.T, name string, lines []string, evs []nexmark.Event) {
	t.Helper()
	want := map[int64]int64{}
	for _, b := range bidsOf(evs) {
		want[b.Bidder]++
	}
	got := map[int64]int64{}
	for _, l := range lines {
		var r SessionRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.EndTime-r.StartTime != 10_000 || r.StartTime%10_000 != 0 {
			t.Fatalf("%s row %s: not a 10 s processing-time window", name, l)
		}
		got[r.Bidder] += r.BidCount
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: bids per bidder over all windows differ from the bid count: %d bidders, want %d", name, len(got), len(want))
	}
}

func TestQ12(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	checkQ12(t, "q12", runQuery(t, "q12", cfg, testEvents, 2), evs)
}

// wantQ3 returns q3's rows: category-10 auctions with sellers from OR, ID
// or CA.
func wantQ3(evs []nexmark.Event) []Q3Row {
	persons := map[int64]*nexmark.Person{}
	for _, e := range evs {
		if e.Type == nexmark.PersonEvent {
			persons[e.Person.ID] = e.Person
		}
	}
	var want []Q3Row
	for _, e := range evs {
		if e.Type != nexmark.AuctionEvent || e.Auction.Category != 10 {
			continue
		}
		p, ok := persons[e.Auction.Seller]
		if ok && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			want = append(want, Q3Row{p.Name, p.City, p.State, e.Auction.ID})
		}
	}
	return want
}

func TestQ3(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	sameRows(t, "q3", runQuery(t, "q3", cfg, testEvents, 2), encode(t, wantQ3(evs)))
}

// wantQ5 returns q5's rows: per sliding window (10 s every 2 s), the
// auctions with the most bids.
func wantQ5(evs []nexmark.Event) []Q5Row {
	const size, slide = int64(10_000), int64(2_000)
	counts := map[int64]map[int64]int64{} // window start → auction → count
	for _, b := range bidsOf(evs) {
		last := b.DateTime - b.DateTime%slide
		for s := last; s > b.DateTime-size; s -= slide {
			if counts[s] == nil {
				counts[s] = map[int64]int64{}
			}
			counts[s][b.Auction]++
		}
	}
	var want []Q5Row
	for _, c := range counts {
		var m int64
		for _, n := range c {
			m = max(m, n)
		}
		for a, n := range c {
			if n >= m {
				want = append(want, Q5Row{a, n})
			}
		}
	}
	return want
}

func TestQ5(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	sameRows(t, "q5", runQuery(t, "q5", cfg, testEvents, 2), encode(t, wantQ5(evs)))
}

// wantQ8 returns q8's rows: people who opened an auction in the 10 s window
// they registered in.
func wantQ8(evs []nexmark.Event) []Q8Row {
	const size = int64(10_000)
	type pw struct{ id, w int64 }
	sellers := map[pw]bool{}
	for _, e := range evs {
		if e.Type == nexmark.AuctionEvent {
			sellers[pw{e.Auction.Seller, e.Auction.DateTime - e.Auction.DateTime%size}] = true
		}
	}
	var want []Q8Row
	for _, e := range evs {
		if e.Type != nexmark.PersonEvent {
			continue
		}
		w := e.Person.DateTime - e.Person.DateTime%size
		if sellers[pw{e.Person.ID, w}] {
			want = append(want, Q8Row{e.Person.ID, e.Person.Name, w})
		}
	}
	return want
}

func TestQ8(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	sameRows(t, "q8", runQuery(t, "q8", cfg, testEvents, 3), encode(t, wantQ8(evs)))
}

// wantQ11 returns q11's rows: each bidder's sessions (gap 10 s).
func wantQ11(evs []nexmark.Event) []SessionRow {
	const gap = int64(10_000)
	byBidder := map[int64][]int64{}
	for _, b := range bidsOf(evs) {
		byBidder[b.Bidder] = append(byBidder[b.Bidder], b.DateTime)
	}
	var want []SessionRow
	for bidder, ts := range byBidder {
		slices.Sort(ts)
		start, end, n := ts[0], ts[0]+gap, int64(1)
		for _, t := range ts[1:] {
			// Sessions that touch merge, as Flink's TimeWindow.intersects.
			if t <= end {
				end = max(end, t+gap)
				n++
				continue
			}
			want = append(want, SessionRow{bidder, n, start, end})
			start, end, n = t, t+gap, 1
		}
		want = append(want, SessionRow{bidder, n, start, end})
	}
	return want
}

func TestQ11(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	evs := generate(t, cfg, testEvents)
	sameRows(t, "q11", runQuery(t, "q11", cfg, testEvents, 2), encode(t, wantQ11(evs)))
}
