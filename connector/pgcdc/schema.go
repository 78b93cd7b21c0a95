package pgcdc

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingest-engine/ingest/row"
)

// Column is one column of a captured table as the catalog describes it.
type Column struct {
	// Name is the column's name.
	Name string
	// Type is the column's type as format_type shows it ("bigint",
	// "character varying(20)"), and OID its type's OID.
	Type string
	OID  uint32
	// Key is the column's position in the primary key, from 1; 0 for a
	// column outside it.
	Key int
}

// Kind is the record field kind a column is read as (Kind of its OID).
func (c Column) Kind() row.Kind { return Kind(c.OID) }

// Table is a captured table: its qualified name and columns in order.
type Table struct {
	// Schema and Name name the table; Qualified is "schema.name", the
	// records' _table value.
	Schema, Name string
	Columns      []Column
	// Key lists the primary key's columns (indexes into Columns) in key
	// order.
	Key []int
	// OID is the table's OID: the stream names relations by it, and a
	// table dropped and created again has another.
	OID uint32
	// Identity is the table's replica identity: 'd' (the primary key) or
	// 'f' (full); describe refuses the others.
	Identity byte
}

// Qualified is the table's schema-qualified name, unquoted.
func (t *Table) Qualified() string { return t.Schema + "." + t.Name }

// quoted is the table's name quoted for SQL.
func (t *Table) quoted() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// Type OIDs of the types read as other kinds than String.
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
	oidText        = 25
	oidVarchar     = 1043
	oidUUID        = 2950
)

// Kind is the kind a column of type oid is read as: Bool for boolean, Int
// for smallint, integer, bigint and oid, Float for real and double
// precision, Time for timestamp (taken as UTC), timestamptz and date
// (midnight UTC), Bytes for bytea, and String for every other type, in
// PostgreSQL's text form (numeric keeps all of its digits that way).
func Kind(oid uint32) row.Kind {
	switch oid {
	case oidBool:
		return row.Bool
	case oidInt2, oidInt4, oidInt8, oidOID:
		return row.Int
	case oidFloat4, oidFloat8:
		return row.Float
	case oidDate, oidTimestamp, oidTimestampTZ:
		return row.Time
	case oidBytea:
		return row.Bytes
	}
	return row.String
}

// chunkableKey says whether a primary key column of type oid can order a
// table's chunks the same way in PostgreSQL (text under the C collation)
// and in Go (compareKey).
func chunkableKey(oid uint32) bool {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidOID, oidText, oidVarchar, oidUUID, oidDate, oidTimestamp, oidTimestampTZ:
		return true
	}
	return false
}

// decodeText turns a value in PostgreSQL's text form (as pgoutput sends it
// and as the snapshot selects it, under DateStyle ISO and time zone UTC)
// into a value of kind.
func decodeText(kind row.Kind, oid uint32, s string) (row.Value, error) {
	switch kind {
	case row.Bool:
		switch s {
		case "t":
			return row.BoolValue(true), nil
		case "f":
			return row.BoolValue(false), nil
		}
		return row.Value{}, fmt.Errorf("boolean %q is neither t nor f", s)
	case row.Int:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return row.Value{}, err
		}
		return row.IntValue(i), nil
	case row.Float:
		switch s {
		case "NaN":
			return row.Value{}, fmt.Errorf("NaN has no JSON form")
		case "Infinity", "-Infinity":
			return row.Value{}, fmt.Errorf("%s has no JSON form", s)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return row.Value{}, err
		}
		return row.FloatValue(f), nil
	case row.Time:
		t, err := parseTime(oid, s)
		if err != nil {
			return row.Value{}, err
		}
		return row.TimeValue(t.UnixNano()), nil
	case row.Bytes:
		if !strings.HasPrefix(s, `\x`) {
			return row.Value{}, fmt.Errorf("bytea is not in hex form")
		}
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return row.Value{}, err
		}
		return row.BytesValue(string(b)), nil
	}
	return row.StringValue(s), nil
}

// parseTime reads a date, timestamp or timestamptz in ISO form. Infinite
// and BC values, and times outside the years a Unix nanosecond count holds
// (1678 to 2262), are errors: no record field holds them.
func parseTime(oid uint32, s string) (time.Time, error) {
	if s == "infinity" || s == "-infinity" || strings.HasSuffix(s, " BC") {
		return time.Time{}, fmt.Errorf("%q has no timestamp value", s)
	}
	var layout string
	switch oid {
	case oidDate:
		layout = "2006-01-02"
	case oidTimestamp:
		layout = "2006-01-02 15:04:05.999999999"
	default:
		// +00, +05:30 or +05:30:12.
		layout = "2006-01-02 15:04:05.999999999Z07"
		if i := strings.LastIndexAny(s, "+-"); i > 0 {
			switch len(s) - i {
			case 6:
				layout = "2006-01-02 15:04:05.999999999Z07:00"
			case 9:
				layout = "2006-01-02 15:04:05.999999999Z07:00:00"
			}
		}
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return time.Time{}, err
	}
	if t.Year() < 1678 || t.Year() > 2261 {
		return time.Time{}, fmt.Errorf("%q is outside the years a timestamp field holds (1678 to 2261)", s)
	}
	return t, nil
}

