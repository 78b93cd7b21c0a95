package query

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// q7Window is q7's tumbling window size.
const q7Window = int64(10 * time.Second)

// q7Partitions is how many partial maxima q7's first stage computes per
// window: bids are spread over them by auction id, so the first stage runs
// in parallel and the second merges only this many partials per window.
const q7Partitions = 128

// Q7Row is a bid with the highest price of its 10-second window.
type Q7Row struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// q7Partial is one partition's part of a window [Start, Start+10s): the
// highest price of its bids in the window and those bids (ties), plus bids
// at exactly the window's end whose price reached the partial maximum when
// they arrived. The SQL's join condition (B.dateTime BETWEEN end - 10s AND
// end) includes the end instant, which belongs to the next window.
type q7Partial struct {
	Start    int64
	Max      int64
	HasMax   bool
	Ties     []nexmark.Bid
	Boundary []nexmark.Bid
}

// partialKey is (partition, window start); its hash is the partition's.
type partialKey struct {
	Part, Start int64
}

// HashKey puts a partition's windows in the partition's key group.
func (k partialKey) HashKey() uint64 { return state.HashKey(k.Part) }

// partialKeyCodec encodes a partialKey as two varints.
type partialKeyCodec struct{}

func (partialKeyCodec) Name() string { return "nexmark.q7.partial-key(size=10s)" }
func (partialKeyCodec) Append(dst []byte, k partialKey) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, k.Part), k.Start)
}
func (partialKeyCodec) Decode(src []byte) (partialKey, int, error) {
	a, n := binary.Varint(src)
	if n <= 0 {
		return partialKey{}, 0, errors.New("q7 partial key: truncated")
	}
	b, m := binary.Varint(src[n:])
	if m <= 0 {
		return partialKey{}, 0, errors.New("q7 partial key: truncated")
	}
	return partialKey{a, b}, n + m, nil
}

// q7Partials is q7's first stage, keyed by partition: per window the
// partial maximum with its bids, emitted when the watermark reaches the
// window's end (inclusive, for the boundary bids).
type q7Partials struct {
	partials *state.ValueState[partialKey, q7Partial]
}

func (f *q7Partials) Open(s process.Setup[int64]) error {
	var err error
	f.partials, err = state.NewValueState(s.State, "partials", partialKeyCodec{}, state.JSONCodec[q7Partial]())
	return err
}

func windowStart(t, size int64) int64 {
	r := t % size
	if r < 0 {
		r += size
	}
	return t - r
}

// ProcessRecord adds a bid to its window and, when it is at a window's start
// instant, to the previous window's boundary bids.
// INVARIANT: slices in stored partials are only appended to or replaced,
// never written in place, so a snapshot holding an older value stays valid.
func (f *q7Partials) ProcessRecord(c *process.Context[int64, q7Partial], b nexmark.Bid) error {
	t := nanos(b.DateTime)
	if t <= c.Watermark() {
		c.DropLate() // late: its window may have fired
		return nil
	}
	start := windowStart(t, q7Window)
	k := partialKey{Part: c.Key(), Start: start}
	p, ok := f.partials.Get(k)
	if !ok {
		p.Start = start
		c.SetTimer(process.EventTime, start+q7Window)
	}
	switch {
	case !p.HasMax || b.Price > p.Max:
		p.Max, p.HasMax, p.Ties = b.Price, true, []nexmark.Bid{b}
		p.Boundary = keepAtLeast(p.Boundary, b.Price)
	case b.Price == p.Max:
		p.Ties = append(p.Ties, b)
	}
	f.partials.Update(k, p)
	if t == start {
		// A bid at a window's start instant also joins the previous window
		// (BETWEEN is inclusive); that window fires when the watermark
		// reaches this instant, so it has not fired yet.
		prev := partialKey{Part: c.Key(), Start: start - q7Window}
		pp, ok := f.partials.Get(prev)
		if !ok {
			pp.Start = prev.Start
			c.SetTimer(process.EventTime, start)
		}
		if !pp.HasMax || b.Price >= pp.Max {
			pp.Boundary = append(pp.Boundary, b)
		}
		f.partials.Update(prev, pp)
	}
	return nil
}

