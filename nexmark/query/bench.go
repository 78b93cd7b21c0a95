package query

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"syscall"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// BenchEventsPerSecond is the bench's default event-time density: events
// per second of event time. At 200,000, the default BenchEvents span 100 s
// of event time: ten lengths of the queries' 10 s windows and fifty of q5's
// 2 s slides, so windows fire all through the run and the steady part the
// bench reports (see Bench) is most of it. (Flink's published nexmark run
// uses 10,000,000, where 20 M events span 2 s of event time, less than the
// 4 s watermark delay: no window fires before the end of input and a
// windowed query's figure is state build-up plus one final burst. Give
// --events-per-second 10000000 to compare with it.)
const BenchEventsPerSecond = 200_000

// BenchEvents is the bench's default number of events.
const BenchEvents = 20_000_000

// benchWarmupShare is the least part of the events the bench counts as
// warm-up (start-up, first checkpoints), for queries without windows too.
const benchWarmupShare = 0.1

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
	// FinalCheckpointOnly disables periodic checkpoints: only the final
	// one at the end of input is taken (CheckpointInterval is ignored). The
	// ratio of a run's steady throughput with checkpoints to one without is
	// what checkpointing costs.
	FinalCheckpointOnly bool
	// CheckpointDir keeps the checkpoints (required).
	CheckpointDir string
	// Rate limits the source to this many events per second of wall-clock
	// time (crash tests); 0 means as fast as possible.
	Rate float64
	// Output is the directory of the transactional JSON Lines result sink;
	// "" discards results.
	Output string
	// Generator configures the events. The zero value means the Beam
	// defaults with EventsPerSecond = BenchEventsPerSecond. The warm-up
	// (see Bench) needs a fixed EventsPerSecond; with Beam's own timeline
	// (EventsPerSecond 0) it is the first tenth of the events.
	Generator nexmark.Config
	// Progress, when set, is called about once a second.
	Progress func(Progress)
	// Log receives the job's log; nil discards it.
	Log *slog.Logger
	// LSM keeps the queries' keyed state in Pebble stores (the pebble
	// backend) when set; nil keeps it in memory.
	LSM *state.LSMOptions
	// Build, when set, builds the pipeline instead of the Go API query
	// (the SQL version of the query): over src's events, with parallelism
	// p. records is how many records its sources emit over the whole run
	// (a table source emits only its type's events), which the bench
	// scales the sources' progress by to count events.
	Build func(src nexmark.SourceConfig, p int) (pipeline *stream.Pipeline, records int64, err error)
}

// Progress is a benchmark's state while it runs.
type Progress struct {
	Elapsed     time.Duration
	Records     int64 // records sent between subtasks so far
	Checkpoints int64
}

// Result is a finished benchmark: the JSON object `ingest bench nexmark`
// prints as its last line. The top-level figures cover the whole run;
// Steady and EndOfInput split it (see Bench).
type Result struct {
	Query                  string  `json:"query"`
	Events                 int64   `json:"events"`
	EventsPerEventSecond   int64   `json:"events_per_event_second"`
	CheckpointIntervalMs   int64   `json:"checkpoint_interval_ms"` // 0: the final checkpoint only
	Seconds                float64 `json:"seconds"`
	EventsPerSecond        float64 `json:"events_per_second"`
	EventsPerSecondPerCore float64 `json:"events_per_second_per_core"`
	Checkpoints            int64   `json:"checkpoints"`
	MeanCheckpointMs       float64 `json:"mean_checkpoint_ms"`
	// Steady is the run from the end of the warm-up to the last event read.
	Steady Phase `json:"steady"`
	// EndOfInput is the run from the last event read to the end of the
	// job: windows fired by the final watermark, the final checkpoint, the
	// sinks' last commit.
	EndOfInput Phase `json:"end_of_input"`
}

// Phase is one part of a benchmark run. Events are those the source read
// in it; the checkpoints are those triggered and completed within it.
type Phase struct {
	Events                 int64   `json:"events"`
	Seconds                float64 `json:"seconds"`
	CPUSeconds             float64 `json:"cpu_seconds"`
	EventsPerSecond        float64 `json:"events_per_second"`
	EventsPerSecondPerCore float64 `json:"events_per_second_per_core"`
	Checkpoints            int     `json:"checkpoints"`
	MeanCheckpointMs       float64 `json:"mean_checkpoint_ms"`
	P99CheckpointMs        float64 `json:"p99_checkpoint_ms"`
	MaxCheckpointMs        float64 `json:"max_checkpoint_ms"`
}

