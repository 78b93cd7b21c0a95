package config_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// This file tests the groupjoin (groupjoin.go): an interval join with a
// unique left side bounded by a left field, read only by an aggregate that
// groups per left record and closes at the bound, built as one operator.
// The fused pipeline must commit what the two nodes commit (the same file
// with an identity map between them, which keeps them apart), and what a
// model of the join and the GROUP BY says; a join the rules do not let the
// aggregate fold stays a node of its own and still computes the model's
// rows.

// gjT0 is the base of the files' event times.
var gjT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// gjDelay is the source's watermark max_delay.
const gjDelay = 3 * time.Second

// gjLate is how far behind its start an auction written after its bids
// is in the file: within gjDelay, and far enough after them that the
// groupjoin, which reads its left input up to 1s of event time ahead of its
// right input (join.groupsLead), finds the bids waiting: the file source's
// batches (1024 lines, about 1s of the file's event time) put them in an
// earlier batch, more than 1s of watermark before.
const gjLate = 2500 * time.Millisecond

// gjNull is the id of a NULL key.
const gjNull = int64(-1)

// gjLeft is an auction: a left record.
type gjLeft struct {
	id      int64 // gjNull: NULL
	ts      time.Duration
	expires time.Duration
	noExp   bool // expires is NULL
	cat     string
	// pos orders the file: lines are written by pos, auctions before bids
	// at one pos.
	pos time.Duration
	// late: the last lines of the file, 3h behind the watermark: dropped.
	late bool
}

// gjRight is a bid: a right record.
type gjRight struct {
	auction       int64 // gjNull: NULL
	bidder, price int64
	ts            time.Duration
	pos           time.Duration
	late          bool
}

