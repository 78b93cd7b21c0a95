package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Mode is how published rows reach the target table.
type Mode int

const (
	// Append inserts every row.
	Append Mode = iota
	// Upsert inserts a row or, when a row with the same key exists, updates
	// it: INSERT … ON CONFLICT (key) DO UPDATE. Of several rows with one key
	// in a checkpoint, the last in (checkpoint, subtask, sequence) order wins.
	Upsert
)

// String returns the mode as written in pipeline files.
func (m Mode) String() string {
	switch m {
	case Append:
		return "append"
	case Upsert:
		return "upsert"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "append" or "upsert".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "append":
		return Append, nil
	case "upsert":
		return Upsert, nil
	}
	return 0, fmt.Errorf("unknown mode %q: want append or upsert", s)
}

// Column is one column of the target table, in the order the sink's values
// function produces values.
type Column struct {
	// Name is the column name, used verbatim (quoted): case matters.
	Name string
	// Type is the PostgreSQL type as written in CREATE TABLE ("bigint",
	// "text", "double precision", "timestamptz", "jsonb", "numeric(12,2)").
	// The staging table has the column with this type, so values are
	// checked when they are staged; CreateTable creates the target column
	// with it.
	Type string
}

// SinkConfig configures a Sink. The zero value of every optional field means
// its documented default.
type SinkConfig struct {
	// DSN is the connection string, a URL (postgres://user:pass@host/db) or
	// keyword/value pairs, as pgx.ParseConfig reads it (with libpq's PG*
	// environment variables as defaults). The sink opens one connection per
	// subtask and one for its committer. The DSN is never printed: Describe
	// and errors show it with the password replaced by xxxxx. Required.
	DSN string
	// Table is the target table, "name" or "schema.name". Names are used
	// verbatim (quoted); an unqualified name resolves through the
	// connection's search_path. Required.
	Table string
	// Mode is Append (the default) or Upsert.
	Mode Mode
	// Key names the columns upserts are keyed on; required in Upsert mode,
	// refused in Append mode. The target table needs a primary key or unique
	// index on exactly these columns (CreateTable makes it the primary key).
	// A row with a NULL key fails the sink subtask.
	Key []string
	// Deletes makes the sink apply a changelog: the values function appends,
	// after the columns' values, one bool per row, true when the row deletes
	// its key (the other values are then the deleted row's, and only the
	// key's are used). Per key the last row of a commit decides: an upsert,
	// or a delete of the key's row if there is one. Upsert mode only. The
	// staging table holds the flag in column ingest_delete.
	Deletes bool
	// CreateTable creates the target table when it does not exist (CREATE
	// TABLE IF NOT EXISTS with Columns, and in Upsert mode PRIMARY KEY (Key)).
	// The default value is false: the table must exist with the columns.
	CreateTable bool
	// Pipeline tags the sink's writers and progress rows; it should be the
	// pipeline's name. Required.
	Pipeline string
	// StagingTable is where rows wait for their checkpoint, "name" or
	// "schema.name". It is created when missing. It holds no committed data:
	// it may be dropped while no job of any pipeline has rows staged in it.
	// The default value is "<table>__ingest_staging" in the target's schema.
	StagingTable string
	// ControlSchema holds ingest_sink_progress (one row per published
	// checkpoint) and ingest_sink_writers (one row per sink subtask start),
	// created when missing. The default value is the target's schema (the
	// search_path when Table is unqualified).
	ControlSchema string
	// FlushRows is how many rows a subtask buffers before it copies them to
	// the staging table in the background. Larger chunks cost memory (rows x
	// columns values) and make the copy at the barrier longer; smaller ones
	// cost a round trip and a transaction commit each.
	// The default value is 10000.
	FlushRows int
	// OpTimeout bounds one database operation: a COPY chunk, a commit
	// transaction, a registration. An operation that takes longer fails (a
	// subtask then fails and the job restarts from the last checkpoint; a
	// commit is retried).
	// The default value is 1m.
	OpTimeout time.Duration
	// CommitRetries is how many times a commit (and a staged chunk) is
	// retried after a transient error (connection lost, serialization
	// failure, deadlock), with RetryBackoff doubling up to 5s in between;
	// after that the error fails the job, which restarts and re-commits.
	// The default value is 3; a negative value disables retries.
	CommitRetries int
	// RetryBackoff is the first pause before a retry. The default value is
	// 100ms.
	RetryBackoff time.Duration
	// StaleAfter is how long the writers of another job of this pipeline may
	// be silent (no prepare) before Abandon deletes their staged rows: such
	// a job was replaced (its checkpoints were deleted) or is long dead, and
	// nothing will publish them. Abandon always deletes this job's
	// unpublished rows. A live writer refreshes its mark at a prepare at
	// most once a minute, so the value must be at least 10m.
	// The default value is 24h; a negative value never deletes other jobs' rows.
	StaleAfter time.Duration
	// ProgressHistory is how many checkpoint ids of progress rows a sink keeps
	// per job: at each commit, rows more than ProgressHistory ids older than
	// the committed checkpoint are deleted, and a commit that old is taken as
	// already published. Restoring from a checkpoint that old is then
	// impossible without duplicates anyway.
	// The default value is 10000; a negative value keeps every row.
	ProgressHistory int64
}

