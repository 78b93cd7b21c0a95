package testkit

import (
	"fmt"
	"strings"
	"time"
)

// WindowPipeline is the contract pipeline — datagen → per-key 1 s
// tumbling window with count() and sum(value) → sink — with the knobs the
// end-to-end tests turn. Zero values leave a setting out (its default
// applies). Its source is "events", its window "per_key", its sink "out"
// writing data/out, its checkpoints under data/checkpoints.
type WindowPipeline struct {
	Name              string
	Interval          time.Duration // checkpoint interval
	Retain            int
	TolerableFailures int
	RestartDelay      time.Duration
	MaxAttempts       int
	// Count is the number of records; 0 makes the source unbounded.
	Count int64
	Rate  int64
	Keys  int64
	// Parallelism of the source and the sink.
	Parallelism int
	// WindowParallelism of the window.
	WindowParallelism int
	// Sink is "file" (the default) or "stdout".
	Sink string
	// StateDir, when set, keeps keyed state in the pebble backend in this
	// directory (relative to the pipeline file): a top-level
	// state: {backend: pebble, dir: StateDir}. Unset, state is in memory.
	StateDir string
}

// YAML renders the pipeline file. The lines up to the source's count are
// fixed: pipeline, checkpoint (interval, dir, retain, tolerable_failures),
// restart, then sources.events with type, parallelism and count. The state
// section, when StateDir is set, comes last.
func (p WindowPipeline) YAML() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	opt := func(indent, key string, v any, set bool) {
		if set {
			line("%s%s: %v", indent, key, v)
		}
	}
	line("pipeline: %s", p.Name)
	line("checkpoint:")
	opt("  ", "interval", p.Interval, p.Interval != 0)
	line("  dir: data/checkpoints")
	opt("  ", "retain", p.Retain, p.Retain != 0)
	opt("  ", "tolerable_failures", p.TolerableFailures, p.TolerableFailures != 0)
	if p.RestartDelay != 0 || p.MaxAttempts != 0 {
		line("restart:")
		opt("  ", "delay", p.RestartDelay, p.RestartDelay != 0)
		// A fixed delay: the tests that set one count on restarts that
		// come quickly however many fail in a row.
		opt("  ", "multiplier", 1, p.RestartDelay != 0)
		opt("  ", "max_attempts", p.MaxAttempts, p.MaxAttempts != 0)
	}
	line("sources:")
	line("  events:")
	line("    type: datagen")
	opt("    ", "parallelism", p.Parallelism, p.Parallelism != 0)
	opt("    ", "count", p.Count, p.Count != 0)
	opt("    ", "rate", p.Rate, p.Rate != 0)
	opt("    ", "keys", p.Keys, p.Keys != 0)
	line("transforms:")
	line("  per_key:")
	line("    type: window")
	line("    input: events")
	line("    key: key")
	line("    size: 1s")
	opt("    ", "parallelism", p.WindowParallelism, p.WindowParallelism != 0)
	line("    aggregates:")
	line("      count: count()")
	line("      sum: sum(value)")
	line("sinks:")
	line("  out:")
	sink := p.Sink
	if sink == "" {
		sink = "file"
	}
	line("    type: %s", sink)
	line("    input: per_key")
	if sink == "file" {
		line("    path: data/out")
	}
	opt("    ", "parallelism", p.Parallelism, p.Parallelism != 0)
	if p.StateDir != "" {
		line("state:")
		line("  backend: pebble")
		line("  dir: %s", p.StateDir)
	}
	return b.String()
}

// SQL renders the same pipeline as a SQL script (see docs/sql.md): the
// window's output has the fields, names and order of the YAML one. StateDir
// and Sink "stdout" are rendered too; the checkpoint directory is
// data/checkpoints and the file sink's data/out, as in YAML.
func (p WindowPipeline) SQL() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("SET pipeline = '%s';", p.Name)
	if p.Interval != 0 {
		line("SET checkpoint.interval = '%v';", p.Interval)
	}
	line("SET checkpoint.dir = 'data/checkpoints';")
	if p.Retain != 0 {
		line("SET checkpoint.retain = %d;", p.Retain)
	}
	if p.TolerableFailures != 0 {
		line("SET checkpoint.tolerable_failures = %d;", p.TolerableFailures)
	}
	if p.RestartDelay != 0 {
		line("SET restart.delay = '%v';", p.RestartDelay)
		line("SET restart.multiplier = 1;")
	}
	if p.MaxAttempts != 0 {
		line("SET restart.max_attempts = %d;", p.MaxAttempts)
	}
	if p.StateDir != "" {
		line("SET state.backend = 'pebble';")
		line("SET state.dir = '%s';", p.StateDir)
	}
	src := []string{"connector = 'datagen'"}
	for _, o := range []struct {
		k string
		v int64
	}{{"parallelism", int64(p.Parallelism)}, {"count", p.Count}, {"rate", p.Rate}, {"keys", p.Keys}} {
		if o.v != 0 {
			src = append(src, fmt.Sprintf("%s = %d", o.k, o.v))
		}
	}
	line("CREATE SOURCE events WITH (%s);", strings.Join(src, ", "))
	sink := p.Sink
	if sink == "" {
		sink = "file"
	}
	opts := []string{fmt.Sprintf("connector = '%s'", sink)}
	if sink == "file" {
		opts = append(opts, "path = 'data/out'")
	}
	if p.Parallelism != 0 {
		opts = append(opts, fmt.Sprintf("parallelism = %d", p.Parallelism))
	}
	// The window's parallelism is the pipeline's default here: SQL sets no
	// per-query parallelism yet.
	if p.WindowParallelism != 0 {
		line("SET parallelism = %d;", p.WindowParallelism)
	}
	line("CREATE SINK out AS")
	line("  SELECT key, window_start, window_end, count(*) AS count, sum(value) AS sum")
	line("  FROM TUMBLE(events, event_time, INTERVAL '1' SECOND)")
	line("  GROUP BY key, window_start")
	line("  WITH (%s);", strings.Join(opts, ", "))
	return b.String()
}
