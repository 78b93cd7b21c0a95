package nexmark_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/nexmark"
)

// TestJavaCrossCheck compares configurations the golden files do not
// cover with a line-by-line Java transcription of Beam's generator (the
// same one as the README describes, run once on OpenJDK 17 to produce these
// digests; the Java is not kept). Between them they take every path: both
// rate shapes and units, out-of-order groups, first event id and number,
// hot ratios of 1 (never hot), tiny active sets, an average size of 0, an
// auction horizon beyond 2^31 ms (LongGenerator's nextLong() path), a base
// time before 1970 and event numbers far beyond the golden files.
func TestJavaCrossCheck(t *testing.T) {
	for _, c := range []struct {
		name        string
		from, count int64
		config      func(*nexmark.Config)
		sha256      string
	}{
		{"defaults from 1e9", 1_000_000_000, 5000, func(*nexmark.Config) {}, "765f59a31773dfe87177297fcb571c1bedbcf418b946a65a58dcbbde938e7e53"},
		{"defaults from 123456789012", 123_456_789_012, 3000, func(*nexmark.Config) {}, "43f71513dbba6c00b002a8d63e92d52a704523008e5ec6bc2b2e7be8110842cf"},
		{"sine, out of order, first id and number", 0, 20000, func(c *nexmark.Config) {
			c.NumEventGenerators, c.FirstEventRate, c.NextEventRate = 3, 10000, 1000
			c.OutOfOrderGroupSize, c.FirstEventID, c.FirstEventNumber = 7, 12345, 999
		}, "d691462595ea265bf2e5b2c960a70a3e3e77716919e1fabda6b95e85d8b32b32"},
		{"sine, short period, later epochs", 5_000_000, 20000, func(c *nexmark.Config) {
			c.NumEventGenerators, c.FirstEventRate, c.NextEventRate, c.RatePeriodSec = 3, 10000, 1000, 60
		}, "b5e4918812bfe173b0add406170512b82ec110edef8b7698cc3954f38f0ed0e3"},
		{"square per minute, never hot, small sets", 0, 20000, func(c *nexmark.Config) {
			c.NumEventGenerators, c.FirstEventRate, c.NextEventRate = 1, 500, 2000000
			c.RateShape, c.RateUnit = nexmark.Square, nexmark.PerMinute
			c.HotAuctionRatio, c.HotSellersRatio, c.HotBiddersRatio = 1, 1, 1
			c.NumActivePeople, c.NumInFlightAuctions = 3, 0
			c.AvgPersonByteSize, c.AvgAuctionByteSize, c.AvgBidByteSize = 0, 1000, 50
		}, "8d92788e763eaf6e3937ecfcbba7fb9119407ca72472d6312fb8644dbfe4209a"},
		{"one per minute: horizon beyond 2^31 ms", 0, 5000, func(c *nexmark.Config) {
			c.FirstEventRate, c.NextEventRate, c.RateUnit, c.HotSellersRatio = 1, 1, nexmark.PerMinute, 3
		}, "7d6c8566986a8d180ecd2cb217bfcba3831e7fa740a1dea58f2d854071f5082f"},
		{"big out-of-order groups before 1970", 77777, 20000, func(c *nexmark.Config) {
			c.NumEventGenerators, c.FirstEventRate, c.NextEventRate = 1, 3000000, 3000000
			c.OutOfOrderGroupSize, c.BaseTime = 1000, -5000
		}, "336d5cf9f7c8cd4b65956ed92055e5511cf66b3a14b4555ea26ff51a24ba0deb"},
		{"other ratios and sizes", 1_000_000, 20000, func(c *nexmark.Config) {
			c.HotAuctionRatio, c.HotBiddersRatio, c.HotSellersRatio = 7, 13, 1000
			c.NumInFlightAuctions, c.NumActivePeople, c.AvgBidByteSize, c.AvgPersonByteSize = 5, 50, 33, 150
		}, "3fc1e1662b4513c4303f8248a348af6a4cbc8f5fa652a8f6c3e17c60ce2a16dc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := nexmark.DefaultConfig()
			c.config(&cfg)
			g, err := nexmark.NewGenerator(cfg)
			if err != nil {
				t.Fatalf("NewGenerator: %v", err)
			}
			var out []byte
			for n := c.from; n < c.from+c.count; n++ {
				out = nexmark.AppendJSON(out, g.Event(n))
				out = append(out, '\n')
			}
			sum := sha256.Sum256(out)
			if got := hex.EncodeToString(sum[:]); got != c.sha256 {
				t.Errorf("sha256 of events %d..%d = %s, Java's is %s", c.from, c.from+c.count-1, got, c.sha256)
			}
		})
	}
}

