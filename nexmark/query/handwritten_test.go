package query

import (
	"syscall"
	"testing"
	"time"

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