// keepAtLeast returns the bids of bs priced at least min, in a new slice.
func keepAtLeast(bs []nexmark.Bid, min int64) []nexmark.Bid {
	var out []nexmark.Bid
	for _, b := range bs {
		if b.Price >= min {
			out = append(out, b)
		}
	}
	return out
}

func (f *q7Partials) OnTimer(c *process.Context[int64, q7Partial], d process.Domain) error {
	k := partialKey{Part: c.Key(), Start: c.Time() - q7Window}
	p, ok := f.partials.Get(k)
	if !ok {
		return fmt.Errorf("q7: timer of window %d without its partial", k.Start)
	}
	f.partials.Clear(k)
	c.Emit(p)
	return nil
}

// q7Merged is a window's merged partials in the second stage.
type q7Merged struct {
	Max    int64
	HasMax bool
	// Cands are bids priced at the running maximum or above: the window's
	// ties and boundary bids.
	Cands []nexmark.Bid
}

// q7Max is q7's second stage, keyed by window start: it merges the
// partitions' partials and, when the watermark reaches the window's end,
// emits the bids of [start, end] priced at the window's maximum.
//
// Late bids (at or before the watermark) are dropped by the first stage, as
// a window operator drops them: their window may have fired.
type q7Max struct {
	merged *state.ValueState[int64, q7Merged]
}

func (f *q7Max) Open(s process.Setup[int64]) error {
	var err error
	f.merged, err = state.NewValueState(s.State, "merged", s.KeyCodec, state.JSONCodec[q7Merged]())
	return err
}

func (f *q7Max) ProcessRecord(c *process.Context[int64, Q7Row], p q7Partial) error {
	m, ok := f.merged.Get(c.Key())
	if !ok {
		c.SetTimer(process.EventTime, c.Key()+q7Window)
	}
	if p.HasMax && (!m.HasMax || p.Max > m.Max) {
		m.Max, m.HasMax = p.Max, true
		m.Cands = keepAtLeast(m.Cands, p.Max)
	}
	for _, b := range p.Ties {
		if b.Price >= m.Max {
			m.Cands = append(m.Cands, b)
		}
	}
	for _, b := range p.Boundary {
		if b.Price >= m.Max {
			m.Cands = append(m.Cands, b)
		}
	}
	f.merged.Update(c.Key(), m)
	return nil
}

func (f *q7Max) OnTimer(c *process.Context[int64, Q7Row], d process.Domain) error {
	start := c.Time() - q7Window
	m, ok := f.merged.Get(start)
	if !ok {
		return fmt.Errorf("q7: timer of window %d without its partials", start)
	}
	f.merged.Clear(start)
	if !m.HasMax {
		return nil
	}
	for _, b := range m.Cands {
		if b.Price == m.Max {
			c.Emit(Q7Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
		}
	}
	return nil
}

func init() {
	register(Query{Name: "q7", Window: 10 * time.Second, Describe: "highest bid per 10 s tumbling window, joined back to the bids",
		Build: func(p *stream.Pipeline, events stream.Stream[nexmark.Event], out string) {
			byPart := stream.KeyBy(bids(events), func(b nexmark.Bid) int64 { return b.Auction % q7Partitions })
			partials := process.Keyed(byPart, "q7-partial-max", func() process.Function[nexmark.Bid, int64, q7Partial] { return &q7Partials{} })
			byWindow := stream.KeyBy(partials, func(p q7Partial) int64 { return p.Start })
			rows := process.Keyed(byWindow, "q7", func() process.Function[q7Partial, int64, Q7Row] { return &q7Max{} })
			sinkTo(rows, out)
		}})
}
