package config

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans a SQL script (package sql) into the YAML document the
// builder builds: a CREATE SOURCE becomes a source whose fields are the WITH
// options, each query becomes filter, map and window transforms, and a
// CREATE SINK a sink. So a SQL pipeline is the same graph as the YAML one
// written by hand, with the same checks, guarantee and plan. Every node made
// carries the SQL construct's line and column, so the builder's errors point
// into the script.

// ParseSQL builds a pipeline from the SQL script in text; path names it in
// errors and anchors relative paths.
func ParseSQL(path string, text []byte) (*Pipeline, error) {
	script, err := sql.Parse(path, string(text))
	if err != nil {
		return nil, err
	}
	return planSQL(path, script, nil)
}

// PlanSQL builds a pipeline from a parsed SQL script, which a caller may
// have changed (the bench sets a Nexmark source's options and makes the
// sinks blackholes); path anchors relative paths.
func PlanSQL(path string, script *sql.Script) (*Pipeline, error) {
	return planSQL(path, script, nil)
}

// planSQL plans script, into the pipeline of emb when it is set.
func planSQL(path string, script *sql.Script, emb *embedding) (*Pipeline, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline path %s: %w", path, err)
	}
	p := &planner{file: path, top: mappingNode(sql.Pos{Line: 1, Column: 1}), rels: map[string]*relation{}}
	p.set("pipeline", pipelineName(path), sql.Pos{Line: 1, Column: 1})
	for name, t := range emb.tableMap() {
		rel := &relation{node: name, timeCol: t.EventTime, updating: t.Changelog}
		for _, f := range t.Schema.Fields {
			rel.add(f.Name, colType{kind: f.Kind, notNull: slices.Contains(t.NotNull, f.Name)})
		}
		p.rels[name] = rel
	}
	if emb == nil {
		// (Go code embedding the script may read any column of a view.)
		sources := map[string]bool{}
		for _, st := range script.Statements {
			if s, ok := st.(*sql.CreateSource); ok {
				sources[s.Name] = true
			}
		}
		p.reads = scriptReads(sources, script.Statements)
	}
	for _, st := range script.Statements {
		if err := p.statement(st); err != nil {
			return nil, err
		}
	}
	if emb == nil {
		// (Go code embedding the script may read any view.)
		p.dropAbsorbedViews()
	}
	for _, k := range []string{"sources", "transforms", "sinks"} {
		if n := p.sections[k]; n != nil {
			p.top.Content = append(p.top.Content, scalarNode(k, n.Line, n.Column), n)
		}
	}
	e := &errs{file: path, columns: true}
	out, err := build(e, path, abs, &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{p.top}}, emb)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(p.warnings, out.Warnings...)
	out.Explain = p.explain
	if emb != nil {
		emb.rels = p.rels
	}
	return out, nil
}

// pipelineName is the default pipeline name: the file's base name without
// its extension, with characters a name may not hold replaced by '_'.
func pipelineName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(base, "_")
}

// relation is a source or view the script declared: its columns, in order,
// and its event-time column ("" when it has none a window can use).
type relation struct {
	node    string // the graph node that produces it
	columns []string
	// types are what is known of each column (translator).
	types    map[string]colType
	timeCol  string
	isSource bool
	// window, when set, says the relation is the result of a tumbling or
	// sliding window: every row's time is its window's end - 1ns.
	window *windowInfo
	// updating, when not nil, says the relation is an updating result (a
	// changelog) keyed by these columns, with the operation in column _op.
	updating []string
	// procCol is the source's AS PROCTIME() column, "" when it has none:
	// it reads the time a record is processed, and TUMBLE over it is a
	// processing-time window.
	procCol string
	// table, when set, says the relation is a bounded table that only
	// lookup joins read (CREATE TABLE … WITH (connector = 'file')).
	table *lookupTable
	// unique, when set, are columns no two rows share the values of, as
	// the user declared them (a source's PRIMARY KEY … NOT ENFORCED).
	unique []string
	// closing, when set, says when the rows of each value of some columns
	// stop coming (see closingRows).
	closing *closingRows
}

// closingRows says of a relation that once the watermark passes a row's
// column at, no more rows with its values of columns key come on time: a
// GROUP BY of every key column can emit each group once, then. A join whose
// left side is unique by the key and bounds each pair by the left row's
// column at has it (q4's bids of an auction stop at its expiry).
type closingRows struct {
	key []string
	at  string
}

// windowInfo is the window a relation is the result of.
type windowInfo struct {
	// shape is the window's kind, size and slide: results of windows of one
	// shape with equal starts have equal times.
	shape string
	// size is the windows' size: a row's window_start is its time + 1ns -
	// size, its window_end its time + 1ns. slide is the time between two
	// windows' starts (size for tumbling windows).
	size, slide time.Duration
	// start and end name the columns holding window_start and window_end
	// ("" when not selected).
	start, end string
}

// add appends column name of type ct.
func (r *relation) add(name string, ct colType) {
	r.columns = append(r.columns, name)
	if r.types == nil {
		r.types = map[string]colType{}
	}
	r.types[name] = ct
}

// planner turns statements into the YAML document.
type planner struct {
	file     string
	top      *yaml.Node
	sections map[string]*yaml.Node
	rels     map[string]*relation
	// views are the CREATE VIEWs' queries as written, before planning
	// (windowTopJoin reads how a view was made).
	views map[string]*sql.Select
	// reads are the columns the script may read (nil: any), which a
	// nexmark source generates alone (sql_prune.go).
	reads *readColumns
	// absorbed are views a query computes otherwise than by reading them
	// (windowTopJoin): when nothing else reads them they are not run.
	absorbed []string
	// joinTTL is SET join.ttl: how long an inner join keeps each side's
	// records, in event time ("" for the default, forever).
	joinTTL string
	// warnings are the planner's findings, added to the pipeline's.
	warnings []Warning
	// explain says the script holds an EXPLAIN (Pipeline.Explain).
	explain bool
}

