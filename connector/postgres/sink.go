package postgres

import (
	"fmt"
	"strings"

	"github.com/ingest-engine/ingest/runtime"
	"github.com/jackc/pgx/v5"
)

// Values appends the column values of one record to dst, in the order of
// the sink's columns, and returns the extended slice. Values are what pgx
// encodes for the column's type (int64 for bigint, string for text,
// time.Time for timestamptz, nil for NULL, …). Appending lets the sink reuse
// one buffer for a whole chunk of rows.
type Values[T any] func(dst []any, v T) []any

// Sink writes records of type T as rows of a PostgreSQL table, published
// exactly once, atomically per checkpoint (see the package documentation).
// It implements stream.Sink[T].
type Sink[T any] struct {
	d      *destination
	values Values[T]
}

// NewSink returns a sink writing each record as the row values(dst, record)
// into cfg.Table with columns. It validates the configuration and parses the
// DSN; it connects only when the job starts.
func NewSink[T any](cfg SinkConfig, columns []Column, values Values[T]) (*Sink[T], error) {
	red := newRedactor(cfg.DSN, "")
	fail := func(err error) (*Sink[T], error) {
		return nil, red.wrap(fmt.Errorf("postgres sink %s: %w", cfg.Table, err))
	}
	if err := cfg.validate(columns); err != nil {
		return fail(err)
	}
	if values == nil {
		return fail(fmt.Errorf("no values function"))
	}
	cfg = cfg.withDefaults()
	connCfg, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return fail(fmt.Errorf("dsn: %w", err))
	}
	red = newRedactor(cfg.DSN, connCfg.Password)
	target, _ := parseTable(cfg.Table) // validated
	staging := target.in(target.name + stagingSuffix)
	if cfg.StagingTable != "" {
		staging, _ = parseTable(cfg.StagingTable)
	} else if len(staging.name) > maxIdentifier {
		return fail(fmt.Errorf("the staging table's name %q would be longer than %d bytes: set staging_table", staging.name, maxIdentifier))
	}
	if staging == target {
		return fail(fmt.Errorf("staging_table is the target table"))
	}
	control := cfg.ControlSchema
	if control == "" {
		control = target.schema
	}
	d := &destination{
		cfg: cfg, columns: append([]Column(nil), columns...), target: target, staging: staging,
		conns:  newConnections(connCfg, cfg.Pipeline),
		redact: red,
	}
	for _, k := range cfg.Key {
		for i, c := range columns {
			if c.Name == k {
				d.keyIndex = append(d.keyIndex, i)
			}
		}
	}
	d.sql = buildStatements(target, staging, control, cfg, d.columns)
	return &Sink[T]{d: d, values: values}, nil
}

// Describe names the table, the mode and the server, without the password.
func (s *Sink[T]) Describe() string {
	d := s.d
	mode := "append"
	if d.cfg.Mode == Upsert {
		mode = fmt.Sprintf("upsert on %s", strings.Join(d.cfg.Key, ", "))
	}
	return fmt.Sprintf("postgres table %s (%s, staged in %s, committed per checkpoint) at %s", d.target, mode, d.staging, RedactDSN(d.cfg.DSN))
}

// Committer returns the sink's committer.
func (s *Sink[T]) Committer() runtime.Committer { return committer{d: s.d} }

// NewSubtask creates one writer subtask.
func (s *Sink[T]) NewSubtask() runtime.SinkSubtask[T] { return &writer[T]{sink: s} }

// StagingTable returns the staging table's name as the sink uses it.
func (s *Sink[T]) StagingTable() string { return s.d.staging.String() }
