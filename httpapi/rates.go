package httpapi

import (
	"sync"
	"time"

	"github.com/ingest-engine/ingest/runtime"
)

// This file turns the job's cumulative counters into rates over the last
// seconds: each request's observation is compared with an earlier one kept
// from a previous request, so the rates need no goroutine of their own.

// rateWindow is the least time between the two observations a rate is
// computed from; keepFor is how long an older sample is kept while a newer
// one at least rateWindow old exists.
const (
	rateWindow = time.Second
	keepFor    = 10 * time.Second
)

// nodeRate is a node's rates over the last seconds.
type nodeRate struct {
	in, out float64 // records per second
	// backpressure is the share of the time its subtasks waited on full
	// channels, 0..1.
	backpressure float64
	// subtasks are the rates of each subtask, by index: their spread is the
	// node's skew.
	subtasks []subtaskRate
}

// subtaskRate is one subtask's rates over the last seconds.
type subtaskRate struct {
	in, out, backpressure float64
}

// sample is one observation's counters, by node.
type sample struct {
	at    time.Time
	nodes map[string]nodeCounts
}

type nodeCounts struct {
	in, out     int64
	blocked     time.Duration
	parallelism int
	subtasks    []subtaskCounts // by index
}

type subtaskCounts struct {
	in, out int64
	blocked time.Duration
}

// sampler keeps recent samples.
type sampler struct {
	mu      sync.Mutex
	samples []sample // oldest first, at least rateWindow apart
}

func sampleOf(o runtime.Observation) sample {
	s := sample{at: o.At, nodes: make(map[string]nodeCounts, len(o.Nodes))}
	for _, n := range o.Nodes {
		c := nodeCounts{parallelism: len(n.Subtasks)}
		for _, st := range n.Subtasks {
			c.in += st.RecordsIn
			c.out += st.RecordsOut
			c.blocked += st.Backpressure
			c.subtasks = append(c.subtasks, subtaskCounts{in: st.RecordsIn, out: st.RecordsOut, blocked: st.Backpressure})
		}
		s.nodes[n.ID] = c
	}
	return s
}

// rates returns each node's rates between o and the newest sample at least
// rateWindow older (or the oldest one kept; or, on the first request, since
// the job started), and keeps o as a sample.
func (s *sampler) rates(o runtime.Observation) map[string]nodeRate {
	cur := sampleOf(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	var base *sample
	for i := len(s.samples) - 1; i >= 0; i-- {
		if cur.at.Sub(s.samples[i].at) >= rateWindow {
			base = &s.samples[i]
			break
		}
	}
	if base == nil && len(s.samples) > 0 {
		base = &s.samples[0]
	}
	if base == nil && !o.StartedAt.IsZero() {
		base = &sample{at: o.StartedAt}
	}
	out := map[string]nodeRate{}
	if base != nil {
		out = ratesBetween(*base, cur)
	}
	if n := len(s.samples); n == 0 || cur.at.Sub(s.samples[n-1].at) >= rateWindow {
		s.samples = append(s.samples, cur)
	}
	for len(s.samples) > 1 && cur.at.Sub(s.samples[0].at) > keepFor && cur.at.Sub(s.samples[1].at) >= rateWindow {
		s.samples = s.samples[1:]
	}
	return out
}

// ratesBetween returns the rates of the nodes of cur since base; a node
// base does not have counts from 0.
func ratesBetween(base, cur sample) map[string]nodeRate {
	out := make(map[string]nodeRate, len(cur.nodes))
	dt := cur.at.Sub(base.at)
	if dt <= 0 {
		return out
	}
	for id, c := range cur.nodes {
		b := base.nodes[id]
		r := nodeRate{
			in:  float64(c.in-b.in) / dt.Seconds(),
			out: float64(c.out-b.out) / dt.Seconds(),
		}
		if c.parallelism > 0 {
			r.backpressure = min(max(float64(c.blocked-b.blocked)/float64(dt)/float64(c.parallelism), 0), 1)
		}
		for i, sc := range c.subtasks {
			var sb subtaskCounts
			if i < len(b.subtasks) {
				sb = b.subtasks[i]
			}
			r.subtasks = append(r.subtasks, subtaskRate{
				in:           float64(sc.in-sb.in) / dt.Seconds(),
				out:          float64(sc.out-sb.out) / dt.Seconds(),
				backpressure: min(max(float64(sc.blocked-sb.blocked)/float64(dt), 0), 1),
			})
		}
		out[id] = r
	}
	return out
}