func (p *planner) errorf(at sql.Pos, format string, args ...any) error {
	return &sql.Error{File: p.file, Pos: at, Msg: fmt.Sprintf(format, args...)}
}

// section returns the mapping of sources, transforms or sinks.
func (p *planner) section(name string, at sql.Pos) *yaml.Node {
	if p.sections == nil {
		p.sections = map[string]*yaml.Node{}
	}
	if p.sections[name] == nil {
		p.sections[name] = mappingNode(at)
	}
	return p.sections[name]
}

// set sets a dotted top-level field (SET checkpoint.interval = '1s').
func (p *planner) set(name, value string, at sql.Pos) {
	setPath(p.top, strings.Split(name, "."), scalarNode(value, at.Line, at.Column), at)
}

// setPath sets path under mapping m to v, making the mappings on the way
// and replacing an earlier value.
func setPath(m *yaml.Node, path []string, v *yaml.Node, at sql.Pos) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == path[0] {
			if len(path) == 1 {
				m.Content[i+1] = v
				return
			}
			if m.Content[i+1].Kind != yaml.MappingNode {
				m.Content[i+1] = mappingNode(at)
			}
			setPath(m.Content[i+1], path[1:], v, at)
			return
		}
	}
	k := scalarNode(path[0], at.Line, at.Column)
	if len(path) == 1 {
		m.Content = append(m.Content, k, v)
		return
	}
	sub := mappingNode(at)
	m.Content = append(m.Content, k, sub)
	setPath(sub, path[1:], v, at)
}

func mappingNode(at sql.Pos) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: at.Line, Column: at.Column}
}

func scalarNode(v string, line, col int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: line, Column: col}
}

// add adds node name with fields to section, refusing a second use of a name.
func (p *planner) add(section, name string, at sql.Pos, fields *yaml.Node) error {
	if err := p.nameFree(name, at); err != nil {
		return err
	}
	s := p.section(section, at)
	s.Content = append(s.Content, scalarNode(name, at.Line, at.Column), fields)
	return nil
}

// nameFree refuses name when a node of any section, or a table (which adds
// no node), took it.
func (p *planner) nameFree(name string, at sql.Pos) error {
	for _, sec := range p.sections {
		for i := 0; i < len(sec.Content); i += 2 {
			if sec.Content[i].Value == name {
				return p.errorf(at, "the name %s is already used at line %d", name, sec.Content[i].Line)
			}
		}
	}
	if r := p.rels[name]; r != nil && r.table != nil {
		return p.errorf(at, "the name %s is already used at line %d", name, r.table.at.Line)
	}
	return nil
}

func (p *planner) statement(st sql.Statement) error {
	switch s := st.(type) {
	case *sql.Set:
		if s.Name == "join.ttl" {
			p.joinTTL = s.Value
			return nil
		}
		p.set(s.Name, s.Value, s.Pos)
		return nil
	case *sql.CreateSource:
		if err := p.nameFree(s.Name, s.Pos); err != nil {
			return err
		}
		return p.source(s)
	case *sql.CreateView:
		if err := p.nameFree(s.Name, s.Pos); err != nil {
			return err
		}
		if p.views == nil {
			p.views = map[string]*sql.Select{}
		}
		q := *s.Query
		q.Items, q.GroupBy = slices.Clone(q.Items), slices.Clone(q.GroupBy)
		p.views[s.Name] = &q
		_, err := p.query(s.Name, s.Query)
		return err
	case *sql.CreateSink:
		if err := p.nameFree(s.Name, s.Pos); err != nil {
			return err
		}
		return p.sink(s)
	case *sql.Explain:
		p.explain = true
		if s.Statement != nil {
			return p.statement(s.Statement)
		}
		// A query explained alone is planned into a sink that discards
		// its rows, as a sink would write them.
		name := fmt.Sprintf("explain-%d", s.Pos.Line)
		node, err := p.query(name, s.Query)
		if err != nil {
			return err
		}
		m := mappingNode(s.Pos)
		setPath(m, []string{"type"}, scalarNode("blackhole", s.Pos.Line, s.Pos.Column), s.Pos)
		setPath(m, []string{"input"}, scalarNode(node, s.Pos.Line, s.Pos.Column), s.Pos)
		return p.add("sinks", name+"-out", s.Pos, m)
	}
	return p.errorf(st.At(), "unsupported statement")
}

// columnKinds are the SQL column types and the field types they declare.
var columnKinds = map[string]string{
	"bigint": "int", "int": "int", "integer": "int", "smallint": "int", "int8": "int", "int4": "int", "int2": "int",
	"double precision": "float", "double": "float", "float": "float", "float8": "float", "real": "float", "float4": "float",
	"numeric": "float", "decimal": "float",
	"varchar": "string", "text": "string", "string": "string", "char": "string", "character varying": "string", "character": "string",
	"boolean": "bool", "bool": "bool",
	"timestamp": "time", "timestamptz": "time", "timestamp with time zone": "time", "timestamp without time zone": "time",
	"bytea": "bytes",
}

