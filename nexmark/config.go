package nexmark

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// BaseTime is Beam's NexmarkUtils.BASE_TIME, 2015-07-15T00:00:00.000Z in
// epoch milliseconds: the event time of event 0 when event time is not the
// wall clock.
const BaseTime int64 = 1436918400000

// Beam's GeneratorConfig, PersonGenerator, AuctionGenerator and BidGenerator
// constants. They are fixed in Beam, so they are not configurable here.
const (
	// FirstPersonID is the id of the first person (GeneratorConfig.FIRST_PERSON_ID).
	FirstPersonID = 1000
	// FirstAuctionID is the id of the first auction (GeneratorConfig.FIRST_AUCTION_ID).
	FirstAuctionID = 1000
	// FirstCategoryID is the lowest auction category (GeneratorConfig.FIRST_CATEGORY_ID).
	FirstCategoryID = 10
	// NumCategories is the number of auction categories (AuctionGenerator.NUM_CATEGORIES).
	NumCategories = 5

	// PersonProportion is how many of every ProportionDenominator
	// consecutive event ids are people: the first.
	PersonProportion = 1
	// AuctionProportion is how many of every ProportionDenominator
	// consecutive event ids are auctions: the ones after the people.
	AuctionProportion = 3
	// BidProportion is how many of every ProportionDenominator consecutive
	// event ids are bids: the rest.
	BidProportion = 46
	// ProportionDenominator is the length of the person/auction/bid cycle of
	// event ids.
	ProportionDenominator = PersonProportion + AuctionProportion + BidProportion

	personIDLead    = 10  // PersonGenerator.PERSON_ID_LEAD
	auctionIDLead   = 10  // AuctionGenerator.AUCTION_ID_LEAD
	hotSellerRatio  = 100 // AuctionGenerator.HOT_SELLER_RATIO
	hotAuctionRatio = 100 // BidGenerator.HOT_AUCTION_RATIO
	hotBidderRatio  = 100 // BidGenerator.HOT_BIDDER_RATIO
)

// MaxAvgByteSize bounds the average event sizes: Beam pads events with an
// "extra" string of about the average size, and beyond this the generator is
// a memory benchmark, not Nexmark.
const MaxAvgByteSize = 1 << 20

// RateUnit is the unit of FirstEventRate and NextEventRate (Beam's
// NexmarkUtils.RateUnit).
type RateUnit int

const (
	// PerSecond is Beam's RateUnit.PER_SECOND, the default.
	PerSecond RateUnit = iota
	// PerMinute is Beam's RateUnit.PER_MINUTE.
	PerMinute
)

// usPerUnit is the number of microseconds in the unit.
func (u RateUnit) usPerUnit() int64 {
	if u == PerMinute {
		return 60_000_000
	}
	return 1_000_000
}

// rateToPeriodUs is Beam's RateUnit.rateToPeriodUs: the rounded number of
// microseconds between events at rate (rate > 0).
func (u RateUnit) rateToPeriodUs(rate int64) int64 {
	return (u.usPerUnit() + rate/2) / rate
}

// String returns Beam's name of the unit.
func (u RateUnit) String() string {
	switch u {
	case PerSecond:
		return "PER_SECOND"
	case PerMinute:
		return "PER_MINUTE"
	}
	return fmt.Sprintf("RateUnit(%d)", int(u))
}

// ParseRateUnit accepts Beam's names (PER_SECOND, PER_MINUTE) in any case,
// with '-' for '_'.
func ParseRateUnit(s string) (RateUnit, error) {
	switch strings.ToUpper(strings.ReplaceAll(s, "-", "_")) {
	case "PER_SECOND":
		return PerSecond, nil
	case "PER_MINUTE":
		return PerMinute, nil
	}
	return 0, fmt.Errorf("rate unit %q: want PER_SECOND or PER_MINUTE", s)
}

// RateShape is the shape of the event rate over time when FirstEventRate
// differs from NextEventRate (Beam's NexmarkUtils.RateShape).
type RateShape int

const (
	// Sine approximates a sine wave from FirstEventRate to NextEventRate and
	// back with 10 steps per RatePeriodSec. It is Beam's default.
	Sine RateShape = iota
	// Square alternates between FirstEventRate and NextEventRate, each for
	// half of RatePeriodSec.
	Square
)

// sineSteps is RateShape.N, the steps approximating a sine period.
const sineSteps = 10