// gjData makes the auctions and bids, the same every time. Both are lines
// of one file, which the join reads as its left and its right input: an
// auction's bound (expires) is NULL on a bid's line, so a bid joins nothing
// as a left record, and an auction's auction field is a value no id takes,
// so an auction joins nothing as a right record. One source sends both
// inputs the same watermarks, batch by batch, so whether a record is late
// depends on the file alone, not on how two sources' reads interleave.
//   - auction 1 starts 2h before the others and closes at 5s; a bid of it
//     1h before t0 is the file's last line, far behind the watermark: late;
//   - auctions 2..n every 15ms, open 0 to 1.2s (distinct close times, so
//     that the output's order is defined at parallelism 1), every 23rd with
//     a NULL expiry, every 37th open for one instant (expires = start),
//     every 41st closing before it starts; every 11th is written gjLate
//     after its start (out of order within the delay), after its bids;
//   - one auction with a NULL id, whose bids are bids with a NULL auction
//     (a YAML join's NULL key matches a NULL key);
//   - bids 100ms before to 100ms after each auction's interval (some
//     outside), some exactly at its bounds, bids to auctions that do not
//     exist (filling the file so that the late lines come batches after
//     the first: the file source reads 1024 lines at most per batch), and
//     bids of auction 9000, which comes last, 3h before t0: late, so its
//     bids never find it.
//
// With shared, every 7th of the auctions open for a while closes with the
// one 4 before it (their categories are the same too): a group of
// [category, expires] then spans two auctions.
func gjData(shared bool) ([]gjLeft, []gjRight) {
	rng := rand.New(rand.NewPCG(7, 11))
	var ls []gjLeft
	var rs []gjRight
	bidAt := func(a int64, ts, pos time.Duration) {
		rs = append(rs, gjRight{auction: a, bidder: 1 + rng.Int64N(6), price: 1 + rng.Int64N(1000), ts: ts, pos: pos})
	}
	bid := func(a int64, ts time.Duration) {
		bidAt(a, ts, ts+time.Duration(rng.Int64N(int64(200*time.Millisecond))))
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

	// Auction 1, its bids with fixed prices: 151 in all, and 151 + 999999
	// with the late bid, both 1 modulo 3 (the late bid changes the row, not
	// whether HAVING keeps it).
	ls = append(ls, gjLeft{id: 1, ts: -2 * time.Hour, expires: 5*time.Second + 1, cat: "c1", pos: -2 * time.Hour})
	for _, b := range []struct {
		ts           time.Duration
		price, whose int64
	}{{-2 * time.Hour, 10, 1}, {-2*time.Hour + time.Second, 20, 2}, {-2*time.Hour + 2*time.Second, 30, 3},
		{3 * time.Second, 41, 1}, {5*time.Second + 1, 50, 4} /* the bound: inclusive */, {5*time.Second + 2, 60, 5}} {
		rs = append(rs, gjRight{auction: 1, bidder: b.whose, price: b.price, ts: b.ts, pos: b.ts})
	}

	const n = 300
	spans := map[int64]time.Duration{} // the open-for-a-while auctions' expiries
	for i := int64(2); i <= n; i++ {
		ts := ms(i * 15)
		l := gjLeft{id: i, ts: ts, cat: fmt.Sprintf("c%d", i%4), pos: ts}
		if i%11 == 0 {
			l.pos = ts + gjLate
		}
		switch {
		case i%23 == 0:
			l.noExp = true
			for range 3 {
				bid(i, ts+ms(rng.Int64N(500)))
			}
		case i%37 == 0:
			l.expires = ts + time.Duration(i) // one instant (+i ns: close times differ)
			l.ts = l.expires
			bid(i, l.ts)
			bid(i, l.ts+1)
			bid(i, l.ts-1)
		case i%41 == 0:
			l.expires = ts - 10*time.Millisecond + time.Duration(i)
			bid(i, ts)
			bid(i, ts-5*time.Millisecond)
		default:
			span := ms(rng.Int64N(1200)) + time.Duration(i)*time.Microsecond
			l.expires = ts + span
			if e, ok := spans[i-4]; ok && shared && i%7 == 0 && e > ts {
				l.expires, span = e, e-ts
			}
			spans[i] = l.expires
			for range rng.IntN(6) {
				bid(i, ts-100*time.Millisecond+time.Duration(rng.Int64N(int64(span+200*time.Millisecond))))
			}
			if i%5 == 0 {
				bid(i, l.expires)
				bid(i, ts)
			}
		}
		ls = append(ls, l)
	}
	// The NULL key, once on the left (it is unique), on both sides.
	nullTS := ms(1234)
	ls = append(ls, gjLeft{id: gjNull, ts: nullTS, expires: nullTS + ms(700) + 3, cat: "c2", pos: nullTS})
	// Its pairs' prices are kept by every HAVING of the tests (391 in all).
	for k, d := range []int64{-50, 0, 100, 350, 699, 701, 900} {
		ts := nullTS + ms(d)
		rs = append(rs, gjRight{auction: gjNull, bidder: int64(k%3 + 1), price: []int64{7, 10, 250, 32, 99, 5, 6}[k], ts: ts, pos: ts})
	}
	// Bids to auctions that do not exist.
	for j := range int64(3500) {
		bid(5000+j%40, ms(rng.Int64N(4500)))
	}
	// Auction 9000's bids (100 + 200 + 301: kept by every HAVING of the
	// tests, had the auction not been late), which wait for it in vain.
	for k, d := range []int64{100, 500, 1500} {
		rs = append(rs, gjRight{auction: 9000, bidder: int64(k + 1), price: []int64{100, 200, 301}[k], ts: ms(d), pos: ms(d)})
	}
	slices.SortStableFunc(ls, func(a, b gjLeft) int { return cmp.Compare(a.pos, b.pos) })
	slices.SortStableFunc(rs, func(a, b gjRight) int { return cmp.Compare(a.pos, b.pos) })
	ls = append(ls, gjLeft{id: 9000, ts: -3 * time.Hour, expires: 2*time.Second + 17, cat: "c1", late: true, pos: math.MaxInt64})
	rs = append(rs, gjRight{auction: 1, bidder: 99, price: 999999, ts: -time.Hour, late: true, pos: math.MaxInt64})
	// Every close time differs: at parallelism 1 the order of the output,
	// by close time, is defined.
	seen := map[time.Duration]bool{}
	for _, l := range ls {
		if !l.noExp && seen[l.expires] && !shared {
			panic(fmt.Sprintf("two auctions close at %v", l.expires))
		}
		seen[l.expires] = true
	}
	return ls, rs
}

// gjTS renders d after gjT0 as the files' times.
func gjTS(d time.Duration) string { return `"` + gjT0.Add(d).Format(time.RFC3339Nano) + `"` }

// gjKey renders an id as JSON: an integer or, with str, a string.
func gjKey(id int64, str bool) string {
	switch {
	case id == gjNull:
		return "null"
	case str:
		return fmt.Sprintf(`"a%d"`, id)
	}
	return fmt.Sprint(id)
}

// gjNoKey renders the n-th value no key of the other side takes: a bid's
// id (base 1e6) or an auction's auction field (base 2e6).
func gjNoKey(base, n int64, str bool) string {
	if str {
		return fmt.Sprintf(`"x%d"`, base+n)
	}
	return fmt.Sprint(-base - n)
}

// gjKeyValue is an id as a row value.
func gjKeyValue(id int64, str bool) row.Value {
	switch {
	case id == gjNull:
		return row.Value{}
	case str:
		return row.StringValue(fmt.Sprintf("a%d", id))
	}
	return row.IntValue(id)
}

// gjWrite writes the auctions and bids into dir as events.jsonl, in the
// order of their pos, the late ones last.
func gjWrite(t *testing.T, dir string, ls []gjLeft, rs []gjRight, str bool) {
	t.Helper()
	type line struct {
		pos  time.Duration
		text string
	}
	var lines []line
	for i, l := range ls {
		exp, deadline := "null", "null"
		if !l.noExp {
			exp, deadline = gjTS(l.expires), gjTS(l.expires+time.Second)
		}
		lines = append(lines, line{l.pos, fmt.Sprintf(`{"id":%s,"auction":%s,"ts":%s,"expires":%s,"deadline":%s,"category":%q,"bidder":null,"price":null}`,
			gjKey(l.id, str), gjNoKey(2e6, int64(i), str), gjTS(l.ts), exp, deadline, l.cat)})
	}
	for i, r := range rs {
		lines = append(lines, line{r.pos, fmt.Sprintf(`{"id":%s,"auction":%s,"ts":%s,"expires":null,"deadline":null,"category":null,"bidder":%d,"price":%d}`,
			gjNoKey(1e6, int64(i), str), gjKey(r.auction, str), gjTS(r.ts), r.bidder, r.price)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.pos, b.pos) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gjShape is a pipeline over gjWrite's file, which yaml renders: a join
// j of the file with itself, an aggregate g of j (or of an identity map m
// of j), a map stamping each result with its event time, a file sink.
type gjShape struct {
	str bool // string keys
	// par is the pipeline's parallelism (0: 1); joinPar and aggPar set
	// the two nodes' own.
	par, joinPar, aggPar int
	// unfused puts an identity map between the join and the aggregate.
	unfused  bool
	noUnique bool
	lower    string // default 0s
	// idRef is what the join selects as id: left.id (default) or key.
	idRef string
	// key and closes are the aggregate's (default [id, category, expires]
	// and expires).
	key    []string
	closes string
	having string // default total % 3 != 0; "-" for none
	// transforms and sinks are appended to the file's.
	transforms, sinks string
	// warn: fused, the builder warns that the join's parallelism is not
	// used.
	warn bool
}

// gjHaving is the default HAVING.
const gjHaving = "total % 3 != 0"

func (s gjShape) yaml() string {
	kind := "int"
	if s.str {
		kind = "string"
	}
	par := ""
	if s.par > 0 {
		par = fmt.Sprintf("parallelism: %d\n", s.par)
	}
	nodePar := func(p int) string {
		if p == 0 {
			return ""
		}
		return fmt.Sprintf("    parallelism: %d\n", p)
	}
	unique := "    unique: left\n"
	if s.noUnique {
		unique = ""
	}
	lower := s.lower
	if lower == "" {
		lower = "0s"
	}
	idRef := s.idRef
	if idRef == "" {
		idRef = "left.id"
	}
	key, closes := s.key, s.closes
	if key == nil {
		key = []string{"id", "category", "expires"}
	}
	if closes == "" {
		closes = "expires"
	}
	having := s.having
	switch having {
	case "":
		having = "    having: " + gjHaving + "\n"
	case "-":
		having = ""
	default:
		having = "    having: " + having + "\n"
	}
	input, between := "j", ""
	if s.unfused {
		input = "m"
		between = "  m:\n    type: map\n    input: j\n    keep_input: true\n    select: {price: price}\n"
	}
	return fmt.Sprintf(`pipeline: groupjoin
%scheckpoint: {interval: 20ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  events:
    type: file
    path: events.jsonl
    stop_at: latest
    parallelism: 1
    fields: {id: %[2]s, auction: %[2]s, ts: time, expires: time, deadline: time, category: string, bidder: int, price: int}
    event_time: {field: ts}
    watermark: {max_delay: %[3]v}
transforms:
  j:
    type: join
    kind: interval
    left: events
    right: events
    on: {left: id, right: auction}
    lower: %[4]s
    upper: left.expires
%[5]s%[6]s    select: {id: %[7]s, category: left.category, expires: left.expires, deadline: left.deadline, price: right.price, bidder: right.bidder, bid_ts: right.ts}
%[8]s  g:
    type: aggregate
    input: %[9]s
    key: [%[10]s]
    closes_at: %[11]s
%[12]s    aggregates:
      n: count()
      hi: max(price)
      lo: min(price)
      total: sum(price)
      mean: avg(price)
      bidders: count_distinct(bidder)
%[13]s  stamped:
    type: map
    input: g
    keep_input: true
    select: {at: event_time}
%[14]ssinks:
  out: {type: file, input: stamped, path: out}
%[15]s`, par, kind, gjDelay, lower, unique, nodePar(s.joinPar), idRef, between, input, strings.Join(key, ", "), closes,
		nodePar(s.aggPar), having, s.transforms, s.sinks)
}

// gjPair is a pair of the join as the model sees it: its output fields.
type gjPair map[string]row.Value

// gjPairs is the model of the join of ls and rs: the pairs of equal keys
// (NULL matching NULL) with l.ts + lower <= r.ts <= l.expires, neither
// late.
func gjPairs(ls []gjLeft, rs []gjRight, str bool, lower time.Duration) []gjPair {
	var out []gjPair
	for _, l := range ls {
		if l.late || l.noExp {
			continue
		}
		for _, r := range rs {
			if r.late || r.auction != l.id || r.ts < l.ts+lower || r.ts > l.expires {
				continue
			}
			k := gjKeyValue(l.id, str)
			out = append(out, gjPair{"id": k, "key": k, "category": row.StringValue(l.cat),
				"expires": tval(gjT0.Add(l.expires).UnixNano()), "deadline": tval(gjT0.Add(l.expires + time.Second).UnixNano()),
				"price": i64(r.price), "bidder": i64(r.bidder), "bid_ts": tval(gjT0.Add(r.ts).UnixNano())})
		}
	}
	return out
}

// gjKinds are the kinds of the join's output fields.
func gjKinds(str bool) map[string]row.Kind {
	k := row.Int
	if str {
		k = row.String
	}
	return map[string]row.Kind{"id": k, "category": row.String, "expires": row.Time, "deadline": row.Time,
		"price": row.Int, "bidder": row.Int, "bid_ts": row.Time}
}

// gjModel is the aggregate of a gjShape over pairs: grouped by key, each
// group's row (key fields, n, hi, lo, total, mean, bidders, and its close
// time as at) when keep accepts it (nil: every group), rendered as the file
// sink writes it, sorted.
func gjModel(pairs []gjPair, str bool, key []string, closes string, keep func(gjAgg) bool) []string {
	type acc struct {
		key              row.Row
		n, hi, lo, total int64
		bidders          map[int64]bool
	}
	groups := map[string]*acc{}
	var order []string
	for _, p := range pairs {
		var k row.Row
		for _, f := range key {
			k = append(k, p[f])
		}
		id := string((&row.Schema{Fields: make([]row.Field, len(k))}).AppendJSON(nil, k))
		a := groups[id]
		if a == nil {
			a = &acc{key: k, hi: p["price"].Int(), lo: p["price"].Int(), bidders: map[int64]bool{}}
			groups[id] = a
			order = append(order, id)
		}
		price := p["price"].Int()
		a.n, a.total, a.hi, a.lo = a.n+1, a.total+price, max(a.hi, price), min(a.lo, price)
		a.bidders[p["bidder"].Int()] = true
	}
	kinds := gjKinds(str)
	schema := &row.Schema{}
	for _, f := range key {
		schema.Fields = append(schema.Fields, row.Field{Name: f, Kind: kinds[f]})
	}
	schema.Fields = append(schema.Fields, row.Field{Name: "n", Kind: row.Int}, row.Field{Name: "hi", Kind: row.Int},
		row.Field{Name: "lo", Kind: row.Int}, row.Field{Name: "total", Kind: row.Int}, row.Field{Name: "mean", Kind: row.Float},
		row.Field{Name: "bidders", Kind: row.Int}, row.Field{Name: "at", Kind: row.Time})
	at := slices.Index(key, closes)
	var rows []row.Row
	for _, id := range order {
		a := groups[id]
		if keep != nil && !keep(gjAgg{n: a.n, hi: a.hi, lo: a.lo, total: a.total}) {
			continue
		}
		r := append(slices.Clone(a.key), i64(a.n), i64(a.hi), i64(a.lo), i64(a.total), fval(float64(a.total)/float64(a.n)),
			i64(int64(len(a.bidders))), a.key[at])
		rows = append(rows, r)
	}
	return jsonLines(schema, rows)
}

// gjAgg is what a HAVING of the model reads of a group.
type gjAgg struct{ n, hi, lo, total int64 }

// gjKeep is the default HAVING's model.
func gjKeep(a gjAgg) bool { return a.total%3 != 0 }

// gjRun is one run of a pipeline of gjData: its committed lines in the
// order written, the late records its join or groupjoin counted, and its
// plan.
type gjRun struct {
	lines []string
	late  map[string]int64
	plan  string
}

// gjRunShape writes the data and s's file into a new directory, runs it to
// the end and returns what it committed.
func gjRunShape(t *testing.T, s gjShape, ls []gjLeft, rs []gjRight) gjRun {
	t.Helper()
	dir := t.TempDir()
	gjWrite(t, dir, ls, rs, s.str)
	p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(s.yaml()))
	if err != nil {
		t.Fatalf("Parse:\n%v\n%s", err, s.yaml())
	}
	plan := planText(t, p)
	warned := slices.ContainsFunc(p.Warnings, func(w config.Warning) bool {
		return strings.Contains(w.Msg, "runs inside this aggregate") && strings.Contains(w.Msg, "is not used")
	})
	if want := s.warn && !s.unfused; warned != want {
		t.Fatalf("warned that the join's parallelism is not used: %v, want %v (warnings %v)", warned, want, p.Warnings)
	}
	job := gjRunToEnd(t, p)
	lines, err := testkit.ReadCommitted(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l.Text))
	}
	return gjRun{lines: out, late: job.Observe().LateRecords, plan: plan}
}

// gjRunToEnd runs p until its bounded sources end and returns its job.
func gjRunToEnd(t *testing.T, p *config.Pipeline) *runtime.Job {
	t.Helper()
	job, err := p.Stream.NewJob(p.RunOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := job.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return job
}

// The fused node's description, and the join's.
const (
	gjFused    = "its pairs grouped per left record: aggregate by ["
	gjJoinDesc = "interval join [0s, left expires], left unique by key (declared)"
)

// gjFusedPlan fails t unless plan shows the join and the aggregate as one
// node, g, and no node j. The test goes on: what the run commits tells
// more.
func gjFusedPlan(t *testing.T, plan string) {
	t.Helper()
	if !strings.Contains(plan, gjFused) || gjHasNode(plan, "j") || !gjHasNode(plan, "g") {
		t.Errorf("plan:%s\nwant the join folded into g (%q), no node j", plan, gjFused)
	}
}

// gjSeparatePlan fails t unless plan shows the join j as a node of its own,
// and nothing fused. The test goes on.
func gjSeparatePlan(t *testing.T, plan, joinDesc string) {
	t.Helper()
	if strings.Contains(plan, "grouped per left record") || !gjHasNode(plan, "j") || !strings.Contains(plan, joinDesc) {
		t.Errorf("plan:%s\nwant node j (%q) and nothing fused", plan, joinDesc)
	}
}

// gjHasNode reports whether plan (Plan.Describe) lists a node named id.
func gjHasNode(plan, id string) bool {
	for _, l := range strings.Split(plan, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == id {
			return true
		}
	}
	return false
}

// The fused pipeline commits exactly what the join and the aggregate as two
// nodes commit, which is the model's rows: at parallelism 1 the same lines
// in the same order (by close time), at parallelism 2 the same rows; for an
// integer key (the intKey state) and a string key (row.Value), with NULL
// keys on both sides, pairs at the interval's bounds, auctions without bids,
// with a NULL expiry, with an empty interval, bids that wait for their
// auction, bids to no auction, and a late auction and a late bid, which
// both plans drop and count.
func TestGroupJoinSameAsJoinThenAggregate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	ls, rs := gjData(false)
	for _, c := range []struct {
		name string
		s    gjShape
	}{
		{"int key, parallelism 1", gjShape{}},
		{"string key, parallelism 1", gjShape{str: true, idRef: "key"}},
		{"int key, parallelism 2", gjShape{par: 2, idRef: "key"}},
		{"string key, parallelism 2", gjShape{str: true, joinPar: 2, aggPar: 2}},
		// The join's parallelism written out, the aggregate's the
		// pipeline's: the same, so fused.
		{"int key, the join's parallelism alone set, to the pipeline's", gjShape{par: 2, joinPar: 2, idRef: "key"}},
		// Other parallelisms: fused all the same, at the aggregate's (so
		// that rescaling either node keeps the plan's state), with a
		// warning that the join's is not used.
		{"int key, other parallelisms", gjShape{joinPar: 2, aggPar: 1, warn: true}},
		{"string key, the join's parallelism alone set, to another", gjShape{str: true, joinPar: 2, warn: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fused := gjRunShape(t, c.s, ls, rs)
			gjFusedPlan(t, fused.plan)
			u := c.s
			u.unfused = true
			two := gjRunShape(t, u, ls, rs)
			gjSeparatePlan(t, two.plan, gjJoinDesc)
			want := gjModel(gjPairs(ls, rs, c.s.str, 0), c.s.str, []string{"id", "category", "expires"}, "expires", gjKeep)
			if len(want) < 100 || !slices.ContainsFunc(want, func(l string) bool { return strings.Contains(l, `"id":null`) }) {
				t.Fatalf("the model has %d rows (want 100 or more, one with a NULL id): the data do not exercise the join", len(want))
			}
			if c.s.par <= 1 && c.s.joinPar <= 1 {
				// One subtask: the rows in close-time order, the same.
				if strings.Join(fused.lines, "\n") != strings.Join(two.lines, "\n") {
					sameLines(t, "fused against unfused (sorted)", sortedCopy(fused.lines), sortedCopy(two.lines))
					t.Fatalf("fused and unfused commit the same rows in another order:\nfused %s\nunfused %s", gjHead(fused.lines), gjHead(two.lines))
				}
			} else {
				sameLines(t, "fused against unfused", sortedCopy(fused.lines), sortedCopy(two.lines))
			}
			sameLines(t, "fused against the model", sortedCopy(fused.lines), want)
			// The late auction and the late bid, each as a left and as a
			// right record.
			if f, u := fused.late["g"], two.late["j"]; f != 4 || u != 4 {
				t.Errorf("late records: fused g %d (%v), unfused j %d (%v); want 4 each (the late auction and the late bid, each on both sides)", f, fused.late, u, two.late)
			}
			t.Logf("%d rows alike", len(fused.lines))
		})
	}
}

// gjHead shows the first lines of s.
func gjHead(s []string) string {
	if len(s) > 4 {
		s = s[:4]
	}
	return "\n  " + strings.Join(s, "\n  ")
}

// A join that the aggregate may not fold stays a node of its own, and the
// pipeline commits the model's rows: the join read by a second transform or
// a sink; a key with a right field, or without the join key; closes_at on
// a left field other than the bound; other parallelisms; no unique: left;
// a negative lower bound.
func TestGroupJoinNotFused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	ls, rs := gjData(false)
	std := []string{"id", "category", "expires"}
	for _, c := range []struct {
		name     string
		s        gjShape
		joinDesc string
		lower    time.Duration
		key      []string
		closes   string
		// shared: the data of gjData(true), whose groups of [category,
		// expires] may span two auctions.
		shared bool
		// check checks what else the run committed (dir: its directory).
		check func(t *testing.T, dir string)
	}{
		{name: "a second sink reads the join",
			s:   gjShape{sinks: "  pairs: {type: file, input: j, path: pairs}\n"},
			key: std, closes: "expires",
			check: func(t *testing.T, dir string) {
				schema := &row.Schema{}
				names := []string{"id", "category", "expires", "deadline", "price", "bidder", "bid_ts"}
				kinds := gjKinds(false)
				for _, f := range names {
					schema.Fields = append(schema.Fields, row.Field{Name: f, Kind: kinds[f]})
				}
				var rows []row.Row
				for _, p := range gjPairs(ls, rs, false, 0) {
					var r row.Row
					for _, f := range names {
						r = append(r, p[f])
					}
					rows = append(rows, r)
				}
				sameLines(t, "the join's pairs", committedLines(t, dir, "pairs"), jsonLines(schema, rows))
			}},
		{name: "a second transform reads the join",
			s: gjShape{str: true, transforms: "  cheap: {type: filter, input: j, where: price < 100}\n",
				sinks: "  cheap_out: {type: file, input: cheap, path: cheap}\n"},
			key: std, closes: "expires",
			check: func(t *testing.T, dir string) {
				n := 0
				for _, p := range gjPairs(ls, rs, true, 0) {
					if p["price"].Int() < 100 {
						n++
					}
				}
				if got := len(committedLines(t, dir, "cheap")); got != n || n == 0 {
					t.Errorf("%d cheap pairs committed, want %d (and some)", got, n)
				}
			}},
		{name: "a right field in the key",
			s:   gjShape{key: []string{"id", "bidder", "expires"}},
			key: []string{"id", "bidder", "expires"}, closes: "expires"},
		{name: "a right field in the key, string key",
			s:   gjShape{str: true, idRef: "key", key: []string{"id", "expires", "bid_ts"}},
			key: []string{"id", "expires", "bid_ts"}, closes: "expires"},
		{name: "the key without the join key",
			s:   gjShape{key: []string{"category", "expires"}},
			key: []string{"category", "expires"}, closes: "expires", shared: true},
		{name: "closes_at another left field",
			s:   gjShape{key: []string{"id", "expires", "deadline"}, closes: "deadline"},
			key: []string{"id", "expires", "deadline"}, closes: "deadline"},
		{name: "no unique: left",
			s:        gjShape{noUnique: true, str: true},
			joinDesc: "interval join [0s, left expires]",
			key:      std, closes: "expires"},
		{name: "a negative lower bound",
			s:        gjShape{lower: "-200ms"},
			joinDesc: "interval join [-200ms, left expires], left unique by key (declared)",
			lower:    -200 * time.Millisecond,
			key:      std, closes: "expires"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ls, rs := ls, rs
			if c.shared {
				ls, rs = gjData(true)
			}
			dir := t.TempDir()
			gjWrite(t, dir, ls, rs, c.s.str)
			src := c.s.yaml()
			p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(src))
			if err != nil {
				t.Fatalf("Parse:\n%v\n%s", err, src)
			}
			desc := c.joinDesc
			if desc == "" {
				desc = gjJoinDesc
			}
			gjSeparatePlan(t, planText(t, p), desc)
			if err := runToEnd(t, p); err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := gjModel(gjPairs(ls, rs, c.s.str, c.lower), c.s.str, c.key, c.closes, gjKeep)
			if len(want) == 0 {
				t.Fatal("the model has no rows")
			}
			sameLines(t, "committed", committedLines(t, dir, "out"), want)
			if c.check != nil {
				c.check(t, dir)
			}
		})
	}
}

