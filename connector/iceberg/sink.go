//go:build iceberg

package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver of the SQL catalog

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
)

// Sink is the Iceberg sink of rows. Its subtasks write data files; its
// committer publishes them (see the package documentation).
type Sink struct {
	cfg  SinkConfig
	name string
	// cols are the input fields written, in table order once opened.
	cols []column
	// key are the indexes of the changelog's key fields in a row; op the
	// index of its operation field.
	key []int
	op  int

	catOnce sync.Mutex
	cat     catalog.Catalog

	// published is the newest checkpoint of a job whose files this process
	// knows are in the table: that job's subtasks stop offering files
	// prepared at or before it.
	published publishedMark
}

// publishedMark is Sink.published: a job and its newest published
// checkpoint. A Sink may run several jobs one after another (a Go program
// running one pipeline value twice), whose checkpoint ids are unrelated.
type publishedMark struct {
	mu  sync.Mutex
	job string
	id  int64
}

// set records checkpoint id of job as published.
func (m *publishedMark) set(job string, id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.job != job {
		m.job, m.id = job, 0
	}
	m.id = max(m.id, id)
}

// of returns the newest published checkpoint of job, 0 when none.
func (m *publishedMark) of(job string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.job != job {
		return 0
	}
	return m.id
}

// column is an input field the sink writes.
type column struct {
	name  string
	index int // in the input row
	kind  row.Kind
}

// NewSink returns the sink of node name. The catalog is not contacted until
// a subtask opens or the committer runs.
func NewSink(name string, cfg SinkConfig) (*Sink, error) {
	if cfg.Schema == nil {
		return nil, errors.New("iceberg sink: no schema")
	}
	s := &Sink{cfg: cfg, name: name, op: -1}
	if cfg.Key != nil {
		if len(cfg.Key) == 0 {
			return nil, fmt.Errorf("iceberg sink %s: the changelog has no key (a single group, key: []): equality deletes need key columns; write it to a sink that replaces its one row, or group it by a field", name)
		}
		s.op = cfg.Schema.Index(cfg.Op)
		if s.op < 0 {
			return nil, fmt.Errorf("iceberg sink %s: the changelog has no operation field %q", name, cfg.Op)
		}
		for _, k := range cfg.Key {
			i := cfg.Schema.Index(k)
			if i < 0 {
				return nil, fmt.Errorf("iceberg sink %s: the changelog has no key field %q", name, k)
			}
			if f := cfg.Schema.Fields[i]; f.Kind == row.Float {
				return nil, fmt.Errorf("iceberg sink %s: the changelog's key field %q is a float, which Iceberg does not take as an equality delete key", name, k)
			}
			s.key = append(s.key, i)
		}
	}
	for i, f := range cfg.Schema.Fields {
		if cfg.Key != nil && (f.Name == cfg.Op || !cfg.KeepMetadata && strings.HasPrefix(f.Name, "_")) {
			continue
		}
		s.cols = append(s.cols, column{name: f.Name, index: i, kind: f.Kind})
	}
	return s, nil
}

// Describe says what the sink writes, for plans.
func (s *Sink) Describe() string {
	mode := "appends"
	if s.cfg.Key != nil {
		mode = "changelog by [" + strings.Join(s.cfg.Key, ", ") + "]"
	}
	return fmt.Sprintf("iceberg %s.%s (%s catalog), %s", s.cfg.Namespace, s.cfg.Table, s.cfg.Catalog.Type, mode)
}

// Descriptor: each complete checkpoint's files are published in one catalog
// transaction that records the checkpoint.
func (s *Sink) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "iceberg", Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}

// Committer returns the sink's committer.
func (s *Sink) Committer() runtime.Committer { return &committer{s: s} }

// NewSubtask returns a writer.
func (s *Sink) NewSubtask() runtime.SinkSubtask[row.Row] { return &writer{s: s} }

func (s *Sink) errorf(format string, args ...any) error {
	return fmt.Errorf("iceberg sink %s (table %s.%s): "+format, append([]any{s.name, s.cfg.Namespace, s.cfg.Table}, args...)...)
}

