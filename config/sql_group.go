package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans an updating query: GROUP BY (or aggregates) without a
// window in FROM. Its result is a changelog keyed by the GROUP BY columns
// (the aggregate transform), which only sinks that apply it may read.

// windowResultQuery plans a GROUP BY of a window result's window_start or
// window_end column, without a window: the groups are results of one window
// each, which all have its end - 1ns as their time and reach the query
// together, when the watermark passes it. So it is a tumbling window of the
// result windows' slide — each holds one window's results exactly when the
// windows' ends are multiples of the slide, that is when the size is — and
// its result is again a window result of the same shape, which a join can
// pair with the others (q5).
func (p *planner) windowResultQuery(name string, q *sql.Select, in *relation) (string, error) {
	w := in.window
	if w.slide <= 0 || w.size%w.slide != 0 {
		return "", p.errorf(q.GroupBy[0].At(), "GROUP BY a window bound of windows whose size (%v) is not a multiple of their slide (%v) is not supported", w.size, w.slide)
	}
	for _, c := range in.columns {
		if c == "window_start" || c == "window_end" {
			return "", p.errorf(q.From.RelationPos, "%s has a column named %s, which a GROUP BY of its windows would take for the bound of a window of its own: name it otherwise (%s AS ws) in the query that makes it", q.From.Relation, c, c)
		}
	}
	const rowTime = "_window_time"
	rel := *in
	rel.timeCol = rowTime
	wq := *q
	wq.From = sql.From{Relation: q.From.Relation, Alias: q.From.Alias, RelationPos: q.From.RelationPos, Window: "tumble", TimeColumn: rowTime, Size: w.slide, Pos: q.Pos}
	wq.GroupBy = append(slices.Clone(q.GroupBy), &sql.Column{Name: "window_start", Pos: q.Pos})
	relName := q.From.Relation
	if q.From.Alias != "" {
		relName = q.From.Alias
	}
	if _, err := p.windowQuery(name, &wq, &rel, &translator{p: p, rel: &rel, relName: relName}); err != nil {
		return "", err
	}
	// The result keeps the windows' shape: its rows' times are theirs.
	out := p.rels[name]
	out.window = &windowInfo{shape: w.shape, size: w.size, slide: w.slide}
	for _, it := range q.Items {
		if c, ok := it.Expr.(*sql.Column); ok && c.Name == w.start && w.start != "" {
			out.window.start = it.Alias
		} else if ok && c.Name == w.end && w.end != "" {
			out.window.end = it.Alias
		}
	}
	return name, nil
}

