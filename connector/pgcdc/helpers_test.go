package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// The tests reach the real PostgreSQL server (wal_level = logical) at
// 127.0.0.1:5432, user postgres, database test; INGEST_POSTGRES_DSN
// overrides it. Without a server they are skipped, or fail under
// INGEST_REQUIRE_SERVICES=1. Each test works in a schema of its own, with a
// replication slot and publication of its own, all dropped when it ends.

// realDSN is the server the tests use.
func realDSN() string {
	if d := os.Getenv("INGEST_POSTGRES_DSN"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

// deadline bounds every wait for an event of the server or the job: far
// longer than any of them takes, so that only a real hang reaches it.
const deadline = 60 * time.Second

// requireServer connects to the real server with the source's session
// settings (connectSQL), or skips the test (fails it under
// INGEST_REQUIRE_SERVICES=1).
func requireServer(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := connectSQL(ctx, realDSN())
	var level string
	if err == nil {
		err = conn.QueryRow(ctx, "SHOW wal_level").Scan(&level)
		if err == nil && level != "logical" {
			err = fmt.Errorf("wal_level is %s, not logical", level)
		}
	}
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL with wal_level = logical at 127.0.0.1:5432 (or INGEST_POSTGRES_DSN) is not usable (%v): start it (user postgres, trust auth, database test) to run this test", err)
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg + " (INGEST_REQUIRE_SERVICES=1)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pipelines limits the pipelines running at once: each holds a replication
// slot and a WAL sender (two while it takes a snapshot), and the server
// has max_replication_slots and max_wal_senders of 10 by default.
var pipelines = make(chan struct{}, 3)

// fixture is a schema, slot and publication of one test.
type fixture struct {
	t    *testing.T
	conn *pgx.Conn
	// schema is the test's schema; slot and pub the names of its slot and
	// publication (the same name).
	schema, slot, pub string
}

// newFixture creates the test's schema and registers the dropping of it,
// of the slot and of the publication.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	conn := requireServer(t)
	select {
	case pipelines <- struct{}{}:
	case <-time.After(2 * time.Minute):
		t.Fatal("no pipeline slot freed in 2 minutes")
	}
	t.Cleanup(func() { <-pipelines })
	name := uniqueName(t)
	f := &fixture{t: t, conn: conn, schema: name, slot: name, pub: name}
	f.exec("CREATE SCHEMA " + pgx.Identifier{name}.Sanitize())
	t.Cleanup(f.drop)
	return f
}

// drop removes the slot (retrying while the job's WAL sender lets go of
// it), the publication and the schema.
func (f *fixture) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	conn, err := pgx.Connect(ctx, realDSN())
	if err != nil {
		f.t.Errorf("cleanup: connecting: %v", err)
		return
	}
	defer conn.Close(context.Background())
	if err := dropSlot(ctx, conn, f.slot); err != nil {
		f.t.Errorf("cleanup: %v", err)
	}
	for _, q := range []string{
		"DROP PUBLICATION IF EXISTS " + pgx.Identifier{f.pub}.Sanitize(),
		"DROP SCHEMA IF EXISTS " + pgx.Identifier{f.schema}.Sanitize() + " CASCADE",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			f.t.Errorf("cleanup: %s: %v", q, err)
		}
	}
}