// catalog opens the catalog once per sink; the committer and the subtasks
// share it (a SQL catalog's connection pool is safe for concurrent use).
func (s *Sink) catalog(ctx context.Context) (catalog.Catalog, error) {
	s.catOnce.Lock()
	defer s.catOnce.Unlock()
	if s.cat != nil {
		return s.cat, nil
	}
	c := s.cfg.Catalog
	props := iceberg.Properties{}
	maps.Copy(props, c.Properties)
	if c.Warehouse != "" {
		props["warehouse"] = warehouseURL(c.Warehouse)
	}
	var cat catalog.Catalog
	switch c.Type {
	case "sql":
		db, dialect, err := catalogDB(c.URI)
		if err != nil {
			return nil, fmt.Errorf("opening the SQL catalog: %w", err)
		}
		props["init_catalog_tables"] = "true"
		sc, err := sqlcat.NewCatalog(c.Name, db, dialect, props)
		if err != nil {
			return nil, fmt.Errorf("opening the SQL catalog: %w", err)
		}
		cat = sc
	case "rest":
		var opts []rest.Option
		// A REST catalog names its warehouses (Polaris, Lakekeeper) or
		// takes a location: the value goes as it is.
		if c.Warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(c.Warehouse))
		}
		for key, opt := range map[string]func(string) rest.Option{
			"credential": rest.WithCredential, "token": rest.WithOAuthToken, "prefix": rest.WithPrefix, "scope": rest.WithScope,
		} {
			if v := c.Properties[key]; v != "" {
				opts = append(opts, opt(v))
			}
		}
		if len(c.Properties) > 0 {
			opts = append(opts, rest.WithAdditionalProps(iceberg.Properties(maps.Clone(c.Properties))))
		}
		rc, err := rest.NewCatalog(ctx, c.Name, c.URI, opts...)
		if err != nil {
			return nil, fmt.Errorf("opening the REST catalog %s: %w", c.URI, err)
		}
		cat = rc
	default:
		return nil, fmt.Errorf("unknown catalog type %q (known: sql, rest)", c.Type)
	}
	s.cat = cat
	return cat, nil
}

// catalogDBs are the SQL catalogs' connection pools, one per connection
// string for the whole process: every sink (and every pipeline a process
// builds) shares it, so sinks never add up to more connections than one
// pool keeps.
var catalogDBs struct {
	sync.Mutex
	m map[string]*sql.DB
}

// catalogDB returns the process's pool for uri, opening it on first use.
func catalogDB(uri string) (*sql.DB, sqlcat.SupportedDialect, error) {
	catalogDBs.Lock()
	defer catalogDBs.Unlock()
	dialect := sqlcat.Postgres
	path, isSQLite := strings.CutPrefix(uri, SQLitePrefix)
	if isSQLite {
		dialect = sqlcat.SQLite
	}
	if db, ok := catalogDBs.m[uri]; ok {
		return db, dialect, nil
	}
	var db *sql.DB
	var err error
	if isSQLite {
		if path == "" {
			return nil, "", fmt.Errorf("%q names no file: want %s<path of the catalog's database file>", uri, SQLitePrefix)
		}
		// One connection: the process's subtasks and committer take turns
		// (SQLite has one writer), and other processes sharing the file
		// wait for its lock rather than fail at once.
		u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(30000)&_pragma=journal_mode(wal)&_txlock=immediate"}
		db, err = sql.Open("sqlite3", u.String())
		if err == nil {
			db.SetMaxOpenConns(1)
		}
	} else {
		db, err = sql.Open("pgx", uri)
		if err == nil {
			db.SetMaxIdleConns(4)
			db.SetConnMaxIdleTime(30 * time.Second)
		}
	}
	if err != nil {
		return nil, "", err
	}
	if catalogDBs.m == nil {
		catalogDBs.m = map[string]*sql.DB{}
	}
	catalogDBs.m[uri] = db
	return db, dialect, nil
}

// warehouseURL makes a directory a file:// URL; URLs are kept.
func warehouseURL(w string) string {
	if strings.Contains(w, "://") {
		return w
	}
	return (&url.URL{Scheme: "file", Path: w}).String()
}

func (s *Sink) ident() table.Identifier {
	return catalog.ToIdentifier(append(strings.Split(s.cfg.Namespace, "."), s.cfg.Table)...)
}

// loadTable loads the table; with create, a missing table (and namespace)
// is created from the input's schema first. Two subtasks creating it at
// once is fine: the loser loads the winner's table.
func (s *Sink) loadTable(ctx context.Context, create bool) (*table.Table, error) {
	cat, err := s.catalog(ctx)
	if err != nil {
		return nil, err
	}
	tbl, err := cat.LoadTable(ctx, s.ident())
	if err == nil || !errors.Is(err, catalog.ErrNoSuchTable) || !create || !s.cfg.CreateTable {
		if errors.Is(err, catalog.ErrNoSuchTable) && !s.cfg.CreateTable {
			return nil, fmt.Errorf("%w (create it, or set create_table: true)", err)
		}
		return tbl, err
	}
	sch, spec, err := s.newTableSchema()
	if err != nil {
		return nil, err
	}
	ns := catalog.ToIdentifier(strings.Split(s.cfg.Namespace, ".")...)
	// Another subtask, or another pipeline, may create them at the same
	// time: whatever the error says, one that exists now is taken.
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		if ok, e := cat.CheckNamespaceExists(ctx, ns); e != nil || !ok {
			return nil, fmt.Errorf("creating namespace %s: %w", s.cfg.Namespace, err)
		}
	}
	tbl, err = cat.CreateTable(ctx, s.ident(), sch, catalog.WithPartitionSpec(&spec),
		catalog.WithProperties(iceberg.Properties{"format-version": "2", "write.parquet.compression-codec": "zstd"}))
	if err != nil {
		if t, e := cat.LoadTable(ctx, s.ident()); e == nil {
			return t, nil
		}
		return nil, fmt.Errorf("creating the table: %w", err)
	}
	return tbl, nil
}