func (p *planner) source(s *sql.CreateSource) error {
	m := mappingNode(s.Pos)
	typ, spec, err := p.connectorOf(connector.RoleSource, s.Name, s.Pos, s.Options)
	if err != nil {
		return err
	}
	if typ == "postgres-cdc" || typ == "postgres_cdc" {
		return p.cdcSource(s)
	}
	if s.Table && typ == "file" {
		return p.table(s)
	}
	if s.PrimaryKey != nil && !s.NotEnforced {
		return p.errorf(s.KeyPos, "source %s: connector %s reads records, not a table's changes, so the engine cannot enforce a PRIMARY KEY (that is for connector = 'postgres-cdc'); to declare that no two records share the key, write PRIMARY KEY (%s) NOT ENFORCED (a duplicate is found only while a join holds the first record)", s.Name, typ, strings.Join(s.PrimaryKey, ", "))
	}
	for _, o := range s.Options {
		key, value, err := p.sourceOption(typ, o)
		if err != nil {
			return err
		}
		o.Value = value
		setPath(m, strings.Split(key, "."), p.optionValue(spec, key, o), o.Pos)
	}
	rel := &relation{node: s.Name, isSource: true}
	// A processing-time column (AS PROCTIME()) is no field of the records.
	for i := 0; i < len(s.Columns); i++ {
		c := s.Columns[i]
		if !c.Proctime {
			continue
		}
		switch {
		case rel.procCol != "":
			return p.errorf(c.Pos, "source %s: %s and %s are both AS PROCTIME(): declare one", s.Name, rel.procCol, c.Name)
		case columnKinds[c.Type] != "time":
			return p.errorf(c.Pos, "column %s %s AS PROCTIME(): a processing time is a TIMESTAMP", c.Name, strings.ToUpper(c.Type))
		}
		rel.procCol = c.Name
		s.Columns = slices.Delete(slices.Clone(s.Columns), i, i+1)
		i--
	}
	if typ == "nexmark" {
		return p.nexmarkSource(s, m, rel)
	}
	if len(s.Columns) > 0 {
		if typ == "datagen" {
			for _, c := range s.Columns {
				if !slices.Contains([]string{"id", "key", "value"}, c.Name) || columnKinds[c.Type] != "int" {
					return p.errorf(c.Pos, "source %s: a datagen record is id, key and value, all BIGINT; column %s %s is not one of them", s.Name, c.Name, strings.ToUpper(c.Type))
				}
			}
		} else {
			fields := mappingNode(s.Pos)
			for _, c := range s.Columns {
				if c.Written != "" {
					p.warnings = append(p.warnings, Warning{File: p.file, Line: c.Pos.Line, Field: "source " + s.Name,
						Msg: fmt.Sprintf("column %s is read as %s (an unquoted name is lower-cased): a record member named %q is not found and reads as NULL; write %q in double quotes to read it", c.Written, c.Name, c.Written, c.Written)})
				}
				kind, ok := columnKinds[c.Type]
				if !ok {
					return p.errorf(c.Pos, "column %s: type %s is not supported (known: BIGINT, DOUBLE PRECISION, VARCHAR, BOOLEAN, TIMESTAMP, BYTEA and their synonyms)", c.Name, strings.ToUpper(c.Type))
				}
				fields.Content = append(fields.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column), scalarNode(kind, c.Pos.Line, c.Pos.Column))
			}
			setPath(m, []string{"fields"}, fields, s.Pos)
		}
		for _, c := range s.Columns {
			// A datagen record is never NULL; the other sources' values
			// may be.
			rel.add(c.Name, colType{kind: kindNames[columnKinds[c.Type]], notNull: typ == "datagen"})
		}
	} else if typ == "datagen" {
		for _, c := range []string{"id", "key", "value"} {
			rel.add(c, colType{kind: row.Int, notNull: true})
		}
	}
	if typ == "datagen" {
		// A datagen record's event time is its own, not a column: queries
		// read it as event_time.
		rel.timeCol = "event_time"
	}
	if w := s.Watermark; w != nil {
		if typ == "datagen" && w.Column != "event_time" {
			return p.errorf(w.Pos, "WATERMARK FOR %s: a datagen record's event time is event_time", w.Column)
		}
		if typ != "datagen" {
			if !slices.Contains(rel.columns, w.Column) {
				return p.errorf(w.Pos, "WATERMARK FOR %s: source %s has no column %s", w.Column, s.Name, w.Column)
			}
			setPath(m, []string{"event_time", "field"}, scalarNode(w.Column, w.Pos.Line, w.Pos.Column), w.Pos)
			rel.timeCol = w.Column
		}
		setPath(m, []string{"watermark", "max_delay"}, scalarNode(w.Delay.String(), w.Pos.Line, w.Pos.Column), w.Pos)
	}
	if s.Encode != "" {
		switch {
		case s.Encode == "json":
		case s.Encode == "csv" && typ == "file":
			setPath(m, []string{"format"}, scalarNode("csv", s.EncodePos.Line, s.EncodePos.Column), s.EncodePos)
		default:
			return p.errorf(s.EncodePos, "source %s: ENCODE %s is not supported for connector %s (known: JSON; CSV for file)", s.Name, strings.ToUpper(s.Encode), typ)
		}
	}
	if err := p.declaredKey(s, rel); err != nil {
		return err
	}
	p.rels[s.Name] = rel
	return p.add("sources", s.Name, s.Pos, m)
}

// declaredKey takes a source's PRIMARY KEY … NOT ENFORCED as rel's unique
// columns, each of which must be one of its columns.
func (p *planner) declaredKey(s *sql.CreateSource, rel *relation) error {
	if !s.NotEnforced {
		return nil
	}
	for i, k := range s.PrimaryKey {
		if !slices.Contains(rel.columns, k) {
			return p.errorf(s.KeyPos, "PRIMARY KEY (%s): source %s has no column %s (columns: %s)", strings.Join(s.PrimaryKey, ", "), s.Name, k, strings.Join(rel.columns, ", "))
		}
		if slices.Contains(s.PrimaryKey[:i], k) {
			return p.errorf(s.KeyPos, "PRIMARY KEY (%s): %s is listed twice", strings.Join(s.PrimaryKey, ", "), k)
		}
	}
	rel.unique = slices.Clone(s.PrimaryKey)
	return nil
}

