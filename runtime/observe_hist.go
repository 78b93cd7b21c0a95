package runtime

import (
	"slices"
	"time"
)

// This file holds the cumulative distributions Job.Observe reports: the
// runtime counts events into fixed buckets, and a metrics exporter turns a
// snapshot into a histogram of its own kind (package metrics: Prometheus).

// DurationBuckets are the upper bounds, in seconds, of the buckets of every
// duration Histogram: from half a millisecond (a synchronous snapshot, a
// small commit) to ten minutes (the default checkpoint timeout).
var DurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Histogram is a snapshot of a cumulative distribution of durations, in
// seconds, since the job was created.
type Histogram struct {
	// Bounds are the buckets' upper bounds, increasing (DurationBuckets).
	Bounds []float64
	// Counts[i] is the number of observations <= Bounds[i] and greater than
	// Bounds[i-1]: per bucket, not cumulative. Observations above the last
	// bound are only in Count.
	Counts []uint64
	// Count is the number of observations, Sum their total in seconds.
	Count uint64
	Sum   float64
}

// Cumulative returns the number of observations <= each bound, the form a
// Prometheus histogram takes.
func (h Histogram) Cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, b := range h.Bounds {
		n += h.Counts[i]
		out[b] = n
	}
	return out
}

// histogram accumulates a Histogram. It is not safe for concurrent use: the
// observer's mutex guards it.
type histogram struct {
	counts []uint64
	count  uint64
	sum    float64
}

func (h *histogram) observe(d time.Duration) {
	if h.counts == nil {
		h.counts = make([]uint64, len(DurationBuckets))
	}
	s := d.Seconds()
	h.count++
	h.sum += s
	if i, _ := slices.BinarySearch(DurationBuckets, s); i < len(DurationBuckets) {
		h.counts[i]++
	}
}

func (h *histogram) snapshot() Histogram {
	counts := make([]uint64, len(DurationBuckets))
	copy(counts, h.counts)
	return Histogram{Bounds: DurationBuckets, Counts: counts, Count: h.count, Sum: h.sum}
}

// histograms are histograms by a label value (operator, sink, kind).
type histograms map[string]*histogram

func (m histograms) observe(key string, d time.Duration) {
	h := m[key]
	if h == nil {
		h = &histogram{}
		m[key] = h
	}
	h.observe(d)
}

func (m histograms) snapshot() map[string]Histogram {
	out := make(map[string]Histogram, len(m))
	for k, h := range m {
		out[k] = h.snapshot()
	}
	return out
}