// compareKey orders two primary key values of one column as PostgreSQL
// orders them under the C collation: by number, time, or bytes.
func compareKey(a, b row.Value) int {
	switch a.Kind() {
	case row.Int, row.Time:
		switch x, y := a.Int(), b.Int(); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return strings.Compare(a.Str(), b.Str())
}

// describe reads the columns and primary keys of the tables named (each
// "schema.table", or "table" in public) and of every table of schemas.
func describe(ctx context.Context, conn *pgx.Conn, tables, schemas []string) ([]*Table, error) {
	var names [][2]string
	for _, t := range tables {
		s, n, ok := strings.Cut(t, ".")
		if !ok {
			s, n = "public", t
		}
		names = append(names, [2]string{s, n})
	}
	for _, s := range schemas {
		rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`, s)
		if err != nil {
			return nil, fmt.Errorf("listing the tables of schema %s: %w", s, err)
		}
		ns, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("listing the tables of schema %s: %w", s, err)
		}
		if len(ns) == 0 {
			return nil, unrecoverable(fmt.Errorf("schema %s has no tables", s))
		}
		for _, n := range ns {
			names = append(names, [2]string{s, n})
		}
	}
	var out []*Table
	seen := map[[2]string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		t := &Table{Schema: n[0], Name: n[1]}
		var kind, identity string
		var children bool
		err := conn.QueryRow(ctx, `SELECT c.oid, c.relkind::text, c.relreplident::text, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
			FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relname = $2`, t.Schema, t.Name).Scan(&t.OID, &kind, &identity, &children)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, unrecoverable(fmt.Errorf("table %s does not exist", t.Qualified()))
		case err != nil:
			return nil, fmt.Errorf("reading table %s: %w", t.Qualified(), err)
		case kind == "p":
			return nil, unrecoverable(fmt.Errorf("%s is a partitioned table, whose changes the stream names by partition: capture its partitions (each a table of its own, or schemas: [%s])", t.Qualified(), t.Schema))
		case kind != "r":
			return nil, unrecoverable(fmt.Errorf("%s is not a table (relkind %s)", t.Qualified(), kind))
		case children:
			return nil, unrecoverable(fmt.Errorf("table %s has inheritance children, whose changes the stream names by child: capture the children as tables of their own", t.Qualified()))
		case identity == "n" || identity == "i":
			return nil, unrecoverable(fmt.Errorf("table %s has REPLICA IDENTITY %s: a delete or key change would not carry the primary key; ALTER TABLE %s REPLICA IDENTITY DEFAULT (or FULL)",
				t.Qualified(), map[string]string{"n": "NOTHING", "i": "USING INDEX"}[identity], t.quoted()))
		}
		t.Identity = identity[0]
		rows, err := conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
				coalesce(array_position(i.indkey::int2[], a.attnum) + 1 - array_lower(i.indkey::int2[], 1), 0)
			FROM pg_attribute a
			JOIN pg_class c ON c.oid = a.attrelid
			JOIN pg_namespace ns ON ns.oid = c.relnamespace
			LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
			WHERE ns.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
			ORDER BY a.attnum`, t.Schema, t.Name)
		if err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", t.Qualified(), err)
		}
		for rows.Next() {
			var c Column
			var key int32
			if err := rows.Scan(&c.Name, &c.Type, &c.OID, &key); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reading the columns of %s: %w", t.Qualified(), err)
			}
			c.Key = int(key)
			t.Columns = append(t.Columns, c)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", t.Qualified(), err)
		}
		if len(t.Columns) == 0 {
			return nil, unrecoverable(fmt.Errorf("table %s does not exist (or has no columns)", t.Qualified()))
		}
		for k := 1; ; k++ {
			at := -1
			for i, c := range t.Columns {
				if c.Key == k {
					at = i
				}
			}
			if at < 0 {
				break
			}
			t.Key = append(t.Key, at)
		}
		if len(t.Key) == 0 {
			return nil, unrecoverable(fmt.Errorf("table %s has no primary key: a change-data-capture source reads a table in chunks of its primary key and keys its changes by it", t.Qualified()))
		}
		for _, k := range t.Key {
			if c := t.Columns[k]; !chunkableKey(c.OID) {
				return nil, unrecoverable(fmt.Errorf("table %s: primary key column %s is of type %s, which the snapshot cannot read in chunks (key types: smallint, integer, bigint, oid, text, varchar, uuid, date, timestamp, timestamptz)", t.Qualified(), c.Name, c.Type))
			}
		}
		for _, c := range t.Columns {
			if strings.HasPrefix(c.Name, "_") {
				return nil, unrecoverable(fmt.Errorf("table %s: column %s starts with _, which the records keep for their metadata (_op, _table, _lsn, _commit_time)", t.Qualified(), c.Name))
			}
		}
		out = append(out, t)
	}
	return out, nil
}