// dropSlot drops slot if it exists. A slot stays active for a moment after
// the job's replication connection closes; after 10 s of that, the WAL
// sender holding it (this test's) is terminated.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	start := time.Now()
	for {
		var active bool
		var pid *int32
		err := conn.QueryRow(ctx, "SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active, &pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading slot %s: %w", slot, err)
		}
		if !active {
			_, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
			if err == nil || !strings.Contains(err.Error(), "is active") {
				if err != nil && strings.Contains(err.Error(), "does not exist") {
					return nil
				}
				return err
			}
		} else if time.Since(start) > 10*time.Second && pid != nil {
			_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("slot %s stayed active: %w", slot, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uniqueName derives a lower-case identifier (a valid slot name) from the
// test's name and a random suffix.
func uniqueName(t testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	base := strings.TrimPrefix(b.String(), "test")
	if len(base) > 24 {
		base = base[:24]
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "cdc_" + base + "_" + hex.EncodeToString(rnd[:])
}

// table is the unquoted qualified name of table name, as Config.Tables
// takes it; quoted is it quoted for SQL.
func (f *fixture) table(name string) string  { return f.schema + "." + name }
func (f *fixture) quoted(name string) string { return pgx.Identifier{f.schema, name}.Sanitize() }

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := f.conn.Exec(ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// config is a source configuration for the fixture's tables.
func (f *fixture) config(tables ...string) Config {
	cfg := Config{DSN: realDSN(), Slot: f.slot, Publication: f.pub, ChunkRows: 3}
	for _, t := range tables {
		cfg.Tables = append(cfg.Tables, f.table(t))
	}
	return cfg
}

// slotExists says whether the fixture's slot exists.
func (f *fixture) slotExists() bool {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var n int
	if err := f.conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n > 0
}

// collector is a sink keeping every record it is given, in order. It is
// exactly-once as a transactional sink is: a restart drops the records
// written after the barrier of the checkpoint restored (their count is its
// state), and the source replays them.
type collector struct {
	mu   sync.Mutex
	recs []row.Row
	// covered is the most records written before the barrier of a
	// checkpoint that completed (0 until one covering records completes).
	covered  int
	barriers map[int64]int
}

func (c *collector) Descriptor() connector.Descriptor         { return connector.Descriptor{Type: "collect"} }
func (c *collector) Describe() string                         { return "collect" }
func (c *collector) Committer() runtime.Committer             { return nil }
func (c *collector) NewSubtask() runtime.SinkSubtask[row.Row] { return &collectorSub{c: c} }

// records returns a copy of the records so far.
func (c *collector) records() []row.Row {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.recs)
}

// coveredRecords is the most records a completed checkpoint covers.
func (c *collector) coveredRecords() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.covered
}

type collectorSub struct{ c *collector }

func (s *collectorSub) Open(ctx *runtime.Context) error {
	if ctx.Attempt == 0 {
		return nil
	}
	n := 0
	if ctx.Restored != nil && len(ctx.Restored.Inline) > 0 {
		var err error
		if n, err = strconv.Atoi(string(ctx.Restored.Inline)); err != nil {
			return err
		}
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if n < len(s.c.recs) {
		s.c.recs = s.c.recs[:n]
	}
	return nil
}

func (s *collectorSub) Write(b runtime.Batch[row.Row]) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for _, r := range b {
		s.c.recs = append(s.c.recs, slices.Clone(r.Value))
	}
	return nil
}
func (s *collectorSub) ProcessWatermark(int64) error { return nil }
func (s *collectorSub) Snapshot(id int64) (runtime.Snapshot, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.barriers == nil {
		s.c.barriers = map[int64]int{}
	}
	s.c.barriers[id] = len(s.c.recs)
	return runtime.Snapshot{Inline: []byte(strconv.Itoa(len(s.c.recs)))}, nil
}
func (s *collectorSub) NotifyComplete(id int64) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.covered = max(s.c.covered, s.c.barriers[id])
	return nil
}
func (s *collectorSub) Close() error { return nil }

// logs keeps the messages a job logs.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

type logHandler struct {
	l     *logs
	attrs []slog.Attr
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.l.mu.Lock()
	h.l.msgs = append(h.l.msgs, b.String())
	h.l.mu.Unlock()
	return nil
}
func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l: h.l, attrs: append(slices.Clone(h.attrs), as...)}
}
func (h logHandler) WithGroup(string) slog.Handler { return h }