// connectorOf returns the type a source's or sink's WITH options name
// (connector = '…') and its registered spec (the zero Spec for a type not
// registered, which the builder reports).
func (p *planner) connectorOf(role connector.Role, name string, at sql.Pos, opts []sql.Option) (string, connector.Spec, error) {
	for _, o := range opts {
		if o.Key == "connector" {
			spec, _ := connector.Lookup(role, o.Value)
			return o.Value, spec, nil
		}
	}
	return "", connector.Spec{}, p.errorf(at, "%s %s: WITH needs connector = '…' (known: %s)", role, name, strings.Join(connector.Types(role), ", "))
}

// nexmarkOptions are RisingWave's nexmark options and the fields they set.
var nexmarkOptions = map[string]string{
	"nexmark.table.type":          "table",
	"nexmark.event.num":           "events",
	"nexmark.min.event.gap.in.ns": "events_per_second",
	"nexmark.split.num":           "parallelism",
}

// sourceOption returns the field and value a source's WITH option sets:
// connector is the type, and a nexmark source takes RisingWave's names.
func (p *planner) sourceOption(typ string, o sql.Option) (key, value string, err error) {
	if o.Key == "connector" {
		return "type", o.Value, nil
	}
	f, ok := nexmarkOptions[o.Key]
	if typ != "nexmark" || !ok {
		return o.Key, o.Value, nil
	}
	switch f {
	case "table":
		return f, strings.ToLower(o.Value), nil
	case "events_per_second":
		gap, err := strconv.ParseInt(o.Value, 10, 64)
		if err != nil || gap <= 0 || int64(time.Second)%gap != 0 {
			return "", "", p.errorf(o.Pos, "%s = %s: the gap must be a whole number of nanoseconds that divides a second (100: 10,000,000 events per second)", o.Key, o.Value)
		}
		return f, strconv.FormatInt(int64(time.Second)/gap, 10), nil
	}
	return f, o.Value, nil
}

// nexmarkSource finishes a nexmark source: its columns are a subset of the
// table's, of the table's types; its event time is date_time.
func (p *planner) nexmarkSource(s *sql.CreateSource, m *yaml.Node, rel *relation) error {
	var table string
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "table" {
			table = m.Content[i+1].Value
		}
	}
	all := nexmark.TableColumns(nexmark.Table(table))
	if all == nil {
		return p.errorf(s.Pos, "source %s: nexmark.table.type must be Person, Auction or Bid", s.Name)
	}
	declared := s.Columns
	if len(declared) == 0 {
		for _, f := range all {
			declared = append(declared, sql.ColumnDef{Name: f.Name, Type: strings.ToLower(f.Kind.String()), Pos: s.Pos})
		}
	}
	// The source generates the declared columns the script reads (every
	// one when it may read any), and its event time.
	cols := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: s.Pos.Line, Column: s.Pos.Column}
	for _, c := range declared {
		i := slices.IndexFunc(all, func(f row.Field) bool { return f.Name == c.Name })
		if i < 0 {
			var names []string
			for _, f := range all {
				names = append(names, f.Name)
			}
			return p.errorf(c.Pos, "column %s: the nexmark %s table has no such column (columns: %s)", c.Name, table, strings.Join(names, ", "))
		}
		if want := all[i].Kind.String(); len(s.Columns) > 0 && columnKinds[c.Type] != want {
			return p.errorf(c.Pos, "column %s %s: it is a %s column of the nexmark %s table", c.Name, strings.ToUpper(c.Type), want, table)
		}
		if !p.reads.reads(c.Name) && c.Name != "date_time" {
			continue
		}
		cols.Content = append(cols.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column))
		rel.add(c.Name, nexmarkType(all[i]))
	}
	if len(cols.Content) == 0 {
		// Nothing named and no event time declared: one column, so that
		// rows have a width.
		c := declared[0]
		i := slices.IndexFunc(all, func(f row.Field) bool { return f.Name == c.Name })
		cols.Content = append(cols.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column))
		rel.add(c.Name, nexmarkType(all[i]))
	}
	if len(s.Columns) > 0 || len(rel.columns) < len(all) {
		setPath(m, []string{"columns"}, cols, s.Pos)
	}
	if slices.Contains(rel.columns, "date_time") {
		rel.timeCol = "date_time"
	}
	if w := s.Watermark; w != nil {
		if w.Column != "date_time" {
			return p.errorf(w.Pos, "WATERMARK FOR %s: a nexmark table's event time is date_time", w.Column)
		}
		setPath(m, []string{"max_delay"}, scalarNode(w.Delay.String(), w.Pos.Line, w.Pos.Column), w.Pos)
	}
	if s.Encode != "" && s.Encode != "json" {
		return p.errorf(s.EncodePos, "source %s: a nexmark source has no encoding", s.Name)
	}
	if err := p.declaredKey(s, rel); err != nil {
		return err
	}
	p.rels[s.Name] = rel
	return p.add("sources", s.Name, s.Pos, m)
}

// nexmarkType is the type of a nexmark table's column: never NULL, but a
// bid's channel and url, which always are.
func nexmarkType(f row.Field) colType {
	return colType{kind: f.Kind, notNull: f.Name != "channel" && f.Name != "url"}
}

