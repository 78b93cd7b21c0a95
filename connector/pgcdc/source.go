package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/internal/redact"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/watermark"
)

// The metadata fields every record carries after the tables' columns.
const (
	// OpField is the operation: insert, update or delete. A snapshot's rows
	// are inserts.
	OpField = "_op"
	// TableField is the source table, "schema.table".
	TableField = "_table"
	// LSNField is the commit's log sequence number ("0/16B3748"); for a
	// snapshot's rows, the snapshot's.
	LSNField = "_lsn"
	// CommitTimeField is the commit time, the record's event time; for a
	// snapshot's rows, the time the snapshot was taken.
	CommitTimeField = "_commit_time"
	// BeforePrefix starts the name of a before-image field (Config.
	// BeforeImages): _before_<column> is the column's value before an
	// update.
	BeforePrefix = "_before_"
)

// Config configures a Source.
type Config struct {
	// DSN is the connection string (URL or keyword/value pairs, as pgx
	// reads it). The source opens a regular connection and a replication
	// connection with it; its user needs the REPLICATION attribute (or
	// superuser), SELECT on the tables and, to create the publication,
	// ownership of them. Required.
	DSN string
	// Tables are the captured tables, "schema.table" or "table" (in
	// public); Schemas adds every table of these schemas. At least one
	// table between them.
	Tables, Schemas []string
	// Slot is the logical replication slot (created when missing), and
	// Publication the publication the slot decodes (created when missing,
	// for exactly the tables). Required.
	Slot, Publication string
	// ChunkRows is how many rows a snapshot reads per chunk, each chunk
	// one read between barriers (default 10000).
	ChunkRows int
	// SnapshotParallelism is how many tables the snapshot reads at once,
	// each on a connection of its own (default 4). Within a table, the
	// next chunk is read while the last one is emitted.
	SnapshotParallelism int
	// StopAtLatest ends the source once it has emitted every transaction
	// that committed before the job's first start (the server's WAL flush
	// position then, kept in the checkpoints).
	StopAtLatest bool
	// Watermark is the event-time watermark strategy over commit times.
	Watermark watermark.Strategy
	// Fields, when set, are the columns the records keep, in this order,
	// each with the kind the table's column is read as (a SQL source's
	// declared columns). They include the primary key. Nil: every column.
	Fields []row.Field
	// Key, when set, must be the tables' primary key columns (a SQL
	// source's declared PRIMARY KEY).
	Key []string
	// BeforeImages adds, after the columns, a field _before_<column> per
	// column: an update's value of the column before it (the insert half
	// of an update that changed the key included), NULL in every other
	// record (inserts, deletes, snapshot rows). It needs REPLICA IDENTITY
	// FULL on every table, so that each update carries its old row; a
	// table without it is refused when the source is made, and an update
	// arriving without its old row (the identity changed meanwhile) stops
	// the job.
	BeforeImages bool
	// StatusInterval is how often the source reports its position to the
	// server while streaming (default 10 s; the server's
	// wal_sender_timeout, 60 s by default, must be longer).
	StatusInterval time.Duration
}

// slotName is what PostgreSQL accepts as a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,48}$`)

func (c Config) withDefaults() (Config, error) {
	if c.ChunkRows == 0 {
		c.ChunkRows = 10000
	}
	if c.SnapshotParallelism == 0 {
		c.SnapshotParallelism = 4
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = 10 * time.Second
	}
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("dsn is required"))
	}
	if len(c.Tables) == 0 && len(c.Schemas) == 0 {
		errs = append(errs, errors.New("tables or schemas is required"))
	}
	if !slotName.MatchString(c.Slot) {
		errs = append(errs, fmt.Errorf("slot %q is not a replication slot name: lower-case letters, digits and _, at most 48", c.Slot))
	}
	if c.Publication == "" {
		errs = append(errs, errors.New("publication is required"))
	}
	if c.SnapshotParallelism < 0 {
		errs = append(errs, fmt.Errorf("snapshot_parallelism %d is negative", c.SnapshotParallelism))
	}
	if c.ChunkRows < 0 {
		errs = append(errs, fmt.Errorf("chunk_rows %d is negative", c.ChunkRows))
	}
	if err := c.Watermark.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Source reads the changes of PostgreSQL tables through logical replication
