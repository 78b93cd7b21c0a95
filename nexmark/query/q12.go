package query

import (
	"math"
	"time"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// q12Window is q12's processing-time window size.
const q12Window = int64(10 * time.Second)

// SessionRow is a bidder's bid count in a window: q11's session windows and
// q12's processing-time windows.
type SessionRow struct {
	Bidder    int64 `json:"bidder"`
	BidCount  int64 `json:"bid_count"`
	StartTime int64 `json:"starttime"`
	EndTime   int64 `json:"endtime"`
}

// procWindow is a bidder's open processing-time window.
type procWindow struct{ Start, Count int64 }

// q12Counts counts each bidder's bids in tumbling 10-second windows of
// processing time (the SQL's PROCTIME()). A window is emitted when the wall
// clock passes its end, or when the input ends (where Flink would drop it).
// Its output depends on when records were processed, so a recovered run's
// output differs from a failure-free one: processing-time results are not
// reproducible, whatever the delivery guarantee.
type q12Counts struct {
	open *state.ValueState[int64, procWindow]
}

func (f *q12Counts) Open(s process.Setup[int64]) error {
	var err error
	f.open, err = state.NewValueState(s.State, "window", s.KeyCodec, state.JSONCodec[procWindow]())
	return err
}

func (f *q12Counts) emit(c *process.Context[int64, SessionRow], w procWindow) {
	c.Emit(SessionRow{Bidder: c.Key(), BidCount: w.Count, StartTime: ms(w.Start), EndTime: ms(w.Start + q12Window)})
}

func (f *q12Counts) ProcessRecord(c *process.Context[int64, SessionRow], _ nexmark.Bid) error {
	now := c.Now()
	start := windowStart(now, q12Window)
	w, ok := f.open.Get(c.Key())
	if ok && w.Start != start {
		// The clock passed the open window's end before its timer ran.
		f.emit(c, w)
		c.DeleteTimer(process.ProcessingTime, w.Start+q12Window-1)
		ok = false
	}
	if !ok {
		w = procWindow{Start: start}
		c.SetTimer(process.ProcessingTime, start+q12Window-1)
		// Flush at the end of the input (the watermark reaches the maximum).
		c.SetTimer(process.EventTime, math.MaxInt64)
	}
	w.Count++
	f.open.Update(c.Key(), w)
	return nil
}

func (f *q12Counts) OnTimer(c *process.Context[int64, SessionRow], d process.Domain) error {
	w, ok := f.open.Get(c.Key())
	if !ok {
		return nil
	}
	if d == process.ProcessingTime && c.Time() != w.Start+q12Window-1 {
		return nil
	}
	f.open.Clear(c.Key())
	f.emit(c, w)
	return nil
}

func init() {
	register(Query{Name: "q12", Window: 10 * time.Second, Describe: "bids per bidder in 10 s processing-time tumbling windows",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			byBidder := stream.KeyBy(bids(events), func(b nexmark.Bid) int64 { return b.Bidder })
			rows := process.Keyed(byBidder, "q12", func() process.Function[nexmark.Bid, int64, SessionRow] { return &q12Counts{} })
			sinkTo(rows, out)
		}})
}
