package query

import (
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/nexmark"
)

// handwrittenQ0 is q0 as a single goroutine would compute it without the
// engine: the same generator's events, every bid turned into its result
// row. sink receives each row (a checksum, so the compiler keeps the work).
func handwrittenQ0(g *nexmark.Generator, events int64, sink func(Q0Row)) {
	for i := range events {
		e := g.Event(i)
		if e.Type != nexmark.BidEvent {
			continue
		}
		b := e.Bid
		sink(Q0Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
	}
}

// watermarkDelayMs is WatermarkDelay in the events' milliseconds. The
// engine's watermark is the newest event time minus the delay minus 1 ns,
// so a window [s, e) of milliseconds, whose last instant is e - 1 ns, is
// complete once the newest event time minus the delay reaches e.
const watermarkDelayMs = int64(WatermarkDelay / time.Millisecond)

// handwrittenQ5 is q5 as one goroutine computes it: per 10 s window sliding
// by 2 s, a count per auction, and when the window is complete the auctions
// with the highest count. State: the counts of the open windows only.
func handwrittenQ5(g *nexmark.Generator, events int64, sink func(Q5Row)) {
	const size, slide = int64(10_000), int64(2_000)
	counts := map[int64]map[int64]int64{} // window start → auction → count
	var starts []int64                    // open windows, increasing
	maxT := int64(math.MinInt64)
	fire := func(s int64) {
		c := counts[s]
		var m int64
		for _, n := range c {
			m = max(m, n)
		}
		for a, n := range c {
			if n == m {
				sink(Q5Row{Auction: a, Num: n})
			}
		}
		delete(counts, s)
	}
	for i := range events {
		e := g.Event(i)
		maxT = max(maxT, e.DateTime())
		if e.Type == nexmark.BidEvent {
			t := e.Bid.DateTime
			for s := t - t%slide; s > t-size; s -= slide {
				if s+size <= maxT-watermarkDelayMs {
					continue // late: that window was emitted already
				}
				c := counts[s]
				if c == nil {
					c = map[int64]int64{}
					counts[s] = c
					starts = append(starts, s)
					slices.Sort(starts)
				}
				c[e.Bid.Auction]++
			}
		}
		for len(starts) > 0 && starts[0]+size <= maxT-watermarkDelayMs {
			fire(starts[0])
			starts = starts[1:]
		}
	}
	for _, s := range starts {
		fire(s)
	}
}

// handwrittenQ8 is q8 as one goroutine computes it: per 10 s tumbling
// window, the distinct people who registered in it and the distinct sellers
// who opened an auction in it; when the window is complete, the people who
// are also sellers.
func handwrittenQ8(g *nexmark.Generator, events int64, sink func(Q8Row)) {
	const size = int64(10_000)
	type window struct {
		persons map[q8Person]bool
		sellers map[int64]bool
	}
	open := map[int64]*window{}
	var starts []int64
	maxT := int64(math.MinInt64)
	get := func(s int64) *window {
		w := open[s]
		if w == nil {
			w = &window{persons: map[q8Person]bool{}, sellers: map[int64]bool{}}
			open[s] = w
			starts = append(starts, s)
			slices.Sort(starts)
		}
		return w
	}
	fire := func(s int64) {
		w := open[s]
		for p := range w.persons {
			if w.sellers[p.ID] {
				sink(Q8Row{ID: p.ID, Name: p.Name, Stime: s})
			}
		}
		delete(open, s)
	}
	for i := range events {
		e := g.Event(i)
		t := e.DateTime()
		maxT = max(maxT, t)
		if s := t - t%size; s+size > maxT-watermarkDelayMs {
			switch e.Type {
			case nexmark.PersonEvent:
				get(s).persons[q8Person{ID: e.Person.ID, Name: e.Person.Name}] = true
			case nexmark.AuctionEvent:
				get(s).sellers[e.Auction.Seller] = true
			}
		}
		for len(starts) > 0 && starts[0]+size <= maxT-watermarkDelayMs {
			fire(starts[0])
			starts = starts[1:]
		}
	}
	for _, s := range starts {
		fire(s)
	}
}

// The hand-written programs give the engine's rows.
func TestHandwrittenQueriesMatchTheEngine(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  nexmark.Config
		n    int64
	}{
		{"beam-timeline", nexmark.DefaultConfig(), testEvents},
		{"bench-density/20", BenchGenerator(BenchEventsPerSecond / 20), 300_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testkit.RaceEnabled && c.n > testEvents {
				t.Skip("the same code as the case before, several times slower under -race")
			}
			g, err := nexmark.NewGenerator(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var q5 []Q5Row
			handwrittenQ5(g, c.n, func(r Q5Row) { q5 = append(q5, r) })
			sameRows(t, "q5", runQuery(t, "q5", c.cfg, c.n, 1), encode(t, q5))
			var q8 []Q8Row
			handwrittenQ8(g, c.n, func(r Q8Row) { q8 = append(q8, r) })
			sameRows(t, "q8", runQuery(t, "q8", c.cfg, c.n, 1), encode(t, q8))
		})
	}
}

// The hand-written q0 gives the engine's rows: same count, same checksum.
func TestHandwrittenQ0MatchesTheEngine(t *testing.T) {
	const n = 20_000
	cfg := BenchGenerator(BenchEventsPerSecond)
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []Q0Row
	handwrittenQ0(g, n, func(r Q0Row) { want = append(want, r) })
	got := runQuery(t, "q0", cfg, n, 1)
	if w := encode(t, want); len(w) != len(got) {
		t.Fatalf("engine %d rows, hand-written %d", len(got), len(w))
	} else {
		sameRows(t, "q0", got, w)
	}
}

// BenchmarkHandwritten is the baseline of the engine's CPU for q5 and q8 at
// the bench's default density: events per CPU-second of the hand-written
// programs (ingest bench nexmark --query qN reports the engine's).
func BenchmarkHandwritten(b *testing.B) {
	for _, q := range []struct {
		name string
		run  func(*nexmark.Generator, int64, *int64)
	}{
		{"q5", func(g *nexmark.Generator, n int64, sum *int64) {
			handwrittenQ5(g, n, func(r Q5Row) { *sum += r.Num })
		}},
		{"q8", func(g *nexmark.Generator, n int64, sum *int64) {
			handwrittenQ8(g, n, func(r Q8Row) { *sum += r.ID })
		}},
	} {
		b.Run(q.name, func(b *testing.B) {
			g, err := nexmark.NewGenerator(BenchGenerator(BenchEventsPerSecond))
			if err != nil {
				b.Fatal(err)
			}
			var sum int64
			cpu0 := cpuTimeSelf()
			b.ResetTimer()
			q.run(g, int64(b.N), &sum)
			b.StopTimer()
			if cpu := cpuTimeSelf() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
			}
			if sum == 42 {
				b.Log("unlikely")
			}
		})
	}
}

// BenchmarkHandwrittenQ0 is the baseline of the engine's CPU for q0: events
// per CPU-second of the hand-written program (ingest bench nexmark --query
// q0 reports the engine's).
func BenchmarkHandwrittenQ0(b *testing.B) {
	g, err := nexmark.NewGenerator(BenchGenerator(BenchEventsPerSecond))
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	cpu0 := cpuTimeSelf()
	b.ResetTimer()
	handwrittenQ0(g, int64(b.N), func(r Q0Row) { sum += r.Price + int64(len(r.Extra)) })
	b.StopTimer()
	if cpu := cpuTimeSelf() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "events/cpu-s")
	}
	if sum == 42 {
		b.Log("unlikely")
	}
}

func cpuTimeSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
