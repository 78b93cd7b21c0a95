// Package windowtop keeps, for each tumbling window of event time, the rows
// whose value of one field is the window's highest (or lowest), every tie,
// and emits them once the watermark closes the window. It is SQL's
//
//	SELECT b.* FROM bid AS b JOIN (
//	  SELECT max(price) AS m, window_end FROM TUMBLE(bid, date_time, …) GROUP BY window_end
//	) AS w ON b.price = w.m WHERE b.date_time BETWEEN w.window_end - … AND w.window_end
//
// (Nexmark q7; q5 reads it over a window's results) and Flink's window top-1
// with RANK(), computed without keeping the window's rows: each window keeps
// its best value and the rows at it.
//
// # Two stages
//
// Rows are spread over Partitions partial windows by their value's hash, so
// the first stage runs on every subtask; when the watermark closes a window
// each partial is sent, keyed by the window's start, to the second stage,
// which merges them and emits the rows at the window's best value.
//
// # Through the end instant
//
// With ThroughEnd a row at a window's end instant (which is the next
// window's start, and belongs to it) also competes in the window ending
// there, as SQL's BETWEEN end - size AND end includes it: it is kept when its
// value equals the window's best, but never raises it (the best is over the
// window's own rows). The window then closes when the watermark reaches its
// end instead of the instant before.
//
// # Late rows and NULL
//
// A row is counted in its window, as a window aggregate of the same size
// counts it, while the watermark is before the window's last instant: later
// it is dropped as late (counted as a window drops it). A row at a window's
// end instant competes in the window ending there (ThroughEnd) only when it
// is after the watermark. A row whose value is NULL equals no best value and
// is dropped. A row whose window would end after the latest representable
// time (2262-04-11) stops the job with an error naming its time; the times
// before the first whole window after the earliest (1677-09-21) fall in a
// window starting at the earliest, as the window operator has it.
//
// # Output
//
// Each emitted row is the input row followed by its window's start and end
// (row.Time), at the event time the window closes: end - 1ns, as a window's
// results are, or end with ThroughEnd (so that no event-time operator
// downstream takes them for late). The rows of one window are emitted in no
// particular order.
package windowtop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/operator/process"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Partitions is how many partial windows the first stage computes per
// window. It is in the partials' state codec names: a checkpoint of another
// count is refused at restore.
const Partitions = 128

// Config is what Rows keeps.
type Config struct {
	// Size is the tumbling windows' size in ns (at least 1).
	Size int64
	// Field is the index of the ranked field in the input rows.
	Field int
	// Compare orders two non-NULL values of the field (negative when a is
	// before b). Required.
	Compare func(a, b row.Value) int
	// Lowest keeps the rows at the lowest value instead of the highest.
	Lowest bool
	// ThroughEnd makes a row at a window's end instant compete in it too
	// (see the package documentation).
	ThroughEnd bool
	// Signature names the input's fields and the order in checkpoints: state
	// of another signature is refused at restore.
	Signature string
}

// Rows applies cfg to in: id-partial is the first stage, id the second.
func Rows(in stream.Stream[row.Row], id string, cfg Config, opts ...stream.NodeOption) stream.Stream[row.Row] {
	if cfg.Size < 1 || cfg.Compare == nil || cfg.Field < 0 {
		in.Pipeline().Errorf("window top %s: the size must be at least 1ns, the field an index and the order set", id)
	}
	field := cfg.Field
	byPart := stream.KeyBy(in, func(r row.Row) int64 {
		if field >= len(r) {
			return 0
		}
		return int64(r[field].HashKey() % Partitions)
	})
	partials := process.Keyed(byPart, id+"-partial", func() process.Function[row.Row, int64, partial] { return &partials{cfg: cfg} },
		append(opts, keyDesc(fmt.Sprintf("partition (the ranked value's hash mod %d)", Partitions)))...)
	partials.Node().Type = "window_top"
	partials.Node().Describe = "each window's best value and the rows at it, per partition"
	byWindow := stream.KeyBy(partials, func(p partial) int64 { return p.Start })
	return process.Keyed(byWindow, id, func() process.Function[partial, int64, row.Row] { return &merger{cfg: cfg} }, append(opts, keyDesc("window start"))...)
}

// keyDesc says in the plan what a stage is keyed by.
func keyDesc(desc string) stream.NodeOption {
	return func(n *runtime.Node) { n.KeyDesc = desc }
}

// closing returns the instant whose watermark closes the window starting at
// start: its last instant, or its end with ThroughEnd.
func (cfg *Config) closing(start int64) int64 {
	if cfg.ThroughEnd {
		return start + cfg.Size
	}
	return start + cfg.Size - 1
}

// better reports whether v ranks before best.
func (cfg *Config) better(v, best row.Value) bool {
	d := cfg.Compare(v, best)
	if cfg.Lowest {
		return d < 0
	}
	return d > 0
}

