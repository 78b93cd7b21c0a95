package join_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// reviewUntilOp is IntervalUntil with lower, each left record's bound given
// by its id in bounds (no entry: NULL).
func reviewUntilOp(t *testing.T, lower time.Duration, bounds map[int64]int64) func() runtime.Operator {
	t.Helper()
	until := func(l lrec) (int64, bool) {
		u, ok := bounds[l.ID]
		return u, ok
	}
	build := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.IntervalUntil(lk, rk, id, lower, until, "review-bound", pairOf, opts...)
	}
	return newOp(t, build, keyL, keyR)
}

// The pair (l, r) matches when l.Time+lower <= r.Time <= until(l),
// whichever arrives first. At the ends of int64, l.Time+lower and
// r.Time-lower saturate, and the two probes disagree: a pair the bounds
// exclude joins when one side arrives first and not when the other does.
func TestUntilArrivalOrderAtTheEndsOfTime(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	for _, c := range []struct {
		name   string
		lower  time.Duration
		lt, rt int64
		until  int64
	}{
		// l.Time+10 overflows: no r.Time is >= it, yet the left probe's
		// saturated bound is MaxInt64, which r.Time = MaxInt64 meets.
		{"top", 10, hi - 5, hi, hi},
		// r.Time-10 underflows: no l.Time is <= it, yet the right probe's
		// saturated bound is MinInt64, which l.Time = MinInt64 meets.
		{"bottom", 10, lo, lo + 5, hi},
	} {
		t.Run(c.name, func(t *testing.T) {
			// l.Time + lower <= r.Time <= until, in exact arithmetic.
			sum := new(big.Int).Add(big.NewInt(c.lt), big.NewInt(int64(c.lower)))
			w := 0
			if sum.Cmp(big.NewInt(c.rt)) <= 0 && c.rt <= c.until {
				w = 1
			}
			newOp := reviewUntilOp(t, c.lower, map[int64]int64{1: c.until})
			h := open[lrec, rrec, pair](t, newOp, nil)
			leftFirst := len(h.left(t, lr(1, 1, c.lt))) + len(h.right(t, rr(1, 1, c.rt)))
			h = open[lrec, rrec, pair](t, newOp, nil)
			rightFirst := len(h.right(t, rr(1, 1, c.rt))) + len(h.left(t, lr(1, 1, c.lt)))
			if leftFirst != w || rightFirst != w {
				t.Fatalf("l.Time %d, r.Time %d, lower %v, until %d: %d pairs when the left comes first, %d when the right does; want %d",
					c.lt, c.rt, c.lower, c.until, leftFirst, rightFirst, w)
			}
		})
	}
}

// The same for Interval (lower 10ns, upper 20ns): both sides decide a pair
// exactly at the ends of int64, whichever arrives first.
func TestIntervalArrivalOrderAtTheEndsOfTime(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	const lower, upper = 10, 20
	build := func(lk stream.KeyedStream[lrec, int64], rk stream.KeyedStream[rrec, int64], id string, opts ...join.Option) stream.Stream[pair] {
		return join.Interval(lk, rk, id, lower, upper, pairOf, opts...)
	}
	newOp := newOp(t, build, keyL, keyR)
	for _, c := range []struct {
		name   string
		lt, rt int64
	}{
		{"top, below the interval", hi - 5, hi},
		{"top, in it", hi - 15, hi},
		{"bottom, below the interval", lo, lo + 5},
		{"bottom, in it", lo, lo + 15},
		{"bottom, above it", lo, lo + 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := new(big.Int).Sub(big.NewInt(c.rt), big.NewInt(c.lt))
			w := 0
			if d.Cmp(big.NewInt(lower)) >= 0 && d.Cmp(big.NewInt(upper)) <= 0 {
				w = 1
			}
			h := open[lrec, rrec, pair](t, newOp, nil)
			leftFirst := len(h.left(t, lr(1, 1, c.lt))) + len(h.right(t, rr(1, 1, c.rt)))
			h = open[lrec, rrec, pair](t, newOp, nil)
			rightFirst := len(h.right(t, rr(1, 1, c.rt))) + len(h.left(t, lr(1, 1, c.lt)))
			if leftFirst != w || rightFirst != w {
				t.Fatalf("l.Time %d, r.Time %d: %d pairs when the left comes first, %d when the right does; want %d", c.lt, c.rt, leftFirst, rightFirst, w)
			}
		})
	}
}
