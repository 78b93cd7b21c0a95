package nexmark

import (
	"fmt"
	"math"
	"unsafe"
)

// Generator makes events. It is immutable and safe for concurrent use.
type Generator struct {
	cfg Config
	tl  timeline
	// auctionHorizonEvents is how many events it takes to generate
	// NumInFlightAuctions auctions (AuctionGenerator.nextAuctionLengthMs).
	auctionHorizonEvents int64
	// limit is the number of events the generator makes: every event below
	// it has an id, a date_time and an expires the engine represents.
	limit int64
}

// NewGenerator validates cfg and returns its generator.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nexmark: %w", err)
	}
	tl, err := newTimeline(cfg)
	if err != nil {
		return nil, fmt.Errorf("nexmark: %w", err)
	}
	g := &Generator{
		cfg:                  cfg,
		tl:                   tl,
		auctionHorizonEvents: int64(cfg.NumInFlightAuctions) * ProportionDenominator / AuctionProportion,
	}
	// An auction's expires is below date_time + 2*horizon + 1, where the
	// horizon ends at the time of event number adjusted + auctionHorizonEvents;
	// keeping that time at most (maxMillis + base - 1)/2 keeps expires within
	// maxMillis. Event numbers stay below MaxInt64/953 so Beam's out-of-order
	// shuffle does not overflow.
	last := tl.lastNumber(math.MaxInt64/953, minMillis, (maxMillis+cfg.BaseTime-1)/2)
	// Event k has event number FirstEventNumber+k; its adjusted number is at
	// most g-1 beyond (the end of its out-of-order group), its horizon
	// auctionHorizonEvents beyond that, and its id is FirstEventID + adjusted.
	slack, ok := addChecked(cfg.OutOfOrderGroupSize-1, g.auctionHorizonEvents)
	maxNumber := min(last-slack, math.MaxInt64-cfg.FirstEventID-(cfg.OutOfOrderGroupSize-1))
	g.limit = maxNumber - cfg.FirstEventNumber + 1
	if !ok || last < 0 || maxNumber < cfg.FirstEventNumber {
		return nil, fmt.Errorf("nexmark: no event of this configuration has an event time the engine represents (base_time %d ms, first_event_number %d, out_of_order_group_size %d)",
			cfg.BaseTime, cfg.FirstEventNumber, cfg.OutOfOrderGroupSize)
	}
	return g, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// Limit returns the number of events the generator makes: Event(n) is
// defined for 0 <= n < Limit(). It keeps every event's date_time and
// expires within the engine's event times (int64 Unix nanoseconds, up to
// the year 2262): with the defaults, 123 years of event time, far beyond any
// benchmark run.
func (g *Generator) Limit() int64 { return g.limit }

// adjusted returns Beam's adjusted event number of event n
// (GeneratorConfig.nextAdjustedEventNumber): the event number shuffled
// within its group of OutOfOrderGroupSize.
func (g *Generator) adjusted(n int64) int64 {
	number := g.cfg.FirstEventNumber + n
	size := g.cfg.OutOfOrderGroupSize
	if size == 1 {
		return number
	}
	return (number/size)*size + (number*953)%size
}

// EventID returns the event id of event n (Beam's Generator.getNextEventId):
// FirstEventID plus the adjusted event number. With the defaults it is n.
func (g *Generator) EventID(n int64) int64 { return g.cfg.FirstEventID + g.adjusted(n) }

// EventTime returns the date_time of event n in epoch milliseconds, without
// generating the event. n must be in [0, Limit()).
func (g *Generator) EventTime(n int64) int64 { return g.tl.at(g.adjusted(n)) }

// Watermark returns Beam's watermark after event n: the event time of the
// first event number of n's out-of-order group, which no later event
// precedes. With OutOfOrderGroupSize 1 it is EventTime(n).
func (g *Generator) Watermark(n int64) int64 {
	number := g.cfg.FirstEventNumber + n
	return g.tl.at((number / g.cfg.OutOfOrderGroupSize) * g.cfg.OutOfOrderGroupSize)
}

// Type returns the type of event n without generating it (NoEvent outside
// [0, Limit())).
func (g *Generator) Type(n int64) EventType {
	if n < 0 || n >= g.limit {
		return NoEvent
	}
	switch rem := (g.cfg.FirstEventID + g.adjusted(n)) % ProportionDenominator; {
	case rem < PersonProportion:
		return PersonEvent
	case rem < PersonProportion+AuctionProportion:
		return AuctionEvent
	}
	return BidEvent
}