// partial is a window's best value among some of its rows, with those rows
// at it (Ties) and rows at its end instant that were at or above the best
// when they came (Boundary: they do not raise it).
//
// INVARIANT: the slices of a stored partial are only appended to or
// replaced, never written in place, so a snapshot holding an older value
// stays valid.
type partial struct {
	Start    int64
	Best     row.Value
	HasBest  bool
	Ties     []row.Row
	Boundary []row.Row
}

// offer adds r, of value v, as a row of the window (boundary false) or one
// at its end instant (boundary true).
func (p *partial) offer(cfg *Config, r row.Row, v row.Value, boundary bool) {
	switch {
	case boundary:
		if !p.HasBest || !cfg.better(p.Best, v) {
			p.Boundary = append(p.Boundary, r)
		}
	case !p.HasBest || cfg.better(v, p.Best):
		p.Best, p.HasBest, p.Ties = v, true, []row.Row{r}
		p.Boundary = keepAtBest(cfg, p.Boundary, v)
	case cfg.Compare(v, p.Best) == 0:
		p.Ties = append(p.Ties, r)
	}
}

// keepAtBest returns, in a new slice, the rows of rs whose value is best or
// better.
func keepAtBest(cfg *Config, rs []row.Row, best row.Value) []row.Row {
	var out []row.Row
	for _, r := range rs {
		if !cfg.better(best, r[cfg.Field]) {
			out = append(out, r)
		}
	}
	return out
}

// partKey is a partial's state key: (partition, window start).
type partKey struct{ Part, Start int64 }

// HashKey puts a partition's windows in the partition's key group.
func (k partKey) HashKey() uint64 { return state.HashKey(k.Part) }

// partials is the first stage, keyed by partition.
type partials struct {
	cfg   Config
	state *state.ValueState[partKey, partial]
}

// Open implements process.Function.
func (f *partials) Open(s process.Setup[int64]) error {
	var err error
	f.state, err = state.NewValueState(s.State, "partials", partKeyCodec{}, partialCodec{name: f.cfg.codecName("partial")})
	return err
}

// codecName names a stage's state codec (what) with every parameter that
// gives the state its meaning, so a checkpoint of other parameters is
// refused.
func (cfg *Config) codecName(what string) string {
	return fmt.Sprintf("windowtop.%s.v1[%d parts, size %d, field %d, lowest %t, through end %t, %s]", what, Partitions, cfg.Size, cfg.Field, cfg.Lowest, cfg.ThroughEnd, cfg.Signature)
}

// ProcessRecord implements process.Function: it offers r to its window and,
// with ThroughEnd when r is at its window's start instant, to the window
// ending there.
func (f *partials) ProcessRecord(c *process.Context[int64, partial], r row.Row) error {
	t, wm, size := c.Time(), c.Watermark(), f.cfg.Size
	start := windowStart(t, size)
	if start > math.MaxInt64-size {
		return fmt.Errorf("window top: a row at %s (%d ns) falls in a window that ends after the latest time there is (%s)",
			time.Unix(0, t).UTC().Format(time.RFC3339Nano), t, time.Unix(0, math.MaxInt64).UTC().Format(time.RFC3339Nano))
	}
	if start+size-1 <= wm {
		// Its window was emitted, or closed as a window closes (a window
		// aggregate of the same size has dropped the row).
		c.DropLate()
		return nil
	}
	v := r[f.cfg.Field]
	if v.Kind() == row.Null {
		return nil
	}
	f.offer(c, start, r, v, false)
	if f.cfg.ThroughEnd && t == start && t > wm && start >= math.MinInt64+size {
		// The previous window closes when the watermark reaches t, which
		// it has not.
		f.offer(c, start-size, r, v, true)
	}
	return nil
}

func (f *partials) offer(c *process.Context[int64, partial], start int64, r row.Row, v row.Value, boundary bool) {
	k := partKey{Part: c.Key(), Start: start}
	p, ok := f.state.Get(k)
	if !ok {
		p.Start = start
		c.SetTimer(process.EventTime, f.cfg.closing(start))
	}
	p.offer(&f.cfg, r, v, boundary)
	f.state.Update(k, p)
}

// OnTimer implements process.Function: the window closed; its partial goes
// to the second stage.
func (f *partials) OnTimer(c *process.Context[int64, partial], _ process.Domain) error {
	start := c.Time() - f.cfg.closing(0)
	k := partKey{Part: c.Key(), Start: start}
	p, ok := f.state.Get(k)
	if !ok {
		return fmt.Errorf("window top: the timer of window %d has no partial", start)
	}
	f.state.Clear(k)
	c.Emit(p)
	return nil
}

// merger is the second stage, keyed by window start.
type merger struct {
	cfg   Config
	state *state.ValueState[int64, partial]
}

// Open implements process.Function.
func (f *merger) Open(s process.Setup[int64]) error {
	var err error
	f.state, err = state.NewValueState(s.State, "merged", s.KeyCodec, partialCodec{name: f.cfg.codecName("merged")})
	return err
}