// addColumns adds to tbl, a table the sink creates when it is missing
// (create_table), an optional column for each field of the input the table
// lacks, as it would have made them: a column added to the source (a CDC
// table's, after the pipeline was loaded again) flows on into the table.
// Rows written before read it as NULL. Subtasks adding the same columns at
// once race: the losers load the table again and find them added.
func (s *Sink) addColumns(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	for attempt := 1; ; attempt++ {
		sch := tbl.Schema()
		var missing []column
		for _, c := range s.cols {
			if _, ok := sch.FindFieldByName(c.name); !ok {
				missing = append(missing, c)
			}
		}
		if len(missing) == 0 {
			return tbl, nil
		}
		tx := tbl.NewTransaction()
		us := tx.UpdateSchema(true, false)
		var names []string
		for _, c := range missing {
			t, ok := icebergType(c.kind)
			if !ok {
				return nil, fmt.Errorf("the table has no column %q, a field of the input of kind %v, which no Iceberg column takes: declare its type (fields:)", c.name, c.kind)
			}
			us.AddColumn([]string{c.name}, t, "", false, nil)
			names = append(names, c.name)
		}
		err := us.Commit()
		if err == nil {
			var t *table.Table
			if t, err = tx.Commit(ctx); err == nil {
				return t, nil
			}
		}
		if !lostRace(err) || attempt == commitAttempts {
			return nil, fmt.Errorf("adding the input's columns %s to the table: %w", strings.Join(names, ", "), err)
		}
		if tbl, err = s.loadTable(ctx, false); err != nil {
			return nil, err
		}
	}
}

// icebergType is the Iceberg type of a row kind.
func icebergType(k row.Kind) (iceberg.Type, bool) {
	switch k {
	case row.Int:
		return iceberg.PrimitiveTypes.Int64, true
	case row.Float:
		return iceberg.PrimitiveTypes.Float64, true
	case row.String:
		return iceberg.PrimitiveTypes.String, true
	case row.Bool:
		return iceberg.PrimitiveTypes.Bool, true
	case row.Time:
		return iceberg.PrimitiveTypes.TimestampTz, true
	case row.Bytes:
		return iceberg.PrimitiveTypes.Binary, true
	}
	return nil, false
}

// newTableSchema is the schema and partition spec of a table the sink
// creates: one optional column per written field, the key's columns
// required and the schema's identifier fields.
func (s *Sink) newTableSchema() (*iceberg.Schema, iceberg.PartitionSpec, error) {
	var fields []iceberg.NestedField
	var ids []int
	isKey := map[string]bool{}
	for _, k := range s.cfg.Key {
		isKey[k] = true
	}
	for i, c := range s.cols {
		t, ok := icebergType(c.kind)
		if !ok {
			return nil, iceberg.PartitionSpec{}, fmt.Errorf("field %q has kind %v, which no Iceberg column takes: declare its type (fields:)", c.name, c.kind)
		}
		f := iceberg.NestedField{ID: i + 1, Name: c.name, Type: t, Required: isKey[c.name]}
		if f.Required {
			ids = append(ids, f.ID)
		}
		fields = append(fields, f)
	}
	sch := iceberg.NewSchemaWithIdentifiers(0, ids, fields...)
	var pfs []iceberg.PartitionField
	for i, p := range s.cfg.PartitionBy {
		f, ok := sch.FindFieldByName(p.Column)
		if !ok {
			return nil, iceberg.PartitionSpec{}, fmt.Errorf("partition %s: no written column %q", p, p.Column)
		}
		var tr iceberg.Transform
		name := p.Column + "_" + p.Transform
		switch p.Transform {
		case "identity":
			tr, name = iceberg.IdentityTransform{}, p.Column
		case "year":
			tr = iceberg.YearTransform{}
		case "month":
			tr = iceberg.MonthTransform{}
		case "day":
			tr = iceberg.DayTransform{}
		case "hour":
			tr = iceberg.HourTransform{}
		case "bucket":
			tr = iceberg.BucketTransform{NumBuckets: p.Param}
		case "truncate":
			tr = iceberg.TruncateTransform{Width: p.Param}
		default:
			return nil, iceberg.PartitionSpec{}, fmt.Errorf("partition %s: unknown transform", p)
		}
		pfs = append(pfs, iceberg.PartitionField{SourceIDs: []int{f.ID}, FieldID: 1000 + i, Name: name, Transform: tr})
	}
	return sch, iceberg.NewPartitionSpec(pfs...), nil
}

// dataDir is where the subtasks of job jobID write: a directory of the
// sink's own under the table's location, so that a recovery can tell the
// files it wrote from any other writer's. Data files go to its data/
// directory, under their partition's path.
func (s *Sink) dataDir(tbl *table.Table, jobID string) string {
	return strings.TrimSuffix(tbl.Location(), "/") + "/data/ingest/" + url.PathEscape(s.cfg.Pipeline) + "/" + url.PathEscape(s.name) + "/" + url.PathEscape(jobID)
}
