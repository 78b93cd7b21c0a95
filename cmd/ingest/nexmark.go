package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/nexmark/query"
)

// nexmarkCmd groups the Nexmark tools.
func nexmarkCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "nexmark", Short: "Nexmark benchmark tools"}
	cmd.AddCommand(nexmarkGenerateCmd())
	return cmd
}

// beamTimelineFlags are the flags that shape Beam's timeline, which a
// positive --events-per-second replaces.
var beamTimelineFlags = []string{"num-event-generators", "first-event-rate", "next-event-rate", "rate-unit", "rate-shape", "rate-period-sec"}

// nexmarkGenerateCmd writes generated events as JSON Lines. Its defaults
// are the events `ingest bench nexmark` consumes: Beam's configuration with
// the bench's event-time density.
func nexmarkGenerateCmd() *cobra.Command {
	cfg := query.BenchGenerator(query.BenchEventsPerSecond)
	var events, from int64
	rateUnit, rateShape := cfg.RateUnit.String(), cfg.RateShape.String()
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write Nexmark events to stdout as JSON Lines, exactly as Apache Beam's generator makes them",
		Long: `Write Nexmark events 0..N-1 (people, auctions and bids) to stdout, one JSON
object per line:

  {"type":"person","event_id":N,"id":..,"name":"..","email_address":"..","credit_card":"..","city":"..","state":"..","date_time":..,"extra":".."}
  {"type":"auction","event_id":N,"id":..,"item_name":"..","description":"..","initial_bid":..,"reserve":..,"date_time":..,"expires":..,"seller":..,"category":..,"extra":".."}
  {"type":"bid","event_id":N,"auction":..,"bidder":..,"price":..,"date_time":..,"extra":".."}

Times are epoch milliseconds, prices cents. The events are those of Apache
Beam's Java Nexmark generator (NexmarkUtils.standardEventIterator) bit for
bit; the flags are Beam's NexmarkConfiguration fields, with Beam's defaults,
except the event-time density: --events-per-second (not Beam's) defaults to
` + "`ingest bench nexmark`" + `'s 200,000 events per second of event time, so the
default output is exactly the events the bench consumes (with the same
--events and --events-per-second; Flink's Nexmark uses 10,000,000).
--events-per-second 0 selects Beam's timeline, which the rate flags
(--num-event-generators, --first-event-rate, ...) shape; they are refused
without it.

  ingest nexmark generate --events 1000000               # the events of ingest bench nexmark --events 1000000
  ingest nexmark generate --events 20000 --events-per-second 0 --num-event-generators 1 --first-event-rate 10000   # Beam's config B`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			var err error
			if cfg.RateUnit, err = nexmark.ParseRateUnit(rateUnit); err != nil {
				errs = append(errs, err)
			}
			if cfg.RateShape, err = nexmark.ParseRateShape(rateShape); err != nil {
				errs = append(errs, err)
			}
			if cfg.EventsPerSecond > 0 {
				for _, name := range beamTimelineFlags {
					if cmd.Flags().Changed(name) {
						errs = append(errs, fmt.Errorf("--%s shapes Beam's timeline, which --events-per-second %d replaces: add --events-per-second 0 to use it", name, cfg.EventsPerSecond))
					}
				}
			}
			if err := errors.Join(errs...); err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("nexmark: %w", err)}
			}
			g, err := nexmark.NewGenerator(cfg)
			if err != nil {
				return &exitError{code: exitConfig, err: err}
			}
			if err := generateNexmark(cmd.OutOrStdout(), g, from, events); err != nil {
				var ce configError
				if errors.As(err, &ce) {
					return &exitError{code: exitConfig, err: err}
				}
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&events, "events", 100_000, "number of events (Beam's numEvents); 0 = until the generator's limit")
	f.Int64Var(&from, "from", 0, "first event number to write (to split generation: events from..from+N-1)")
	f.IntVar(&cfg.NumEventGenerators, "num-event-generators", cfg.NumEventGenerators, "Beam's numEventGenerators: multiplies the delay between events")
	f.IntVar(&cfg.FirstEventRate, "first-event-rate", cfg.FirstEventRate, "initial event rate, in --rate-unit")
	f.IntVar(&cfg.NextEventRate, "next-event-rate", cfg.NextEventRate, "event rate the rate shape moves to and from")
	f.StringVar(&rateUnit, "rate-unit", rateUnit, "unit of the rates: PER_SECOND or PER_MINUTE")
	f.StringVar(&rateShape, "rate-shape", rateShape, "rate curve when the two rates differ: SINE or SQUARE")
	f.IntVar(&cfg.RatePeriodSec, "rate-period-sec", cfg.RatePeriodSec, "period of the rate shape, seconds of event time")
	f.Int64Var(&cfg.EventsPerSecond, "events-per-second", cfg.EventsPerSecond, "event-time density: date_time(n) = base time + n*1000/this ms, as ingest bench nexmark's (not in Beam; 0 = Beam's timeline from the rate flags)")
	f.IntVar(&cfg.AvgPersonByteSize, "avg-person-byte-size", cfg.AvgPersonByteSize, "average idealised size of a person")
	f.IntVar(&cfg.AvgAuctionByteSize, "avg-auction-byte-size", cfg.AvgAuctionByteSize, "average idealised size of an auction")
	f.IntVar(&cfg.AvgBidByteSize, "avg-bid-byte-size", cfg.AvgBidByteSize, "average idealised size of a bid")
	f.IntVar(&cfg.HotAuctionRatio, "hot-auction-ratio", cfg.HotAuctionRatio, "a bid is on the hot auction unless nextInt(this) == 0")
	f.IntVar(&cfg.HotSellersRatio, "hot-sellers-ratio", cfg.HotSellersRatio, "an auction is by the hot seller unless nextInt(this) == 0")
	f.IntVar(&cfg.HotBiddersRatio, "hot-bidders-ratio", cfg.HotBiddersRatio, "a bid is by the hot bidder unless nextInt(this) == 0")
	f.IntVar(&cfg.NumInFlightAuctions, "num-in-flight-auctions", cfg.NumInFlightAuctions, "recent auctions a bid may be on; sets the mean auction length")
	f.IntVar(&cfg.NumActivePeople, "num-active-people", cfg.NumActivePeople, "recent people an auction or bid may come from")
	f.Int64Var(&cfg.OutOfOrderGroupSize, "out-of-order-group-size", cfg.OutOfOrderGroupSize, "event times are shuffled within groups of this many events (1 = in order)")
	f.Int64Var(&cfg.BaseTime, "base-time", cfg.BaseTime, "event time of event 0, epoch milliseconds (Beam's BASE_TIME, 2015-07-15T00:00:00Z)")
	f.Int64Var(&cfg.FirstEventID, "first-event-id", cfg.FirstEventID, "Beam's firstEventId, added to every event id")
	f.Int64Var(&cfg.FirstEventNumber, "first-event-number", cfg.FirstEventNumber, "Beam's firstEventNumber: the timeline position of event 0")
	return cmd
}

