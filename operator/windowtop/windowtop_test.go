package windowtop

import (
	"reflect"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// A partial survives its state codec: the best value (or none), the ties
// and the rows at the end instant, NULLs and every kind included.
func TestPartialCodecRoundTrip(t *testing.T) {
	for _, p := range []partial{
		{Start: -30},
		{Start: 1 << 60, Best: row.IntValue(7), HasBest: true,
			Ties:     []row.Row{{row.IntValue(7), row.StringValue("a")}, {row.IntValue(7), {}}},
			Boundary: []row.Row{{row.IntValue(9), row.TimeValue(-5)}}},
		{Start: 0, Best: row.StringValue("z"), HasBest: true, Ties: []row.Row{{row.StringValue("z"), row.FloatValue(0.5), row.BoolValue(true)}}},
	} {
		c := partialCodec{name: "t"}
		b := c.Append([]byte{0xff}, p)[1:]
		got, n, err := c.Decode(append(b, 0xee))
		if err != nil || n != len(b) {
			t.Fatalf("decode %+v: n %d of %d, %v", p, n, len(b), err)
		}
		if !reflect.DeepEqual(norm(got), norm(p)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
		}
		for cut := range b {
			if _, _, err := c.Decode(b[:cut]); err == nil {
				t.Fatalf("%+v cut at %d of %d bytes decoded", p, cut, len(b))
			}
		}
	}
}

// norm makes empty row lists nil, as Decode may make them empty.
func norm(p partial) partial {
	if len(p.Ties) == 0 {
		p.Ties = nil
	}
	if len(p.Boundary) == 0 {
		p.Boundary = nil
	}
	return p
}

// The best value moves up (or down, with Lowest), keeps the ties at it, and
// rows at the end instant never raise it but stay while they tie it.
func TestPartialOffer(t *testing.T) {
	cfg := &Config{Size: 10, Field: 0, Compare: func(a, b row.Value) int { return int(a.Int() - b.Int()) }}
	var p partial
	r := func(v int64) row.Row { return row.Row{row.IntValue(v)} }
	p.offer(cfg, r(5), row.IntValue(5), true) // at the end: no best yet
	p.offer(cfg, r(3), row.IntValue(3), false)
	p.offer(cfg, r(3), row.IntValue(3), false)
	if !p.HasBest || p.Best.Int() != 3 || len(p.Ties) != 2 || len(p.Boundary) != 1 {
		t.Fatalf("after 5 at the end, 3, 3: %+v", p)
	}
	p.offer(cfg, r(5), row.IntValue(5), false)
	if p.Best.Int() != 5 || len(p.Ties) != 1 || len(p.Boundary) != 1 {
		t.Fatalf("after 5: %+v", p)
	}
	p.offer(cfg, r(6), row.IntValue(6), false)
	p.offer(cfg, r(4), row.IntValue(4), true) // below the best: dropped
	if p.Best.Int() != 6 || len(p.Ties) != 1 || len(p.Boundary) != 0 {
		t.Fatalf("after 6 and 4 at the end: %+v", p)
	}
	low := &Config{Size: 10, Field: 0, Compare: cfg.Compare, Lowest: true}
	var q partial
	for _, v := range []int64{4, 2, 9, 2} {
		q.offer(low, r(v), row.IntValue(v), false)
	}
	if q.Best.Int() != 2 || len(q.Ties) != 2 {
		t.Fatalf("lowest of 4 2 9 2: %+v", q)
	}
}
