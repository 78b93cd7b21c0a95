// Package query holds the Nexmark queries q0, q1, q2, q3, q4, q5, q7, q8, q11
// and q12, written with the Go API, with the semantics of the SQL in the
// Flink nexmark repository (nexmark-flink/src/main/resources/queries):
// event time is each event's dateTime, the watermark trails it by 4 seconds,
// and result rows have the SQL's column names.
//
// Times in result rows (dateTime, starttime, endtime, stime) are epoch
// milliseconds, as in the event JSON. Where the SQL produces an updating
// result (q4's averages), each update is a row and the last row per key is
// the SQL's final value.
package query

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/stream"
)

// WatermarkDelay is the watermark strategy of Flink's nexmark DDL:
// WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
const WatermarkDelay = 4 * time.Second

// Query is one Nexmark query.
type Query struct {
	// Name is "q0", "q1", ...
	Name string
	// Describe says what it computes.
	Describe string
	// Window is the longest event-time span the query keeps a record in
	// state for (a window's size, a session's gap), 0 for queries without
	// event-time windows. The bench's warm-up covers it (see Bench).
	Window time.Duration
	// Build adds the query to p, reading events; results go to a
	// transactional JSON Lines file sink under out, or are discarded when
	// out is "" (Flink's blackhole sink).
	Build func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string)
}

// All lists the queries by name.
var All = map[string]Query{}

func register(q Query) { All[q.Name] = q }

// Names returns the query names in order.
func Names() []string {
	var names []string
	for n := range All {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		var a, b int
		fmt.Sscanf(names[i], "q%d", &a)
		fmt.Sscanf(names[j], "q%d", &b)
		return a < b
	})
	return names
}

// Lookup returns the query called name.
func Lookup(name string) (Query, error) {
	q, ok := All[strings.ToLower(name)]
	if !ok {
		return Query{}, fmt.Errorf("unknown query %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return q, nil
}

// sinkTo writes s to a JSON Lines file sink under out, or discards it.
func sinkTo[T any](s stream.Stream[T], out string) {
	if out == "" {
		stream.To(s, "sink", stream.Discard[T]())
		return
	}
	stream.To(s, "sink", file.JSONLines[T](out))
}

// ms converts a record time in Unix ns to epoch milliseconds.
func ms(ns int64) int64 { return ns / int64(time.Millisecond) }

// nanos converts epoch milliseconds to Unix ns.
func nanos(ms int64) int64 { return ms * int64(time.Millisecond) }

// bids keeps the bids of events.
func bids(events stream.Stream[nexmark.Event]) stream.Stream[nexmark.Bid] {
	isBid := stream.Filter(events, "bids", func(e nexmark.Event) bool { return e.Type == nexmark.BidEvent })
	return stream.Map(isBid, "bid", func(e nexmark.Event) nexmark.Bid { return e.Bid })
}

// Q0Row is a bid passed through.
type Q0Row struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Decimal3 is a DECIMAL(23, 3) value in thousandths, written as a JSON
// number with three decimals.
type Decimal3 int64

// MarshalJSON writes d with exactly three decimals.
func (d Decimal3) MarshalJSON() ([]byte, error) {
	v := int64(d)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Appendf(nil, "%s%d.%03d", sign, v/1000, v%1000), nil
}

// Q1Row is a bid with its price converted to euros (price × 0.908).
type Q1Row struct {
	Auction  int64    `json:"auction"`
	Bidder   int64    `json:"bidder"`
	Price    Decimal3 `json:"price"`
	DateTime int64    `json:"dateTime"`
	Extra    string   `json:"extra"`
}

// Q2Row is a bid on a selected auction.
type Q2Row struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

func init() {
	register(Query{Name: "q0", Describe: "pass-through: every bid", Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
		rows := stream.Map(bids(events), "q0", func(b nexmark.Bid) Q0Row {
			return Q0Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
		})
		sinkTo(rows, out)
	}})
	register(Query{Name: "q1", Describe: "currency conversion: bid prices × 0.908", Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
		rows := stream.Map(bids(events), "q1", func(b nexmark.Bid) Q1Row {
			return Q1Row{Auction: b.Auction, Bidder: b.Bidder, Price: Decimal3(b.Price * 908), DateTime: b.DateTime, Extra: b.Extra}
		})
		sinkTo(rows, out)
	}})
	register(Query{Name: "q2", Describe: "selection: bids on auctions with id % 123 == 0", Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
		sel := stream.Filter(events, "q2-filter", func(e nexmark.Event) bool {
			return e.Type == nexmark.BidEvent && e.Bid.Auction%123 == 0
		})
		rows := stream.Map(sel, "q2", func(e nexmark.Event) Q2Row { return Q2Row{Auction: e.Bid.Auction, Price: e.Bid.Price} })
		sinkTo(rows, out)
	}})
}
