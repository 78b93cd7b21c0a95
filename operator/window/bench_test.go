package window_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Benchmarks. b.N is the number of records; each reports records/s.
//
// BenchmarkOperator* drive one window subtask directly on one goroutine
// (records/s is per core): batches of 1024 records, a watermark after each,
// a checkpoint capture (operator and state backend snapshot, so the
// copy-on-write costs count) every 2^20 records.
//
//	go test ./operator/window -run '^$' -bench Operator -benchtime 20000000x
//
// BenchmarkPipeline* run datagen → key by → window → discard through the
// runtime with checkpoints every second, and also report records per
// CPU-second of the whole process.
//
//	go test ./operator/window -run '^$' -bench Pipeline -benchtime 20000000x

// bid is a Nexmark-like bid: q5 counts bids per auction over sliding
// windows, q11 counts bids per bidder over sessions.
type bid struct {
	Auction, Bidder, Price int64
}

// bidStream describes generated bids: record i has event time i*interval
// and a pseudo-random key (a hash of i): half the bids go to one of hot keys,
// the rest spread over all keys (Nexmark's hot auction ratio of 2).
type bidStream struct {
	keys, hot int64
	interval  int64
}

func newBids(keys, hot int64, interval time.Duration) bidStream {
	return bidStream{keys: keys, hot: hot, interval: int64(interval)}
}

// key returns record i's key.
func (s bidStream) key(i int) int64 {
	x := uint64(i) + 0x9e3779b97f4a7c15 // splitmix64
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	if s.keys == 0 {
		// Nexmark's generator: an auction opens every 16 events; a bid goes
		// to the latest hot auction (every 100th) or to one of the 100
		// auctions in flight.
		cur := int64(i / 16)
		if x&1 == 0 {
			return cur / 100 * 100
		}
		return max(cur-int64((x>>1)%100), 0)
	}
	if x&1 == 0 {
		return int64((x >> 1) % uint64(s.hot))
	}
	return int64((x >> 1) % uint64(s.keys))
}

func countResult(k int64, w window.Window, n int64) window.Result[int64, int64] {
	return window.ResultOf(k, w, n)
}

// windowOp builds the window with build over a bid stream keyed by key and
// returns its operator factory.
func windowOp(b *testing.B, key func(bid) int64, build func(stream.KeyedStream[bid, int64]) stream.Stream[window.Result[int64, int64]]) func() runtime.Operator {
	p := stream.New("bench")
	ks := stream.KeyBy(stream.From[bid](p, "src", nopSource[bid]{}), key)
	w := build(ks)
	stream.To(w, "sink", discardSink[window.Result[int64, int64]]{})
	if _, err := p.Plan(); err != nil {
		b.Fatal(err)
	}
	return w.Node().NewOperator
}

// nullOutput discards.
type nullOutput struct{ n int }

func (o *nullOutput) Emit(r runtime.Records) error { o.n += r.Len(); return nil }

// runOperator feeds b.N records of s to one subtask of newOp.
func runOperator(b *testing.B, newOp func() runtime.Operator, s bidStream, byBidder bool) {
	backend := state.NewBackend(opID, 128, fullRange())
	op := newOp()
	out := &nullOutput{}
	if err := op.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128,
		KeyGroups: fullRange(), State: backend, Output: out}); err != nil {
		b.Fatal(err)
	}
	const batch = 1024
	buf := make(runtime.Batch[bid], batch)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		for j := range n {
			k := s.key(i + j)
			v := bid{Auction: k, Price: int64(j)}
			if byBidder {
				v = bid{Bidder: k, Price: int64(j)}
			}
			buf[j] = runtime.Record[bid]{Value: v, Time: int64(i+j) * s.interval}
		}
		if err := op.ProcessBatch(0, buf[:n]); err != nil {
			b.Fatal(err)
		}
		if err := op.ProcessWatermark(int64(i+n-1)*s.interval - int64(time.Millisecond)); err != nil {
			b.Fatal(err)
		}
		if (i+n)%(1<<20) < batch {
			if _, err := op.Snapshot(1); err != nil {
				b.Fatal(err)
			}
			backend.Snapshot()
		}
	}
	if err := op.ProcessWatermark(runtime.MaxWatermark); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(float64(out.n), "results")
}

func auction(v bid) int64 { return v.Auction }
func bidder(v bid) int64  { return v.Bidder }