// optionValue is a WITH option's value as a YAML node: a list for a field
// the connector declares a list (comma-separated), else the text.
func (p *planner) optionValue(spec connector.Spec, key string, o sql.Option) *yaml.Node {
	for _, f := range spec.Fields {
		if f.Name == key && f.Kind == connector.List {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: o.Pos.Line, Column: o.Pos.Column}
			for _, v := range strings.Split(o.Value, ",") {
				seq.Content = append(seq.Content, scalarNode(strings.TrimSpace(v), o.Pos.Line, o.Pos.Column))
			}
			return seq
		}
	}
	return scalarNode(o.Value, o.Pos.Line, o.Pos.Column)
}

func (p *planner) sink(s *sql.CreateSink) error {
	in := s.From
	var rel *relation
	if s.Query != nil {
		node, err := p.query(s.Name+"-query", s.Query)
		if err != nil {
			return err
		}
		in, rel = node, p.rels[s.Name+"-query"]
	} else if rel = p.rels[in]; rel == nil {
		return p.errorf(s.FromPos, "sink %s: no source or view %s", s.Name, in)
	} else if rel.table != nil {
		return p.errorf(s.FromPos, "sink %s: %s is a table, which only lookup joins read: FROM s JOIN %s FOR SYSTEM_TIME AS OF PROCTIME() AS t ON …", s.Name, in, in)
	} else {
		in = rel.node
	}
	m := mappingNode(s.Pos)
	typ, spec, err := p.connectorOf(connector.RoleSink, s.Name, s.Pos, s.Options)
	if err != nil {
		return err
	}
	for _, o := range s.Options {
		key := o.Key
		switch key {
		case "connector":
			key = "type"
		case "type":
			// RisingWave's sink option: append-only or upsert.
			key = "mode"
			switch strings.ToLower(o.Value) {
			case "append-only":
				o.Value = "append"
			case "upsert":
				o.Value = "upsert"
			default:
				return p.errorf(o.Pos, "sink %s: type = '%s': want 'append-only' or 'upsert'", s.Name, o.Value)
			}
		case "primary_key":
			key = "key" // RisingWave's name of an upsert sink's key
		}
		setPath(m, strings.Split(key, "."), p.optionValue(spec, key, o), o.Pos)
	}
	if err := p.sinkApplies(s, typ, rel); err != nil {
		return err
	}
	setPath(m, []string{"input"}, scalarNode(in, s.Pos.Line, s.Pos.Column), s.Pos)
	return p.add("sinks", s.Name, s.Pos, m)
}

// transform adds transform name of type typ reading input, with fields
// (key, value node pairs).
func (p *planner) transform(name, typ, input string, at sql.Pos, fields ...*yaml.Node) error {
	m := mappingNode(at)
	m.Content = append(m.Content, scalarNode("type", at.Line, at.Column), scalarNode(typ, at.Line, at.Column),
		scalarNode("input", at.Line, at.Column), scalarNode(input, at.Line, at.Column))
	m.Content = append(m.Content, fields...)
	return p.add("transforms", name, at, m)
}

// query plans q as node name (or nodes name-where, name-window, … ending in
// the returned node) and declares relation name.
func (p *planner) query(name string, q *sql.Select) (string, error) {
	if slices.ContainsFunc(q.Items, overItem) {
		return p.overQuery(name, q)
	}
	if q.From.Join != nil {
		return p.joinQuery(name, q, false)
	}
	if i := rankItem(q); i >= 0 {
		return "", p.errorf(q.Items[i].Pos, "a window function (… OVER (…)) stands in a subquery whose rank the query filters: SELECT … FROM (SELECT …, ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) AS rn FROM t) WHERE rn <= N")
	}
	if sub := q.From.Subquery; sub != nil && rankItem(sub) >= 0 {
		return p.topNQuery(name, q)
	}
	if sub := q.From.Subquery; sub != nil {
		// A subquery is planned as a view of its own, which q reads.
		if _, err := p.query(name+"-from", sub); err != nil {
			return "", err
		}
		q.From.Relation, q.From.Subquery = name+"-from", nil
	}
	in := p.rels[q.From.Relation]
	if in == nil {
		return "", p.errorf(q.From.RelationPos, "no source or view %s", q.From.Relation)
	}
	if in.table != nil {
		return "", p.errorf(q.From.RelationPos, "%s is a table, which only lookup joins read: FROM s JOIN %s FOR SYSTEM_TIME AS OF PROCTIME() AS t ON …", q.From.Relation, q.From.Relation)
	}
	relName := q.From.Relation
	if q.From.Alias != "" {
		relName = q.From.Alias
	}
	tr := &translator{p: p, rel: in, relName: relName}
	grouped := len(q.GroupBy) > 0 || slices.ContainsFunc(q.Items, func(it sql.SelectItem) bool { return it.Expr != nil && tr.hasAggregate(it.Expr) })
	if in.updating != nil && (!grouped || q.From.Window != "") {
		return "", p.errorf(q.From.RelationPos, "%s is an updating result (a GROUP BY without a window, or top-N): a sink can apply it (CREATE SINK … FROM %s) and a GROUP BY aggregate it; other queries cannot read it yet", q.From.Relation, q.From.Relation)
	}
	if q.From.Window != "" {
		return p.windowQuery(name, q, in, tr)
	}
	if grouped {
		return p.groupQuery(name, q, in, tr)
	}
	node := in.node
	star := len(q.Items) == 1 && q.Items[0].Star
	if q.Having != nil {
		return "", p.errorf(q.Having.At(), "HAVING without GROUP BY and a window in FROM is not supported")
	}
	if q.Where != nil {
		whereName := name + "-where"
		if star {
			whereName = name
		}
		if err := p.filter(whereName, node, tr, q.Where); err != nil {
			return "", err
		}
		node = whereName
	}
	out := &relation{node: node, timeCol: in.timeCol}
	if star {
		out.columns, out.types, out.window, out.procCol = in.columns, in.types, in.window, in.procCol
		p.rels[name] = out
		return node, nil
	}
	timeKept := false
	for _, it := range q.Items {
		if it.Star {
			return "", p.errorf(it.Pos, "* with other columns is not supported yet: list the columns")
		}
		if c, ok := it.Expr.(*sql.Column); ok && c.Name == in.timeCol && it.Alias == in.timeCol {
			timeKept = true
		}
	}
	if err := p.project(name, node, q, tr, out); err != nil {
		return "", err
	}
	if in.timeCol == "event_time" && !slices.Contains(in.columns, "event_time") && !slices.Contains(out.columns, "event_time") {
		// The record's own event time, which a map keeps, and which no
		// selected column named event_time hides.
		timeKept = true
	}
	if !timeKept {
		out.timeCol = ""
	}
	out.node = name
	p.rels[name] = out
	return name, nil
}

