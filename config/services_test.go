package config_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/internal/natstest"
)

// needService skips (or, with INGEST_REQUIRE_SERVICES=1, fails) when addr
// cannot be used.
func needService(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is not reachable (%v); start it on 127.0.0.1 to run this test", what, err)
	if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// newNATSStream connects to NATS JetStream on 127.0.0.1:4222 (see
// needService when it is not there) and creates a stream named
// <prefix>_<nanoseconds> on the subjects <name>.>, deleted with the
// connection when t ends.
func newNATSStream(ctx context.Context, t *testing.T, prefix string) (jetstream.JetStream, string) {
	t.Helper()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222")
	needService(t, "NATS JetStream", err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := natstest.CreateStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		needService(t, "NATS JetStream", err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return js, name
}

// TestConfigNATSWindowPostgres runs the YAML contract pipeline NATS →
// window → PostgreSQL on the real services: JSON messages with an event-time
// field and no declared fields (inferred from the first message), bounded by
// stop_at: latest, one row per (key, window) with exact counts and sums.
func TestConfigNATSWindowPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, name := newNATSStream(ctx, t, "CFG")
	pg, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test")
	needService(t, "PostgreSQL", err)
	defer pg.Close(context.Background())
	table := "cfg_" + fmt.Sprint(time.Now().UnixNano())
	defer pg.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"__ingest_staging")

	const n, keys = 3000, 5
	type agg struct{ count, sum int64 }
	want := map[[2]int64]agg{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := int64(0); i < n; i++ {
		ts := base.Add(time.Duration(i) * 7 * time.Millisecond)
		key := i % keys
		msg := fmt.Sprintf(`{"key":%d,"value":%d,"ts":%q}`, key, i%100, ts.Format(time.RFC3339Nano))
		if _, err := js.Publish(ctx, name+".e", []byte(msg)); err != nil {
			t.Fatal(err)
		}
		w := ts.Truncate(time.Second).UnixMilli()
		a := want[[2]int64{key, w}]
		a.count++
		a.sum += i % 100
		want[[2]int64{key, w}] = a
	}
	runYAML(t, fmt.Sprintf(`pipeline: nats-pg
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  js:
    type: nats
    url: nats://127.0.0.1:4222
    stream: %s
    subject: %s.>
    stop_at: latest
    event_time: {field: ts}
transforms:
  w:
    type: window
    input: js
    key: key
    size: 1s
    parallelism: 2
    aggregates: {count: count(), sum: sum(value)}
sinks:
  pg:
    type: postgres
    input: w
    dsn: postgres://postgres@127.0.0.1:5432/test
    table: %s
    create_table: true
`, name, name, table))
	rows, err := pg.Query(ctx, "SELECT key, window_start, count, sum FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]int64]agg{}
	for rows.Next() {
		var key, count, sum int64
		var start time.Time
		if err := rows.Scan(&key, &start, &count, &sum); err != nil {
			t.Fatal(err)
		}
		k := [2]int64{key, start.UnixMilli()}
		if _, dup := got[k]; dup {
			t.Fatalf("window %v twice", k)
		}
		got[k] = agg{count, sum}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d windows in PostgreSQL, want %d", len(got), len(want))
	}
	for k, a := range want {
		if got[k] != a {
			t.Fatalf("window %v: %+v, want %+v", k, got[k], a)
		}
	}
}

// on_gap reaches the NATS source (#12 item 4a): skip reads on past removed
// messages, fail (the default) stops the job; another value is an error
// naming the line.
func TestConfigNATSOnGap(t *testing.T) {
	src := func(onGap string) string {
		return `pipeline: p
sources:
  events:
    type: nats
    url: nats://127.0.0.1:1
    stream: s
    fields: {id: int}
` + onGap + `sinks:
  out:
    type: stdout
    input: events
`
	}
	for _, tc := range []struct{ line, want string }{
		{"", ""},
		{"    on_gap: fail\n", ""},
		{"    on_gap: skip\n", "on_gap skip"},
	} {
		p, _ := load(t, src(tc.line))
		plan := mustPlan(t, p)
		if got := strings.Contains(plan, "on_gap skip"); got != (tc.want != "") {
			t.Errorf("%q: plan %q", tc.line, plan)
		}
	}
	// A stream is read by one subtask: a pipeline-wide parallelism does not
	// apply to the source, an explicit one above 1 is refused.
	p, _ := load(t, "parallelism: 3\n"+src(""))
	if plan := mustPlan(t, p); !strings.Contains(plan, "events (parallelism 1): nats stream s") || !strings.Contains(plan, "out (parallelism 3)") {
		t.Errorf("pipeline parallelism 3: plan %q, want the source at 1 and the sink at 3", plan)
	}
	if lines := parseErrs(t, src("    parallelism: 2\n")); !strings.Contains(strings.Join(lines, "\n"), "nats source events: parallelism 2, at most 1: a JetStream stream is one ordered sequence") {
		t.Errorf("parallelism 2 on the source: errors\n  %s", strings.Join(lines, "\n  "))
	}
	lines := parseErrs(t, src("    on_gap: sometimes\n"))
	if want := `p.yaml:8: sources.events.on_gap: unknown value "sometimes" (known: fail, skip)`; !hasLine(lines, want) {
		t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), want)
	}
}

// The YAML of issue 17's contract, with keep_metadata: a postgres_cdc
// source upserted into PostgreSQL ends equal to the table, and the replica
// keeps the records' _table, _lsn and _commit_time (not _op, which it
// applied) only when asked to; without keep_metadata it has the table's
// columns alone.
func TestConfigPostgresCDCToUpsert(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg := cdcServer(t)
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_metadata=%v", keep), func(t *testing.T) {
			name, exec := cdcTable(t, pg, "cfgcdc", "id bigint PRIMARY KEY, owner text, balance bigint")
			exec("INSERT INTO " + name + " SELECT g, 'o' || g, g FROM generate_series(1, 50) g")
			doc := fmt.Sprintf(`pipeline: %s
checkpoint: {interval: 50ms, dir: ckpts}
sources:
  cdc:
    type: postgres_cdc
    dsn: postgres://postgres@127.0.0.1:5432/test
    tables: [public.%s]
    slot: %s
    publication: %s
    chunk_rows: 7
    stop_at: latest
sinks:
  replica:
    type: postgres
    input: cdc
    dsn: postgres://postgres@127.0.0.1:5432/test
    table: %s_replica
    mode: upsert
    key: [id]
    create_table: true
    keep_metadata: %v
`, name, name, name, name, name, keep)
			runYAML(t, doc)
			var cols []string
			rows, err := pg.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position", name+"_replica")
			if err != nil {
				t.Fatal(err)
			}
			if cols, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			want := "id owner balance"
			if keep {
				want += " _table _lsn _commit_time"
			}
			if got := strings.Join(cols, " "); got != want {
				t.Fatalf("replica columns %q, want %q", got, want)
			}
			var diff int
			q := "SELECT count(*) FROM ((SELECT id, owner, balance FROM %[1]s EXCEPT SELECT id, owner, balance FROM %[1]s_replica) UNION ALL (SELECT id, owner, balance FROM %[1]s_replica EXCEPT SELECT id, owner, balance FROM %[1]s)) d"
			if err := pg.QueryRow(ctx, fmt.Sprintf(q, name)).Scan(&diff); err != nil || diff != 0 {
				t.Fatalf("replica differs from the table in %d rows (%v)", diff, err)
			}
			if keep {
				var n int
				if err := pg.QueryRow(ctx, "SELECT count(*) FROM "+name+"_replica WHERE _table = 'public."+name+"' AND _lsn::pg_lsn > '0/0' AND _commit_time > now() - interval '1 hour'").Scan(&n); err != nil || n != 50 {
					t.Fatalf("%d rows with their metadata, want 50 (%v)", n, err)
				}
			}
		})
	}
}

// keep_metadata is for a changelog's metadata: on records, whose every
// field is written, it is an error naming the line.
func TestConfigKeepMetadataNeedsAChangelog(t *testing.T) {
	path := writeFile(t, "p.yaml", `pipeline: p
checkpoint: {dir: ckpts}
sources:
  events: {type: datagen, count: 10}
sinks:
  pg: {type: postgres, input: events, dsn: "postgres://postgres@127.0.0.1:5432/test", table: t, keep_metadata: true}
`)
	_, err := config.Load(path)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:6:") || !strings.Contains(err.Error(), "events is not a changelog") {
		t.Fatalf("Load: %v, want an error at line 6 saying events is not a changelog", err)
	}
}
