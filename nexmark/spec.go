package nexmark

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: nexmark`: one Nexmark
// table (TableSource).
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "nexmark",
	Summary: "Generates one table of the Nexmark benchmark — `person`, `auction` or `bid`, with RisingWave's columns — from Beam's " +
		"reference generator: every table of a pipeline reads the same event sequence (the events `ingest nexmark generate` " +
		"writes), keeping its own type's events, whose `date_time` is the event time. Subtask *s* of *P* passes the event " +
		"numbers *n* with `n % P == s`; its replay position is its next *n*, so it is exactly-once.",
	Fields: []connector.Field{
		{Name: "table", Kind: connector.String, Required: true, Values: []string{"person", "auction", "bid"}, Doc: "The table."},
		{Name: "columns", Kind: connector.List, Doc: "The columns, in this order. Absent: all of the table's. person: `id, name, email_address, credit_card, city, state, date_time, extra`; auction: `id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra`; bid: `auction, bidder, price, channel, url, date_time, extra` (`channel` and `url` are NULL)."},
		{Name: "events", Kind: connector.Int, Doc: "Events of the sequence (of all three types) over all subtasks. Absent: unbounded."},
		{Name: "rate", Kind: connector.Float, Doc: "Events of the sequence per second of wall-clock time over all subtasks. Absent: as fast as possible."},
		{Name: "events_per_second", Kind: connector.Int, Doc: "Events per second of event time (10000000 is RisingWave's `nexmark.min.event.gap.in.ns = 100`). Absent: Beam's timeline (10,000 per second)."},
		{Name: "max_delay", Kind: connector.Duration, Default: "0s", Doc: "The watermark trails the newest event time by this much."},
	},
	Example: "type: nexmark\ntable: bid\ncolumns: [auction, bidder, price, date_time]\nevents: 100000\nevents_per_second: 10000000\n",
}

func init() { connector.Register(SourceSpec) }
