package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/sql"
)

// This file plans lookup joins: CREATE TABLE t (…) WITH (connector =
// 'file', path = '…') declares a bounded table of JSON lines, and FROM s
// JOIN t FOR SYSTEM_TIME AS OF PROCTIME() AS x ON <expression of s> = x.col
// joins each row of s, as it is processed, with t's rows of that key (the
// lookup_join transform, config/lookup.go).

// lookupTable is a table a lookup join reads: its fields mapping, in the
// lookup_join transform's form, and its path.
type lookupTable struct {
	name   string
	path   string
	fields *yaml.Node
	at     sql.Pos
}

// table records CREATE TABLE … WITH (connector = 'file', path = …): no
// source of its own, a relation only lookup joins read.
func (p *planner) table(s *sql.CreateSource) error {
	t := &lookupTable{name: s.Name, at: s.Pos}
	var pathAt sql.Pos
	for _, o := range s.Options {
		switch o.Key {
		case "connector":
		case "path":
			t.path, pathAt = o.Value, o.Pos
		default:
			return p.errorf(o.Pos, "table %s: option %s: a table of connector 'file' takes path only (JSON lines, read whole when the job starts)", s.Name, o.Key)
		}
	}
	switch {
	case t.path == "":
		return p.errorf(s.Pos, "table %s: WITH needs path = '…', its file of JSON lines", s.Name)
	case len(s.Columns) == 0:
		return p.errorf(s.Pos, "table %s: declare its columns, e.g. CREATE TABLE %s (key BIGINT, value VARCHAR) WITH (…)", s.Name, s.Name)
	case s.Watermark != nil:
		return p.errorf(s.Watermark.Pos, "table %s: a table has no event time (lookups read it as it is when a row is processed): drop the WATERMARK", s.Name)
	case s.PrimaryKey != nil:
		return p.errorf(s.KeyPos, "table %s: PRIMARY KEY is not supported on a lookup table (its rows are joined as they are, repeated keys included): drop it", s.Name)
	case s.Encode != "" && s.Encode != "json":
		return p.errorf(s.EncodePos, "table %s: ENCODE %s is not supported for a table (known: JSON)", s.Name, strings.ToUpper(s.Encode))
	}
	// The file is read when the job starts; a missing one is named here,
	// at its option, not at the join that reads it.
	file := t.path
	if !filepath.IsAbs(file) {
		file = filepath.Join(filepath.Dir(p.file), file)
	}
	if _, err := os.Stat(file); err != nil {
		return p.errorf(pathAt, "table %s: path: %v", s.Name, err)
	}
	rel := &relation{table: t}
	t.fields = mappingNode(s.Pos)
	for _, c := range s.Columns {
		kind, ok := columnKinds[c.Type]
		if !ok || c.Proctime {
			return p.errorf(c.Pos, "table %s: column %s: type %s is not supported (known: BIGINT, DOUBLE PRECISION, VARCHAR, BOOLEAN, TIMESTAMP, BYTEA and their synonyms)", s.Name, c.Name, strings.ToUpper(c.Type))
		}
		t.fields.Content = append(t.fields.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column), scalarNode(kind, c.Pos.Line, c.Pos.Column))
		rel.add(c.Name, colType{kind: kindNames[kind]})
	}
	p.rels[s.Name] = rel
	return nil
}

