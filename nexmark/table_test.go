package nexmark_test

import (
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// rowsOut collects the row batches a table subtask emits.
type rowsOut struct{ recs []runtime.Record[row.Row] }

func (o *rowsOut) Emit(r runtime.Records) error {
	o.recs = append(o.recs, r.(runtime.Batch[row.Row])...)
	return nil
}

// A table source emits exactly its type's events of the sequence, as rows
// of the chosen columns, in the lane's order; a subtask restored from a
// position continues where it was, and its watermark follows the whole
// sequence's event times, skipped events included.
func TestTableSourceRowsAndPositions(t *testing.T) {
	const events = 5000
	cfg := nexmark.SourceConfig{Generator: nexmark.DefaultConfig(), Events: events}
	g, err := nexmark.NewGenerator(cfg.Generator)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table nexmark.Table
		typ   nexmark.EventType
		cols  []string
		want  func(e nexmark.Event) row.Row
	}{
		{nexmark.BidTable, nexmark.BidEvent, []string{"price", "auction", "url", "date_time"}, func(e nexmark.Event) row.Row {
			return row.Row{row.IntValue(e.Bid.Price), row.IntValue(e.Bid.Auction), {}, row.TimeValue(e.Bid.DateTime * 1e6)}
		}},
		{nexmark.PersonTable, nexmark.PersonEvent, []string{"id", "name", "state"}, func(e nexmark.Event) row.Row {
			return row.Row{row.IntValue(e.Person.ID), row.StringValue(e.Person.Name), row.StringValue(e.Person.State)}
		}},
		{nexmark.AuctionTable, nexmark.AuctionEvent, []string{"seller", "expires", "reserve"}, func(e nexmark.Event) row.Row {
			return row.Row{row.IntValue(e.Auction.Seller), row.TimeValue(e.Auction.Expires * 1e6), row.IntValue(e.Auction.Reserve)}
		}},
	} {
		t.Run(string(c.table), func(t *testing.T) {
			src, err := nexmark.NewTableSource(cfg, c.table, c.cols)
			if err != nil {
				t.Fatal(err)
			}
			// Subtask 1 of 2, read in two halves across a restore.
			var want []row.Row
			for n := int64(1); n < events; n += 2 {
				if e := g.Event(n); e.Type == c.typ {
					want = append(want, c.want(e))
				}
			}
			out := &rowsOut{}
			ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "t", Subtask: 1}, Parallelism: 2, MaxParallelism: 2}
			sub := src.NewSubtask()
			if err := sub.Open(ctx, runtime.EmitTo[row.Row](out)); err != nil {
				t.Fatal(err)
			}
			res, err := sub.Read()
			if err != nil {
				t.Fatal(err)
			}
			// The watermark covers every event passed, of any type.
			last := int64(1) + 2*(1024-1)
			if wm := g.EventTime(last)*1e6 - 1; res.Watermark != wm {
				t.Errorf("watermark after the first read %d, want %d (event %d's time - 1ns)", res.Watermark, wm, last)
			}
			pos, err := sub.Position()
			if err != nil {
				t.Fatal(err)
			}
			sub2 := src.NewSubtask()
			ctx2 := *ctx
			ctx2.Restored = &checkpoint.SubtaskState{Inline: pos}
			if err := sub2.Open(&ctx2, runtime.EmitTo[row.Row](out)); err != nil {
				t.Fatal(err)
			}
			for {
				res, err := sub2.Read()
				if err != nil {
					t.Fatal(err)
				}
				if res.Exhausted {
					break
				}
			}
			if len(out.recs) != len(want) {
				t.Fatalf("%d rows, want %d", len(out.recs), len(want))
			}
			for i, r := range out.recs {
				if !rowsEqual(r.Value, want[i]) {
					t.Fatalf("row %d: %v, want %v", i, r.Value, want[i])
				}
			}
		})
	}
}

func rowsEqual(a, b row.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() || a[i].Kind() != b[i].Kind() {
			return false
		}
	}
	return true
}

// Columns a table does not have are refused, naming the table's columns.
func TestTableSourceRefusesUnknownColumns(t *testing.T) {
	_, err := nexmark.NewTableSource(nexmark.SourceConfig{Events: 10}, nexmark.BidTable, []string{"auction", "seller"})
	if err == nil || err.Error() != `nexmark: table bid has no column "seller" (columns: auction, bidder, price, channel, url, date_time, extra)` {
		t.Fatalf("error %v", err)
	}
}