// TestEventsPerSecond checks the added timeline: date_time(n) = BaseTime +
// floor(n*1000/EventsPerSecond) ms, without overflow, and the auction expiry
// horizon measured on it.
func TestEventsPerSecond(t *testing.T) {
	for _, eps := range []int64{1, 3, 1000, 7777, 10_000_000, math.MaxInt64 / 999, math.MaxInt64} {
		cfg := nexmark.DefaultConfig()
		cfg.EventsPerSecond = eps
		g, err := nexmark.NewGenerator(cfg)
		if err != nil {
			t.Fatalf("events_per_second %d: %v", eps, err)
		}
		for _, n := range []int64{0, 1, 2, 9, 10, 49, 999, 1000, 12345, 10_000_000, 123_456_789_012, g.Limit() / 3, g.Limit() - 1} {
			if n >= g.Limit() {
				continue
			}
			want := timeAt(cfg.BaseTime, n, eps)
			if got := g.EventTime(n); got != want {
				t.Fatalf("events_per_second %d: EventTime(%d) = %d, want %d", eps, n, got, want)
			}
			e := g.Event(n)
			if e.DateTime() != want || e.EventTimeNanos() != want*1_000_000 {
				t.Fatalf("events_per_second %d: event %d has date_time %d (%d ns), want %d", eps, n, e.DateTime(), e.EventTimeNanos(), want)
			}
		}
	}
	// Flink's density: 10,000 events share each millisecond; an auction's
	// horizon is 1666 events, under 1 ms, so it expires 1 or 2 ms later.
	cfg := nexmark.DefaultConfig()
	cfg.EventsPerSecond = 10_000_000
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n < 200_000; n += 50 {
		a := g.Event(n).Auction
		if d := a.Expires - a.DateTime; d < 1 || d > 2 {
			t.Fatalf("auction %d at events_per_second 10M: expires - date_time = %d ms, want 1 or 2", n, d)
		}
	}
	if got, want := g.EventTime(9_999_999), nexmark.BaseTime+999; got != want {
		t.Errorf("EventTime(9,999,999) = %d, want %d", got, want)
	}
}

// timeAt is the EventsPerSecond timeline in arbitrary precision.
func timeAt(base, n, eps int64) int64 {
	v := new(big.Int).Mul(big.NewInt(n), big.NewInt(1000))
	v.Quo(v, big.NewInt(eps))
	return v.Add(v, big.NewInt(base)).Int64()
}

