package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is `ingest dev`: throwaway services to try connectors with,
// nothing to install. `ingest dev kafka` serves franz-go's in-process
// Kafka-compatible broker (kfake, the one the tests use) on 127.0.0.1,
// writes sample records to one topic and prints what is committed to
// another, so examples/kafka.yaml runs in a second terminal.

// devCmd groups the development services.
func devCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dev", Short: "Throwaway services for trying connectors locally"}
	cmd.AddCommand(devKafkaCmd())
	return cmd
}

// defaultDevKafka is where `ingest dev kafka` listens by default, and the
// brokers examples/kafka.yaml uses unless KAFKA_BROKERS says otherwise.
const defaultDevKafka = "127.0.0.1:9092"

// devKafka are the flags of `ingest dev kafka`.
type devKafka struct {
	port       int
	partitions int
	topics     []string
	// produce is the topic sample records are written to ("" for none), at
	// rate records per second.
	produce string
	rate    float64
	// watch is the topic whose committed records are printed ("" for none).
	watch string
}

func devKafkaCmd() *cobra.Command {
	var d devKafka
	cmd := &cobra.Command{
		Use:   "kafka",
		Short: "Serve an in-memory Kafka-compatible broker on 127.0.0.1 for examples/kafka.yaml",
		Long: `Serve franz-go's in-process Kafka-compatible broker (kfake) on 127.0.0.1, in
memory, until Ctrl-C. It creates the --topics, writes --rate sample records a
second to --produce, and prints to stdout every record committed to --watch
as a read-committed consumer sees it: a transactional sink's output appears
one checkpoint at a time. In a second terminal:

  ingest run examples/kafka.yaml

Sample records are {"id": i, "key": i % 10, "value": i % 1000, "ts": <epoch
ms of the wall clock>}, keyed by key. The topics live as long as the broker:
after restarting it, delete the pipeline's checkpoints (for the example,
examples/data/kafka/) or the pipeline refuses offsets that no longer exist.

It is for trying things out, not a Kafka: no replication, nothing on disk,
and transactions differ from a real broker's in corner cases (it aborts a
fenced producer's transaction at once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return d.run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&d.port, "port", 9092, "port on 127.0.0.1 to listen on (0 picks a free one)")
	f.IntVar(&d.partitions, "partitions", 4, "partitions of each topic")
	f.StringSliceVar(&d.topics, "topics", []string{"events", "totals"}, "topics to create")
	f.StringVar(&d.produce, "produce", "events", `topic to write sample records to ("" for none)`)
	f.Float64Var(&d.rate, "rate", 100, "sample records per second")
	f.StringVar(&d.watch, "watch", "totals", `topic whose committed records are printed to stdout ("" for none)`)
	return cmd
}

// run serves the broker until ctx is done.
func (d *devKafka) run(ctx context.Context, stdout, stderr io.Writer) error {
	switch {
	case d.port < 0 || d.port > 65535:
		return &exitError{code: exitConfig, err: fmt.Errorf("--port %d is not a port", d.port)}
	case d.partitions < 1:
		return &exitError{code: exitConfig, err: fmt.Errorf("--partitions %d must be positive", d.partitions)}
	case d.produce != "" && d.rate <= 0:
		return &exitError{code: exitConfig, err: fmt.Errorf("--rate %g must be positive", d.rate)}
	}
	topics := d.topics
	for _, t := range []string{d.produce, d.watch} {
		if t != "" && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	c, err := kfake.NewCluster(kfake.Ports(d.port), kfake.SeedTopics(int32(d.partitions), topics...))
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("the broker cannot listen on 127.0.0.1:%d: %w; choose another port with --port", d.port, err)}
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	fmt.Fprintf(stderr, "Kafka-compatible broker (kfake, in memory) listening on %s\n", addr)
	fmt.Fprintf(stderr, "topics: %s (%d partitions each)\n", strings.Join(topics, ", "), d.partitions)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if d.produce != "" {
		fmt.Fprintf(stderr, "writing %g sample records a second to %s\n", d.rate, d.produce)
		wg.Go(func() { errs <- d.produceSamples(ctx, addr) })
	}
	if d.watch != "" {
		fmt.Fprintf(stderr, "printing the records committed to %s (read committed)\n", d.watch)
		wg.Go(func() { errs <- d.printCommitted(ctx, addr, stdout) })
	}
	try := "ingest run examples/kafka.yaml"
	if addr != defaultDevKafka {
		try = "KAFKA_BROKERS=" + addr + " " + try
	}
	fmt.Fprintf(stderr, "in another terminal: %s\nCtrl-C stops the broker, and its topics go with it\n", try)
	var failed error
	select {
	case <-ctx.Done():
	case failed = <-errs:
	}
	cancel()
	wg.Wait()
	if failed != nil && !errors.Is(failed, context.Canceled) {
		return &exitError{code: exitFailed, err: failed}
	}
	return nil
}

// sampleRecord is sample record i at ts (epoch milliseconds).
func sampleRecord(topic string, i, ts int64) *kgo.Record {
	key := i % 10
	return &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%d", key),
		Value: fmt.Appendf(nil, `{"id":%d,"key":%d,"value":%d,"ts":%d}`, i, key, i%1000, ts)}
}

// produceSamples writes d.rate sample records a second to d.produce until
// ctx is done, each stamped with the wall-clock time it is made at.
func (d *devKafka) produceSamples(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return fmt.Errorf("sample producer: %w", err)
	}
	defer cl.Close()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var i int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			// As many records as the rate owes by now: steady however the
			// ticks are delayed.
			for due := int64(now.Sub(start).Seconds() * d.rate); i < due; i++ {
				if err := cl.ProduceSync(ctx, sampleRecord(d.produce, i, now.UnixMilli())).FirstErr(); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("sample producer: %w", err)
				}
			}
		}
	}
}

// printCommitted prints the value of every record committed to d.watch,
// one a line, until ctx is done.
func (d *devKafka) printCommitted(ctx context.Context, addr string, w io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(d.watch),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("watching %s: %w", d.watch, err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			return fmt.Errorf("watching %s: partition %d: %w", e.Topic, e.Partition, e.Err)
		}
		var b []byte
		fs.EachRecord(func(r *kgo.Record) { b = append(append(b, r.Value...), '\n') })
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("watching %s: %w", d.watch, err)
		}
	}
}