// The fused pipeline's HAVING decides, and without one every group is
// committed: the model's rows both ways.
func TestGroupJoinHaving(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	ls, rs := gjData(false)
	for _, c := range []struct {
		having string
		keep   func(gjAgg) bool
	}{
		{"-", nil},
		{"n >= 2 && hi - lo > 100", func(a gjAgg) bool { return a.n >= 2 && a.hi-a.lo > 100 }},
	} {
		t.Run(c.having, func(t *testing.T) {
			got := gjRunShape(t, gjShape{having: c.having}, ls, rs)
			gjFusedPlan(t, got.plan)
			want := gjModel(gjPairs(ls, rs, false, 0), false, []string{"id", "category", "expires"}, "expires", c.keep)
			sameLines(t, "committed", sortedCopy(got.lines), want)
		})
	}
}

// gjNexmark is a fused pipeline over Nexmark's auctions and bids (the
// join's auctions unique by id, as they are) at parallelism par (the
// sources' stays 1: a Nexmark source's state does not rescale); rate
// limits the sources (a stopped run has more to read); unfused puts a map
// between the join and the aggregate; str joins on the ids as strings (the
// row.Value state of the groupjoin, not the intKey one).
func gjNexmark(par int, rate string, unfused, str bool) string {
	input, between := "j", ""
	if unfused {
		input = "m"
		between = "  m: {type: map, input: j, keep_input: true, select: {price: price}}\n"
	}
	on := "{left: id, right: auction}"
	if str {
		on = `{left: "string(id)", right: "string(auction)"}`
	}
	return fmt.Sprintf(`pipeline: q4groups
parallelism: %d
checkpoint: {interval: 40ms, dir: ckpts}
sources:
  auction: {type: nexmark, parallelism: 1, table: auction, columns: [id, date_time, expires, category], events: 20000, max_delay: 4s%[2]s}
  bid: {type: nexmark, parallelism: 1, table: bid, columns: [auction, bidder, price, date_time], events: 20000, max_delay: 4s%[2]s}
transforms:
  j:
    type: join
    kind: interval
    left: auction
    right: bid
    on: %[3]s
    lower: 0s
    upper: left.expires
    unique: left
    select: {id: key, category: left.category, expires: left.expires, price: right.price, bidder: right.bidder}
%[4]s  g:
    type: aggregate
    input: %[5]s
    key: [id, category, expires]
    closes_at: expires
    aggregates: {n: count(), final: max(price), lo: min(price), total: sum(price), mean: avg(price), bidders: count_distinct(bidder)}
    having: n > 1
  stamped: {type: map, input: g, keep_input: true, select: {at: event_time}}
sinks:
  out: {type: file, input: stamped, path: out}
`, par, rate, on, between, input)
}

