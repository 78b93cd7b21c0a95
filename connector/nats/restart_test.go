package nats_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
)

// embedded is an in-process nats-server with JetStream on a file store, so
// it can be restarted with its streams intact.
type embedded struct {
	t     *testing.T
	store string
	port  int
	srv   *server.Server
}

func startEmbedded(t *testing.T) *embedded {
	t.Helper()
	e := &embedded{t: t, store: t.TempDir(), port: -1}
	e.start()
	e.port = e.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(e.stop)
	return e
}

func (e *embedded) url() string { return e.srv.ClientURL() }

// start starts the server on e.port (random when -1) with e.store.
func (e *embedded) start() {
	e.t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: e.port, JetStream: true, StoreDir: e.store, NoLog: true, NoSigs: true})
	if err != nil {
		e.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		e.t.Fatal("embedded nats-server not ready after 10s")
	}
	e.srv = srv
}

// stop shuts the server down and waits until it is gone.
func (e *embedded) stop() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.srv = nil
	}
}

// The server restarts while the pipeline runs. With enough reconnect
// attempts the source rides the outage out (it recreates its consumer,
// which the restart dropped); with few, the connection closes, the task
// fails and the job restarts from its last checkpoint, retrying until the
// server is back. Either way the committed output is exact.
func TestServerRestartDuringPipeline(t *testing.T) {
	const n, keys = 10000, 10
	for _, tc := range []struct {
		name          string
		maxReconnects int
		outage        time.Duration
		restarts      bool
	}{
		{name: "source-reconnects", maxReconnects: 100, outage: 300 * time.Millisecond},
		{name: "task-fails-job-recovers", maxReconnects: 1, outage: time.Second, restarts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEmbedded(t)
			began := time.Now()
			f := newStream(t, e.url())
			f.publishEvents(0, n, keys)
			t.Logf("published %d messages in %v", n, time.Since(began).Round(time.Millisecond))

			cfg := f.config()
			cfg.StopAt = nats.StopAtLatest
			cfg.BatchSize = 100
			cfg.ReconnectWait = 50 * time.Millisecond
			cfg.MaxReconnects = tc.maxReconnects
			c := &chaos{pace: 2 * time.Millisecond}
			dir := t.TempDir()
			opts := jobOptions(dir)
			opts.Restart = runtime.RestartOptions{Delay: 100 * time.Millisecond, MaxAttempts: 50}
			job := windowJob(t, eventSource(t, cfg), c, dir, opts)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- job.Run(ctx) }()
			for job.Stats().Completed < 3 {
				select {
				case err := <-done:
					t.Fatalf("the job ended before the restart: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			e.stop()
			time.Sleep(tc.outage)
			select {
			case err := <-done:
				t.Fatalf("the job ended during the outage: %v", err)
			default:
			}
			e.start()
			restarted := time.Now()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkWindows(t, dir, n, keys)
			st := job.Stats()
			if tc.restarts && st.Restarts == 0 {
				t.Errorf("the connection closed after %d reconnects during a %v outage, yet the job did not restart", tc.maxReconnects, tc.outage)
			}
			if !tc.restarts && st.Restarts != 0 {
				t.Errorf("the source should have ridden out a %v outage; the job restarted %d times", tc.outage, st.Restarts)
			}
			t.Logf("%d checkpoints, %d restarts; the job ended %v after the server was back", st.Completed, st.Restarts, time.Since(restarted).Round(time.Millisecond))
		})
	}
}

// The source warns when its connection drops, and says nothing of the kind
// when it closes the connection itself.
func TestDisconnectWarningOnlyWhenUnexpected(t *testing.T) {
	e := startEmbedded(t)
	f := newStream(t, e.url())
	f.publishEvents(0, 10, 2)
	openLogged := func() (runtime.Source, *testkit.SyncBuffer) {
		t.Helper()
		buf := &testkit.SyncBuffer{}
		s := runtime.EraseSource(eventSource(t, f.config()).NewSubtask())
		ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "events"}, Parallelism: 1, MaxParallelism: 128,
			Output: &collector[event]{}, JobID: "job", Log: slog.New(slog.NewTextHandler(buf, nil))}
		if err := s.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s, buf
	}
	const warning = "disconnected; reconnecting"

	s, buf := openLogged()
	if _, err := s.Read(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // nats.go runs its callbacks on another goroutine
	if strings.Contains(buf.String(), warning) {
		t.Errorf("a normal Close logged %q:\n%s", warning, buf)
	}

	s, buf = openLogged()
	defer s.Close()
	e.stop()
	defer e.start()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(buf.String(), warning); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server went away and the source did not log %q:\n%s", warning, buf)
		}
	}
}