// count is how many messages start with prefix.
func (l *logs) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// running is a job of the source into a collector, run in the background.
type running struct {
	t    *testing.T
	src  *Source
	job  *runtime.Job
	sink *collector
	logs *logs
	// cancel cancels Run's context.
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// newSource makes the source of cfg or fails the test.
func newSource(t *testing.T, cfg Config) *Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	src, err := NewSource(ctx, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return src
}

// start runs src into a new collector with checkpoints every 20 ms in dir
// and a short restart policy (ErrUnrecoverable must stop the job at once
// anyway; the tests check Restarts). The job is cancelled and waited for
// when the test ends, before the fixture's slot is dropped.
func start(t *testing.T, src *Source, dir string) *running {
	t.Helper()
	return startEvery(t, src, dir, 20*time.Millisecond)
}

// startEvery is start with checkpoints every interval.
func startEvery(t *testing.T, src *Source, dir string, interval time.Duration) *running {
	t.Helper()
	p := stream.New("cdc")
	sink := &collector{}
	stream.To(stream.From(p, "cdc", src), "out", sink)
	ck := checkpoint.DefaultOptions()
	ck.Interval = interval
	l := &logs{}
	job, err := p.NewJob(stream.RunOptions{CheckpointDir: filepath.Join(dir, "checkpoints"), Checkpoint: ck,
		Restart: runtime.RestartOptions{Delay: 20 * time.Millisecond, MaxAttempts: 5}, Log: slog.New(logHandler{l: l})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r := &running{t: t, src: src, job: job, sink: sink, logs: l, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = job.Run(ctx)
	}()
	// A cancelled context does not end a job whose source is idle (see
	// TestCancelEndsIdleJob): the job is stopped gracefully instead.
	t.Cleanup(func() {
		defer cancel()
		r.job.Stop()
		select {
		case <-r.done:
		case <-time.After(deadline):
			buf := make([]byte, 1<<20)
			t.Errorf("the job did not stop in %v; goroutines:\n%s", deadline, buf[:goruntime.Stack(buf, true)])
		}
	})
	return r
}

// ended says whether the job has returned.
func (r *running) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitFor waits until cond holds for the records so far; it fails the test
// when the job ends first or the deadline passes.
func (r *running) waitFor(what string, cond func([]row.Row) bool) []row.Row {
	r.t.Helper()
	end := time.Now().Add(deadline)
	for {
		recs := r.sink.records()
		if cond(recs) {
			return recs
		}
		if r.ended() {
			r.t.Fatalf("waiting for %s: the job ended (%v) with %d records:\n%s", what, r.err, len(recs), r.dump(recs))
		}
		if time.Now().After(end) {
			r.t.Fatalf("waiting for %s: nothing after %v; %d records:\n%s", what, deadline, len(recs), r.dump(recs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLog waits until a message starting with prefix was logged n times.
func (r *running) waitLog(prefix string, n int) {
	r.t.Helper()
	end := time.Now().Add(deadline)
	for r.logs.count(prefix) < n {
		if r.ended() {
			r.t.Fatalf("waiting for log %q: the job ended (%v)", prefix, r.err)
		}
		if time.Now().After(end) {
			r.t.Fatalf("waiting for log %q ×%d: not logged in %v", prefix, n, deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the job to end and returns Run's error.
func (r *running) wait() error {
	r.t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(deadline):
		r.t.Fatalf("the job did not end in %v", deadline)
		return nil
	}
}

// stop stops the job gracefully (a final checkpoint) and fails the test
// unless Run returns nil.
func (r *running) stop() {
	r.t.Helper()
	r.job.Stop()
	if err := r.wait(); err != nil {
		r.t.Fatalf("stopping: %v", err)
	}
}

// failsAtOnce waits for the job to end and checks that it failed, without
// a restart, with an unrecoverable error containing every part.
func (r *running) failsAtOnce(parts ...string) error {
	r.t.Helper()
	err := r.wait()
	if err == nil {
		r.t.Fatal("the job ended without an error")
	}
	if !errors.Is(err, runtime.ErrUnrecoverable) {
		r.t.Errorf("the error does not wrap runtime.ErrUnrecoverable (the job would be restarted for minutes): %v", err)
	}
	if st := r.job.Stats(); st.Restarts != 0 {
		r.t.Errorf("the job restarted %d times before stopping: %v", st.Restarts, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			r.t.Errorf("the error does not mention %q: %v", p, err)
		}
	}
	return err
}

// field is record rec's value of field name.
func (r *running) field(rec row.Row, name string) row.Value {
	r.t.Helper()
	i := r.src.Schema().Index(name)
	if i < 0 {
		r.t.Fatalf("no field %s in %v", name, r.src.Schema().Names())
	}
	return rec[i]
}

func (r *running) dump(recs []row.Row) string {
	var b strings.Builder
	for i, rec := range recs {
		if i == 200 {
			fmt.Fprintf(&b, "… %d more\n", len(recs)-i)
			break
		}
		b.Write(r.src.Schema().AppendJSON(nil, rec))
		b.WriteByte('\n')
	}
	return b.String()
}

// has is a condition: some record has field name equal to v and the op.
func (r *running) has(op, name string, v row.Value) func([]row.Row) bool {
	return func(recs []row.Row) bool {
		for _, rec := range recs {
			if r.field(rec, OpField).Str() == op && r.field(rec, name) == v {
				return true
			}
		}
		return false
	}
}

// model applies a changelog of one table by its key, in order: inserts and
// updates put the row's columns, deletes remove the key.
func (r *running) model(recs []row.Row) map[string][]row.Value {
	r.t.Helper()
	if len(r.src.tables) != 1 {
		r.t.Fatal("model: one table only")
	}
	t := r.src.tables[0]
	m := map[string][]row.Value{}
	for _, rec := range recs {
		cols := make([]row.Value, len(t.Columns))
		for i := range t.Columns {
			cols[i] = rec[r.src.fields[0][i]]
		}
		k := keyString(t, cols)
		switch op := r.field(rec, OpField).Str(); op {
		case "insert", "update":
			m[k] = cols
		case "delete":
			delete(m, k)
		default:
			r.t.Fatalf("record with _op %q", op)
		}
	}
	return m
}

// keyString is the key of a row of t's columns, as a map key.
func keyString(t *Table, cols []row.Value) string {
	var b []byte
	for _, k := range t.Key {
		b = cols[k].AppendJSON(b)
		b = append(b, 0)
	}
	return string(b)
}

// tableRows reads the source table's rows now, decoded as the source
// decodes them, keyed as model keys them.
func (r *running) tableRows(conn *pgx.Conn) map[string][]row.Value {
	r.t.Helper()
	t := r.src.tables[0]
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = pgx.Identifier{c.Name}.Sanitize() + "::text"
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+t.quoted())
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]row.Value{}
	text := make([]*string, len(cols))
	scan := make([]any, len(cols))
	for i := range text {
		scan[i] = &text[i]
	}
	for rows.Next() {
		if err := rows.Scan(scan...); err != nil {
			r.t.Fatal(err)
		}
		vals := make([]row.Value, len(cols))
		for i, c := range t.Columns {
			if text[i] == nil {
				continue
			}
			v, err := decodeText(c.Kind(), c.OID, *text[i])
			if err != nil {
				r.t.Fatal(err)
			}
			vals[i] = v
		}
		out[keyString(t, vals)] = vals
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// snapshotLSNs are the LSNs of the snapshots the job logged.
func (r *running) snapshotLSNs() map[string]bool {
	r.logs.mu.Lock()
	defer r.logs.mu.Unlock()
	out := map[string]bool{}
	for _, m := range r.logs.msgs {
		if !strings.HasPrefix(m, "postgres_cdc: snapshot ") {
			continue
		}
		for _, f := range strings.Fields(m) {
			if l, ok := strings.CutPrefix(f, "lsn="); ok {
				out[l] = true
			}
		}
	}
	return out
}

// exactlyOnce checks the changelog of one table against the snapshots
// that read it: each key is read by at most one snapshot, every change of
// a key read by a snapshot committed at or after that snapshot (the older
// ones are in it), and no change is emitted twice.
func (r *running) exactlyOnce(recs []row.Row) {
	r.t.Helper()
	snaps := r.snapshotLSNs()
	if len(snaps) == 0 {
		r.t.Fatal("no snapshot LSN logged")
	}
	t := r.src.tables[0]
	read := map[string]pglogrepl.LSN{}
	seen := map[string]bool{}
	for i, rec := range recs {
		cols := make([]row.Value, len(t.Columns))
		for j := range t.Columns {
			cols[j] = rec[r.src.fields[0][j]]
		}
		k := keyString(t, cols)
		lsnText := r.field(rec, LSNField).Str()
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			r.t.Fatalf("record %d: _lsn %q: %v", i, lsnText, err)
		}
		if snaps[lsnText] {
			if at, ok := read[k]; ok {
				r.t.Errorf("record %d: key %s read by the snapshots at %v and %v", i, k, at, lsn)
			}
			read[k] = lsn
			continue
		}
		id := k + "\x00" + r.field(rec, OpField).Str() + "\x00" + lsnText
		if seen[id] {
			r.t.Errorf("record %d: emitted twice: %s", i, r.dump(recs[i:i+1]))
		}
		seen[id] = true
		if at, ok := read[k]; ok && lsn < at {
			r.t.Errorf("record %d: a change committed at %v to a key the snapshot at %v read: %s", i, lsn, at, r.dump(recs[i:i+1]))
		}
	}
}

// sameRows compares a model with the table's rows and reports every
// difference.
func (r *running) sameRows(what string, got, want map[string][]row.Value) {
	r.t.Helper()
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %v", w))
		case !slices.Equal(g, w):
			diffs = append(diffs, fmt.Sprintf("row %v, want %v", g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %v", g))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		if len(diffs) > 30 {
			diffs = append(diffs[:30], fmt.Sprintf("… %d more", len(diffs)-30))
		}
		r.t.Errorf("%s: the changelog applied by key differs from the table (%d rows, want %d):\n%s", what, len(got), len(want), strings.Join(diffs, "\n"))
	}
}