// The fused pipeline stopped twice and restored at other parallelisms
// (2 → 3 → 1), so that open groups, waiting bids and their timers move
// between subtasks, commits exactly the rows of an uninterrupted run of the
// join and the aggregate as two nodes; with an integer key and a string
// key. Where the runs stop depends on the clock (runStages), what they
// commit does not.
func TestGroupJoinRestoredAtOtherParallelisms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	for _, str := range []bool{false, true} {
		t.Run(fmt.Sprintf("string key %v", str), func(t *testing.T) {
			gjFusedPlan(t, planOfYAML(t, gjNexmark(2, "", false, str)))
			gjSeparatePlan(t, planOfYAML(t, gjNexmark(1, "", true, str)), gjJoinDesc)
			dir := t.TempDir()
			path := filepath.Join(dir, "p.yaml")
			runStages(t, path, rescaled(600*time.Millisecond, 500*time.Millisecond), func(par int) string {
				return gjNexmark(par, ", rate: 12000", false, str)
			})
			got := committedLines(t, dir, "out")
			want := runAndRead(t, writeFile(t, "p.yaml", gjNexmark(1, "", true, str)))
			if len(want) == 0 {
				t.Fatal("the reference committed nothing")
			}
			if str && !strings.Contains(want[0], `"id":"`) {
				t.Fatalf("the reference's ids are not strings: %s", want[0])
			}
			sameLines(t, "restored against uninterrupted", got, want)
			t.Logf("%d rows exactly", len(got))
		})
	}
}

