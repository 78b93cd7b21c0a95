package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingest-engine/ingest/nexmark/query"
	"github.com/ingest-engine/ingest/state"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a benchmark",
	}
	cmd.AddCommand(benchNexmarkCmd())
	return cmd
}

func benchNexmarkCmd() *cobra.Command {
	var o query.BenchOptions
	var eventsPerSecond int64
	var cpuProfile, memProfile, stateBackend string
	var stateCacheMiB int64
	var useSQL bool
	cmd := &cobra.Command{
		Use:   "nexmark --query qN --events N",
		Short: "Run a Nexmark query exactly-once with checkpoints and measure it",
		Long: `Runs one Nexmark query (` + fmt.Sprint(query.Names()) + `) over N generated events with
exactly-once checkpoints, prints progress once a second on stderr and, as
its last line on stdout, one JSON object with the figures. Per core is
events divided by the process's CPU seconds.

Events follow Beam's default generator configuration with an event-time
density of --events-per-second (default 200,000: the default 20 M events
span 100 s of event time, ten lengths of the 10 s windows, so windows fire
all through the run; Flink's published nexmark run uses 10,000,000). To
write the exact events a run consumes, as JSON Lines, give ingest nexmark
generate the same --events and --events-per-second (its defaults are the
bench's):

  ingest nexmark generate --events 20000000 > events.jsonl

Besides the whole run, the result reports its steady part (from the end of
the warm-up, the query's window plus the 4 s watermark delay of event time
and at least a tenth of the events, to the last event read: the throughput
and checkpoint durations the query sustains) and the end of input (windows
the final watermark fires, the final checkpoint) on lines of their own.
--checkpoint-interval 0 takes only the final checkpoint, so the ratio of
the steady throughputs with and without checkpoints is what they cost.

Without --checkpoint-dir the checkpoints go to a temporary directory that
is removed at the end. With it, a run that was killed resumes from its last
checkpoint when started again with the same flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.CheckpointDir == "" {
				dir, err := os.MkdirTemp("", "ingest-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				o.CheckpointDir = dir
			}
			switch stateBackend {
			case "memory":
			case "pebble":
				dir, err := os.MkdirTemp("", "ingest-bench-state-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				o.LSM = &state.LSMOptions{Dir: dir, CacheBytes: stateCacheMiB << 20}
			default:
				return &exitError{code: exitConfig, err: fmt.Errorf("--state-backend %q: known backends are memory and pebble", stateBackend)}
			}
			if eventsPerSecond != query.BenchEventsPerSecond {
				o.Generator = query.BenchGenerator(eventsPerSecond)
			}
			if o.CheckpointInterval == 0 {
				o.FinalCheckpointOnly = true
			}
			if useSQL {
				if o.Output != "" {
					return &exitError{code: exitConfig, err: fmt.Errorf("--output and --sql: the SQL version writes to a blackhole sink")}
				}
				o.Build = sqlBench(o.Query)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			o.Progress = func(p query.Progress) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %5.1fs  %d records between operators, %d checkpoints\n",
					o.Query, p.Elapsed.Seconds(), p.Records, p.Checkpoints)
			}
			if memProfile != "" {
				// Every allocation is sampled, so the profile's counts are exact.
				prev := runtime.MemProfileRate
				runtime.MemProfileRate = 1
				defer func() { runtime.MemProfileRate = prev }()
			}
			r, err := query.Bench(ctx, o)
			if err != nil {
				return err
			}
			if memProfile != "" {
				if err := writeHeapProfile(memProfile); err != nil {
					return err
				}
			}
			for _, p := range []struct {
				name string
				p    query.Phase
			}{{"steady state", r.Steady}, {"end of input", r.EndOfInput}} {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s: %d events in %.3fs (%.3f CPU-s): %.0f events/s, %.0f events/cpu-s; %d checkpoints, mean %.1f ms, p99 %.1f ms, max %.1f ms\n",
					o.Query, p.name, p.p.Events, p.p.Seconds, p.p.CPUSeconds, p.p.EventsPerSecond, p.p.EventsPerSecondPerCore,
					p.p.Checkpoints, p.p.MeanCheckpointMs, p.p.P99CheckpointMs, p.p.MaxCheckpointMs)
			}
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(line))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Query, "query", "", "query to run: "+fmt.Sprint(query.Names()))
	f.Int64Var(&o.Events, "events", query.BenchEvents, "number of events to generate")
	f.IntVar(&o.Parallelism, "parallelism", 1, "parallelism of every operator")
	f.DurationVar(&o.CheckpointInterval, "checkpoint-interval", time.Second, "exactly-once checkpoint interval; 0: the final checkpoint only")
	f.StringVar(&o.CheckpointDir, "checkpoint-dir", "", "checkpoint directory (default: a temporary one)")
	f.StringVar(&o.Output, "output", "", "write result rows as JSON Lines (transactional file sink) under this directory")
	f.Int64Var(&eventsPerSecond, "events-per-second", query.BenchEventsPerSecond, "event-time density: events per second of event time")
	f.Float64Var(&o.Rate, "rate", 0, "limit the source to this many events per second of wall-clock time (0: as fast as possible)")
	f.StringVar(&stateBackend, "state-backend", "memory", "where keyed state lives: memory, or pebble (Pebble stores in a temporary directory)")
	f.Int64Var(&stateCacheMiB, "state-cache-mib", state.DefaultLSMCacheBytes>>20, "the pebble backend's block cache, MiB")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to this file")
	f.StringVar(&memProfile, "memprofile", "", "write an allocation profile (go tool pprof -sample_index=alloc_space) to this file; every allocation is sampled, which slows the run")
	f.BoolVar(&useSQL, "sql", false, "run the query's SQL version (examples/nexmark/qN.sql) instead of its Go API version")
	_ = cmd.MarkFlagRequired("query")
	return cmd
}

// writeHeapProfile writes the allocation profile of the run to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memory profile %s: %w", path, err)
	}
	return nil
}
