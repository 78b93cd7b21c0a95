// Package nexmark generates the Nexmark benchmark's events (people, auctions
// and bids) exactly as Apache Beam's Java generator does, and reads them into
// pipelines as a replayable source.
//
// # Events
//
// Every event is a pure function of (Config, event number n): Beam seeds a
// fresh java.util.Random with the event's id and draws its fields in a fixed
// order. Random ports java.util.Random, and Generator ports Beam's Generator,
// GeneratorConfig, PersonGenerator, AuctionGenerator, BidGenerator,
// StringsGenerator, PriceGenerator and LongGenerator draw for draw. With
// DefaultConfig, events 0..19999 encoded with AppendJSON are byte for byte
// the golden file beam-config-a.jsonl (Beam's NexmarkUtils.standardEventIterator;
// see ../shared/nexmark/README.txt from the repository root); other
// configurations were checked against a transcription run on Java 17.
//
// Of every 50 consecutive event ids, 1 is a person, 3 are auctions and 46
// are bids. The event id is FirstEventID plus the event number, shuffled
// within groups of OutOfOrderGroupSize (1 by default: id = n).
//
// # Event time
//
// Beam spaces events by a whole number of microseconds,
// ((1e6 + rate/2) / rate) * NumEventGenerators per event at a constant rate
// (10 ms by default), with the rate-shape steps of Beam's RateShape when
// FirstEventRate and NextEventRate differ, from Config.BaseTime. Times are
// epoch milliseconds, truncated. Config.EventsPerSecond, not in Beam,
// replaces that timeline with date_time(n) = BaseTime + floor(n*1000 /
// EventsPerSecond), which can express Flink's Nexmark density of 10,000,000
// events per second of event time (Beam's formula rounds its delay to 0).
// Auction expiry is measured on whichever timeline is in use.
//
// # Beam's behaviour kept on purpose
//
//   - Bids and auctions may refer to people and auctions a few ids ahead of
//     the newest (Beam's PERSON_ID_LEAD and AUCTION_ID_LEAD).
//   - The hot-key shares are not 1 - 1/ratio: the first draw of a
//     java.util.Random seeded with consecutive ids is far from uniform, so
//     about 37% of bids are on the hot auction (nominally 50%) and 65% of
//     auctions are by the hot seller (nominally 75%).
//   - nextExactString maps negative draws to the characters 'H'..'`', so
//     extra strings contain backslashes; AppendJSON escapes them.
//   - Prices are Math.round(Math.pow(10, 6*nextDouble())*100). Java's and
//     Go's pow differ in the last bits of many results, never (in 1e9 draws
//     checked) in the rounded price; the port rounds a faster exp-based
//     value when it is clear of a half cent and math.Pow's otherwise.
//
// # Source
//
// Source reads events 0..Events-1 into a pipeline: subtask s of P emits the
// event numbers n with n % P == s in increasing order, its checkpointed
// position is the next such n, and a restored subtask continues exactly. The
// record time is the event's date_time in Unix nanoseconds; the watermark is
// the largest record time emitted minus SourceConfig.MaxDelay minus 1ns.
// A subtask never reports itself idle (there is no idle timeout): it always
// has events to come, rate-limited or not, and they lie between the other
// subtasks' in event time, so consumers that moved on without it would find
// them late.
package nexmark
