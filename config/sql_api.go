package config

import (
	"fmt"
	"iter"
	"maps"
	"strings"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
	"github.com/ingest-engine/ingest/stream"
)

// This file lets a Go program mix SQL into the pipeline it builds: its
// streams of rows are tables the SQL reads, and the SQL's views are streams
// the program goes on with.

// Table is a stream of rows that SQL reads or makes: its schema, its
// event-time column ("" when its rows' time is no column; windows over it
// are then refused) and the columns that are never NULL (SQL writes no NULL
// guards for them). Changelog, when not nil, says the stream is a
// changelog keyed by those columns, with each row's operation in column _op
// (an updating view: a GROUP BY without a window); only sinks apply it.
type Table struct {
	Stream    stream.Stream[row.Row]
	Schema    *row.Schema
	EventTime string
	NotNull   []string
	Changelog []string
}

// AddSQL plans the statements of text (CREATE VIEW, and CREATE SOURCE and
// CREATE SINK, which add their nodes) into p, the program's pipeline.
// tables name the program's streams the statements read; the result holds
// every view the statements create, by name. name names text in errors
// (file:line:column) and anchors relative paths. SET is refused: the
// program's RunOptions hold the pipeline's settings. After an error p may
// hold part of the statements' nodes: do not run it.
func AddSQL(p *stream.Pipeline, name, text string, tables map[string]Table) (map[string]Table, error) {
	script, err := sql.Parse(name, text)
	if err != nil {
		return nil, err
	}
	for tn, t := range tables {
		if t.Schema == nil || t.Stream.Node() == nil {
			return nil, fmt.Errorf("%s: table %s needs a stream and a schema", name, tn)
		}
		if t.EventTime != "" && t.EventTime != "event_time" && t.Schema.Index(t.EventTime) < 0 {
			return nil, fmt.Errorf("%s: table %s: its event-time column %s is not one of its columns (%s)", name, tn, t.EventTime, strings.Join(t.Schema.Names(), ", "))
		}
	}
	for _, st := range script.Statements {
		var what, stName string
		switch s := st.(type) {
		case *sql.Set:
			return nil, &sql.Error{File: name, Pos: s.Pos, Msg: "SET has no meaning in a Go program's pipeline: its settings are the program's RunOptions"}
		case *sql.Explain:
			return nil, &sql.Error{File: name, Pos: s.Pos, Msg: "EXPLAIN has no meaning in a Go program's pipeline: print its plan (Pipeline.Plan)"}
		case *sql.CreateView:
			what, stName = "view", s.Name
		case *sql.CreateSource:
			what, stName = "source", s.Name
		case *sql.CreateSink:
			what, stName = "sink", s.Name
		}
		if _, dup := tables[stName]; dup {
			return nil, &sql.Error{File: name, Pos: st.At(), Msg: fmt.Sprintf("%s %s has the name of a table the program gives", what, stName)}
		}
	}
	emb := &embedding{p: p, tables: tables}
	if _, err := planSQL(name, script, emb); err != nil {
		return nil, err
	}
	views := map[string]Table{}
	for _, st := range script.Statements {
		v, ok := st.(*sql.CreateView)
		if !ok {
			continue
		}
		rel := emb.rels[v.Name]
		s, built := emb.streams[rel.node]
		if !built || s.schema == nil {
			return nil, &sql.Error{File: name, Pos: v.Pos, Msg: fmt.Sprintf("view %s was not built", v.Name)}
		}
		t := Table{Stream: s.s, Schema: s.schema, EventTime: rel.timeCol, Changelog: s.changelog}
		for _, c := range rel.columns {
			if rel.types[c].notNull {
				t.NotNull = append(t.NotNull, c)
			}
		}
		views[v.Name] = t
	}
	return views, nil
}

// embedding is a Go program's pipeline that a SQL script adds to: the
// program's tables, and, once built, the streams and relations made.
type embedding struct {
	p       *stream.Pipeline
	tables  map[string]Table
	streams map[string]named
	rels    map[string]*relation
}

// tableMap returns the program's tables (none without an embedding).
func (e *embedding) tableMap() map[string]Table {
	if e == nil {
		return nil
	}
	return e.tables
}

// tableNames iterates over the program's table names.
func (e *embedding) tableNames() iter.Seq[string] { return maps.Keys(e.tableMap()) }
