package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/stream"
)

// benchMessages is how many messages the benchmark stream holds (JSON
// events of about 80 bytes).
const benchMessages = 200_000

// BenchmarkSource measures how many messages per second one source subtask
// reads from the real server (nats://127.0.0.1:4222): a full read of a
// stream of benchMessages with stop_at latest, per iteration.
//
//	go test ./connector/nats -run '^$' -bench Source -benchtime 5x
func BenchmarkSource(b *testing.B) {
	f := newStream(b, requireServer(b))
	f.publishEvents(0, benchMessages, 100)
	raw := func(m nats.Message) ([]byte, int64, error) { return m.Data, nats.Timestamp(m), nil }

	b.Run("raw/batch=1000", func(b *testing.B) { benchRead(b, f, 1000, raw) })
	b.Run("raw/batch=100", func(b *testing.B) { benchRead(b, f, 100, raw) })
	// A filter that reads one subject of four: the source proves, once per
	// batch, that the sequences between hold other subjects' messages.
	b.Run("raw/filter-one-of-four/batch=1000", func(b *testing.B) { benchReadFiltered(b, f, 1000, raw) })
	b.Run("json-time-field/batch=1000", func(b *testing.B) { benchRead(b, f, 1000, nats.JSONWithTime[event]("ts")) })
	b.Run("pipeline-to-discard/batch=1000", func(b *testing.B) {
		cfg := f.config()
		cfg.StopAt = nats.StopAtLatest
		src, err := nats.NewSource(cfg, raw)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for b.Loop() {
			p := stream.New("nats-bench")
			stream.To(stream.From(p, "events", src), "out", stream.Discard[[]byte]())
			ck := checkpoint.DefaultOptions()
			ck.Interval = 100 * time.Millisecond
			if err := p.Run(context.Background(), stream.RunOptions{CheckpointDir: b.TempDir(), Checkpoint: ck}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchMessages*b.N)/time.Since(start).Seconds(), "msgs/s")
	})
}

// benchRead drains the stream with one subtask per iteration.
func benchRead[T any](b *testing.B, f *fixture, batch int, decode func(nats.Message) (T, int64, error)) {
	benchDrain(b, f, "", batch, benchMessages, decode)
}

// benchReadFiltered drains subject ev.1 of the stream (a quarter of it).
func benchReadFiltered[T any](b *testing.B, f *fixture, batch int, decode func(nats.Message) (T, int64, error)) {
	benchDrain(b, f, f.subject("ev.1"), batch, benchMessages/4, decode)
}

func benchDrain[T any](b *testing.B, f *fixture, subject string, batch, want int, decode func(nats.Message) (T, int64, error)) {
	cfg := f.config()
	cfg.StopAt = nats.StopAtLatest
	cfg.BatchSize = batch
	cfg.Subject = subject
	src, err := nats.NewSource(cfg, decode)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		st, err := tryOpen(src, nil)
		if err != nil {
			b.Fatal(err)
		}
		st.drain(b)
		if len(st.out.recs) != want {
			b.Fatalf("read %d messages, want %d", len(st.out.recs), want)
		}
		_ = st.src.Close()
	}
	b.ReportMetric(float64(want*b.N)/time.Since(start).Seconds(), "msgs/s")
}
