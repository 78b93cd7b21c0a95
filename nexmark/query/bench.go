package query

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"syscall"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// BenchEventsPerSecond is the event-time density of Flink's published
// nexmark run (TPS = 10 million events per second of event time), the
// bench's default so window contents and state sizes are comparable.
const BenchEventsPerSecond = 10_000_000

// BenchOptions configures a benchmark run.
type BenchOptions struct {
	// Query is the query name ("q5").
	Query string
	// Events is the number of events to generate.
	Events int64
	// Parallelism is every node's parallelism. The default value is 1.
	Parallelism int
	// CheckpointInterval is the exactly-once checkpoint interval. The
	// default value is 1s.
	CheckpointInterval time.Duration
	// CheckpointDir keeps the checkpoints (required).
	CheckpointDir string
	// Rate limits the source to this many events per second of wall-clock
	// time (crash tests); 0 means as fast as possible.
	Rate float64
	// Output is the directory of the transactional JSON Lines result sink;
	// "" discards results.
	Output string
	// Generator configures the events. The zero value means the Beam
	// defaults with EventsPerSecond = BenchEventsPerSecond.
	Generator nexmark.Config
	// Progress, when set, is called about once a second.
	Progress func(Progress)
	// Log receives the job's log; nil discards it.
	Log *slog.Logger
}

// Progress is a benchmark's state while it runs.
type Progress struct {
	Elapsed     time.Duration
	Records     int64 // records sent between subtasks so far
	Checkpoints int64
}

// Result is a finished benchmark: the JSON object `ingest bench nexmark`
// prints as its last line.
type Result struct {
	Query                  string  `json:"query"`
	Events                 int64   `json:"events"`
	Seconds                float64 `json:"seconds"`
	EventsPerSecond        float64 `json:"events_per_second"`
	EventsPerSecondPerCore float64 `json:"events_per_second_per_core"`
	Checkpoints            int64   `json:"checkpoints"`
	MeanCheckpointMs       float64 `json:"mean_checkpoint_ms"`
}

// Pipeline builds query q over a Nexmark source of cfg's events with
// parallelism p; results go to out ("" discards).
func Pipeline(q Query, src nexmark.SourceConfig, parallelism int, out string) (*stream.Pipeline, error) {
	source, err := nexmark.NewSource(src)
	if err != nil {
		return nil, err
	}
	p := stream.New("nexmark-"+q.Name, stream.DefaultParallelism(parallelism))
	events := stream.From[nexmark.Event](p, "events", source)
	q.Build(p, events, out)
	return p, nil
}

// Bench runs a query exactly-once with checkpoints over o.Events events
// and measures it. Per core is events divided by the process's CPU time
// (user + system) during the run.
func Bench(ctx context.Context, o BenchOptions) (Result, error) {
	q, err := Lookup(o.Query)
	if err != nil {
		return Result{}, err
	}
	if o.Events <= 0 {
		return Result{}, fmt.Errorf("events %d must be positive", o.Events)
	}
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Second
	}
	gen := o.Generator
	if gen == (nexmark.Config{}) {
		gen = BenchGenerator(BenchEventsPerSecond)
	}
	p, err := Pipeline(q, nexmark.SourceConfig{Generator: gen, Events: o.Events, Rate: o.Rate, MaxDelay: WatermarkDelay}, o.Parallelism, o.Output)
	if err != nil {
		return Result{}, err
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = o.CheckpointInterval
	job, err := p.NewJob(stream.RunOptions{Checkpoint: ck, CheckpointDir: o.CheckpointDir, Log: o.Log,
		Restart: runtime.RestartOptions{Delay: time.Second, MaxAttempts: 3}})
	if err != nil {
		return Result{}, err
	}
	cpu0 := cpuTime()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err = <-done:
		case <-tick.C:
			if o.Progress != nil {
				st := job.Stats()
				o.Progress(Progress{Elapsed: time.Since(start), Records: st.Records, Checkpoints: st.Completed})
			}
			continue
		}
		break
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	if err != nil {
		return Result{}, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	st := job.Stats()
	r := Result{Query: q.Name, Events: o.Events, Seconds: round3(elapsed.Seconds()), Checkpoints: st.Completed}
	r.EventsPerSecond = math.Round(float64(o.Events) / elapsed.Seconds())
	if cpu > 0 {
		r.EventsPerSecondPerCore = math.Round(float64(o.Events) / cpu.Seconds())
	}
	if st.Completed > 0 {
		r.MeanCheckpointMs = round3(float64(st.CheckpointTime) / float64(st.Completed) / 1e6)
	}
	return r, nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchGenerator returns Beam's default generator configuration with the
// event-time density eventsPerSecond (the bench's default is
// BenchEventsPerSecond).
func BenchGenerator(eventsPerSecond int64) nexmark.Config {
	gen := nexmark.DefaultConfig()
	gen.EventsPerSecond = eventsPerSecond
	return gen
}