// mark is the bench's reading at one instant.
type mark struct {
	at     time.Time
	cpu    time.Duration
	events int64 // read by the sources so far
}

// phase returns the figures between marks a and b, with the completed
// checkpoints of history triggered and ended between them; the final
// checkpoint counts only for the end of input (endOfInput), where it
// belongs however early the sources' end triggered it.
func phase(a, b mark, history []runtime.CheckpointRecord, endOfInput bool) Phase {
	p := Phase{Events: b.events - a.events, Seconds: round3(b.at.Sub(a.at).Seconds()), CPUSeconds: round3((b.cpu - a.cpu).Seconds())}
	if s := b.at.Sub(a.at).Seconds(); s > 0 {
		p.EventsPerSecond = math.Round(float64(p.Events) / s)
	}
	if c := (b.cpu - a.cpu).Seconds(); c > 0 {
		p.EventsPerSecondPerCore = math.Round(float64(p.Events) / c)
	}
	var d []time.Duration
	for _, r := range history {
		within := !r.TriggeredAt.Before(a.at) && !r.EndedAt.After(b.at)
		if r.Status == runtime.CheckpointCompleted && (within && !r.Final || endOfInput && r.Final) {
			d = append(d, r.Duration)
		}
	}
	p.Checkpoints = len(d)
	if len(d) > 0 {
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		p.MeanCheckpointMs = round3(float64(sum) / float64(len(d)) / 1e6)
		p.P99CheckpointMs = round3(float64(d[(len(d)*99+99)/100-1]) / 1e6)
		p.MaxCheckpointMs = round3(float64(d[len(d)-1]) / 1e6)
	}
	return p
}

// sourceEvents returns the records the job's sources have read so far.
func sourceEvents(job *runtime.Job) int64 {
	var n int64
	for _, node := range job.Observe().Nodes {
		if node.Kind == runtime.KindSource {
			for _, s := range node.Subtasks {
				n += s.RecordsOut
			}
		}
	}
	return n
}

// WarmupEvents returns how many of events the bench counts as warm-up for q
// at the event-time density eventsPerSecond (0: Beam's timeline): the
// query's window and the watermark delay in event time, so state has its
// steady size and windows fire regularly when the steady part begins, and
// at least a tenth of the events.
func WarmupEvents(q Query, events, eventsPerSecond int64) int64 {
	w := int64(math.Ceil(float64(events) * benchWarmupShare))
	if eventsPerSecond > 0 {
		span := q.Window + WatermarkDelay
		w = max(w, int64(math.Ceil(span.Seconds()*float64(eventsPerSecond))))
	}
	return w
}

// Pipeline builds query q over a Nexmark source of cfg's events with
// parallelism p; results go to out ("" discards).
func Pipeline(q Query, src nexmark.SourceConfig, parallelism int, out string) (*stream.Pipeline, error) {
	source, err := nexmark.NewSource(src)
	if err != nil {
		return nil, err
	}
	p := stream.New("nexmark-"+q.Name, stream.DefaultParallelism(parallelism))
	events := stream.From(p, "events", source)
	q.Build(p, events, out)
	return p, nil
}

