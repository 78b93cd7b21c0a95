package query

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/nexmark"
)

// Seeded out-of-order tests: the generator's events, their times moved onto
// a coarse grid (so bids tie with each other, with their auction's time and
// expiry, and with window boundaries), emitted in a random order that keeps
// every event at most WatermarkDelay behind the running maximum (often
// exactly), must give every query's reference result: no event is late, so
// the order they came in must not matter. The stateful queries also run
// with the source failing once in the middle and the job restoring its last
// complete checkpoint.
//
// Run many seeds: go test ./nexmark/query -run '^TestQueriesOutOfOrder$' -seeds=200
// Replay one:     go test ./nexmark/query -run '^TestQueriesOutOfOrder$' -seed=N -v

var (
	oooSeed  = flag.Int64("seed", 0, "TestQueriesOutOfOrder: run only this seed")
	oooSeeds = flag.Int("seeds", 1, "TestQueriesOutOfOrder: number of seeds to run (1..N)")
)

// oooEvents is the event count of one seed: 80 s of event time with the
// default configuration, about 400 events within the watermark delay.
const oooEvents = 8000

// coarse returns copies of evs with every time (dateTime, an auction's
// expires) moved down to a multiple of grid milliseconds.
func coarse(evs []nexmark.Event, grid int64) []nexmark.Event {
	down := func(ms int64) int64 { return ms - ms%grid }
	out := make([]nexmark.Event, len(evs))
	for i, e := range evs {
		switch e.Type {
		case nexmark.PersonEvent:
			p := *e.Person
			p.DateTime = down(p.DateTime)
			e.Person = &p
		case nexmark.AuctionEvent:
			a := *e.Auction
			a.DateTime, a.Expires = down(a.DateTime), down(a.Expires)
			e.Auction = &a
		case nexmark.BidEvent:
			e.Bid.DateTime = down(e.Bid.DateTime)
		}
		out[i] = e
	}
	return out
}

// oooCheck compares a query's result lines with its reference over evs.
type oooCheck func(t *testing.T, name string, got []string, evs []nexmark.Event)

// rowsOf makes a check from a reference giving rows.
func rowsOf[T any](want func([]nexmark.Event) []T) oooCheck {
	return func(t *testing.T, name string, got []string, evs []nexmark.Event) {
		t.Helper()
		sameRows(t, name, got, encode(t, want(evs)))
	}
}

// rareRowsOf is rowsOf for a query whose reference may be empty over a
// seed's events (q2 selects one auction in 123).
func rareRowsOf[T any](want func([]nexmark.Event) []T) oooCheck {
	return func(t *testing.T, name string, got []string, evs []nexmark.Event) {
		t.Helper()
		w := want(evs)
		if len(w) == 0 {
			if len(got) != 0 {
				t.Fatalf("%s: %d rows, want none (e.g. %q)", name, len(got), got[0])
			}
			return
		}
		sameRows(t, name, got, encode(t, w))
	}
}

// oooQueries are every query with its reference; stateful ones also run
// across a failure and restore.
var oooQueries = []struct {
	name     string
	check    oooCheck
	stateful bool
}{
	{"q0", rowsOf(func(evs []nexmark.Event) []Q0Row { q0, _, _ := wantStateless(evs); return q0 }), false},
	{"q1", rowsOf(func(evs []nexmark.Event) []Q1Row { _, q1, _ := wantStateless(evs); return q1 }), false},
	{"q2", rareRowsOf(func(evs []nexmark.Event) []Q2Row { _, _, q2 := wantStateless(evs); return q2 }), false},
	{"q3", rowsOf(wantQ3), true},
	{"q4", checkQ4, true},
	{"q5", rowsOf(wantQ5), true},
	{"q7", rowsOf(wantQ7), true},
	{"q8", rowsOf(wantQ8), true},
	{"q11", rowsOf(wantQ11), true},
	{"q12", checkQ12, true},
}

// Every query is covered.
func TestQueriesOutOfOrderCoverAll(t *testing.T) {
	have := map[string]bool{}
	for _, q := range oooQueries {
		have[q.name] = true
	}
	for _, n := range Names() {
		if !have[n] {
			t.Errorf("query %s has no seeded out-of-order test", n)
		}
	}
}

