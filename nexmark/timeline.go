package nexmark

import (
	"fmt"
	"math"
	"math/bits"
)

// timeline maps an (adjusted) event number to its event time: Beam's
// GeneratorConfig.timestampAndInterEventDelayUsForEvent, or the
// EventsPerSecond timeline.
type timeline struct {
	base int64 // ms
	// eventsPerSecond > 0 selects the EventsPerSecond timeline.
	eventsPerSecond int64
	// delayUs is Beam's interEventDelayUs: one entry for a constant rate,
	// else one per step of the rate shape, each lasting stepEvents[i] events
	// and stepMs[i] ms.
	delayUs    []int64
	stepEvents []int64
	stepMs     []int64
	// eventsPerEpoch and epochPeriodMs are the events and ms of one full rate
	// period (Beam's eventsPerEpoch and epochPeriodMs); 0 for a constant rate.
	eventsPerEpoch int64
	epochPeriodMs  int64
}

// newTimeline derives the timeline as Beam's GeneratorConfig constructor and
// RateShape.interEventDelayUs do. cfg is valid.
func newTimeline(cfg Config) (timeline, error) {
	t := timeline{base: cfg.BaseTime, eventsPerSecond: cfg.EventsPerSecond}
	if t.eventsPerSecond > 0 {
		return t, nil
	}
	unit, gens := cfg.RateUnit, int64(cfg.NumEventGenerators)
	first, next := int32(cfg.FirstEventRate), int32(cfg.NextEventRate)
	if first == next {
		t.delayUs = []int64{unit.rateToPeriodUs(int64(first)) * gens}
		return t, nil
	}
	var steps int32
	switch cfg.RateShape {
	case Square:
		steps = 2
		t.delayUs = []int64{unit.rateToPeriodUs(int64(first)) * gens, unit.rateToPeriodUs(int64(next)) * gens}
	case Sine:
		steps = sineSteps
		// Java adds and subtracts the int rates before converting: int32
		// arithmetic, wrapping as Java's does.
		mid := float64(first+next) / 2.0
		amp := float64(first-next) / 2.0 // may be negative
		pi := math.Pi
		for i := range sineSteps {
			r := (2.0 * pi * float64(i)) / sineSteps
			// The float64 conversion forbids fusing into an FMA, which Java
			// does not do.
			rate := javaRound(mid + float64(amp*math.Cos(r)))
			if rate < 1 {
				return t, fmt.Errorf("rate shape SINE between %d and %d has a step of rate %d: Beam divides by zero", first, next, rate)
			}
			t.delayUs = append(t.delayUs, unit.rateToPeriodUs(rate)*gens)
		}
	}
	// RateShape.stepLengthSec, in Java int arithmetic.
	stepLengthSec := int64((int32(cfg.RatePeriodSec) + steps - 1) / steps)
	if stepLengthSec <= 0 {
		return t, fmt.Errorf("rate_period_sec %d gives rate steps of %d s", cfg.RatePeriodSec, stepLengthSec)
	}
	for _, d := range t.delayUs {
		if d <= 0 {
			return t, fmt.Errorf("rates %d and %d %v with %d generators round to %d us between events; Beam's rate shapes divide by it (use events_per_second for dense event time)",
				first, next, unit, gens, d)
		}
		n := (stepLengthSec * 1_000_000) / d
		ms := (n * d) / 1000
		t.stepEvents = append(t.stepEvents, n)
		t.stepMs = append(t.stepMs, ms)
		t.eventsPerEpoch += n
		t.epochPeriodMs += ms
	}
	if t.eventsPerEpoch == 0 {
		return t, fmt.Errorf("rate shape %v has no events in a period of %d s", cfg.RateShape, cfg.RatePeriodSec)
	}
	return t, nil
}

// at returns the event time, in epoch ms, of (adjusted) event number n >= 0.
// The caller keeps n within the generator's limit, where nothing overflows.
func (t *timeline) at(n int64) int64 {
	if eps := t.eventsPerSecond; eps > 0 {
		q, r := n/eps, n%eps
		return t.base + q*1000 + mulDiv(r, 1000, eps)
	}
	if len(t.delayUs) == 1 {
		return t.base + (n*t.delayUs[0])/1000
	}
	epoch, n := n/t.eventsPerEpoch, n%t.eventsPerEpoch
	offsetMs := t.base + epoch*t.epochPeriodMs
	for i, events := range t.stepEvents {
		if n < events {
			return offsetMs + (n*t.delayUs[i])/1000
		}
		n -= events
		offsetMs += t.stepMs[i]
	}
	return offsetMs // unreachable: n < eventsPerEpoch
}

// checkedAt is at with overflow detection: ok is false when Beam's long
// arithmetic would overflow for n or the time is outside [lo, hi].
func (t *timeline) checkedAt(n, lo, hi int64) (ms int64, ok bool) {
	if eps := t.eventsPerSecond; eps > 0 {
		q, r := n/eps, n%eps
		qms, ok1 := mulChecked(q, 1000)
		ms, ok2 := addChecked(t.base, qms)
		ms, ok3 := addChecked(ms, mulDiv(r, 1000, eps))
		return ms, ok1 && ok2 && ok3 && ms >= lo && ms <= hi
	}
	if len(t.delayUs) == 1 {
		us, ok1 := mulChecked(n, t.delayUs[0])
		ms, ok2 := addChecked(t.base, us/1000)
		return ms, ok1 && ok2 && ms >= lo && ms <= hi
	}
	epoch, n := n/t.eventsPerEpoch, n%t.eventsPerEpoch
	em, ok1 := mulChecked(epoch, t.epochPeriodMs)
	offsetMs, ok2 := addChecked(t.base, em)
	if !ok1 || !ok2 {
		return 0, false
	}
	for i, events := range t.stepEvents {
		if n < events {
			ms, ok := addChecked(offsetMs, (n*t.delayUs[i])/1000) // n*delay < stepLengthSec*1e6: no overflow
			return ms, ok && ms >= lo && ms <= hi
		}
		n -= events
		if offsetMs, ok1 = addChecked(offsetMs, t.stepMs[i]); !ok1 {
			return 0, false
		}
	}
	return 0, false
}

// lastNumber returns the largest event number n <= max whose time, and every
// earlier one's, is computable and within [lo, hi]; -1 if there is none.
// Times never decrease with n, so the valid numbers are a prefix.
func (t *timeline) lastNumber(max, lo, hi int64) int64 {
	if _, ok := t.checkedAt(0, lo, hi); !ok {
		return -1
	}
	if _, ok := t.checkedAt(max, lo, hi); ok {
		return max
	}
	good, bad := int64(0), max // good is valid, bad is not
	for bad-good > 1 {
		mid := good + (bad-good)/2
		if _, ok := t.checkedAt(mid, lo, hi); ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good
}

// mulDiv returns a*b/c for 0 <= a < c and b >= 0 without overflowing:
// a*b/c < b, so the quotient fits.
func mulDiv(a, b, c int64) int64 {
	if a <= math.MaxInt64/max(b, 1) {
		return a * b / c
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c)) // hi < c because a < c
	return int64(q)
}

// mulChecked returns a*b for a, b >= 0 and whether it fits in int64.
func mulChecked(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(lo), hi == 0 && lo <= math.MaxInt64
}

// addChecked returns a+b and whether it did not overflow.
func addChecked(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}