// sinkApplies refuses a sink of type typ that cannot apply the updating
// result rel: a postgres sink must upsert on exactly its key. The other
// sinks write the changelog's rows, _op included; a kafka sink keys its
// records by the changelog's key.
func (p *planner) sinkApplies(s *sql.CreateSink, typ string, rel *relation) error {
	if rel == nil || rel.updating == nil || typ != "postgres" {
		return nil
	}
	var mode, key string
	for _, o := range s.Options {
		switch o.Key {
		case "mode", "type":
			mode = strings.ToLower(o.Value)
		case "key", "primary_key":
			key = o.Value
		}
	}
	want := strings.Join(rel.updating, ", ")
	var keys []string
	for _, k := range strings.Split(key, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	switch {
	case len(rel.updating) == 0:
		return p.errorf(s.Pos, "sink %s: the result is one updated row (an aggregate without GROUP BY), which a postgres table cannot upsert without a key; GROUP BY a column, or write it to a file or kafka sink as a changelog", s.Name)
	case mode != "upsert" || !sameSet(keys, rel.updating):
		return p.errorf(s.Pos, "sink %s: the query's result is updated by (%s), so a postgres sink must apply its updates: WITH (type = 'upsert', primary_key = '%s', …)", s.Name, want, want)
	}
	for _, k := range rel.updating {
		if !rel.types[k].notNull {
			return p.errorf(s.Pos, "sink %s: key column %s may be NULL, which a primary key cannot hold: filter its NULLs out before (WHERE … IS NOT NULL) or replace them (coalesce)", s.Name, k)
		}
	}
	return nil
}

// groupQuery plans SELECT … GROUP BY keys without a window: a filter for
// WHERE, a map for computed aggregate inputs, the aggregate (with HAVING)
// and a map giving the selected columns their names, with _op.
func (p *planner) groupQuery(name string, q *sql.Select, in *relation, tr *translator) (string, error) {
	if in.updating != nil && q.Where != nil {
		return "", p.errorf(q.Where.At(), "WHERE over an updating result is not supported: filter the rows before the query that makes it")
	}
	if w := in.window; w != nil && slices.ContainsFunc(q.GroupBy, func(g sql.Expr) bool {
		c, ok := g.(*sql.Column)
		return ok && (c.Name == w.start && w.start != "" || c.Name == w.end && w.end != "")
	}) {
		return p.windowResultQuery(name, q, in)
	}
	node := in.node
	if q.Where != nil {
		if err := p.filter(name+"-where", node, tr, q.Where); err != nil {
			return "", err
		}
		node = name + "-where"
	}
	w := &windowPlan{updating: true, keyTypes: map[string]colType{}}
	keyList := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: q.Pos.Line, Column: q.Pos.Column}
	for _, g := range q.GroupBy {
		c, ok := g.(*sql.Column)
		switch {
		case ok && slices.Contains(in.columns, c.Name):
			if !slices.ContainsFunc(w.keys, func(k *sql.Column) bool { return k.Name == c.Name }) {
				w.keys = append(w.keys, c)
				w.keyTypes[c.Name] = in.types[c.Name]
				keyList.Content = append(keyList.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column))
			}
		case ok:
			return "", p.errorf(c.Pos, "GROUP BY %s: %s has no column %s (columns: %s)", c.Name, q.From.Relation, c.Name, strings.Join(in.columns, ", "))
		default:
			return "", p.errorf(g.At(), "GROUP BY an expression is not supported yet: compute it in a view first")
		}
	}
	for _, it := range q.Items {
		if it.Star {
			return "", p.errorf(it.Pos, "SELECT * with GROUP BY is not supported: list the key columns and the aggregates")
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
		// The aggregate computes something: count what no column selects
		// (the query lists the distinct keys).
		w.aggs = append(w.aggs, windowAgg{field: "_agg0", spec: "count()", pos: q.Pos, kind: row.Int})
	}
	if in.updating != nil {
		// Over an updating result, an update takes the row it replaces
		// back out of its group.
		for _, a := range w.aggs {
			if f, _, _ := strings.Cut(a.spec, "("); f != "count" && f != "sum" && f != "avg" {
				return "", p.errorf(a.pos, "%s over an updating result: an update takes the row it replaces back out of its group, which count, sum and avg can do and %s cannot", a.call.Name, a.call.Name)
			}
		}
	}
	// Groups that hold every key column of rows that stop coming close:
	// each is emitted once, when the watermark passes its rows' close
	// time, which the groups are keyed by too (the key determines it).
	closes := ""
	if c := in.closing; c != nil && in.updating == nil && !slices.ContainsFunc(c.key, func(k string) bool {
		return !slices.ContainsFunc(w.keys, func(g *sql.Column) bool { return g.Name == k })
	}) {
		closes = c.at
		if !slices.ContainsFunc(w.keys, func(g *sql.Column) bool { return g.Name == c.at }) {
			w.keys = append(w.keys, &sql.Column{Name: c.at, Pos: q.Pos})
			w.keyTypes[c.at] = in.types[c.at]
			keyList.Content = append(keyList.Content, scalarNode(c.at, q.Pos.Line, q.Pos.Column))
		}
	}
	node, err := p.aggregateInputs(name, node, q.Pos, in, w)
	if err != nil {
		return "", err
	}
	at := q.Pos
	am := mappingNode(at)
	add := func(k string, v *yaml.Node) {
		am.Content = append(am.Content, scalarNode(k, at.Line, at.Column), v)
	}
	add("type", scalarNode("aggregate", at.Line, at.Column))
	add("input", scalarNode(node, at.Line, at.Column))
	add("key", keyList)
	aggs := mappingNode(at)
	for _, a := range w.aggs {
		aggs.Content = append(aggs.Content, scalarNode(a.field, a.pos.Line, a.pos.Column), scalarNode(a.spec, a.pos.Line, a.pos.Column))
	}
	add("aggregates", aggs)
	if closes != "" {
		add("closes_at", scalarNode(closes, at.Line, at.Column))
	}
	// Past the aggregate, columns are the keys and the aggregates' fields.
	post := &translator{p: p, relName: tr.relName, window: w}
	if q.Having != nil {
		cond, err := post.cond(q.Having)
		if err != nil {
			return "", err
		}
		hp := q.Having.At()
		add("having", scalarNode(cond, hp.Line, hp.Column))
	}
	if err := p.add("transforms", name+"-aggregate", at, am); err != nil {
		return "", err
	}
	if closes != "" {
		// Final rows, one per group: an append-only result.
		out := &relation{node: name}
		if err := p.project(name, name+"-aggregate", q, post, out); err != nil {
			return "", err
		}
		p.rels[name] = out
		return name, nil
	}
	// The result is keyed by the GROUP BY columns: each must be selected as
	// it is, under any name.
	return name, p.projectChangelog(name, name+"-aggregate", q, post, w.keys, "GROUP BY")
}

// projectChangelog adds map transform name over changelog input, making
// q's selected columns with tr and keeping _op, and declares the updating
// relation name, keyed by the selected names of the changelog's keys (each
// must be selected as it is; what names what keys them in messages).
func (p *planner) projectChangelog(name, input string, q *sql.Select, tr *translator, keys []*sql.Column, what string) error {
	out := &relation{node: name, updating: []string{}} // an empty key: one group
	for _, k := range keys {
		i := slices.IndexFunc(q.Items, func(it sql.SelectItem) bool {
			c, ok := it.Expr.(*sql.Column)
			return ok && c.Name == k.Name
		})
		if i < 0 {
			return p.errorf(k.Pos, "%s %s: select %s too: the result is updated by its %s columns, and a sink applies the updates by them", what, k.Name, k.Name, what)
		}
		out.updating = append(out.updating, q.Items[i].Alias)
	}
	for _, it := range q.Items {
		if it.Alias == aggregate.OpField {
			return p.errorf(it.Pos, "the column name %s is the operation of an updating result's rows; choose another", aggregate.OpField)
		}
	}
	// The projection keeps the operation, after the selected columns.
	if err := p.project(name, input, q, tr, out, aggregate.OpField); err != nil {
		return err
	}
	out.add(aggregate.OpField, colType{kind: row.String, notNull: true})
	p.rels[name] = out
	return nil
}
