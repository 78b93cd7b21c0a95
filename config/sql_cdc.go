package config

import (
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/connector/pgcdc"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans a PostgreSQL change-data-capture source in SQL:
//
//	CREATE SOURCE accounts (id BIGINT PRIMARY KEY, owner VARCHAR, …) WITH (
//	  connector = 'postgres-cdc', hostname = '127.0.0.1', port = '5432',
//	  username = 'postgres', database.name = 'test', table.name = 'accounts',
//	  slot.name = 'ingest_accounts', publication.name = 'ingest_accounts');
//
// as RisingWave writes it (its options, or the YAML fields dsn, tables,
// slot, publication). The source is an updating relation keyed by its
// PRIMARY KEY: a sink applies it, and a GROUP BY aggregates it.

// cdcDSNOptions are RisingWave's connection options.
var cdcDSNOptions = []string{"hostname", "port", "username", "password", "database.name"}

// cdcSource plans s as a postgres_cdc source.
func (p *planner) cdcSource(s *sql.CreateSource) error {
	m := mappingNode(s.Pos)
	set := func(key, value string, at sql.Pos) {
		setPath(m, []string{key}, scalarNode(value, at.Line, at.Column), at)
	}
	set("type", "postgres_cdc", s.Pos)
	conn := map[string]string{}
	schema, table := "public", ""
	var tablePos sql.Pos
	for _, o := range s.Options {
		switch {
		case o.Key == "connector":
		case slices.Contains(cdcDSNOptions, o.Key):
			conn[o.Key] = o.Value
		case o.Key == "schema.name":
			schema = o.Value
		case o.Key == "table.name":
			table, tablePos = o.Value, o.Pos
		case o.Key == "slot.name":
			set("slot", o.Value, o.Pos)
		case o.Key == "publication.name":
			set("publication", o.Value, o.Pos)
		case o.Key == "tables" || o.Key == "schemas":
			list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: o.Pos.Line, Column: o.Pos.Column}
			for _, v := range strings.Split(o.Value, ",") {
				list.Content = append(list.Content, scalarNode(strings.TrimSpace(v), o.Pos.Line, o.Pos.Column))
			}
			setPath(m, []string{o.Key}, list, o.Pos)
		default:
			// dsn, chunk_rows, stop_at: the YAML fields; the builder names
			// any other as unknown.
			set(o.Key, o.Value, o.Pos)
		}
	}
	if len(conn) > 0 {
		if conn["hostname"] == "" || conn["database.name"] == "" {
			return p.errorf(s.Pos, "source %s: hostname and database.name are required with %s (or give dsn)", s.Name, strings.Join(cdcDSNOptions, ", "))
		}
		u := url.URL{Scheme: "postgres", Host: conn["hostname"], Path: "/" + conn["database.name"]}
		if port := conn["port"]; port != "" {
			u.Host += ":" + port
		}
		if user := conn["username"]; user != "" {
			u.User = url.User(user)
			if pw, ok := conn["password"]; ok && pw != "" {
				u.User = url.UserPassword(user, pw)
			}
		}
		set("dsn", u.String(), s.Pos)
	}
	if table != "" {
		list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: tablePos.Line, Column: tablePos.Column}
		list.Content = append(list.Content, scalarNode(schema+"."+table, tablePos.Line, tablePos.Column))
		setPath(m, []string{"tables"}, list, tablePos)
	}
	if len(s.Columns) == 0 {
		return p.errorf(s.Pos, "source %s: declare its columns and PRIMARY KEY, as the table has them", s.Name)
	}
	if s.PrimaryKey == nil {
		return p.errorf(s.Pos, "source %s: a change-data-capture source needs its PRIMARY KEY: changes are keyed by it", s.Name)
	}
	if s.NotEnforced {
		return p.errorf(s.KeyPos, "source %s: a change-data-capture source's PRIMARY KEY is its table's, which PostgreSQL enforces: drop NOT ENFORCED", s.Name)
	}
	rel := &relation{node: s.Name, isSource: true, updating: s.PrimaryKey, timeCol: pgcdc.CommitTimeField}
	fields := mappingNode(s.Pos)
	for _, c := range s.Columns {
		if c.Proctime {
			return p.errorf(c.Pos, "column %s AS PROCTIME(): a change-data-capture source's time is its commit time, %s", c.Name, pgcdc.CommitTimeField)
		}
		kind, ok := columnKinds[c.Type]
		if !ok {
			return p.errorf(c.Pos, "column %s: type %s is not supported (known: BIGINT, DOUBLE PRECISION, VARCHAR, BOOLEAN, TIMESTAMP, BYTEA and their synonyms)", c.Name, strings.ToUpper(c.Type))
		}
		if c.Type == "numeric" || c.Type == "decimal" {
			kind = "string" // read in its text form, every digit kept
		}
		fields.Content = append(fields.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column), scalarNode(kind, c.Pos.Line, c.Pos.Column))
		rel.add(c.Name, colType{kind: kindNames[kind], notNull: slices.Contains(s.PrimaryKey, c.Name)})
	}
	for _, k := range s.PrimaryKey {
		if !slices.Contains(rel.columns, k) {
			return p.errorf(s.KeyPos, "PRIMARY KEY (%s): %s is not a declared column", strings.Join(s.PrimaryKey, ", "), k)
		}
	}
	setPath(m, []string{"fields"}, fields, s.Pos)
	key := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: s.KeyPos.Line, Column: s.KeyPos.Column}
	for _, k := range s.PrimaryKey {
		key.Content = append(key.Content, scalarNode(k, s.KeyPos.Line, s.KeyPos.Column))
	}
	setPath(m, []string{"key"}, key, s.KeyPos)
	// before_images = 'true' adds _before_<column> after the columns.
	for _, o := range s.Options {
		if o.Key == "before_images" && strings.EqualFold(o.Value, "true") {
			for _, c := range slices.Clone(rel.columns) {
				rel.add(pgcdc.BeforePrefix+c, colType{kind: rel.types[c].kind})
			}
		}
	}
	rel.add(pgcdc.TableField, colType{kind: row.String, notNull: true})
	rel.add(pgcdc.LSNField, colType{kind: row.String, notNull: true})
	rel.add(pgcdc.CommitTimeField, colType{kind: row.Time, notNull: true})
	if w := s.Watermark; w != nil {
		if w.Column != pgcdc.CommitTimeField {
			return p.errorf(w.Pos, "WATERMARK FOR %s: a change-data-capture source's event time is its commit time, %s", w.Column, pgcdc.CommitTimeField)
		}
		setPath(m, []string{"watermark", "max_delay"}, scalarNode(w.Delay.String(), w.Pos.Line, w.Pos.Column), w.Pos)
	}
	if s.Encode != "" {
		return p.errorf(s.EncodePos, "source %s: a change-data-capture source reads the table's columns: FORMAT … ENCODE does not apply", s.Name)
	}
	p.rels[s.Name] = rel
	return p.add("sources", s.Name, s.Pos, m)
}