// filter adds filter transform name over input, keeping the rows for which
// every one of conds is true (translated with tr).
func (p *planner) filter(name, input string, tr *translator, conds ...sql.Expr) error {
	var parts []string
	for _, c := range conds {
		s, err := tr.cond(c)
		if err != nil {
			return err
		}
		parts = append(parts, s)
	}
	at := conds[0].At()
	return p.transform(name, "filter", input, at, scalarNode("where", at.Line, at.Column), scalarNode(strings.Join(parts, " and "), at.Line, at.Column))
}

// project adds map transform name over input, making the selected columns
// of q with tr, then copying the input's fields keep as they are, and
// declares the selected columns in out.
func (p *planner) project(name, input string, q *sql.Select, tr *translator, out *relation, keep ...string) error {
	sel := mappingNode(q.Pos)
	for _, it := range q.Items {
		e, err := tr.tx(it.Expr)
		if err != nil {
			return err
		}
		if slices.Contains(out.columns, it.Alias) {
			return p.errorf(it.Pos, "column %s is selected twice: name one otherwise with AS", it.Alias)
		}
		out.add(it.Alias, colType{kind: e.kind, notNull: !e.null})
		v := scalarNode(e.code, it.Pos.Line, it.Pos.Column)
		if e.code == "nil" && e.kind != row.Null {
			// A NULL of a known type (a strict function of a NULL
			// constant): the map cannot tell the type from nil.
			v = mappingNode(it.Pos)
			v.Content = append(v.Content, scalarNode("expr", it.Pos.Line, it.Pos.Column), scalarNode("nil", it.Pos.Line, it.Pos.Column),
				scalarNode("type", it.Pos.Line, it.Pos.Column), scalarNode(e.kind.String(), it.Pos.Line, it.Pos.Column))
		}
		sel.Content = append(sel.Content, scalarNode(it.Alias, it.Pos.Line, it.Pos.Column), v)
	}
	for _, f := range keep {
		sel.Content = append(sel.Content, scalarNode(f, q.Pos.Line, q.Pos.Column), scalarNode(f, q.Pos.Line, q.Pos.Column))
	}
	return p.transform(name, "map", input, q.Pos, scalarNode("select", q.Pos.Line, q.Pos.Column), sel)
}

