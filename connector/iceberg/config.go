package iceberg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/row"
)

// SinkConfig configures the Iceberg sink.
type SinkConfig struct {
	// Catalog is where the table's metadata is kept.
	Catalog CatalogConfig
	// Namespace and Table name the table.
	Namespace, Table string
	// CreateTable creates the table from Schema when it does not exist.
	CreateTable bool
	// PartitionBy is the partition spec of a table the sink creates.
	PartitionBy []Partition
	// Schema is the input's fields.
	Schema *row.Schema
	// Key is a changelog's key, nil for a stream of appends; Op is then the
	// changelog's operation field (insert, update or delete).
	Key []string
	Op  string
	// KeepMetadata writes a changelog's fields starting with '_' but Op;
	// without it they are not written.
	KeepMetadata bool
	// TargetFileSize is the size at which a data file is closed.
	TargetFileSize int64
	// CommitInterval is the least time between two commits; 0 commits
	// every checkpoint.
	CommitInterval time.Duration
	// Pipeline names the pipeline in the table's snapshot summaries.
	Pipeline string
}

// CatalogConfig says where a table's metadata is kept.
type CatalogConfig struct {
	// Type is "sql" (a PostgreSQL or SQLite database) or "rest".
	Type string
	// URI is the database's connection string (PostgreSQL), SQLitePrefix
	// and the path of a SQLite file, or the REST catalog's URL.
	URI string
	// Warehouse is where new tables are written.
	Warehouse string
	// Name is the catalog's name.
	Name string
	// Properties are more catalog properties, such as the FileIO's of an
	// s3:// warehouse (s3.endpoint, s3.region, s3.path-style-access,
	// s3.access-key-id, s3.secret-access-key).
	Properties map[string]string
}

// SQLitePrefix starts the URI of a SQL catalog kept in a SQLite file:
// sqlite:<path>.
const SQLitePrefix = "sqlite:"

// ParseTable splits `namespace.table`; the namespace may have several
// levels (a.b.table).
func ParseTable(s string) (namespace, table string, err error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("table %q: want namespace.table", s)
	}
	return s[:i], s[i+1:], nil
}

// Partition is one field of a partition spec: Transform ("identity",
// "year", "month", "day", "hour", "bucket" or "truncate") of Column, with
// Param the bucket count or truncation width.
type Partition struct {
	Transform string
	Param     int
	Column    string
}

// String writes p as partition_by takes it.
func (p Partition) String() string {
	switch p.Transform {
	case "identity":
		return p.Column
	case "bucket", "truncate":
		return fmt.Sprintf("%s(%d, %s)", p.Transform, p.Param, p.Column)
	}
	return fmt.Sprintf("%s(%s)", p.Transform, p.Column)
}

// ParsePartition reads one item of partition_by and checks it against the
// input's schema: the column exists, and a time transform applies to a time
// column.
func ParsePartition(s string, schema *row.Schema) (Partition, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return checkPartition(Partition{Transform: "identity", Column: s}, schema)
	}
	if !strings.HasSuffix(s, ")") {
		return Partition{}, fmt.Errorf("partition %q: want column, year(c), month(c), day(c), hour(c), bucket(N, c) or truncate(W, c)", s)
	}
	p := Partition{Transform: strings.ToLower(strings.TrimSpace(s[:open]))}
	args := strings.Split(s[open+1:len(s)-1], ",")
	switch p.Transform {
	case "year", "month", "day", "hour":
		if len(args) != 1 {
			return Partition{}, fmt.Errorf("partition %q: %s takes one column", s, p.Transform)
		}
		p.Column = strings.TrimSpace(args[0])
	case "bucket", "truncate":
		if len(args) != 2 {
			return Partition{}, fmt.Errorf("partition %q: %s takes a number and a column, as %s(16, id)", s, p.Transform, p.Transform)
		}
		n, err := strconv.Atoi(strings.TrimSpace(args[0]))
		if err != nil || n <= 0 {
			return Partition{}, fmt.Errorf("partition %q: %s needs a positive number, not %q", s, p.Transform, strings.TrimSpace(args[0]))
		}
		p.Param, p.Column = n, strings.TrimSpace(args[1])
	default:
		return Partition{}, fmt.Errorf("partition %q: unknown transform %q (known: year, month, day, hour, bucket, truncate; a bare column is identity)", s, p.Transform)
	}
	return checkPartition(p, schema)
}

func checkPartition(p Partition, schema *row.Schema) (Partition, error) {
	i := schema.Index(p.Column)
	if i < 0 {
		return Partition{}, fmt.Errorf("partition %s: the input has no field %q (fields: %s)", p, p.Column, strings.Join(schema.Names(), ", "))
	}
	k := schema.Fields[i].Kind
	switch p.Transform {
	case "year", "month", "day", "hour":
		if k != row.Time {
			return Partition{}, fmt.Errorf("partition %s: %s applies to a time field; %q is %v", p, p.Transform, p.Column, k)
		}
	case "truncate":
		if k != row.Int && k != row.String && k != row.Bytes {
			return Partition{}, fmt.Errorf("partition %s: truncate applies to an int, string or bytes field; %q is %v", p, p.Column, k)
		}
	case "bucket":
		if k == row.Float || k == row.Bool {
			return Partition{}, fmt.Errorf("partition %s: bucket does not apply to a %v field", p, k)
		}
	}
	return p, nil
}