// (the pgoutput plugin), after a snapshot of their rows. It implements
// stream.Source[row.Row]; see the package documentation.
type Source struct {
	cfg    Config
	tables []*Table
	schema *row.Schema
	// fields maps a table's column index to its record field index.
	fields [][]int
	// data is how many fields hold the tables' columns; with before-images
	// the next data fields hold them before an update.
	data  int
	key   []string
	scrub redact.Scrubber
}

// NewSource describes cfg's tables, connecting to the server: the
// records' fields are their columns (the union of them, for several
// tables), then OpField, TableField, LSNField and CommitTimeField.
func NewSource(ctx context.Context, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	s := &Source{cfg: cfg, scrub: redact.NewScrubber(cfg.DSN)}
	if err != nil {
		return nil, s.fail(err)
	}
	conn, err := connectSQL(ctx, cfg.DSN)
	if err != nil {
		return nil, s.fail(err)
	}
	defer conn.Close(context.Background())
	tables, err := describe(ctx, conn, cfg.Tables, cfg.Schemas)
	if err != nil {
		return nil, s.fail(err)
	}
	if err := s.plan(tables); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

func (s *Source) fail(err error) error {
	return s.scrub.Error(fmt.Errorf("postgres_cdc source %s: %w", s.cfg.Slot, err))
}

// plan makes the record schema of tables.
func (s *Source) plan(tables []*Table) error {
	s.tables = tables
	s.schema = &row.Schema{}
	at := map[string]int{}
	var keys []string
	for _, t := range tables {
		idx := make([]int, len(t.Columns))
		for i, c := range t.Columns {
			j, seen := at[c.Name]
			switch {
			case !seen:
				j = len(s.schema.Fields)
				at[c.Name] = j
				s.schema.Fields = append(s.schema.Fields, row.Field{Name: c.Name, Kind: c.Kind()})
			case s.schema.Fields[j].Kind != c.Kind():
				return fmt.Errorf("column %s is %s in %s but %s in another table: read the tables with one source each", c.Name, c.Type, t.Qualified(), s.schema.Fields[j].Kind)
			}
			idx[i] = j
		}
		s.fields = append(s.fields, idx)
		var names []string
		for _, k := range t.Key {
			names = append(names, t.Columns[k].Name)
		}
		if keys != nil && !slices.Equal(keys, names) {
			// A uniform key: a column that is a key in one table and not in
			// another would key the other's changes by a changing value.
			return fmt.Errorf("table %s's primary key is (%s), %s's is (%s): tables read by one source need the same primary key columns; read them with one source each",
				t.Qualified(), strings.Join(names, ", "), tables[0].Qualified(), strings.Join(keys, ", "))
		}
		keys = names
	}
	if err := s.keep(keys); err != nil {
		return err
	}
	s.data = len(s.schema.Fields)
	if s.cfg.BeforeImages {
		for _, t := range tables {
			if t.Identity != 'f' {
				return unrecoverable(fmt.Errorf("before_images: table %s has REPLICA IDENTITY DEFAULT, so an update that keeps the key carries no old row: ALTER TABLE %s REPLICA IDENTITY FULL", t.Qualified(), t.quoted()))
			}
		}
		for _, f := range s.schema.Fields[:s.data] {
			s.schema.Fields = append(s.schema.Fields, row.Field{Name: BeforePrefix + f.Name, Kind: f.Kind})
		}
	}
	s.schema.Fields = append(s.schema.Fields,
		row.Field{Name: OpField, Kind: row.String}, row.Field{Name: TableField, Kind: row.String},
		row.Field{Name: LSNField, Kind: row.String}, row.Field{Name: CommitTimeField, Kind: row.Time})
	if len(tables) > 1 {
		keys = append([]string{TableField}, keys...)
	}
	s.key = keys
	return nil
}

// keep narrows the records to Config.Fields, checking each against the
// tables' columns, and checks Config.Key against the primary key.
func (s *Source) keep(key []string) error {
	if s.cfg.Key != nil && !slices.Equal(s.cfg.Key, key) {
		return fmt.Errorf("the declared key (%s) is not the primary key of the tables, (%s)", strings.Join(s.cfg.Key, ", "), strings.Join(key, ", "))
	}
	if s.cfg.Fields == nil {
		return nil
	}
	all := s.schema
	at := make([]int, len(all.Fields)) // a column's field in the kept ones, or -1
	for i := range at {
		at[i] = -1
	}
	for j, f := range s.cfg.Fields {
		i := all.Index(f.Name)
		switch {
		case i < 0:
			return fmt.Errorf("declared column %s is not a column of %s (columns: %s)", f.Name, strings.Join(tableNames(s.tables), ", "), strings.Join(all.Names(), ", "))
		case all.Fields[i].Kind != f.Kind:
			return fmt.Errorf("declared column %s is %v, but the table's column is read as %v", f.Name, f.Kind, all.Fields[i].Kind)
		case at[i] >= 0:
			return fmt.Errorf("column %s is declared twice", f.Name)
		}
		at[i] = j
	}
	for _, k := range key {
		if at[all.Index(k)] < 0 {
			return fmt.Errorf("primary key column %s is not among the declared columns: a change is keyed by it", k)
		}
	}
	for _, idx := range s.fields {
		for c, i := range idx {
			idx[c] = at[i]
		}
	}
	s.schema = &row.Schema{Fields: slices.Clone(s.cfg.Fields)}
	return nil
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// Schema is the records' schema.
func (s *Source) Schema() *row.Schema { return s.schema }

// Key is the changelog's key: the primary key's columns, after TableField
// for several tables.
func (s *Source) Key() []string { return s.key }

// Tables are the captured tables as described at NewSource.
func (s *Source) Tables() []*Table { return s.tables }

// Descriptor: replayable from the slot (its confirmed position advances
// only with complete checkpoints); one subtask, since a slot is one ordered
// stream.
func (s *Source) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "postgres_cdc", Capabilities: runtime.Capabilities{Replayable: true},
		MaxParallelism: 1, MaxParallelismReason: "a replication slot is one ordered stream of transactions, read by one subtask; set parallelism 1"}
}