// planOfYAML parses a YAML pipeline and describes its plan.
func planOfYAML(t *testing.T, src string) string {
	t.Helper()
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return planText(t, p)
}

// A FLOAT field of a group's key holding -0 is 0 in the fused result, as
// the aggregate's key makes it when the two run apart.
func TestGroupJoinNegativeZeroKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipelines")
	}
	const doc = `pipeline: negzero
checkpoint: {interval: 20ms, dir: ckpts}
restart: {max_attempts: 0}
sources:
  events:
    type: file
    path: events.jsonl
    stop_at: latest
    fields: {id: int, auction: int, f: float, ts: time, expires: time, price: int}
    event_time: {field: ts}
transforms:
  j:
    type: join
    kind: interval
    left: events
    right: events
    on: {left: id, right: auction}
    lower: 0s
    upper: left.expires
    unique: left
    select: {id: left.id, f: left.f, expires: left.expires, price: right.price}
%s  g:
    type: aggregate
    input: %s
    key: [id, f, expires]
    closes_at: expires
    aggregates: {n: count()}
sinks:
  out: {type: file, input: g, path: out}
`
	data := `{"id":1,"auction":-1,"f":-0.0,"ts":"2026-01-01T00:00:00Z","expires":"2026-01-01T00:00:05Z","price":0}
{"id":-2,"auction":1,"f":1.5,"ts":"2026-01-01T00:00:01Z","expires":null,"price":7}
`
	var got [2][]string
	for i, between := range []string{"", "  m:\n    type: map\n    input: j\n    keep_input: true\n    select: {price: price}\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		input := "j"
		if between != "" {
			input = "m"
		}
		p, err := config.Parse(filepath.Join(dir, "p.yaml"), []byte(fmt.Sprintf(doc, between, input)))
		if err != nil {
			t.Fatal(err)
		}
		if fused := strings.Contains(planText(t, p), "its pairs grouped per left record"); fused != (i == 0) {
			t.Fatalf("variant %d: fused %v", i, fused)
		}
		gjRunToEnd(t, p)
		got[i] = committedLines(t, dir, "out")
	}
	if len(got[0]) != 1 || !slices.Equal(got[0], got[1]) || !strings.Contains(got[0][0], `"f":0,`) {
		t.Fatalf("fused %q, apart %q: want one row alike, with f 0", got[0], got[1])
	}
}
