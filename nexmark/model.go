package nexmark

// EventType says which of an Event's payloads is set.
type EventType uint8

const (
	// NoEvent marks the zero Event (Generator.Event out of range).
	NoEvent EventType = iota
	// PersonEvent: a new person registers (2% of events).
	PersonEvent
	// AuctionEvent: a person opens an auction (6% of events).
	AuctionEvent
	// BidEvent: a person bids on an auction (92% of events).
	BidEvent
)

// String returns the "type" value of the JSON encoding.
func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return "none"
}

// Person is Beam's model.Person, fields in Beam's order. Times are epoch
// milliseconds, as in Beam.
type Person struct {
	// ID is the person's id, from FirstPersonID, one per person event.
	ID int64
	// Name is "First Last" from Beam's lists of 11 and 9 names.
	Name string
	// EmailAddress is "<letters>@<letters>.com".
	EmailAddress string
	// CreditCard is "dddd dddd dddd dddd".
	CreditCard string
	// City is one of 10 US cities.
	City string
	// State is one of 6 US states (independent of City, as in Beam).
	State string
	// DateTime is the event time, epoch milliseconds.
	DateTime int64
	// Extra pads the person to about Config.AvgPersonByteSize.
	Extra string
}

// Auction is Beam's model.Auction, fields in Beam's order. Prices are in
// cents; times are epoch milliseconds.
type Auction struct {
	// ID is the auction's id, from FirstAuctionID, one per auction event.
	ID int64
	// ItemName is up to 19 letters and spaces.
	ItemName string
	// Description is up to 99 letters and spaces.
	Description string
	// InitialBid is the opening price, cents.
	InitialBid int64
	// Reserve is InitialBid plus another random price, cents.
	Reserve int64
	// DateTime is the event time, epoch milliseconds.
	DateTime int64
	// Expires is when the auction closes, epoch milliseconds: DateTime plus 1
	// to twice the event time NumInFlightAuctions auctions take.
	Expires int64
	// Seller is a person's id.
	Seller int64
	// Category is FirstCategoryID to FirstCategoryID+NumCategories-1.
	Category int64
	// Extra pads the auction to about Config.AvgAuctionByteSize.
	Extra string
}

// Bid is Beam's model.Bid, fields in Beam's order. Price is in cents;
// DateTime is epoch milliseconds.
type Bid struct {
	// Auction is an auction's id (possibly one not generated yet, as in Beam).
	Auction int64
	// Bidder is a person's id (possibly one not generated yet).
	Bidder int64
	// Price is log-uniform from 100 to 100,000,000 cents.
	Price int64
	// DateTime is the event time, epoch milliseconds.
	DateTime int64
	// Extra pads the bid to about Config.AvgBidByteSize.
	Extra string
}

// Event is one Nexmark event: exactly one of a person, an auction or a bid,
// as Type says. Bids (92% of events) are held by value so that generating
// one allocates only its extra string; people and auctions are pointers so
// that an Event stays small (80 bytes) in batches.
type Event struct {
	// Type says which payload is set; NoEvent for the zero Event.
	Type EventType
	// EventID is Beam's event id (FirstEventID + adjusted event number). It
	// seeds the event's random numbers and decides Type.
	EventID int64
	// Bid is the payload when Type == BidEvent.
	Bid Bid
	// Person is the payload when Type == PersonEvent, else nil.
	Person *Person
	// Auction is the payload when Type == AuctionEvent, else nil.
	Auction *Auction
}

// DateTime returns the event time in epoch milliseconds (0 for the zero
// Event).
func (e *Event) DateTime() int64 {
	switch e.Type {
	case PersonEvent:
		return e.Person.DateTime
	case AuctionEvent:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// EventTimeNanos returns the event time in Unix nanoseconds, the engine's
// record time. Generator keeps every event's time in range, so it does not
// overflow.
func (e *Event) EventTimeNanos() int64 { return e.DateTime() * 1_000_000 }