// configError marks an error in the command's arguments.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// generateNexmark writes events from..from+events-1 of g to w as JSON Lines;
// events 0 means up to the generator's limit.
func generateNexmark(w io.Writer, g *nexmark.Generator, from, events int64) error {
	switch {
	case from < 0:
		return configError{fmt.Errorf("nexmark: --from %d is negative", from)}
	case events < 0:
		return configError{fmt.Errorf("nexmark: --events %d is negative (0: until the generator's limit)", events)}
	case from > g.Limit() || events > g.Limit()-from:
		return configError{fmt.Errorf("nexmark: events %d..%d go beyond this configuration's %d events with a representable event time", from, from+events-1, g.Limit())}
	}
	end := from + events
	if events == 0 {
		end = g.Limit()
	}
	out := bufio.NewWriterSize(w, 1<<16)
	buf := make([]byte, 0, 1<<16)
	for n := from; n < end; n++ {
		buf = nexmark.AppendJSON(buf, g.Event(n))
		buf = append(buf, '\n')
		if len(buf) >= 1<<15 {
			if _, err := out.Write(buf); err != nil {
				return fmt.Errorf("nexmark: writing events: %w", err)
			}
			buf = buf[:0]
		}
	}
	if _, err := out.Write(buf); err != nil {
		return fmt.Errorf("nexmark: writing events: %w", err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("nexmark: writing events: %w", err)
	}
	return nil
}