// Count returns how many of events 0..n-1 are of type typ.
func (g *Generator) Count(typ EventType, n int64) int64 {
	var c int64
	for i := range min(n, g.limit) {
		if g.Type(i) == typ {
			c++
		}
	}
	return c
}

// Event returns event n (Beam's Generator.nextEvent after n events), or the
// zero Event (Type NoEvent) when n is outside [0, Limit()).
func (g *Generator) Event(n int64) Event { return g.event(n, true) }

// EventWithoutBidExtra is Event(n) but for a bid's Extra, which it leaves
// empty without drawing it: a bid's extra is drawn last from the event's own
// random stream, so every other field is Event(n)'s. A source that does not
// output the extra column saves its generation.
func (g *Generator) EventWithoutBidExtra(n int64) Event { return g.event(n, false) }

func (g *Generator) event(n int64, bidExtra bool) Event {
	if n < 0 || n >= g.limit {
		return Event{}
	}
	adj := g.adjusted(n)
	id := g.cfg.FirstEventID + adj
	ts := g.tl.at(adj)
	r := NewRandom(id)
	switch rem := id % ProportionDenominator; {
	case rem < PersonProportion:
		return Event{Type: PersonEvent, EventID: id, Person: g.person(id, ts, &r)}
	case rem < PersonProportion+AuctionProportion:
		return Event{Type: AuctionEvent, EventID: id, Auction: g.auction(id, adj, ts, &r)}
	}
	e := Event{Type: BidEvent, EventID: id}
	g.bid(&e.Bid, id, ts, &r, bidExtra)
	return e
}

// lastBase0PersonID is PersonGenerator.lastBase0PersonId: the newest person
// (from 0) at event id.
func lastBase0PersonID(eventID int64) int64 {
	epoch := eventID / ProportionDenominator
	offset := eventID % ProportionDenominator
	if offset >= PersonProportion {
		offset = PersonProportion - 1 // the last person of this epoch
	}
	return epoch*PersonProportion + offset
}

// lastBase0AuctionID is AuctionGenerator.lastBase0AuctionId: the newest
// auction (from 0) at event id; -1 before the first auction.
func lastBase0AuctionID(eventID int64) int64 {
	epoch := eventID / ProportionDenominator
	offset := eventID % ProportionDenominator
	switch {
	case offset < PersonProportion: // the last auction of the previous epoch
		epoch--
		offset = AuctionProportion - 1
	case offset >= PersonProportion+AuctionProportion: // the last auction of this epoch
		offset = AuctionProportion - 1
	default:
		offset -= PersonProportion
	}
	return epoch*AuctionProportion + offset
}

// nextBase0PersonID is PersonGenerator.nextBase0PersonId: one of the
// NumActivePeople newest people, or a few not yet created.
func (g *Generator) nextBase0PersonID(eventID int64, r *Random) int64 {
	numPeople := lastBase0PersonID(eventID) + 1
	activePeople := min(numPeople, int64(g.cfg.NumActivePeople))
	n := nextLong(r, activePeople+personIDLead)
	return numPeople - activePeople + n
}

// nextBase0AuctionID is AuctionGenerator.nextBase0AuctionId: one of the
// NumInFlightAuctions newest auctions, or a few not yet created.
func (g *Generator) nextBase0AuctionID(eventID int64, r *Random) int64 {
	maxAuction := lastBase0AuctionID(eventID)
	minAuction := max(maxAuction-int64(g.cfg.NumInFlightAuctions), 0)
	return minAuction + nextLong(r, maxAuction-minAuction+1+auctionIDLead)
}

// Person name parts (PersonGenerator.FIRST_NAMES, LAST_NAMES), cities and
// states, in Beam's order.
var (
	firstNames = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	usCities   = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	usStates   = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	// personNames[i][j] is firstNames[i] + " " + lastNames[j], built once so
	// that a person's name costs no allocation.
	personNames = func() (names [len(firstNames)][len(lastNames)]string) {
		for i, f := range firstNames {
			for j, l := range lastNames {
				names[i][j] = f + " " + l
			}
		}
		return names
	}()
)

