package query

import (
	"fmt"
	"testing"

	"github.com/ingest-engine/ingest/nexmark"
)

// auctionAt is an auction event with the fields q4 reads.
func auctionAt(id, category, ms, expires int64) nexmark.Event {
	return nexmark.Event{Type: nexmark.AuctionEvent, Auction: &nexmark.Auction{
		ID: id, ItemName: "item", Seller: 1, Category: category, DateTime: ms, Expires: expires, Extra: "x",
	}}
}

// TestHostileQ4EarlyBidTimerKeepsLaterBids: bids that arrive before their
// auction wait for it; when the watermark passes the earliest of them, only
// the bids the watermark passed may go (the auction, arriving on time, is
// later than them, so they cannot qualify). A later bid of the same auction
// still waits, and counts when the auction arrives. Every event is within
// the allowed delay of the running maximum, so none is late.
//
// Defends "A restart must not lose accepted data" (here: nothing restarts,
// and accepted, on-time data was lost all the same) — #12 item 14.
func TestHostileQ4EarlyBidTimerKeepsLaterBids(t *testing.T) {
	base := nexmark.BaseTime
	evs := []nexmark.Event{
		bidAt(1, 5, base),                         // before its auction: waits; timer at base
		bidAt(1, 100, base+6_000),                 // waits too; the watermark passes base (6 s - 4 s - 1 ns)
		auctionAt(1, 10, base+4_000, base+20_000), // on time: 4 s > the watermark 2 s - 1 ns
		bidAt(1, 7, base+8_000),
	}
	// The bid at base precedes the auction, so it does not qualify; the
	// winning bid is 100.
	want := []Q4Row{{ID: 10, Final: 100}}
	for _, p := range []int{1, 2} {
		sameRows(t, fmt.Sprintf("q4 p=%d", p), runEvents(t, "q4", evs, p), encode(t, want))
	}
}

// TestHostileQ11TouchingBidExactlyDelayBehind: a bid exactly 10 s (the gap)
// after a bidder's session started touches that session, and is on time when
// it comes exactly the watermark delay (4 s) behind the newest bid. The
// session must not have fired before it: one session of three bids, not two.
//
// Defends "A restart must not lose accepted data" (the same rows whatever
// the order of on-time events, as a replay may deliver them) — #12 item 14.
func TestHostileQ11TouchingBidExactlyDelayBehind(t *testing.T) {
	base := nexmark.BaseTime
	evs := []nexmark.Event{
		bidAt(1, 5, base),        // session [base, base+10 s)
		bidAt(1, 5, base+14_000), // the watermark reaches base+10 s - 1ns
		bidAt(1, 5, base+10_000), // exactly 4 s behind: on time; touches [base, base+10 s)
	}
	want := []SessionRow{{Bidder: 7, BidCount: 3, StartTime: base, EndTime: base + 24_000}}
	for _, p := range []int{1, 2} {
		sameRows(t, fmt.Sprintf("q11 p=%d", p), runEvents(t, "q11", evs, p), encode(t, want))
	}
}