func TestGeneratorRange(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{-1, math.MinInt64, g.Limit(), math.MaxInt64} {
		if e := g.Event(n); e.Type != nexmark.NoEvent || e.DateTime() != 0 {
			t.Errorf("Event(%d) = %+v, want the zero Event", n, e)
		}
	}
	if e := nexmark.AppendJSON(nil, nexmark.Event{}); string(e) != "null" {
		t.Errorf("AppendJSON(zero Event) = %s, want null", e)
	}
	last := g.Event(g.Limit() - 1)
	if last.Type == nexmark.NoEvent {
		t.Fatalf("Event(Limit()-1) is the zero Event")
	}
	// The last event's times, expiry included, are Unix nanoseconds.
	for _, n := range []int64{g.Limit() - 1, g.Limit() - 2, g.Limit() - 3, g.Limit() - 50} {
		e := g.Event(n)
		ms := e.DateTime()
		if e.Type == nexmark.AuctionEvent {
			ms = e.Auction.Expires
		}
		if ms > math.MaxInt64/1_000_000 || ms < nexmark.BaseTime {
			t.Errorf("event %d of %d: time %d ms is outside the engine's range", n, g.Limit(), ms)
		}
	}
	// About 123 years of event time at 100 events per second.
	if years := float64(g.EventTime(g.Limit()-1)-nexmark.BaseTime) / (365.25 * 24 * 3600 * 1000); years < 100 || years > 130 {
		t.Errorf("Limit %d spans %.1f years of event time, want about 123", g.Limit(), years)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := nexmark.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, c := range []struct {
		change func(*nexmark.Config)
		want   string
	}{
		{func(c *nexmark.Config) { c.NumEventGenerators = 0 }, "num_event_generators 0"},
		{func(c *nexmark.Config) { c.FirstEventRate = -1 }, "first_event_rate -1"},
		{func(c *nexmark.Config) { c.NextEventRate = math.MaxInt32 + 1 }, "next_event_rate 2147483648"},
		{func(c *nexmark.Config) { c.RateUnit = 7 }, "rate_unit RateUnit(7)"},
		{func(c *nexmark.Config) { c.RateShape = 7 }, "rate_shape RateShape(7)"},
		{func(c *nexmark.Config) { c.RatePeriodSec = 0 }, "rate_period_sec 0"},
		{func(c *nexmark.Config) { c.EventsPerSecond = -1 }, "events_per_second -1"},
		{func(c *nexmark.Config) { c.AvgBidByteSize = -1 }, "avg_bid_byte_size -1"},
		{func(c *nexmark.Config) { c.AvgAuctionByteSize = nexmark.MaxAvgByteSize + 1 }, "avg_auction_byte_size"},
		{func(c *nexmark.Config) { c.HotAuctionRatio = 0 }, "hot_auction_ratio 0"},
		{func(c *nexmark.Config) { c.HotSellersRatio = 0 }, "hot_sellers_ratio 0"},
		{func(c *nexmark.Config) { c.HotBiddersRatio = 0 }, "hot_bidders_ratio 0"},
		{func(c *nexmark.Config) { c.NumInFlightAuctions = -1 }, "num_in_flight_auctions -1"},
		{func(c *nexmark.Config) { c.NumActivePeople = -1 }, "num_active_people -1"},
		{func(c *nexmark.Config) { c.OutOfOrderGroupSize = 0 }, "out_of_order_group_size 0"},
		{func(c *nexmark.Config) { c.BaseTime = math.MaxInt64 }, "base_time"},
		{func(c *nexmark.Config) { c.FirstEventID = -1 }, "first_event_id -1"},
		{func(c *nexmark.Config) { c.FirstEventNumber = -1 }, "first_event_number -1"},
	} {
		cfg := nexmark.DefaultConfig()
		c.change(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want an error naming %q", err, c.want)
		}
		if _, gerr := nexmark.NewGenerator(cfg); gerr == nil || !strings.Contains(gerr.Error(), c.want) {
			t.Errorf("NewGenerator: %v, want an error naming %q", gerr, c.want)
		}
	}
	// The zero Config is not valid (and says why, field by field).
	if err := (nexmark.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "hot_bidders_ratio") {
		t.Errorf("zero Config: %v, want errors", err)
	}
}

// TestBeamRejections: configurations Beam would crash on (division by zero)
// are errors.
func TestBeamRejections(t *testing.T) {
	for _, c := range []struct {
		change func(*nexmark.Config)
		want   string
	}{
		// 3,000,000/s rounds to 0 us between events: fine for a constant rate
		// (every event at BaseTime), a division by zero for a rate shape.
		{func(c *nexmark.Config) {
			c.NumEventGenerators, c.FirstEventRate, c.RateShape = 1, 3_000_000, nexmark.Square
		}, "round to 0 us"},
		{func(c *nexmark.Config) { c.NumEventGenerators, c.NextEventRate = 1, 3_000_000 }, "round to 0 us"},
		// Both rates near MaxInt32: Java's int sum wraps negative.
		{func(c *nexmark.Config) { c.FirstEventRate, c.NextEventRate = math.MaxInt32, math.MaxInt32-1 }, "rate shape SINE"},
		// Base time so late that no event fits.
		{func(c *nexmark.Config) { c.BaseTime = math.MaxInt64 / 1_000_000 }, "no event"},
	} {
		cfg := nexmark.DefaultConfig()
		c.change(&cfg)
		if _, err := nexmark.NewGenerator(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewGenerator: %v, want an error containing %q", err, c.want)
		}
	}
	// A constant rate whose delay rounds to 0 is what Beam does: every event
	// at BaseTime.
	cfg := nexmark.DefaultConfig()
	cfg.NumEventGenerators, cfg.FirstEventRate, cfg.NextEventRate = 1, 3_000_000, 3_000_000
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.EventTime(1_000_000); got != nexmark.BaseTime {
		t.Errorf("EventTime at 0 us between events = %d, want BaseTime", got)
	}
}

// TestEventShape checks the README's sanity figures on the golden range:
// type by event id, dense ids, hot-key shares (Beam's bias included).
func TestEventShape(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[nexmark.EventType]int{}
	nextPerson, nextAuction := int64(1000), int64(1000)
	hotAuctionBids, hotBidderBids, hotSellerAuctions := 0, 0, 0
	for n := range int64(20000) {
		e := g.Event(n)
		counts[e.Type]++
		if e.EventID != n || g.EventID(n) != n {
			t.Fatalf("event %d has id %d", n, e.EventID)
		}
		if want := []nexmark.EventType{nexmark.PersonEvent, nexmark.AuctionEvent, nexmark.AuctionEvent, nexmark.AuctionEvent}; n%50 < 4 && e.Type != want[n%50] || n%50 >= 4 && e.Type != nexmark.BidEvent {
			t.Fatalf("event %d is a %v", n, e.Type)
		}
		if g.Watermark(n) != g.EventTime(n) {
			t.Fatalf("Watermark(%d) = %d, want EventTime %d (groups of 1)", n, g.Watermark(n), g.EventTime(n))
		}
		switch e.Type {
		case nexmark.PersonEvent:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", n, e.Person.ID, nextPerson)
			}
			nextPerson++
		case nexmark.AuctionEvent:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", n, a.ID, nextAuction)
			}
			nextAuction++
			if a.Seller == 1000+((n/50)/100)*100 {
				hotSellerAuctions++
			}
		case nexmark.BidEvent:
			b := e.Bid
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d", n, b.Price)
			}
			if b.Bidder == 1000+((n/50)/100)*100+1 {
				hotBidderBids++
			}
			if lastAuction := (n/50)*3 + 2; b.Auction == 1000+(lastAuction/100)*100 {
				hotAuctionBids++
			}
		}
	}
	if counts[nexmark.PersonEvent] != 400 || counts[nexmark.AuctionEvent] != 1200 || counts[nexmark.BidEvent] != 18400 {
		t.Errorf("types %v, want 400 people, 1200 auctions, 18400 bids", counts)
	}
	// The README's shares: 36.9%, 75.3%, 64.5% (counting only the hot
	// branch would give slightly less; random picks can hit the hot key too).
	for _, c := range []struct {
		name      string
		got, of   int
		want, tol float64
	}{
		{"bids on the hot auction", hotAuctionBids, 18400, 0.369, 0.01},
		{"bids by the hot bidder", hotBidderBids, 18400, 0.753, 0.01},
		{"auctions by the hot seller", hotSellerAuctions, 1200, 0.645, 0.01},
	} {
		if share := float64(c.got) / float64(c.of); math.Abs(share-c.want) > c.tol {
			t.Errorf("%s: %.3f, the README says %.3f", c.name, share, c.want)
		}
	}
}

// EventWithoutBidExtra is Event but for a bid's Extra, which is empty:
// every other field of every event, people and auctions whole, is Event's.
func TestEventWithoutBidExtra(t *testing.T) {
	g, err := nexmark.NewGenerator(nexmark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	bids := 0
	for n := range int64(20000) {
		want, got := g.Event(n), g.EventWithoutBidExtra(n)
		if want.Type == nexmark.BidEvent {
			bids++
			if got.Bid.Extra != "" {
				t.Fatalf("event %d: bid extra %q, want none", n, got.Bid.Extra)
			}
			want.Bid.Extra = ""
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("event %d:\n got %+v\nwant %+v", n, got, want)
		}
	}
	if bids < 10000 {
		t.Fatalf("%d bids of 20000 events", bids)
	}
}
