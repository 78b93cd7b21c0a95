// Command gowindow builds the quickstart pipeline with the Go API instead of
// YAML: a bounded generator, per-key one-second tumbling windows with count
// and sum, written by the two-phase-commit file sink.
//
//	go run ./examples/gowindow -out /tmp/gowindow
//
// Run it again after Ctrl-C (or kill -9): it resumes from its latest complete
// checkpoint, and the committed output under <out>/results stays exact.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/state"
	"github.com/ingest-engine/ingest/stream"
)

// Totals is the window accumulator: a plain value, so Add never mutates a
// value a snapshot may hold.
type Totals struct {
	Count int64 `json:"count"`
	Sum   int64 `json:"sum"`
}

// totalsCodec encodes Totals in checkpoints.
type totalsCodec struct{}

func (totalsCodec) Name() string { return "example.totals.v1" }

func (totalsCodec) Append(dst []byte, t Totals) []byte {
	return state.Int64Codec{}.Append(state.Int64Codec{}.Append(dst, t.Count), t.Sum)
}

func (totalsCodec) Decode(src []byte) (Totals, int, error) {
	c, n, err := state.Int64Codec{}.Decode(src)
	if err != nil {
		return Totals{}, 0, err
	}
	s, m, err := state.Int64Codec{}.Decode(src[n:])
	return Totals{Count: c, Sum: s}, n + m, err
}

// Output is one committed line.
type Output struct {
	Key         int64     `json:"key"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Count       int64     `json:"count"`
	Sum         int64     `json:"sum"`
}

func main() {
	out := flag.String("out", "data/gowindow", "directory for checkpoints and committed results")
	count := flag.Int64("count", 200_000, "records to generate")
	rate := flag.Float64("rate", 50_000, "records per second")
	flag.Parse()
	if err := run(*out, *count, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "gowindow:", err)
		os.Exit(1)
	}
}

func run(out string, count int64, rate float64) error {
	p := stream.New("gowindow", stream.DefaultParallelism(2))
	src, err := datagen.Events(datagen.Config{Count: count, Rate: rate, Keys: 100})
	if err != nil {
		return err
	}
	events := stream.From(p, "events", src)
	byKey := stream.KeyBy(events, func(e datagen.Event) int64 { return e.Key })
	totals := window.Aggregate[datagen.Event, Totals]{
		Init:  func() Totals { return Totals{} },
		Add:   func(t Totals, e datagen.Event) Totals { return Totals{Count: t.Count + 1, Sum: t.Sum + e.Value} },
		Codec: totalsCodec{},
	}
	perKey := window.Tumbling(byKey, "per_key", time.Second, totals, func(key int64, w window.Window, t Totals) Output {
		return Output{Key: key, WindowStart: time.Unix(0, w.Start).UTC(), WindowEnd: time.Unix(0, w.End).UTC(), Count: t.Count, Sum: t.Sum}
	})
	stream.To(perKey, "results", file.JSONLines[Output](filepath.Join(out, "results")))

	opts := checkpoint.DefaultOptions()
	opts.Interval = time.Second
	job, err := p.NewJob(stream.RunOptions{
		Checkpoint:    opts,
		CheckpointDir: filepath.Join(out, "checkpoints"),
		Log:           slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	g, why := p.Guarantee(opts.Mode)
	fmt.Fprintf(os.Stderr, "delivery guarantee: %s %s\n", g, why)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() { <-signals; job.Stop() }()
	return job.Run(context.Background())
}
