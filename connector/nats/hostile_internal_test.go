package nats

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/internal/natstest"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// Hostile cases of the NATS source. Each names the sentence of
// checkpointing.txt it defends and the issue item.

// hostileServer starts an in-process nats-server with JetStream on a file
// store in dir, on port (random when 0).
func hostileServer(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("embedded nats-server not ready after 10s")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// hostileCollector keeps what a reader emits.
type hostileCollector struct{ recs []runtime.Record[int64] }

func (c *hostileCollector) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[int64])
	if !ok {
		return errors.New("unexpected batch type")
	}
	c.recs = append(c.recs, b...)
	return nil
}

// A source that cannot look at its stream (the server is restarting, the
// connection is down) for longer than idle_timeout is not idle: messages
// may be waiting, and counting it idle lets the pipeline's other inputs move
// the watermark past them. Only a pull that finds nothing pending makes it
// idle, and then it does become idle. Processing time is the test's clock.
//
// checkpointing.txt: "A restart must not lose accepted data" — nor may an
// outage the source rides out; #12 item 4c.
func TestOutageIsNotIdleness(t *testing.T) {
	dir := t.TempDir()
	srv := hostileServer(t, dir, 0)
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := natsgo.Connect(srv.ClientURL(), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := natstest.CreateStream(ctx, js, jetstream.StreamConfig{Name: "HOSTILE", Subjects: []string{"hostile.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int64) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, "hostile.ev", strconv.AppendInt(nil, i, 10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 10)

	cfg := SourceConfig{URL: srv.ClientURL(), Stream: "HOSTILE", RetryBackoff: 10 * time.Millisecond, PollInterval: time.Millisecond,
		MaxReconnects: 1000, ReconnectWait: 10 * time.Millisecond, Watermark: watermark.Strategy{IdleTimeout: 2 * time.Second}}
	src, err := NewSource(cfg, func(m Message) (int64, int64, error) {
		i, err := strconv.ParseInt(string(m.Data), 10, 64)
		return i, int64(time.Hour) + i*int64(time.Millisecond), err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r := src.NewSubtask().(*reader[int64])
	r.clock = func() time.Time { return clock }
	out := &hostileCollector{}
	if err := r.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "in"}, Parallelism: 1}, runtime.EmitTo[int64](out)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	read := func(step time.Duration) runtime.ReadResult {
		t.Helper()
		clock = clock.Add(step)
		res, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // real time for the server and the client
		return res
	}
	readUntil := func(what string, cond func(runtime.ReadResult) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			res := read(10 * time.Millisecond)
			if len(out.recs) < 20 && res.Idle {
				t.Fatalf("%s: idle while messages %d-19 are in the stream", what, len(out.recs))
			}
			if cond(res) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached within 60s (%d records, idle %v)", what, len(out.recs), res.Idle)
			}
		}
	}
	readUntil("reading the first 10", func(runtime.ReadResult) bool { return len(out.recs) == 10 })
	// Ten more messages, then the server goes down before the source reads
	// them, for 3s of processing time.
	publish(10, 20)
	srv.Shutdown()
	srv.WaitForShutdown()
	down := clock
	for range 30 {
		if res := read(100 * time.Millisecond); res.Idle {
			t.Fatalf("idle after %v of outage, with messages 10-19 waiting in the stream", clock.Sub(down))
		}
	}
	hostileServer(t, dir, port)
	readUntil("reading the rest after the outage", func(runtime.ReadResult) bool { return len(out.recs) == 20 })
	// Everything read: the source looks, finds nothing and becomes idle
	// after the timeout.
	readUntil("idle once drained", func(res runtime.ReadResult) bool { return res.Idle })
	for i, rec := range out.recs {
		if rec.Value != int64(i) {
			t.Fatalf("record %d is message %d", i, rec.Value)
		}
	}
}
