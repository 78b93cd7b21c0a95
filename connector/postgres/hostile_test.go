package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/internal/testkit"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// Hostile cases of the PostgreSQL sink: each test names the sentence of
// checkpointing.txt it defends and the issue item.

// startJob starts the window pipeline (1 s of input) into sink with
// checkpoints every 15 ms, restart options rs and its log into log, and
// returns the job and the channel Run's result arrives on.
func startJob(t *testing.T, f *fixture, sink *postgres.Sink[windowRow], rs runtime.RestartOptions, log *testkit.SyncBuffer) (*runtime.Job, <-chan error) {
	t.Helper()
	p := windowPipeline(t, f.pipeline, sink, &chaos{})
	ck := checkpoint.DefaultOptions()
	ck.Interval = 15 * time.Millisecond
	ck.TolerableFailures = 1000
	job, err := p.NewJob(stream.RunOptions{CheckpointDir: filepath.Join(t.TempDir(), "checkpoints"), Checkpoint: ck, Restart: rs,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	return job, done
}

// await polls cond until it holds; it fails the test if the job ended
// first, or after 60 s.
func await(t *testing.T, what string, done <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("waiting for %s: the job ended: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tableExists reports whether table name exists in the fixture's schema.
func (f *fixture) tableExists(name string) bool {
	f.t.Helper()
	return f.int64("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", f.schema, name) == 1
}

// checkpointing.txt: "A restart must not lose accepted data" — a target
// table renamed for a while mid-run (a migration, an operator's mistake) is
// a destination briefly unavailable, not a checkpoint that does not fit:
// the commits fail with undefined_table (42P01), the job restarts with its
// backoff, and once the table is back it publishes everything exactly once.
// Before, the job stopped for good with "checkpoint incompatible with the
// pipeline: a restart cannot cure this". (#12 item 11)
func TestTargetRenamedMidRunIsRestartedThrough(t *testing.T) {
	f := newFixture(t)
	sink, err := postgres.NewSink(f.config("windows", postgres.Append), windowColumns, windowValues)
	if err != nil {
		t.Fatal(err)
	}
	var log testkit.SyncBuffer
	job, done := startJob(t, f, sink, runtime.RestartOptions{Delay: 5 * time.Millisecond, MaxAttempts: 1000}, &log)
	await(t, "a published checkpoint", done, func() bool { return f.tableExists("windows") && f.count("windows") > 0 })
	f.exec("ALTER TABLE " + f.quoted("windows") + " RENAME TO windows_away")
	restarts := job.Stats().Restarts
	// Commits and recoveries fail while the table is away: the job keeps
	// restarting instead of stopping.
	await(t, "two restarts while the table is renamed", done, func() bool { return job.Stats().Restarts >= restarts+2 })
	f.exec("ALTER TABLE " + f.quoted("windows_away") + " RENAME TO windows")
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want the job to ride out the rename", err)
	}
	t.Logf("stats %+v", job.Stats())
	checkWindows(t, f, testkit.ExpectedWindows(pipeCount, windowKeys, datagen.DefaultStartTime, time.Millisecond, time.Second))
	// The restarts say what happened and what the job does about it.
	text := log.String()
	if !strings.Contains(text, "job failed; restarting") || !strings.Contains(text, "42P01") || !strings.Contains(text, "renamed or dropped") {
		t.Errorf("the log does not report the missing table clearly:\n%s", text)
	}
	if strings.Contains(text, "checkpoint incompatible") {
		t.Errorf("the log blames the checkpoint for a destination error:\n%s", text)
	}
}

// pgProxy forwards TCP connections to the real server until it is told the
// server is down: then it cuts every open connection and refuses new ones,
// as a server that crashed or a network that failed would.
type pgProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

// newPGProxy starts a proxy to the server realDSN names and returns it with
// a DSN through it.
func newPGProxy(t *testing.T) (*pgProxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(realDSN())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: ln.Addr().String(), Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return p, u.String()
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

// track registers c unless the server is down.
func (p *pgProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *pgProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		c.Close()
		if s != nil {
			s.Close()
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// setDown starts (true) or ends (false) the outage.
func (p *pgProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// checkpointing.txt: "A restart must not lose accepted data" — a PostgreSQL
// outage longer than the former default restart budget (10 restarts 1 s
// apart: ~17 s) is survived with the default strategy (1 s doubling to
// 1 min, giving up after 10 min without a completed checkpoint): the server
// is unreachable until the job has restarted 12 times, and the job then
// ends with exact output. The restart pauses run on a fake clock; the
// sink's own retries are off so that every failure reaches the restart
// strategy at once. (#12 item 11, item 4d)
func TestOutageLongerThanTheFormerRestartBudgetIsSurvived(t *testing.T) {
	f := newFixture(t)
	proxy, dsn := newPGProxy(t)
	cfg := f.config("windows", postgres.Append)
	cfg.DSN = dsn
	cfg.CommitRetries = -1 // no retries in place
	sink, err := postgres.NewSink(cfg, windowColumns, windowValues)
	if err != nil {
		t.Fatal(err)
	}
	rs := runtime.DefaultRestartOptions()
	clock := testkit.NewInstantClock()
	rs.Clock = clock
	var log testkit.SyncBuffer
	job, done := startJob(t, f, sink, rs, &log)
	await(t, "a published checkpoint", done, func() bool { return f.tableExists("windows") && f.count("windows") > 0 })
	// The outage ends at the 12th restart pause after it began, decided by
	// the restart loop itself: a poll from here could see the count late,
	// after the instant pauses used up the budget.
	clock.AtPause(12, func() { proxy.setDown(false) })
	proxy.setDown(true)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after an outage of 12 restarts, want the default strategy to ride it out", err)
	}
	t.Logf("stats %+v", job.Stats())
	if r := job.Stats().Restarts; r < 12 {
		t.Fatalf("%d restarts, want at least the outage's 12", r)
	}
	checkWindows(t, f, testkit.ExpectedWindows(pipeCount, windowKeys, datagen.DefaultStartTime, time.Millisecond, time.Second))
}

// #12 item 1 at the sink: a checkpoint ingest_sink_progress records as
// published counts as this commit's only when the record names the same
// staged rows. The same id naming other rows (the checkpoint ledger deleted
// and the id used again) fails loudly, publishing nothing and keeping the
// rows staged, instead of answering "already committed" and dropping them.
// checkpointing.txt: "A prepared commit can be retried, completed, or
// identified as already committed without publishing duplicates."
func TestHostileReusedIDIsNotAlreadyCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newItemSink(t, f.config("out", postgres.Append))
	w0, w1 := openWriter(t, s, 0, testJob), openWriter(t, s, 1, testJob)
	write(t, w0, item{1, "first", 0})
	first := commitOf(7, 0, snapshot(t, w0, 7))
	commit(t, s.Committer(), testJob, first)
	commit(t, s.Committer(), testJob, first) // the same commit again: recognised
	write(t, w1, item{2, "second", 0})
	second := commitOf(7, 0, snapshot(t, w1, 7))
	err := s.Committer().Commit(context.Background(), testJob, second)
	if !errors.Is(err, postgres.ErrPublishedDiffers) || !errors.Is(err, runtime.ErrUnrecoverable) {
		t.Fatalf("Commit of other rows under id 7 = %v, want ErrPublishedDiffers", err)
	}
	if !strings.Contains(err.Error(), "ledger") {
		t.Errorf("the error does not name the likely cause: %v", err)
	}
	if got := f.items("out"); len(got) != 1 || got[0].Name != "first" {
		t.Fatalf("target holds %v, want the first commit's row only", got)
	}
	if n := f.count("out__ingest_staging"); n != 1 {
		t.Fatalf("%d rows staged after the refused commit, want the second's 1", n)
	}
}