// Bench runs a query exactly-once with checkpoints over o.Events events
// and measures it. Per core is events divided by the process's CPU time
// (user + system).
//
// Besides the whole run it reports two parts of it. The steady part runs
// from the end of the warm-up (WarmupEvents) to the moment the sources have
// read every event: its throughput and checkpoint durations are what the
// query sustains. The end of input is the rest: the windows the final
// watermark fires, the final checkpoint and commit. The boundaries are
// observed every 20 ms of wall-clock time, so each is late by up to that
// (plus the time to take a reading) and the events and CPU time between
// readings are attributed to the later part. Bench fails when the warm-up
// would take half of the events or more: the run has no steady part worth
// the name (give more events or a lower event-time density).
func Bench(ctx context.Context, o BenchOptions) (Result, error) {
	q, err := Lookup(o.Query)
	switch {
	case err != nil && o.Build != nil:
		// A query only Build knows (a SQL query with no Go API version):
		// no window to warm up.
		q, err = Query{Name: o.Query}, nil
	case err != nil:
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
	warmup := WarmupEvents(q, o.Events, gen.EventsPerSecond)
	if 2*warmup > o.Events {
		return Result{}, fmt.Errorf("nexmark %s: the warm-up (%v window + %v watermark delay of event time = %d events at %d events per second of event time) "+
			"is half of the %d events or more, which leaves no steady part to measure: give at least %d events or a lower --events-per-second",
			q.Name, q.Window, WatermarkDelay, warmup, gen.EventsPerSecond, o.Events, 2*warmup)
	}
	srcCfg := nexmark.SourceConfig{Generator: gen, Events: o.Events, Rate: o.Rate, MaxDelay: WatermarkDelay}
	var p *stream.Pipeline
	records := o.Events
	if o.Build != nil {
		p, records, err = o.Build(srcCfg, o.Parallelism)
	} else {
		p, err = Pipeline(q, srcCfg, o.Parallelism, o.Output)
	}
	if err != nil {
		return Result{}, err
	}
	if records <= 0 {
		return Result{}, fmt.Errorf("nexmark %s: the sources emit no record over %d events", q.Name, o.Events)
	}
	ck := checkpoint.DefaultOptions()
	ck.Interval = o.CheckpointInterval
	if o.FinalCheckpointOnly {
		ck.Interval = 0
	}
	job, err := p.NewJob(stream.RunOptions{Checkpoint: ck, CheckpointDir: o.CheckpointDir, Log: o.Log, LSM: o.LSM,
		Restart: runtime.RestartOptions{Delay: time.Second, MaxAttempts: 3}})
	if err != nil {
		return Result{}, err
	}
	// The sources' records so far, as events of the sequence.
	progress := func() int64 {
		n := sourceEvents(job)
		if records == o.Events {
			return n
		}
		return int64(float64(n) / float64(records) * float64(o.Events))
	}
	now := func() mark { return mark{at: time.Now(), cpu: cpuTime(), events: progress()} }
	start := mark{at: time.Now(), cpu: cpuTime()}
	var warm, input *mark
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	lastProgress := start.at
	for {
		select {
		case err = <-done:
		case <-poll.C:
			m := now()
			if warm == nil && m.events >= warmup {
				warm = &m
			}
			if input == nil && m.events >= o.Events {
				input = &m
			}
			if o.Progress != nil && m.at.Sub(lastProgress) >= time.Second {
				lastProgress = m.at
				st := job.Stats()
				o.Progress(Progress{Elapsed: m.at.Sub(start.at), Records: st.Records, Checkpoints: st.Completed})
			}
			continue
		}
		break
	}
	end := mark{at: time.Now(), cpu: cpuTime(), events: o.Events}
	if err != nil {
		return Result{}, fmt.Errorf("nexmark %s: %w", q.Name, err)
	}
	// A run shorter than a reading interval ends before the marks are set.
	if input == nil {
		input = &end
	}
	if warm == nil {
		warm = input
	}
	st := job.Stats()
	elapsed, cpu := end.at.Sub(start.at), end.cpu-start.cpu
	r := Result{Query: q.Name, Events: o.Events, EventsPerEventSecond: gen.EventsPerSecond, Seconds: round3(elapsed.Seconds()), Checkpoints: st.Completed}
	if !o.FinalCheckpointOnly {
		r.CheckpointIntervalMs = o.CheckpointInterval.Milliseconds()
	}
	r.EventsPerSecond = math.Round(float64(o.Events) / elapsed.Seconds())
	if cpu > 0 {
		r.EventsPerSecondPerCore = math.Round(float64(o.Events) / cpu.Seconds())
	}
	if st.Completed > 0 {
		r.MeanCheckpointMs = round3(float64(st.CheckpointTime) / float64(st.Completed) / 1e6)
	}
	history := job.Checkpoints()
	r.Steady = phase(*warm, *input, history, false)
	r.EndOfInput = phase(*input, end, history, true)
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