// Defaults of SinkConfig, each documented on its field.
const (
	// DefaultFlushRows is SinkConfig.FlushRows' default.
	DefaultFlushRows = 10000
	// DefaultOpTimeout is SinkConfig.OpTimeout's default.
	DefaultOpTimeout = time.Minute
	// DefaultCommitRetries is SinkConfig.CommitRetries' default.
	DefaultCommitRetries = 3
	// DefaultRetryBackoff is SinkConfig.RetryBackoff's default.
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultStaleAfter is SinkConfig.StaleAfter's default.
	DefaultStaleAfter = 24 * time.Hour
	// DefaultProgressHistory is SinkConfig.ProgressHistory's default.
	DefaultProgressHistory = 10000
	// maxRetryBackoff caps the doubling of RetryBackoff.
	maxRetryBackoff = 5 * time.Second
	// minStaleAfter keeps StaleAfter well above heartbeatEvery.
	minStaleAfter = 10 * time.Minute
)

// heartbeatNanos is how often a writer refreshes active_at (see
// heartbeatEvery). Tests shorten it.
var heartbeatNanos atomic.Int64

func init() { heartbeatNanos.Store(int64(time.Minute)) }

// heartbeatEvery is how often a writer refreshes active_at: on a timer, and
// at a checkpoint when the last refresh is older.
func heartbeatEvery() time.Duration { return time.Duration(heartbeatNanos.Load()) }

// Names of the control tables and the staging table's tag columns.
const (
	// ProgressTableName is the table with one row per published checkpoint
	// of every sink, in SinkConfig.ControlSchema.
	ProgressTableName = "ingest_sink_progress"
	// WritersTableName is the table with one row per sink subtask start, in
	// SinkConfig.ControlSchema.
	WritersTableName = "ingest_sink_writers"
	// stagingSuffix is appended to the target's name for the default
	// staging table.
	stagingSuffix = "__ingest_staging"
	writerColumn  = "ingest_writer"
	seqColumn     = "ingest_seq"
	// deleteColumn is the staging table's flag of a row that deletes its
	// key (SinkConfig.Deletes).
	deleteColumn = "ingest_delete"
	// maxIdentifier is PostgreSQL's NAMEDATALEN - 1: longer names are
	// truncated silently, so two derived names could collide.
	maxIdentifier = 63
)

// typePattern is a sanity check of Column.Type: type names, modifiers and
// array brackets, nothing that ends a statement.
var typePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_ ,()\[\]."]*$`)