// windowQuery plans SELECT … FROM TUMBLE/HOP/SESSION(…) GROUP BY key,
// window_start: a filter for WHERE, a map when the key or an aggregate's
// argument is an expression, the window, a filter for HAVING and a map
// giving the selected columns their names.
func (p *planner) windowQuery(name string, q *sql.Select, in *relation, tr *translator) (string, error) {
	f := q.From
	proc := in.procCol != "" && f.TimeColumn == in.procCol
	switch {
	case proc && f.Window != "tumble":
		return "", p.errorf(f.Pos, "%s over %s: windows of processing time (AS PROCTIME()) are tumbling", strings.ToUpper(f.Window), f.TimeColumn)
	case proc:
	case in.timeCol == "" || f.TimeColumn != in.timeCol:
		return "", p.errorf(f.Pos, "%s over %s: windows are over the event time, which is the column of the source's WATERMARK FOR (%s)",
			strings.ToUpper(f.Window), f.TimeColumn, orNone(in.timeCol))
	}
	node := in.node
	if q.Where != nil {
		if err := p.filter(name+"-where", node, tr, q.Where); err != nil {
			return "", err
		}
		node = name + "-where"
	}
	// GROUP BY: window_start or window_end, and the key columns.
	w := &windowPlan{}
	windowed := false
	for _, g := range q.GroupBy {
		c, ok := g.(*sql.Column)
		switch {
		case ok && (c.Name == "window_start" || c.Name == "window_end"):
			windowed = true
		case ok && slices.Contains(in.columns, c.Name):
			if !slices.ContainsFunc(w.keys, func(k *sql.Column) bool { return k.Name == c.Name }) {
				w.keys = append(w.keys, c)
			}
		case ok:
			return "", p.errorf(c.Pos, "GROUP BY %s: %s has no column %s (columns: %s)", c.Name, f.Relation, c.Name, strings.Join(in.columns, ", "))
		default:
			return "", p.errorf(g.At(), "GROUP BY an expression is not supported yet: compute it in a view first")
		}
	}
	if !windowed {
		return "", p.errorf(f.Pos, "a query over %s must GROUP BY window_start (or window_end)", strings.ToUpper(f.Window))
	}
	// The window's aggregates: every aggregate call in SELECT and HAVING.
	keyList := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: f.Pos.Line, Column: f.Pos.Column}
	w.keyTypes = map[string]colType{}
	for _, k := range w.keys {
		keyList.Content = append(keyList.Content, scalarNode(k.Name, k.Pos.Line, k.Pos.Column))
		w.keyTypes[k.Name] = in.types[k.Name]
	}
	for _, it := range q.Items {
		if it.Star {
			return "", p.errorf(it.Pos, "SELECT * over a window is not supported: list the key, window_start and the aggregates")
		}
		if err := w.collect(p, tr, it.Expr); err != nil {
			return "", err
		}
	}
	if q.Having != nil {
		if err := w.collect(p, tr, q.Having); err != nil {
			return "", err
		}
	}
	if len(w.aggs) == 0 {
		// A window computes something: count what no column selects (the
		// query lists the distinct keys of each window).
		w.aggs = append(w.aggs, windowAgg{field: "_agg0", spec: "count()", pos: q.Pos, kind: row.Int})
	}
	node, err := p.aggregateInputs(name, node, f.Pos, in, w)
	if err != nil {
		return "", err
	}
	wm := mappingNode(f.Pos)
	at := func(k, v string) {
		wm.Content = append(wm.Content, scalarNode(k, f.Pos.Line, f.Pos.Column), scalarNode(v, f.Pos.Line, f.Pos.Column))
	}
	at("type", "window")
	at("input", node)
	wm.Content = append(wm.Content, scalarNode("key", f.Pos.Line, f.Pos.Column), keyList)
	switch f.Window {
	case "tumble":
		at("kind", "tumbling")
		at("size", f.Size.String())
		if proc {
			at("time", "processing")
		}
	case "hop":
		at("kind", "sliding")
		at("size", f.Size.String())
		at("slide", f.Slide.String())
	case "session":
		at("kind", "session")
		at("gap", f.Gap.String())
	}
	aggs := mappingNode(f.Pos)
	for _, a := range w.aggs {
		aggs.Content = append(aggs.Content, scalarNode(a.field, a.pos.Line, a.pos.Column), scalarNode(a.spec, a.pos.Line, a.pos.Column))
	}
	wm.Content = append(wm.Content, scalarNode("aggregates", f.Pos.Line, f.Pos.Column), aggs)
	if err := p.add("transforms", name+"-window", f.Pos, wm); err != nil {
		return "", err
	}
	node = name + "-window"
	// Past the window, columns are the key, window_start, window_end and
	// the aggregates' fields.
	post := &translator{p: p, relName: tr.relName, window: w}
	if q.Having != nil {
		if err := p.filter(name+"-having", node, post, q.Having); err != nil {
			return "", err
		}
		node = name + "-having"
	}
	out := &relation{node: name}
	if err := p.project(name, node, q, post, out); err != nil {
		return "", err
	}
	if f.Window != "session" && !proc {
		out.window = &windowInfo{shape: fmt.Sprintf("%s %v %v", f.Window, f.Size, f.Slide), size: f.Size, slide: f.Slide}
		if f.Window == "tumble" {
			out.window.slide = f.Size
		}
		for _, it := range q.Items {
			if c, ok := it.Expr.(*sql.Column); ok && c.Name == "window_start" {
				out.window.start = it.Alias
			} else if ok && c.Name == "window_end" {
				out.window.end = it.Alias
			}
		}
	}
	p.rels[name] = out
	return name, nil
}

// aggregateInputs adds, when w's aggregates need computed inputs, the map
// transform name-inputs over node computing them beside in's columns, and
// returns the node the aggregates read.
func (p *planner) aggregateInputs(name, node string, at sql.Pos, in *relation, w *windowPlan) (string, error) {
	if len(w.inputs) == 0 {
		return node, nil
	}
	sel := mappingNode(at)
	for _, c := range in.columns {
		sel.Content = append(sel.Content, scalarNode(c, at.Line, at.Column), scalarNode(exprName(c), at.Line, at.Column))
	}
	for _, code := range w.inputs {
		sel.Content = append(sel.Content, scalarNode(inputName(code), at.Line, at.Column), scalarNode(code, at.Line, at.Column))
	}
	if err := p.transform(name+"-inputs", "map", node, at, scalarNode("select", at.Line, at.Column), sel); err != nil {
		return "", err
	}
	return name + "-inputs", nil
}

func orNone(s string) string {
	if s == "" {
		return "none declared"
	}
	return s
}

// windowPlan is the window of a query: its key columns (GROUP BY) and
// aggregates.
type windowPlan struct {
	// updating says the plan is a GROUP BY without a window: there are no
	// window bounds.
	updating bool
	keys     []*sql.Column
	keyTypes map[string]colType
	aggs     []windowAgg
	// byCall indexes aggs by the calls they compute.
	byCall map[*sql.Call]int
	// inputs are the expressions of the columns computed before the window
	// for the aggregates that need them (inputName names them).
	inputs []string
}

// windowAgg is one aggregate of the window: its output field, its YAML
// spec (count(), sum(price)) and the call it computes.
type windowAgg struct {
	field, spec string
	call        *sql.Call
	pos         sql.Pos
	// kind is the result's kind: count's int, avg's float, the column's
	// for sum, min and max.
	kind row.Kind
	// null says the result may be NULL: sum, min, max and avg skip NULL
	// values, so a window whose values are all NULL has none.
	null bool
}

// aggregateFuncs are the aggregates a window computes.
var aggregateFuncs = []string{"count", "sum", "min", "max", "avg"}

