package nexmark

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// This file is the Nexmark source as tables of rows — person, auction and
// bid, with RisingWave's columns — for YAML and SQL pipelines. Every table
// of a pipeline reads the same event sequence (the events `ingest nexmark
// generate` writes), each keeping its own type's events.

// Table is one of the Nexmark tables.
type Table string

// The tables, by RisingWave's nexmark.table.type (lower case).
const (
	PersonTable  Table = "person"
	AuctionTable Table = "auction"
	BidTable     Table = "bid"
)

// tableColumns are each table's columns, in RisingWave's order. channel and
// url of a bid are always NULL: Beam's generator has neither.
var tableColumns = map[Table][]row.Field{
	PersonTable: {{Name: "id", Kind: row.Int}, {Name: "name", Kind: row.String}, {Name: "email_address", Kind: row.String},
		{Name: "credit_card", Kind: row.String}, {Name: "city", Kind: row.String}, {Name: "state", Kind: row.String},
		{Name: "date_time", Kind: row.Time}, {Name: "extra", Kind: row.String}},
	AuctionTable: {{Name: "id", Kind: row.Int}, {Name: "item_name", Kind: row.String}, {Name: "description", Kind: row.String},
		{Name: "initial_bid", Kind: row.Int}, {Name: "reserve", Kind: row.Int}, {Name: "date_time", Kind: row.Time},
		{Name: "expires", Kind: row.Time}, {Name: "seller", Kind: row.Int}, {Name: "category", Kind: row.Int}, {Name: "extra", Kind: row.String}},
	BidTable: {{Name: "auction", Kind: row.Int}, {Name: "bidder", Kind: row.Int}, {Name: "price", Kind: row.Int},
		{Name: "channel", Kind: row.String}, {Name: "url", Kind: row.String}, {Name: "date_time", Kind: row.Time}, {Name: "extra", Kind: row.String}},
}

// TableColumns returns table's columns in order, nil for an unknown table.
func TableColumns(t Table) []row.Field { return slices.Clone(tableColumns[t]) }

// TableSource is a Nexmark source of one table's rows: the events of its
// type among the sequence Source would emit, each as a row of the chosen
// columns. Its positions and watermark are Source's: the other types' events
// are skipped without being generated, and their times advance the
// watermark as they would in the full sequence.
type TableSource struct {
	src    *Source
	table  Table
	schema *row.Schema
	// cols are the indexes of the chosen columns in the table's columns.
	cols []int
}

// NewTableSource returns the source of table over cfg's events, with the
// named columns in that order (all of the table's when columns is empty).
func NewTableSource(cfg SourceConfig, table Table, columns []string) (*TableSource, error) {
	all, ok := tableColumns[table]
	if !ok {
		return nil, fmt.Errorf("nexmark: unknown table %q (known: person, auction, bid)", table)
	}
	src, err := NewSource(cfg)
	if err != nil {
		return nil, err
	}
	t := &TableSource{src: src, table: table, schema: &row.Schema{}}
	if len(columns) == 0 {
		for _, f := range all {
			columns = append(columns, f.Name)
		}
	}
	for _, c := range columns {
		i := slices.IndexFunc(all, func(f row.Field) bool { return f.Name == c })
		if i < 0 {
			var names []string
			for _, f := range all {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("nexmark: table %s has no column %q (columns: %s)", table, c, strings.Join(names, ", "))
		}
		if slices.Contains(t.cols, i) {
			return nil, fmt.Errorf("nexmark: column %q is listed twice", c)
		}
		t.cols = append(t.cols, i)
		t.schema.Fields = append(t.schema.Fields, all[i])
	}
	return t, nil
}

// Schema returns the rows' schema: the chosen columns.
func (t *TableSource) Schema() *row.Schema { return t.schema }

// Describe summarises the source.
func (t *TableSource) Describe() string {
	return fmt.Sprintf("nexmark table %s (%s) of %s", t.table, strings.Join(t.schema.Names(), ", "), strings.TrimPrefix(t.src.Describe(), "nexmark "))
}

// Descriptor is Source's: replayable from one event counter per subtask.
func (t *TableSource) Descriptor() connector.Descriptor { return t.src.Descriptor() }

// NewSubtask creates one source subtask.
func (t *TableSource) NewSubtask() runtime.SourceSubtask[row.Row] {
	only := map[Table]EventType{PersonTable: PersonEvent, AuctionTable: AuctionEvent, BidTable: BidEvent}[t.table]
	width := len(t.cols)
	event := func(g *Generator, n int64) Event { return g.Event(n) }
	if !slices.Contains(t.schema.Names(), "extra") {
		event = func(g *Generator, n int64) Event { return g.EventWithoutBidExtra(n) }
	}
	// fill emits the lane's events of the table's type as rows and skips the
	// others without generating them. Rows are cut from slabs of up to 256;
	// a slab is never reused, since receivers may keep the rows.
	fill := func(st *subtask[row.Row], batch runtime.Batch[row.Row], n, maxTime int64) (runtime.Batch[row.Row], int64) {
		var slab []row.Value
		id := st.next
		for k := range n {
			if st.gen.Type(id) != only {
				maxTime = max(maxTime, st.gen.EventTime(id)*1_000_000)
				id += st.p
				continue
			}
			e := event(st.gen, id)
			if len(slab) < width {
				// Room for the rest of the batch, at most 256 rows: a sparse
				// table (people are 2% of events) allocates little.
				slab = make([]row.Value, int(min(n-k, 256))*width)
			}
			r := row.Row(slab[:width:width])
			slab = slab[width:]
			for j, i := range t.cols {
				r[j] = t.value(&e, i)
			}
			rec := runtime.Record[row.Row]{Value: r, Time: e.EventTimeNanos()}
			maxTime = max(maxTime, rec.Time)
			batch = append(batch, rec)
			id += st.p
		}
		return batch, maxTime
	}
	return &subtask[row.Row]{src: t.src, fill: fill}
}

// value is column i of the table for event e.
func (t *TableSource) value(e *Event, i int) row.Value {
	ms := func(v int64) row.Value { return row.TimeValue(v * 1_000_000) }
	switch t.table {
	case PersonTable:
		p := e.Person
		switch i {
		case 0:
			return row.IntValue(p.ID)
		case 1:
			return row.StringValue(p.Name)
		case 2:
			return row.StringValue(p.EmailAddress)
		case 3:
			return row.StringValue(p.CreditCard)
		case 4:
			return row.StringValue(p.City)
		case 5:
			return row.StringValue(p.State)
		case 6:
			return ms(p.DateTime)
		}
		return row.StringValue(p.Extra)
	case AuctionTable:
		a := e.Auction
		switch i {
		case 0:
			return row.IntValue(a.ID)
		case 1:
			return row.StringValue(a.ItemName)
		case 2:
			return row.StringValue(a.Description)
		case 3:
			return row.IntValue(a.InitialBid)
		case 4:
			return row.IntValue(a.Reserve)
		case 5:
			return ms(a.DateTime)
		case 6:
			return ms(a.Expires)
		case 7:
			return row.IntValue(a.Seller)
		case 8:
			return row.IntValue(a.Category)
		}
		return row.StringValue(a.Extra)
	}
	b := &e.Bid
	switch i {
	case 0:
		return row.IntValue(b.Auction)
	case 1:
		return row.IntValue(b.Bidder)
	case 2:
		return row.IntValue(b.Price)
	case 3, 4:
		return row.Value{} // channel, url: NULL
	case 5:
		return ms(b.DateTime)
	}
	return row.StringValue(b.Extra)
}
