package query

import (
	"fmt"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Q4Row is a category's average winning bid so far. The SQL's sink names the
// columns id (the category) and final (AVG of BIGINT, which truncates).
type Q4Row struct {
	ID    int64 `json:"id"`
	Final int64 `json:"final"`
}

// auctionOrBid is what q4's first stage needs of an auction or a bid.
type auctionOrBid struct {
	IsAuction bool
	Auction   int64 // the auction's id, or the bid's auction
	DateTime  int64 // epoch ms
	Expires   int64 // auctions
	Category  int64 // auctions
	Price     int64 // bids
}

// auctionInfo is a known auction in q4's state.
type auctionInfo struct {
	DateTime, Expires, Category int64
}

// winningBid is one closed auction's highest qualifying bid.
type winningBid struct {
	Auction, Category, Price int64
}

// q4Winning is q4's first stage, keyed by auction id: the highest bid with
// auction.dateTime <= bid.dateTime <= auction.expires, emitted when the
// watermark passes the auction's expiry (when no qualifying bid can follow).
// Bids that arrive before their auction wait in state until the watermark
// passes their own time; an auction later than that is late.
type q4Winning struct {
	info    *state.ValueState[int64, auctionInfo]
	max     *state.ValueState[int64, int64]
	pending *state.ListState[int64, auctionOrBid]
}

func (f *q4Winning) Open(s process.Setup[int64]) error {
	var err error
	if f.info, err = state.NewValueState(s.State, "auction", s.KeyCodec, auctionInfoCodec{}); err != nil {
		return err
	}
	if f.max, err = state.NewValueState(s.State, "max-price", s.KeyCodec, state.Int64Codec{}); err != nil {
		return err
	}
	f.pending, err = state.NewListState(s.State, "early-bids", s.KeyCodec, auctionOrBidCodec{})
	return err
}

// bid counts a bid against a known auction.
func (f *q4Winning) bid(id int64, a auctionInfo, b auctionOrBid) {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return
	}
	if m, ok := f.max.Get(id); !ok || b.Price > m {
		f.max.Update(id, b.Price)
	}
}

func (f *q4Winning) ProcessRecord(c *process.Context[int64, winningBid], v auctionOrBid) error {
	id := c.Key()
	if v.IsAuction {
		a := auctionInfo{DateTime: v.DateTime, Expires: v.Expires, Category: v.Category}
		f.info.Update(id, a)
		for _, b := range f.pending.Get(id) {
			f.bid(id, a, b)
		}
		f.pending.Clear(id)
		c.SetTimer(process.EventTime, nanos(a.Expires))
		return nil
	}
	if a, ok := f.info.Get(id); ok {
		f.bid(id, a, v)
		return nil
	}
	f.pending.Add(id, v)
	c.SetTimer(process.EventTime, nanos(v.DateTime))
	return nil
}

func (f *q4Winning) OnTimer(c *process.Context[int64, winningBid], d process.Domain) error {
	id := c.Key()
	a, ok := f.info.Get(id)
	if !ok {
		// The watermark passed bids of an auction that has not arrived:
		// those bids can no longer qualify (the auction, when it comes on
		// time, is later than the watermark, so later than them). Bids
		// after this timer's time still wait: each has its own timer.
		f.dropDue(id, c.Time())
		return nil
	}
	if c.Time() != nanos(a.Expires) {
		return nil
	}
	if m, ok := f.max.Get(id); ok {
		c.Emit(winningBid{Auction: id, Category: a.Category, Price: m})
	}
	f.info.Clear(id)
	f.max.Clear(id)
	return nil
}

// dropDue removes the waiting bids of auction id at or before t.
// INVARIANT: a waiting bid is released only by the timer at its own time or
// a later one, never by an earlier timer of the same auction.
func (f *q4Winning) dropDue(id, t int64) {
	var keep []auctionOrBid
	for _, b := range f.pending.Get(id) {
		if nanos(b.DateTime) > t {
			keep = append(keep, b)
		}
	}
	f.pending.Update(id, keep) // an empty keep clears
}

// avgAcc is a category's running sum and count of winning prices.
type avgAcc struct{ Sum, Count int64 }

// q4Average is q4's second stage, keyed by category: the running average of
// the winning bids, one row per closed auction.
type q4Average struct {
	acc *state.ValueState[int64, avgAcc]
}

func (f *q4Average) Open(s process.Setup[int64]) error {
	var err error
	f.acc, err = state.NewValueState(s.State, "average", s.KeyCodec, avgAccCodec{})
	return err
}

func (f *q4Average) ProcessRecord(c *process.Context[int64, Q4Row], w winningBid) error {
	a, _ := f.acc.Get(c.Key())
	a.Sum += w.Price
	a.Count++
	f.acc.Update(c.Key(), a)
	c.Emit(Q4Row{ID: c.Key(), Final: a.Sum / a.Count})
	return nil
}

func (f *q4Average) OnTimer(*process.Context[int64, Q4Row], process.Domain) error {
	return fmt.Errorf("q4 average: no timers are set")
}

func init() {
	register(Query{Name: "q4", Describe: "average winning bid price per category (join auction-bid, max per auction, avg per category)",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			ab := stream.Filter(events, "q4-auctions-bids", func(e nexmark.Event) bool {
				return e.Type == nexmark.AuctionEvent || e.Type == nexmark.BidEvent
			})
			rows := stream.Map(ab, "q4-project", func(e nexmark.Event) auctionOrBid {
				if e.Type == nexmark.AuctionEvent {
					a := e.Auction
					return auctionOrBid{IsAuction: true, Auction: a.ID, DateTime: a.DateTime, Expires: a.Expires, Category: a.Category}
				}
				return auctionOrBid{Auction: e.Bid.Auction, DateTime: e.Bid.DateTime, Price: e.Bid.Price}
			})
			byAuction := stream.KeyBy(rows, func(v auctionOrBid) int64 { return v.Auction })
			winning := process.Keyed(byAuction, "q4-winning-bids", func() process.Function[auctionOrBid, int64, winningBid] { return &q4Winning{} })
			byCategory := stream.KeyBy(winning, func(w winningBid) int64 { return w.Category })
			avg := process.Keyed(byCategory, "q4", func() process.Function[winningBid, int64, Q4Row] { return &q4Average{} })
			sinkTo(avg, out)
		}})
}