// lookupQuery plans q, whose join reads a table FOR SYSTEM_TIME AS OF
// PROCTIME() on one side, rels being the sides' relations. The key is the
// first equality of ON or WHERE between a table column and an expression of
// the other side; conditions on the other side alone filter it before the
// join, and the rest filter the join's output.
func (p *planner) lookupQuery(name string, q *sql.Select, inputs [2]sql.JoinInput, rels [2]*relation) (string, error) {
	j := q.From.Join
	switch {
	case inputs[0].Lookup && inputs[1].Lookup:
		return "", p.errorf(j.Pos, "both sides of the join are lookups: one side is a stream each of whose rows looks the other up")
	}
	for i := range inputs {
		if inputs[i].Lookup && rels[i].table == nil {
			return "", p.errorf(inputs[i].Pos, "FOR SYSTEM_TIME AS OF PROCTIME() looks up a table (CREATE TABLE … WITH (connector = 'file', …)); %s is a source or view", inputs[i].Name())
		}
	}
	for i := range inputs {
		if rels[i].table != nil && !inputs[i].Lookup {
			return "", p.errorf(inputs[i].Pos, "%s is a table: join it as a lookup, %s FOR SYSTEM_TIME AS OF PROCTIME() AS …", inputs[i].Relation, inputs[i].Relation)
		}
	}
	// The stream is side 0, the table side 1, as the transform has them.
	if inputs[0].Lookup {
		inputs[0], inputs[1] = inputs[1], inputs[0]
		rels[0], rels[1] = rels[1], rels[0]
	}
	js := &joinScope{p: p, inputs: inputs, rels: rels}
	table := rels[1].table
	var pre, post []sql.Expr
	var keyExpr sql.Expr
	var keyCol *sql.Column
	for _, c := range append(conjuncts(j.On), conjuncts(q.Where)...) {
		sides, err := js.sidesOf(c)
		if err != nil {
			return "", err
		}
		switch {
		case len(sides) == 0:
			return "", p.errorf(c.At(), "a join condition that reads neither side is not supported")
		case len(sides) == 1 && sides[0] == 0:
			pre = append(pre, c)
			continue
		}
		if b, ok := c.(*sql.Binary); ok && b.Op == "=" && keyCol == nil {
			for _, pair := range [][2]sql.Expr{{b.L, b.R}, {b.R, b.L}} {
				col, isCol := pair[1].(*sql.Column)
				if !isCol {
					continue
				}
				if s, err := js.side(col); err != nil || s != 1 {
					continue
				}
				if s, err := js.sidesOf(pair[0]); err != nil || !slices.Equal(s, []int{0}) {
					continue
				}
				keyExpr, keyCol = pair[0], col
				break
			}
			if keyCol != nil {
				continue
			}
		}
		post = append(post, c)
	}
	if keyCol == nil {
		return "", p.errorf(j.Pos, "a lookup join needs an equality of a column of table %s and an expression of the other side, e.g. ON mod(b.auction, 10000) = %s.key", table.name, inputs[1].Name())
	}
	node := rels[0].node
	streamTr := &translator{p: p, rel: rels[0], relName: inputs[0].Name()}
	if len(pre) > 0 {
		if err := p.filter(name+"-left", node, streamTr, pre...); err != nil {
			return "", err
		}
		node = name + "-left"
	}
	key, err := streamTr.tx(keyExpr)
	if err != nil {
		return "", err
	}
	at := j.Pos
	str := func(v string) *yaml.Node { return scalarNode(v, at.Line, at.Column) }
	kv := func(m *yaml.Node, k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }
	m := mappingNode(at)
	kv(m, "type", str("lookup_join"))
	kv(m, "input", str(node))
	tm := mappingNode(table.at)
	kv(tm, "path", str(table.path))
	kv(tm, "fields", table.fields)
	kv(m, "table", tm)
	on := mappingNode(at)
	kv(on, "left", str(key.code))
	kv(on, "right", str(keyCol.Name))
	kv(m, "on", on)
	// Output: the columns read, named side_column, then a map naming the
	// query's columns.
	sel, inner, types, err := js.readColumns(q, post, at)
	if err != nil {
		return "", err
	}
	if len(inner) == 0 {
		kv(sel, "left__"+keyCol.Name, str("key")) // a row per match, of no column
		inner = append(inner, "left__"+keyCol.Name)
	}
	kv(m, "select", sel)
	if err := p.add("transforms", name+"-join", at, m); err != nil {
		return "", err
	}
	tr := &translator{p: p, rel: &relation{columns: inner, types: types}, relName: "the join", resolve: js.columnName}
	node = name + "-join"
	if len(post) > 0 {
		if err := p.filter(name+"-where", node, tr, post...); err != nil {
			return "", err
		}
		node = name + "-where"
	}
	out := &relation{node: name}
	if err := p.project(name, node, q, tr, out); err != nil {
		return "", err
	}
	// Each row keeps its stream row's event time: the stream's time
	// column, selected under its own name, is the view's.
	if tc := rels[0].timeCol; tc != "" {
		for _, it := range q.Items {
			c, ok := it.Expr.(*sql.Column)
			if !ok || c.Name != tc || (it.Alias != "" && it.Alias != tc) {
				continue
			}
			if side, err := js.side(c); err == nil && side == 0 {
				out.timeCol = tc
			}
		}
	}
	p.rels[name] = out
	return name, nil
}