func TestQueriesOutOfOrder(t *testing.T) {
	testkit.RunSeeds(t, "go test ./nexmark/query -run '^TestQueriesOutOfOrder$'", *oooSeed, *oooSeeds, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 14))
		// The same events for every seed (later ranges of the generator's
		// stream have no q3 result this short); the seed draws the grid, the
		// order, the parallelism and the source's batches.
		evs := generate(t, nexmark.DefaultConfig(), oooEvents)
		grid := []int64{1, 100, 1000, 2000}[rng.IntN(4)]
		evs = coarse(evs, grid)
		evs = testkit.Disorder(rng, evs, func(e nexmark.Event) int64 { return e.EventTimeNanos() }, int64(WatermarkDelay))
		p := 1 + rng.IntN(3)
		// Events per source read, the watermark following each read (a few
		// let timers fire between an auction's bids and the auction, which
		// comes up to 400 events later; one per read only makes runs slow).
		batch := []int{4, 16, 64}[rng.IntN(3)]
		what := fmt.Sprintf("%d events on a grid of %d ms, parallelism %d, %d events per read", oooEvents, grid, p, batch)
		for _, q := range oooQueries {
			name := fmt.Sprintf("%s over %s", q.name, what)
			if !q.stateful || !testkit.RaceEnabled {
				// (Under -race, which makes runs several times slower, the
				// stateful queries run only across the restore.)
				got, _ := runEventsWith(t, q.name, evs, p, batch, nil)
				q.check(t, name, got, evs)
			}
			if !q.stateful {
				continue
			}
			fail := &failOnce{at: len(evs) / 2 / p}
			got, stats := runEventsWith(t, q.name, evs, p, batch, fail)
			if stats.Restarts != 1 || stats.RestoredFrom == 0 {
				t.Fatalf("%s: %d restarts, restored checkpoint %d: the failure did not restore a checkpoint", name, stats.Restarts, stats.RestoredFrom)
			}
			q.check(t, name+", restored", got, evs)
		}
	})
}

// The grid and the disorder reach what they are for: ties of a bid with
// its auction's expiry and with window boundaries, and events exactly the
// watermark delay behind the running maximum.
func TestQueriesOutOfOrderInputShape(t *testing.T) {
	evs := coarse(generate(t, nexmark.DefaultConfig(), oooEvents), 1000)
	rng := rand.New(rand.NewPCG(1, 14))
	evs = testkit.Disorder(rng, evs, func(e nexmark.Event) int64 { return e.EventTimeNanos() }, int64(WatermarkDelay))
	expires := map[int64]int64{}
	for _, e := range evs {
		if e.Type == nexmark.AuctionEvent {
			expires[e.Auction.ID] = e.Auction.Expires
		}
	}
	var atExpiry, onBoundary, exactDelay, bidBeforeAuction int
	seen := map[int64]bool{}
	maxSeen := evs[0].DateTime()
	for _, e := range evs {
		if e.DateTime() == maxSeen-WatermarkDelay.Milliseconds() {
			exactDelay++
		}
		maxSeen = max(maxSeen, e.DateTime())
		switch e.Type {
		case nexmark.AuctionEvent:
			seen[e.Auction.ID] = true
		case nexmark.BidEvent:
			b := e.Bid
			if x, ok := expires[b.Auction]; ok && x == b.DateTime {
				atExpiry++
			}
			if b.DateTime%10_000 == 0 {
				onBoundary++
			}
			if _, ok := expires[b.Auction]; ok && !seen[b.Auction] {
				bidBeforeAuction++
			}
		}
	}
	if atExpiry == 0 || onBoundary == 0 || exactDelay == 0 || bidBeforeAuction == 0 {
		t.Fatalf("bids at their auction's expiry: %d, on a 10 s boundary: %d, events exactly %v behind: %d, bids before their auction: %d: every one must occur",
			atExpiry, onBoundary, time.Duration(WatermarkDelay), exactDelay, bidBeforeAuction)
	}
}

// The generator's own disorder (OutOfOrderGroupSize: times shuffled within
// groups of 300 events, 3 s of event time, within the 4 s watermark delay)
// through the real Nexmark source gives every stateful query its reference
// result.
func TestQueriesGeneratorOutOfOrder(t *testing.T) {
	cfg := nexmark.DefaultConfig()
	cfg.OutOfOrderGroupSize = 300
	evs := generate(t, cfg, oooEvents)
	behind, maxSeen := 0, evs[0].DateTime()
	for _, e := range evs {
		if e.DateTime() < maxSeen {
			behind++
		}
		if e.DateTime() < maxSeen-WatermarkDelay.Milliseconds() {
			t.Fatalf("event %d is more than the watermark delay behind: the test input would have late events", e.EventID)
		}
		maxSeen = max(maxSeen, e.DateTime())
	}
	if behind < len(evs)/4 {
		t.Fatalf("only %d of %d events are behind the running maximum: not out of order", behind, len(evs))
	}
	for _, q := range oooQueries {
		if q.stateful {
			q.check(t, q.name+" over the generator's out-of-order events", runQuery(t, q.name, cfg, oooEvents, 2), evs)
		}
	}
}
