package query

import (
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Q3Row is a person selling in category 10 from OR, ID or CA, with the
// auction's id.
type Q3Row struct {
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
	ID    int64  `json:"id"`
}

// q3Auction and q3Person are what q3's join keeps in state.
type q3Auction struct{ ID, Seller int64 }
type q3Person struct {
	ID                int64
	Name, City, State string
}

// Q5Row is an auction with the most bids in a sliding window.
type Q5Row struct {
	Auction int64 `json:"auction"`
	Num     int64 `json:"num"`
}

// auctionCount is q5's per-auction count in one sliding window.
type auctionCount struct {
	Auction, Start, Count int64
}

// hotAuctions is one window's highest count and the auctions that have it.
type hotAuctions struct {
	Max      int64
	Auctions []int64
}

// q5Hot is q5's second stage, keyed by window start: the auctions whose
// count equals the window's maximum, emitted when the watermark reaches the
// window's end (all of the window's counts have arrived by then: the first
// stage emits them before it forwards that watermark).
type q5Hot struct {
	hot *state.ValueState[int64, hotAuctions]
}

func (f *q5Hot) Open(s process.Setup[int64]) error {
	var err error
	f.hot, err = state.NewValueState(s.State, "hot", s.KeyCodec, state.JSONCodec[hotAuctions]())
	return err
}

// ProcessRecord keeps the window's maximum and its auctions.
// INVARIANT: a stored Auctions slice is only appended to or replaced.
func (f *q5Hot) ProcessRecord(c *process.Context[int64, Q5Row], a auctionCount) error {
	h, ok := f.hot.Get(c.Key())
	if !ok {
		c.SetTimer(process.EventTime, c.Time())
	}
	switch {
	case !ok || a.Count > h.Max:
		h = hotAuctions{Max: a.Count, Auctions: []int64{a.Auction}}
	case a.Count == h.Max:
		h.Auctions = append(h.Auctions, a.Auction)
	default:
		return nil
	}
	f.hot.Update(c.Key(), h)
	return nil
}

func (f *q5Hot) OnTimer(c *process.Context[int64, Q5Row], _ process.Domain) error {
	h, ok := f.hot.Get(c.Key())
	if !ok {
		return fmt.Errorf("q5: timer of window %d without counts", c.Key())
	}
	f.hot.Clear(c.Key())
	for _, a := range h.Auctions {
		c.Emit(Q5Row{Auction: a, Num: h.Max})
	}
	return nil
}

// Q8Row is a person who registered and opened an auction in the same
// 10-second window; Stime is the window's start.
type Q8Row struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Stime int64  `json:"stime"`
}

// q8Person and q8Auction are what q8's window join keeps in state.
type q8Person struct {
	ID   int64
	Name string
}

func init() {
	register(Query{Name: "q3", Describe: "local item suggestion: inner join of category-10 auctions with sellers in OR, ID, CA",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			auctions := stream.Map(stream.Filter(events, "q3-auctions", func(e nexmark.Event) bool {
				return e.Type == nexmark.AuctionEvent && e.Auction.Category == 10
			}), "q3-auction", func(e nexmark.Event) q3Auction { return q3Auction{ID: e.Auction.ID, Seller: e.Auction.Seller} })
			persons := stream.Map(stream.Filter(events, "q3-persons", func(e nexmark.Event) bool {
				if e.Type != nexmark.PersonEvent {
					return false
				}
				s := e.Person.State
				return s == "OR" || s == "ID" || s == "CA"
			}), "q3-person", func(e nexmark.Event) q3Person {
				return q3Person{ID: e.Person.ID, Name: e.Person.Name, City: e.Person.City, State: e.Person.State}
			})
			rows := join.Inner(stream.KeyBy(auctions, func(a q3Auction) int64 { return a.Seller }),
				stream.KeyBy(persons, func(p q3Person) int64 { return p.ID }), "q3", 0,
				func(_ int64, a q3Auction, p q3Person) Q3Row {
					return Q3Row{Name: p.Name, City: p.City, State: p.State, ID: a.ID}
				}, join.LeftCodec[q3Auction](q3AuctionCodec{}), join.RightCodec[q3Person](q3PersonCodec{}))
			sinkTo(rows, out)
		}})
	register(Query{Name: "q5", Window: 10 * time.Second, Describe: "hot items: auctions with the most bids per sliding window (10 s, every 2 s)",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			byAuction := stream.KeyBy(bids(events), func(b nexmark.Bid) int64 { return b.Auction })
			counts := window.Sliding(byAuction, "q5-counts", 10*time.Second, 2*time.Second, window.CountOf[nexmark.Bid](),
				func(k int64, w window.Window, n int64) auctionCount {
					return auctionCount{Auction: k, Start: w.Start, Count: n}
				})
			byWindow := stream.KeyBy(counts, func(a auctionCount) int64 { return a.Start })
			rows := process.Keyed(byWindow, "q5", func() process.Function[auctionCount, int64, Q5Row] { return &q5Hot{} })
			sinkTo(rows, out)
		}})
	register(Query{Name: "q8", Window: 10 * time.Second, Describe: "monitor new users: people who opened an auction in the 10 s window they registered in",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			persons := stream.Map(stream.Filter(events, "q8-persons", func(e nexmark.Event) bool { return e.Type == nexmark.PersonEvent }),
				"q8-person", func(e nexmark.Event) q8Person { return q8Person{ID: e.Person.ID, Name: e.Person.Name} })
			sellers := stream.Map(stream.Filter(events, "q8-auctions", func(e nexmark.Event) bool { return e.Type == nexmark.AuctionEvent }),
				"q8-seller", func(e nexmark.Event) int64 { return e.Auction.Seller })
			// As the SQL's plan: first the distinct sellers per window
			// (GROUP BY seller, window), so the join keeps one entry per
			// seller and window instead of one per auction. A window's
			// sellers are emitted when the watermark reaches its end and
			// reach the join, in the same window, before that watermark.
			perWindow := window.Tumbling(stream.KeyBy(sellers, func(s int64) int64 { return s }), "q8-sellers", 10*time.Second,
				window.CountOf[int64](), func(s int64, _ window.Window, _ int64) int64 { return s })
			sellers = perWindow
			rows := join.WindowCoGroup(stream.KeyBy(persons, func(p q8Person) int64 { return p.ID }),
				stream.KeyBy(sellers, func(s int64) int64 { return s }), "q8", 10*time.Second,
				func(_ int64, w window.Window, ps []q8Person, ss []int64, emit func(Q8Row)) {
					if len(ps) == 0 || len(ss) == 0 {
						return
					}
					// GROUP BY id, name, window: one row per distinct person.
					seen := map[q8Person]bool{}
					for _, p := range ps {
						if !seen[p] {
							seen[p] = true
							emit(Q8Row{ID: p.ID, Name: p.Name, Stime: ms(w.Start)})
						}
					}
				}, join.LeftCodec[q8Person](q8PersonCodec{}))
			sinkTo(rows, out)
		}})
	register(Query{Name: "q11", Window: 10 * time.Second, Describe: "user sessions: bids per bidder per session (gap 10 s)",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			byBidder := stream.KeyBy(bids(events), func(b nexmark.Bid) int64 { return b.Bidder })
			rows := window.Session(byBidder, "q11", 10*time.Second, window.CountOf[nexmark.Bid](),
				func(k int64, w window.Window, n int64) SessionRow {
					return SessionRow{Bidder: k, BidCount: n, StartTime: ms(w.Start), EndTime: ms(w.End)}
				})
			sinkTo(rows, out)
		}})
}