// Describe summarises the configuration; the DSN's password is masked.
func (s *Source) Describe() string {
	names := make([]string, len(s.tables))
	for i, t := range s.tables {
		names[i] = t.Qualified()
	}
	d := fmt.Sprintf("postgres change data capture of %s, slot %s, publication %s", strings.Join(names, ", "), s.cfg.Slot, s.cfg.Publication)
	if s.cfg.StopAtLatest {
		d += ", until the server's position at the first start"
	}
	return d + " (" + redact.DSN(s.cfg.DSN) + ")"
}

// NewSubtask creates the one subtask.
func (s *Source) NewSubtask() runtime.SourceSubtask[row.Row] { return &reader{src: s} }

// connect opens a connection whose text output the decoders read: ISO
// dates in UTC, floats with every digit, bytea in hex. replication makes
// it a replication connection (replication=database).
func connect(ctx context.Context, dsn string, replication bool) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing the dsn: %w", err)
	}
	setParams(cfg.RuntimeParams, replication)
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return conn, nil
}

// connectSQL opens a regular pgx connection with connect's settings.
func connectSQL(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing the dsn: %w", err)
	}
	setParams(cfg.RuntimeParams, false)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return conn, nil
}

func setParams(p map[string]string, replication bool) {
	p["DateStyle"] = "ISO, YMD"
	p["TimeZone"] = "UTC"
	p["extra_float_digits"] = "1"
	p["bytea_output"] = "hex"
	if _, ok := p["application_name"]; !ok {
		p["application_name"] = "ingest postgres_cdc"
	}
	if replication {
		p["replication"] = "database"
	}
}