// String returns Beam's name of the shape.
func (s RateShape) String() string {
	switch s {
	case Sine:
		return "SINE"
	case Square:
		return "SQUARE"
	}
	return fmt.Sprintf("RateShape(%d)", int(s))
}

// ParseRateShape accepts Beam's names (SINE, SQUARE) in any case.
func ParseRateShape(s string) (RateShape, error) {
	switch strings.ToUpper(s) {
	case "SINE":
		return Sine, nil
	case "SQUARE":
		return Square, nil
	}
	return 0, fmt.Errorf("rate shape %q: want SINE or SQUARE", s)
}

// Config holds every parameter that affects the events: the fields of Beam's
// NexmarkConfiguration and GeneratorConfig the generator reads, plus
// EventsPerSecond. Start from DefaultConfig; the zero Config is not valid.
//
// Beam's numEvents/maxEvents only bound how many events an iterator yields;
// every event is a function of its number alone. Here that count belongs to
// the caller (SourceConfig.Events, the CLI's --events).
type Config struct {
	// NumEventGenerators is Beam's numEventGenerators. Beam runs that many
	// generators on parallel timelines, so each one's inter-event delay is
	// multiplied by it; this unsplit generator keeps the multiplied delay
	// (Beam's standardEventIterator does too). It only affects event times,
	// and not at all when EventsPerSecond > 0. The default value is 100.
	NumEventGenerators int
	// FirstEventRate is the initial overall event rate, in RateUnit. The
	// default value is 10000.
	FirstEventRate int
	// NextEventRate is the overall event rate RateShape moves to and from. If
	// it equals FirstEventRate the rate is constant. The default value is
	// 10000.
	NextEventRate int
	// RateUnit is the unit of the rates. The default value is PerSecond.
	RateUnit RateUnit
	// RateShape is the rate curve when the two rates differ. The default
	// value is Sine.
	RateShape RateShape
	// RatePeriodSec is the period of RateShape, in seconds of event time. The
	// default value is 600.
	RatePeriodSec int

	// EventsPerSecond, when positive, replaces Beam's timeline: event number
	// n has date_time = BaseTime + floor(n * 1000 / EventsPerSecond) ms, and
	// the auction expiry horizon is measured on the same timeline. The rate
	// fields and NumEventGenerators then have no effect. It exists because
	// Beam's timeline has a whole number of microseconds between events, so it
	// cannot express the 10,000,000 events per second of event time that
	// Flink's Nexmark benchmark uses (Beam's formula rounds that delay to
	// 0 us: every event at BaseTime). Not in Beam; the default value is 0
	// (Beam's timeline).
	EventsPerSecond int64

	// AvgPersonByteSize is the average idealised size of a person; the extra
	// field pads to it. The default value is 200.
	AvgPersonByteSize int
	// AvgAuctionByteSize is the average idealised size of an auction. The
	// default value is 500.
	AvgAuctionByteSize int
	// AvgBidByteSize is the average idealised size of a bid. The default
	// value is 100.
	AvgBidByteSize int

	// HotAuctionRatio: a bid is for the latest "hot" auction unless
	// nextInt(HotAuctionRatio) == 0. The default value is 2.
	HotAuctionRatio int
	// HotSellersRatio: an auction is by the latest "hot" seller unless
	// nextInt(HotSellersRatio) == 0. The default value is 4.
	HotSellersRatio int
	// HotBiddersRatio: a bid is by the latest "hot" bidder unless
	// nextInt(HotBiddersRatio) == 0. The default value is 4.
	HotBiddersRatio int
	// NumInFlightAuctions is the number of recent auctions a bid may be for,
	// and sets the mean auction length (the event time NumInFlightAuctions
	// auctions take to generate). The default value is 100.
	NumInFlightAuctions int
	// NumActivePeople is the number of recent people an auction or bid may
	// come from. The default value is 1000.
	NumActivePeople int
	// OutOfOrderGroupSize: event times are shuffled within groups of this
	// many consecutive event numbers (1 keeps them in order). The default
	// value is 1.
	OutOfOrderGroupSize int64

	// BaseTime is the event time of event number 0, in epoch milliseconds.
	// The default value is BaseTime (2015-07-15T00:00:00Z).
	BaseTime int64
	// FirstEventID is Beam's GeneratorConfig.firstEventId: it is added to the
	// (adjusted) event number to make the event id, which seeds the event's
	// random numbers and decides its type. The default value is 0.
	FirstEventID int64
	// FirstEventNumber is Beam's GeneratorConfig.firstEventNumber: the event
	// number (on the timeline) of the generator's event 0. The default value
	// is 0.
	FirstEventNumber int64
}

