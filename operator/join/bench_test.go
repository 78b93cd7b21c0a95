package join_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Benchmarks. b.N is the number of input records (both sides together);
// each reports records/s. The operator benchmarks drive one join subtask
// directly, on one goroutine, with batches of 1024 records alternating
// between the sides and a watermark after each batch: the per-core cost of
// the join itself (state, timers, output). The pipeline benchmarks run it
// in the runtime with checkpoints every second, reporting records per
// CPU-second of the whole process.
//
//	go test ./operator/join -run '^$' -bench . -benchmem
//	go test ./operator/join -run '^$' -bench Pipeline -benchtime 4000000x

// countingOutput counts emitted records and drops them.
type countingOutput struct{ n int }

func (c *countingOutput) Emit(r runtime.Records) error { c.n += r.Len(); return nil }

// workload generates both sides: record i (per side) has event time
// i*spacing, out of order by up to 1ms, and a key drawn from keys(i).
type workload struct {
	name    string
	build   joinFunc[lrec, rrec, pair]
	spacing time.Duration
	// keyL picks left record i's key; keyR a right record's key when i
	// left records were generated before it.
	keyL, keyR func(rng *rand.Rand, i int64) int64
}

func uniformKeys(n int64) func(*rand.Rand, int64) int64 {
	return func(rng *rand.Rand, _ int64) int64 { return rng.Int64N(n) }
}

// benchWorkloads: 10 000 keys, 1M records/s of event time per side; the
// interval, ttl and window are chosen so each record meets about one partner.
// "inner ttl=0 q3" is Nexmark q3's shape: each person (left) once, under a
// new key, and three auctions (right) per person, each of a seller seen
// before; state grows with the input, as it must without a ttl.
func benchWorkloads() []workload {
	const keys = 10_000
	return []workload{
		{"interval [-5ms,5ms]", intervalSpec(-5*time.Millisecond, 5*time.Millisecond).build, time.Microsecond, uniformKeys(keys), uniformKeys(keys)},
		{"window 10ms", windowSpec(10 * time.Millisecond).build, time.Microsecond, uniformKeys(keys), uniformKeys(keys)},
		{"inner ttl=5ms", innerSpec(5 * time.Millisecond).build, time.Microsecond, uniformKeys(keys), uniformKeys(keys)},
		{"inner ttl=0 q3", innerSpec(0).build, time.Microsecond,
			func(_ *rand.Rand, i int64) int64 { return i },
			func(rng *rand.Rand, persons int64) int64 { return rng.Int64N(max(persons, 1)) }},
	}
}

// BenchmarkOperator measures one join subtask driven directly.
func BenchmarkOperator(b *testing.B) {
	for _, w := range benchWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			newOp := newOp(b, w.build, keyL, keyR, join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			op, out := newOp(), &countingOutput{}
			ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: opID}, Parallelism: 1, MaxParallelism: 128, KeyGroups: fullRange(),
				State: state.NewBackend(opID, 128, fullRange()), Output: out}
			if err := op.Open(ctx); err != nil {
				b.Fatal(err)
			}
			const batch = 1024
			rng := rand.New(rand.NewPCG(1, 2))
			lb := make(runtime.Batch[lrec], batch)
			rb := make(runtime.Batch[rrec], batch)
			ratio := int64(1) // right records per left record
			if w.name == "inner ttl=0 q3" {
				ratio = 3
			}
			step := int64(w.spacing)
			jitter := int64(time.Millisecond)
			var li, ri int64
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; {
				// Left: batch/(1+ratio) of every batch's records, right the
				// rest, both covering the same event time.
				nl := batch / int(1+ratio)
				for k := range nl {
					lb[k] = runtime.Record[lrec]{Value: lrec{ID: li, Key: w.keyL(rng, li)}, Time: base + li*step*ratio + rng.Int64N(jitter)}
					li++
				}
				if err := op.ProcessBatch(0, lb[:nl]); err != nil {
					b.Fatal(err)
				}
				nr := batch - nl
				for k := range nr {
					rb[k] = runtime.Record[rrec]{Value: rrec{ID: ri, Key: w.keyR(rng, li)}, Time: base + ri*step + rng.Int64N(jitter)}
					ri++
				}
				if err := op.ProcessBatch(1, rb[:nr]); err != nil {
					b.Fatal(err)
				}
				if err := op.ProcessWatermark(base + min(li*step*ratio, ri*step) - 1); err != nil {
					b.Fatal(err)
				}
				done += batch
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(out.n)/float64(b.N), "out/record")
		})
	}
}

// genSource generates n records of one side, as workload describes, in
// batches of 1024, for the pipeline benchmark. It is replayable by position.
type genSource[T any] struct {
	n       int64
	spacing int64
	make    func(rng *rand.Rand, i int64) T
}

func (g *genSource[T]) NewSubtask() runtime.SourceSubtask[T] { return &genSub[T]{g: g} }
func (g *genSource[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Capabilities: runtime.Capabilities{Replayable: true}}
}
func (g *genSource[T]) Describe() string { return "bench generator" }

type genSub[T any] struct {
	g    *genSource[T]
	out  runtime.Emitter[T]
	next int64
	rng  *rand.Rand
}

func (s *genSub[T]) Open(ctx *runtime.Context, out runtime.Emitter[T]) error {
	s.out = out
	s.rng = rand.New(rand.NewPCG(uint64(ctx.Task.Subtask), 1))
	return nil
}

func (s *genSub[T]) Read() (runtime.ReadResult, error) {
	n := min(1024, s.g.n-s.next)
	b := make(runtime.Batch[T], n)
	for k := range b {
		i := s.next + int64(k)
		b[k] = runtime.Record[T]{Value: s.g.make(s.rng, i), Time: base + i*s.g.spacing}
	}
	s.next += n
	if err := s.out.Emit(b); err != nil {
		return runtime.ReadResult{}, err
	}
	return runtime.ReadResult{Watermark: base + (s.next-1)*s.g.spacing - 1, Exhausted: s.next >= s.g.n}, nil
}

func (s *genSub[T]) Position() ([]byte, error) { return fmt.Appendf(nil, "%d", s.next), nil }
func (s *genSub[T]) Close() error              { return nil }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipeline runs generator → key by → join → discard, everything at
// parallelism 1, with checkpoints every second.
func BenchmarkPipeline(b *testing.B) {
	for _, w := range benchWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			ratio := int64(1)
			if w.name == "inner ttl=0 q3" {
				ratio = 3
			}
			nl := int64(b.N) / (1 + ratio)
			step := int64(w.spacing)
			p := stream.New("bench-join")
			ls := stream.From[lrec](p, "left", &genSource[lrec]{n: nl, spacing: step * ratio,
				make: func(rng *rand.Rand, i int64) lrec { return lrec{ID: i, Key: w.keyL(rng, i)} }})
			rs := stream.From[rrec](p, "right", &genSource[rrec]{n: int64(b.N) - nl, spacing: step,
				make: func(rng *rand.Rand, i int64) rrec { return rrec{ID: i, Key: w.keyR(rng, i/ratio)} }})
			joined := w.build(stream.KeyBy(ls, keyL), stream.KeyBy(rs, keyR), "join", join.LeftCodec(lrecCodec{}), join.RightCodec(rrecCodec{}))
			stream.To(joined, "discard", stream.Discard[pair]())
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
		})
	}
}