// collect adds the aggregate calls in e to the window. An aggregate of a
// column is the window's own; one of an expression, with FILTER, or
// count(col) (which counts the non-NULL values) aggregates an input column
// computed before the window (inputs): FILTER's rows give NULL there, which
// sum, min, max, avg and count(DISTINCT) skip, and count gives 1 or 0 to sum.
func (w *windowPlan) collect(p *planner, tr *translator, e sql.Expr) error {
	var err error
	walk(e, func(x sql.Expr) bool {
		c, ok := x.(*sql.Call)
		if !ok || err != nil || !slices.Contains(aggregateFuncs, c.Name) {
			return err == nil
		}
		err = w.add(p, tr, c)
		return false
	})
	return err
}

// add adds aggregate call c (see collect).
func (w *windowPlan) add(p *planner, tr *translator, c *sql.Call) error {
	switch {
	case c.Over:
		return p.errorf(c.Pos, "%s(…) OVER (…) is selected as it is, not inside an expression, in a query without GROUP BY: it frames the rows of an updating result", c.Name)
	case c.Star && c.Name != "count":
		return p.errorf(c.Pos, "%s(*) is not an aggregate: only count takes *", c.Name)
	case !c.Star && len(c.Args) != 1:
		return p.errorf(c.Pos, "%s takes one argument", c.Name)
	case c.Distinct && c.Name != "count":
		return p.errorf(c.Pos, "%s(DISTINCT …) is not supported", c.Name)
	}
	var arg tx
	if !c.Star {
		var err error
		if arg, err = tr.tx(c.Args[0]); err != nil {
			return err
		}
		if c.Name != "count" && c.Name != "min" && c.Name != "max" && !numeric(arg.kind) {
			return p.errorf(c.Args[0].At(), "%s takes a number, not %s", c.Name, kindText(arg.kind))
		}
	}
	filter := ""
	if c.Filter != nil {
		var err error
		if filter, err = tr.cond(c.Filter); err != nil {
			return err
		}
	}
	// The window aggregates a column: the argument itself, or an input
	// computed from it and the filter.
	col, isCol := (*sql.Column)(nil), false
	if !c.Star {
		// A column of the input itself (not the record's event_time).
		col, isCol = c.Args[0].(*sql.Column)
		isCol = isCol && slices.Contains(tr.rel.columns, col.Name)
	}
	var spec, input string
	kind, null := row.Int, false
	switch {
	case c.Name == "count" && c.Star && filter == "":
		spec = "count()"
	case c.Name == "count" && !c.Distinct:
		// count(*) FILTER, count(x) [FILTER]: a sum of ones.
		one := "1"
		if !c.Star && arg.null {
			one = "((" + arg.code + ") == nil ? 0 : 1)"
		}
		if filter != "" {
			one = "((" + filter + ") ? " + one + " : 0)"
		}
		input, spec = one, "sum"
	default:
		value := arg.code
		if filter != "" {
			value = "((" + filter + ") ? (" + arg.code + ") : nil)"
		}
		name := c.Name
		if c.Distinct {
			name = "count_distinct"
		}
		if isCol && filter == "" {
			spec = name + "(" + col.Name + ")"
		} else {
			input, spec = value, name
		}
		if c.Name != "count" {
			kind, null = arg.kind, true // NULL when the window has no (kept) value
			if c.Name == "avg" {
				kind = row.Float
			}
			if isCol && filter == "" && !arg.null {
				null = false
			}
		}
	}
	if input != "" {
		// The same computed input is made once. Its name is a hash of its
		// expression, so the window's state signature (which names the
		// aggregates' fields) changes with the expression: a restore after
		// it changed is refused, never read into another aggregate.
		if !slices.Contains(w.inputs, input) {
			w.inputs = append(w.inputs, input)
		}
		spec = spec + "(" + inputName(input) + ")"
	}
	if w.byCall == nil {
		w.byCall = map[*sql.Call]int{}
	}
	for i, a := range w.aggs {
		if a.spec == spec {
			w.byCall[c] = i // computed once
			return nil
		}
	}
	w.byCall[c] = len(w.aggs)
	w.aggs = append(w.aggs, windowAgg{field: fmt.Sprintf("_agg%d", len(w.aggs)), spec: spec, call: c, pos: c.Pos, kind: kind, null: null})
	return nil
}

// inputName is the column a window's computed input is in: _in_ and a hash
// of its expression.
func inputName(code string) string {
	h := fnv.New64a()
	h.Write([]byte(code))
	return fmt.Sprintf("_in_%016x", h.Sum64())
}

// kindText names a kind in messages.
func kindText(k row.Kind) string {
	if k == row.Null {
		return "a value of unknown type"
	}
	return "a " + k.String()
}

// lookup returns the window aggregate computing call c.
func (w *windowPlan) lookup(c *sql.Call) (windowAgg, bool) {
	i, ok := w.byCall[c]
	if !ok {
		return windowAgg{}, false
	}
	return w.aggs[i], true
}

// walk calls f on e and, while f returns true, on its children.
func walk(e sql.Expr, f func(sql.Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	switch x := e.(type) {
	case *sql.Binary:
		walk(x.L, f)
		walk(x.R, f)
	case *sql.Unary:
		walk(x.X, f)
	case *sql.IsNull:
		walk(x.X, f)
	case *sql.Cast:
		walk(x.X, f)
	case *sql.Subscript:
		walk(x.X, f)
	case *sql.Case:
		for _, w := range x.Whens {
			walk(w.Cond, f)
			walk(w.Result, f)
		}
		walk(x.Else, f)
	case *sql.Call:
		for _, a := range x.Args {
			walk(a, f)
		}
		walk(x.Filter, f)
	}
}