// DefaultConfig returns Beam's defaults (NexmarkConfiguration.DEFAULT with a
// fixed, not wall-clock, base time): the configuration of the golden file
// beam-config-a.
func DefaultConfig() Config {
	return Config{
		NumEventGenerators:  100,
		FirstEventRate:      10000,
		NextEventRate:       10000,
		RateUnit:            PerSecond,
		RateShape:           Sine,
		RatePeriodSec:       600,
		AvgPersonByteSize:   200,
		AvgAuctionByteSize:  500,
		AvgBidByteSize:      100,
		HotAuctionRatio:     2,
		HotSellersRatio:     4,
		HotBiddersRatio:     4,
		NumInFlightAuctions: 100,
		NumActivePeople:     1000,
		OutOfOrderGroupSize: 1,
		BaseTime:            BaseTime,
	}
}

// Validate reports every field outside the range the generator supports, in
// one error. Beam's configuration fields are Java ints; values Beam would
// reject with an exception (a zero ratio, a zero rate) are rejected here.
func (c Config) Validate() error {
	var errs []error
	positiveInt := func(name string, v int) {
		if v < 1 || v > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("%s %d must be between 1 and %d", name, v, math.MaxInt32))
		}
	}
	nonNegativeInt := func(name string, v int) {
		if v < 0 || v > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("%s %d must be between 0 and %d", name, v, math.MaxInt32))
		}
	}
	positiveInt("num_event_generators", c.NumEventGenerators)
	positiveInt("first_event_rate", c.FirstEventRate)
	positiveInt("next_event_rate", c.NextEventRate)
	if c.RateUnit != PerSecond && c.RateUnit != PerMinute {
		errs = append(errs, fmt.Errorf("rate_unit %v: want PER_SECOND or PER_MINUTE", c.RateUnit))
	}
	if c.RateShape != Sine && c.RateShape != Square {
		errs = append(errs, fmt.Errorf("rate_shape %v: want SINE or SQUARE", c.RateShape))
	}
	positiveInt("rate_period_sec", c.RatePeriodSec)
	if c.EventsPerSecond < 0 {
		errs = append(errs, fmt.Errorf("events_per_second %d is negative (0: Beam's timeline from the event rates)", c.EventsPerSecond))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"avg_person_byte_size", c.AvgPersonByteSize}, {"avg_auction_byte_size", c.AvgAuctionByteSize}, {"avg_bid_byte_size", c.AvgBidByteSize}} {
		if f.v < 0 || f.v > MaxAvgByteSize {
			errs = append(errs, fmt.Errorf("%s %d must be between 0 and %d", f.name, f.v, MaxAvgByteSize))
		}
	}
	positiveInt("hot_auction_ratio", c.HotAuctionRatio)
	positiveInt("hot_sellers_ratio", c.HotSellersRatio)
	positiveInt("hot_bidders_ratio", c.HotBiddersRatio)
	nonNegativeInt("num_in_flight_auctions", c.NumInFlightAuctions)
	nonNegativeInt("num_active_people", c.NumActivePeople)
	if c.OutOfOrderGroupSize < 1 {
		errs = append(errs, fmt.Errorf("out_of_order_group_size %d must be at least 1 (1: events in order)", c.OutOfOrderGroupSize))
	}
	if c.BaseTime < minMillis || c.BaseTime > maxMillis {
		errs = append(errs, fmt.Errorf("base_time %d ms is outside the event times this engine represents (%d to %d ms)", c.BaseTime, minMillis, maxMillis))
	}
	if c.FirstEventID < 0 {
		errs = append(errs, fmt.Errorf("first_event_id %d is negative", c.FirstEventID))
	}
	if c.FirstEventNumber < 0 {
		errs = append(errs, fmt.Errorf("first_event_number %d is negative", c.FirstEventNumber))
	}
	return errors.Join(errs...)
}

// The engine's event times are int64 Unix nanoseconds; these are the epoch
// milliseconds that convert to them.
const (
	minMillis = math.MinInt64 / 1_000_000
	maxMillis = math.MaxInt64 / 1_000_000
)