// person is PersonGenerator.nextPerson. Its generated strings share one
// allocation.
func (g *Generator) person(id, ts int64, r *Random) *Person {
	p := &Person{ID: lastBase0PersonID(id) + FirstPersonID, DateTime: ts}
	first := r.NextIntN(int32(len(firstNames)))
	last := r.NextIntN(int32(len(lastNames)))
	p.Name = personNames[first][last]
	// Email (at most 6+1+4+4 bytes) and credit card, then the extra.
	var buf [32]byte
	b := appendNextString(buf[:0], r, 7)
	b = append(b, '@')
	b = appendNextString(b, r, 5)
	b = append(b, ".com"...)
	emailLen := len(b)
	for i := range 4 {
		if i > 0 {
			b = append(b, ' ')
		}
		v := r.NextIntN(10000) // String.format("%04d", v)
		b = append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	p.City = usCities[r.NextIntN(int32(len(usCities)))]
	p.State = usStates[r.NextIntN(int32(len(usStates)))]
	size := 8 + len(p.Name) + len(b) + len(p.City) + len(p.State)
	extraLen := nextExtraLen(r, int32(size), int32(g.cfg.AvgPersonByteSize))
	s := make([]byte, len(b)+int(extraLen))
	copy(s, b)
	fillExactString(s[len(b):], r)
	str := bytesToString(s)
	p.EmailAddress = str[:emailLen]
	p.CreditCard = str[emailLen:len(b)]
	p.Extra = str[len(b):]
	return p
}

// auction is AuctionGenerator.nextAuction. Its generated strings share one
// allocation.
func (g *Generator) auction(id, adj, ts int64, r *Random) *Auction {
	a := &Auction{ID: lastBase0AuctionID(id) + FirstAuctionID, DateTime: ts}
	// P(the auction is by the hot seller) = 1 - 1/HotSellersRatio.
	if r.NextIntN(int32(g.cfg.HotSellersRatio)) > 0 {
		a.Seller = (lastBase0PersonID(id) / hotSellerRatio) * hotSellerRatio
	} else {
		a.Seller = g.nextBase0PersonID(id, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(r.NextIntN(NumCategories))
	a.InitialBid = nextPrice(r)
	// nextAuctionLengthMs: mean length = the event time until
	// NumInFlightAuctions more auctions exist.
	horizonMs := g.tl.at(adj+g.auctionHorizonEvents) - ts
	a.Expires = ts + 1 + nextLong(r, max(horizonMs*2, 1))
	// Name (at most 19 bytes) and description (at most 99), then the extra.
	var buf [128]byte
	b := appendNextString(buf[:0], r, 20)
	nameLen := len(b)
	b = appendNextString(b, r, 100)
	a.Reserve = a.InitialBid + nextPrice(r)
	size := 8 + len(b) + 8 + 8 + 8 + 8 + 8
	extraLen := nextExtraLen(r, int32(size), int32(g.cfg.AvgAuctionByteSize))
	s := make([]byte, len(b)+int(extraLen))
	copy(s, b)
	fillExactString(s[len(b):], r)
	str := bytesToString(s)
	a.ItemName = str[:nameLen]
	a.Description = str[nameLen:len(b)]
	a.Extra = str[len(b):]
	return a
}

// bidSize is BidGenerator's currentSize: four 8-byte fields.
const bidSize = 8 + 8 + 8 + 8

// bid is BidGenerator.nextBid, written into b.
func (g *Generator) bid(b *Bid, id, ts int64, r *Random, extra bool) {
	// P(the bid is on the hot auction) = 1 - 1/HotAuctionRatio.
	if r.NextIntN(int32(g.cfg.HotAuctionRatio)) > 0 {
		b.Auction = (lastBase0AuctionID(id) / hotAuctionRatio) * hotAuctionRatio
	} else {
		b.Auction = g.nextBase0AuctionID(id, r)
	}
	b.Auction += FirstAuctionID
	// P(the bid is by the hot bidder) = 1 - 1/HotBiddersRatio. The hot bidder
	// is the second person of the batch, so it is not the hot seller.
	if r.NextIntN(int32(g.cfg.HotBiddersRatio)) > 0 {
		b.Bidder = (lastBase0PersonID(id)/hotBidderRatio)*hotBidderRatio + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id, r)
	}
	b.Bidder += FirstPersonID
	b.Price = nextPrice(r)
	b.DateTime = ts
	if !extra {
		return
	}
	if n := nextExtraLen(r, bidSize, int32(g.cfg.AvgBidByteSize)); n > 0 {
		s := make([]byte, n)
		fillExactString(s, r)
		b.Extra = bytesToString(s)
	}
}

// bytesToString returns s as a string without copying. s must not be
// modified afterwards (the generator drops it at once).
func bytesToString(s []byte) string {
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}