// withDefaults fills unset fields.
func (c SinkConfig) withDefaults() SinkConfig {
	if c.FlushRows == 0 {
		c.FlushRows = DefaultFlushRows
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.CommitRetries == 0 {
		c.CommitRetries = DefaultCommitRetries
	}
	if c.CommitRetries < 0 {
		c.CommitRetries = 0
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.ProgressHistory == 0 {
		c.ProgressHistory = DefaultProgressHistory
	}
	return c
}

// validate checks the configuration with the columns; every problem is
// reported, each in a sentence naming the field.
func (c SinkConfig) validate(columns []Column) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.DSN == "" {
		add("dsn is required")
	}
	if c.Pipeline == "" {
		add("pipeline is required (the pipeline's name: it tags staged rows and progress rows)")
	}
	if _, err := parseTable(c.Table); err != nil {
		add("table: %w", err)
	}
	if c.StagingTable != "" {
		if _, err := parseTable(c.StagingTable); err != nil {
			add("staging_table: %w", err)
		}
	}
	if c.ControlSchema != "" && len(c.ControlSchema) > maxIdentifier {
		add("control_schema %q is longer than %d bytes", c.ControlSchema, maxIdentifier)
	}
	if len(columns) == 0 {
		add("no columns: the sink needs at least one")
	}
	seen := map[string]bool{}
	for i, col := range columns {
		switch {
		case col.Name == "":
			add("column %d has no name", i)
		case len(col.Name) > maxIdentifier:
			add("column %q is longer than %d bytes", col.Name, maxIdentifier)
		case col.Name == writerColumn || col.Name == seqColumn || col.Name == deleteColumn:
			add("column %q: the name is reserved for the staging table's tags", col.Name)
		case seen[col.Name]:
			add("column %q appears twice", col.Name)
		}
		seen[col.Name] = true
		if !typePattern.MatchString(col.Type) {
			add("column %q: type %q is not a PostgreSQL type name", col.Name, col.Type)
		}
	}
	switch c.Mode {
	case Append:
		if len(c.Key) > 0 {
			add("key %q is only used in mode upsert; mode is append", c.Key)
		}
	case Upsert:
		if len(c.Key) == 0 {
			add("mode upsert needs key: the columns rows are upserted on")
		}
		for i, k := range c.Key {
			if !seen[k] {
				add("key column %q is not one of the columns %q", k, names(columns))
			}
			if slices.Contains(c.Key[:i], k) {
				add("key column %q appears twice", k)
			}
		}
	default:
		add("mode %v: want append or upsert", c.Mode)
	}
	if c.Deletes && c.Mode != Upsert {
		add("deletes need mode upsert: a deleted row is found by its key")
	}
	if c.FlushRows < 0 {
		add("flush_rows %d must be positive", c.FlushRows)
	}
	if c.OpTimeout < 0 {
		add("op_timeout %v must be positive", c.OpTimeout)
	}
	if c.RetryBackoff < 0 {
		add("retry_backoff %v must not be negative", c.RetryBackoff)
	}
	if c.StaleAfter > 0 && c.StaleAfter < minStaleAfter {
		add("stale_after %v is shorter than %v: writers of a live job refresh their mark once a minute, so their staged rows could be deleted", c.StaleAfter, minStaleAfter)
	}
	return errors.Join(errs...)
}

func names(columns []Column) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.Name
	}
	return out
}

// table is a possibly schema-qualified table name.
type table struct {
	schema, name string
}

// parseTable splits "schema.name" or "name".
func parseTable(s string) (table, error) {
	if s == "" {
		return table{}, errors.New("a table name is required")
	}
	schema, name, qualified := strings.Cut(s, ".")
	if !qualified {
		schema, name = "", s
	}
	if name == "" || (qualified && schema == "") || strings.Contains(name, ".") {
		return table{}, fmt.Errorf("%q is not name or schema.name", s)
	}
	if len(name) > maxIdentifier || len(schema) > maxIdentifier {
		return table{}, fmt.Errorf("%q: names are at most %d bytes", s, maxIdentifier)
	}
	return table{schema: schema, name: name}, nil
}

// String returns the table as configured, unquoted.
func (t table) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// in returns the table named name in t's schema.
func (t table) in(name string) table { return table{schema: t.schema, name: name} }