// Nexmark q5's shape: count bids per auction, sliding 10 s every 2 s, at
// 10^6 bids per second of event time.
func BenchmarkOperatorSliding(b *testing.B) {
	for _, c := range []struct {
		name  string
		keys  int64
		merge bool
	}{
		{"panes/nexmark", 0, true},
		{"panes/auctions=10k", 10_000, true},
		{"panes/auctions=1M", 1_000_000, true},
		{"per-window/auctions=10k", 10_000, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			agg := window.CountOf[bid]()
			if !c.merge {
				agg.Merge = nil
			}
			newOp := windowOp(b, auction, func(ks stream.KeyedStream[bid, int64]) stream.Stream[window.Result[int64, int64]] {
				return window.Sliding(ks, opID, 10*time.Second, 2*time.Second, agg, countResult)
			})
			interval := time.Microsecond
			if c.keys == 0 {
				interval = 100 * time.Nanosecond // 10^7 events/s, as Nexmark benchmarks run
			}
			runOperator(b, newOp, newBids(c.keys, 100, interval), false)
		})
	}
}

// Tumbling windows for comparison: count per auction per 2 s.
func BenchmarkOperatorTumbling(b *testing.B) {
	newOp := windowOp(b, auction, func(ks stream.KeyedStream[bid, int64]) stream.Stream[window.Result[int64, int64]] {
		return window.Tumbling(ks, opID, 2*time.Second, window.CountOf[bid](), countResult)
	})
	runOperator(b, newOp, newBids(10_000, 100, time.Microsecond), false)
}

// Nexmark q11's shape: count bids per bidder over sessions with a 10 s gap.
// dense: 10^6 bids/s over 10^4 bidders, so sessions grow and never close
// until the end; sparse: 10^4 bids/s over 2·10^5 bidders, so a bidder's bids
// are ~20 s apart and almost every bid opens a session that fires 10 s later.
func BenchmarkOperatorSession(b *testing.B) {
	for _, c := range []struct {
		name     string
		keys     int64
		hot      int64
		interval time.Duration
	}{
		{"dense/bidders=10k", 10_000, 100, time.Microsecond},
		{"sparse/bidders=200k", 200_000, 200_000, 100 * time.Microsecond},
	} {
		b.Run(c.name, func(b *testing.B) {
			newOp := windowOp(b, bidder, func(ks stream.KeyedStream[bid, int64]) stream.Stream[window.Result[int64, int64]] {
				return window.Session(ks, opID, 10*time.Second, window.CountOf[bid](), countResult)
			})
			runOperator(b, newOp, newBids(c.keys, c.hot, c.interval), true)
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runPipeline runs datagen (b.N records, keys round robin, 1 µs apart) →
// key by → build → discard, at parallelism par, with checkpoints every
// second.
func runPipeline(b *testing.B, par int, keys int64, build func(stream.KeyedStream[datagen.Event, int64]) stream.Stream[window.Result[int64, int64]]) {
	p := stream.New("bench", stream.DefaultParallelism(par))
	src, err := datagen.Events(datagen.Config{Count: int64(b.N), Keys: keys, EventInterval: time.Microsecond})
	if err != nil {
		b.Fatal(err)
	}
	ks := stream.KeyBy(stream.From[datagen.Event](p, "events", src), func(e datagen.Event) int64 { return e.Key })
	stream.To(build(ks), "discard", stream.Discard[window.Result[int64, int64]]())
	ck := checkpoint.DefaultOptions()
	ck.Interval = time.Second
	job, err := p.NewJob(stream.RunOptions{Checkpoint: ck, CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	if err := job.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(float64(job.Stats().Completed), "checkpoints")
}

func BenchmarkPipelineSliding(b *testing.B) {
	runPipeline(b, 2, 10_000, func(ks stream.KeyedStream[datagen.Event, int64]) stream.Stream[window.Result[int64, int64]] {
		return window.Sliding(ks, "hop", 10*time.Second, 2*time.Second, window.CountOf[datagen.Event](), countResult)
	})
}

func BenchmarkPipelineSession(b *testing.B) {
	runPipeline(b, 2, 10_000, func(ks stream.KeyedStream[datagen.Event, int64]) stream.Stream[window.Result[int64, int64]] {
		return window.Session(ks, "sessions", 10*time.Second, window.CountOf[datagen.Event](), countResult)
	})
}