// ProcessRecord implements process.Function: it merges a partial into its
// window's, which keeps as Ties every row at or above its best so far.
func (f *merger) ProcessRecord(c *process.Context[int64, row.Row], p partial) error {
	m, ok := f.state.Get(p.Start)
	if !ok {
		m.Start = p.Start
		c.SetTimer(process.EventTime, f.cfg.closing(p.Start))
	}
	if p.HasBest && (!m.HasBest || f.cfg.better(p.Best, m.Best)) {
		m.Best, m.HasBest = p.Best, true
		m.Ties = keepAtBest(&f.cfg, m.Ties, p.Best)
	}
	for _, rs := range [][]row.Row{p.Ties, p.Boundary} {
		for _, r := range rs {
			if !m.HasBest || !f.cfg.better(m.Best, r[f.cfg.Field]) {
				m.Ties = append(m.Ties, r)
			}
		}
	}
	f.state.Update(p.Start, m)
	return nil
}

// OnTimer implements process.Function: it emits the window's rows at its
// best value, with the window's bounds.
func (f *merger) OnTimer(c *process.Context[int64, row.Row], _ process.Domain) error {
	start := c.Time() - f.cfg.closing(0)
	m, ok := f.state.Get(start)
	if !ok {
		return fmt.Errorf("window top: the timer of window %d has no partials", start)
	}
	f.state.Clear(start)
	if !m.HasBest {
		return nil
	}
	end := start + f.cfg.Size
	for _, r := range m.Ties {
		if f.cfg.Compare(r[f.cfg.Field], m.Best) != 0 {
			continue
		}
		out := make(row.Row, 0, len(r)+2)
		c.Emit(append(append(out, r...), row.TimeValue(start), row.TimeValue(end)))
	}
	return nil
}

// windowStart is the start of the tumbling window of size holding t,
// saturated at the earliest time (as the window operator's is) for the
// times before the first whole window.
func windowStart(t, size int64) int64 {
	r := t % size
	if r < 0 {
		r += size
	}
	if t < math.MinInt64+r {
		return math.MinInt64
	}
	return t - r
}

// partKeyCodec encodes a partKey as two varints.
type partKeyCodec struct{}

func (partKeyCodec) Name() string { return "windowtop.part-key.v1" }

func (partKeyCodec) Append(dst []byte, k partKey) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, k.Part), k.Start)
}

func (partKeyCodec) Decode(src []byte) (partKey, int, error) {
	a, n := binary.Varint(src)
	if n <= 0 {
		return partKey{}, 0, errors.New("window top: truncated partition key")
	}
	b, m := binary.Varint(src[n:])
	if m <= 0 {
		return partKey{}, 0, errors.New("window top: truncated partition key")
	}
	return partKey{a, b}, n + m, nil
}

// partialCodec encodes a partial: its start (varint), whether it has a best
// value and the value (row.ValueCodec), then Ties and Boundary, each a
// uvarint count of rows (row.RowCodec).
type partialCodec struct{ name string }

func (c partialCodec) Name() string { return c.name }

func (partialCodec) Append(dst []byte, p partial) []byte {
	dst = binary.AppendVarint(dst, p.Start)
	if p.HasBest {
		dst = row.ValueCodec{}.Append(append(dst, 1), p.Best)
	} else {
		dst = append(dst, 0)
	}
	for _, rs := range [][]row.Row{p.Ties, p.Boundary} {
		dst = binary.AppendUvarint(dst, uint64(len(rs)))
		for _, r := range rs {
			dst = row.RowCodec{}.Append(dst, r)
		}
	}
	return dst
}

func (partialCodec) Decode(src []byte) (partial, int, error) {
	var p partial
	start, at := binary.Varint(src)
	if at <= 0 || at >= len(src) {
		return p, 0, errors.New("window top: truncated partial")
	}
	p.Start = start
	has := src[at]
	at++
	switch has {
	case 0:
	case 1:
		v, n, err := row.ValueCodec{}.Decode(src[at:])
		if err != nil {
			return p, 0, fmt.Errorf("window top: best value: %w", err)
		}
		p.Best, p.HasBest, at = v, true, at+n
	default:
		return p, 0, fmt.Errorf("window top: bad best-value flag %d", has)
	}
	for _, dst := range []*[]row.Row{&p.Ties, &p.Boundary} {
		n, used := binary.Uvarint(src[at:])
		if used <= 0 || n > uint64(len(src)) {
			return p, 0, errors.New("window top: bad row count")
		}
		at += used
		rs := make([]row.Row, n)
		for i := range rs {
			r, m, err := row.RowCodec{}.Decode(src[at:])
			if err != nil {
				return p, 0, fmt.Errorf("window top: row %d: %w", i, err)
			}
			rs[i], at = r, at+m
		}
		*dst = rs
	}
	return p, at, nil
}
