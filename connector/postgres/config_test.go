package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/runtime"
)

// Invalid configurations are refused by NewSink with a sentence naming the
// field; all problems are reported at once.
func TestConfigValidation(t *testing.T) {
	good := postgres.SinkConfig{DSN: "postgres://u@localhost/db", Table: "t", Pipeline: "p"}
	cases := []struct {
		name string
		edit func(*postgres.SinkConfig)
		cols []postgres.Column
		want []string
	}{
		{"no dsn", func(c *postgres.SinkConfig) { c.DSN = "" }, nil, []string{"dsn is required"}},
		{"no pipeline", func(c *postgres.SinkConfig) { c.Pipeline = "" }, nil, []string{"pipeline is required"}},
		{"no table", func(c *postgres.SinkConfig) { c.Table = "" }, nil, []string{"table"}},
		{"bad table", func(c *postgres.SinkConfig) { c.Table = "a.b.c" }, nil, []string{`"a.b.c" is not name or schema.name`}},
		{"upsert without key", func(c *postgres.SinkConfig) { c.Mode = postgres.Upsert }, nil, []string{"mode upsert needs key"}},
		{"unknown key", func(c *postgres.SinkConfig) { c.Mode, c.Key = postgres.Upsert, []string{"nope"} }, nil, []string{`key column "nope" is not one of the columns`}},
		{"key in append", func(c *postgres.SinkConfig) { c.Key = []string{"id"} }, nil, []string{"only used in mode upsert"}},
		{"short stale_after", func(c *postgres.SinkConfig) { c.StaleAfter = time.Minute }, nil, []string{"stale_after 1m0s is shorter than 10m0s"}},
		{"long staging name", func(c *postgres.SinkConfig) { c.Table = strings.Repeat("x", 60) }, nil, []string{"staging table's name", "set staging_table"}},
		{"no columns", nil, []postgres.Column{}, []string{"at least one"}},
		{"reserved column", nil, []postgres.Column{{Name: "ingest_seq", Type: "bigint"}}, []string{`"ingest_seq": the name is reserved`}},
		{"duplicate column", nil, []postgres.Column{{Name: "a", Type: "bigint"}, {Name: "a", Type: "text"}}, []string{`"a" appears twice`}},
		{"bad type", nil, []postgres.Column{{Name: "a", Type: "bigint; DROP TABLE x"}}, []string{"is not a PostgreSQL type name"}},
		{"several", func(c *postgres.SinkConfig) { c.DSN, c.Pipeline = "", "" }, nil, []string{"dsn is required", "pipeline is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			if c.edit != nil {
				c.edit(&cfg)
			}
			cols := itemColumns
			if c.cols != nil {
				cols = c.cols
			}
			_, err := postgres.NewSink(cfg, cols, func(dst []any, v item) []any { return dst })
			if err == nil {
				t.Fatal("NewSink accepted the configuration")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, err := postgres.NewSink(good, itemColumns, itemValues); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []postgres.Mode{postgres.Append, postgres.Upsert} {
		got, err := postgres.ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := postgres.ParseMode("merge"); err == nil || !strings.Contains(err.Error(), "append or upsert") {
		t.Errorf("ParseMode(merge): %v", err)
	}
}

func TestRedactDSN(t *testing.T) {
	cases := map[string]string{
		"postgres://user:s3cr3t@host:5432/db?sslmode=disable":   "postgres://user:xxxxx@host:5432/db?sslmode=disable",
		"postgresql://user@host/db?password=s3cr3t":             "postgresql://user@host/db?password=xxxxx",
		"host=h user=u password=s3cr3t dbname=d":                "host=h user=u password=xxxxx dbname=d",
		"host=h password = 'with space s3cr3t' dbname=d":        "host=h password=xxxxx dbname=d",
		"postgres://user@host/db":                               "postgres://user@host/db",
		"postgres://user:s3cr3t@host:notaport%zz/db":            "postgres://(unparseable, not shown)",
		"host=h user=u dbname=d":                                "host=h user=u dbname=d",
		"postgres://us%20er:p%40ss%2Fs3cr3t@host/db":            "postgres://us%20er:xxxxx@host/db",
		"postgresql://user:s3cr3t@host1:5432,host2:5433/db?x=1": "postgresql://user:xxxxx@host1:5432,host2:5433/db?x=1",
	}
	for in, want := range cases {
		got := postgres.RedactDSN(in)
		if got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("RedactDSN(%q) = %q shows the password", in, got)
		}
	}
}

// The DSN's password appears in no error and no description: not when the
// DSN does not parse, not when the server is unreachable, not when the
// server refuses the sink's setup.
func TestPasswordNeverPrinted(t *testing.T) {
	const secret = "Sup3rS3cretPw"
	check := func(what string, s string) {
		t.Helper()
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the password: %s", what, s)
		}
	}
	// A DSN that does not parse.
	for _, dsn := range []string{
		"postgres://u:" + secret + "@host:notaport/db",
		"host=h port=notaport password=" + secret,
		"postgres://u:" + secret + "@[::1/db",
	} {
		_, err := postgres.NewSink(postgres.SinkConfig{DSN: dsn, Table: "t", Pipeline: "p"}, itemColumns, itemValues)
		if err == nil {
			t.Fatalf("NewSink accepted %q", postgres.RedactDSN(dsn))
		}
		check("NewSink error", err.Error())
	}

	// An unreachable server: port 1 refuses connections.
	for _, dsn := range []string{
		"postgres://postgres:" + secret + "@127.0.0.1:1/test?connect_timeout=2",
		"host=127.0.0.1 port=1 user=postgres password=" + secret + " dbname=test connect_timeout=2",
	} {
		cfg := postgres.SinkConfig{DSN: dsn, Table: "t", Pipeline: "p", CommitRetries: -1}
		s, err := postgres.NewSink(cfg, itemColumns, itemValues)
		if err != nil {
			t.Fatal(err)
		}
		check("Describe", s.Describe())
		if !strings.Contains(s.Describe(), "xxxxx") {
			t.Errorf("Describe %q does not show the redacted DSN", s.Describe())
		}
		_, err = s.Committer().Abandon(context.Background(), testJob)
		if err == nil {
			t.Fatal("Abandon on an unreachable server succeeded")
		}
		check("Abandon error", err.Error())
		w := s.NewSubtask()
		err = w.Open(&runtime.Context{Task: checkpoint.TaskID{Operator: "out"}, Parallelism: 1, JobID: testJob})
		_ = w.Close()
		if err == nil {
			t.Fatal("Open on an unreachable server succeeded")
		}
		check("Open error", err.Error())
		err = s.Committer().Commit(context.Background(), testJob, checkpoint.Commit{Checkpoint: 1, Sink: "out", Committables: [][]byte{[]byte(`{"prepared_at":1,"subtask":0,"writer":7,"first_seq":0,"end_seq":1}`)}})
		if err == nil {
			t.Fatal("Commit on an unreachable server succeeded")
		}
		check("Commit error", err.Error())
		t.Logf("unreachable: %v", err)
	}

	// The real server (trust authentication ignores the password) refusing
	// the setup: the table does not exist.
	f := newFixture(t)
	dsn := strings.Replace(realDSN(), "postgres@", "postgres:"+secret+"@", 1)
	if !strings.Contains(dsn, secret) {
		t.Skipf("cannot add a password to %s", postgres.RedactDSN(realDSN()))
	}
	cfg := f.config("missing", postgres.Append)
	cfg.DSN, cfg.CreateTable = dsn, false
	s := newItemSink(t, cfg)
	_, err := s.Committer().Abandon(context.Background(), testJob)
	if err == nil {
		t.Fatal("Abandon with a missing table succeeded")
	}
	check("setup error", err.Error())
}
