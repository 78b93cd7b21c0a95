package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/over"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans aggregates over a frame of rows of an updating result:
//
//	SELECT Q.id, Q.seller, avg(Q.final) OVER (
//	  PARTITION BY Q.seller ORDER BY Q.date_time
//	  ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg
//	FROM (…) AS Q
//
// into the over transform, whose result is a changelog keyed as Q is (so
// the query selects Q's key columns, as a sink applies the updates by
// them). Every frame-aggregate of one query has the same OVER clause.

// overItem reports whether it is an aggregate with an OVER clause.
func overItem(it sql.SelectItem) bool {
	c, ok := it.Expr.(*sql.Call)
	return ok && c.Window != nil && c.Name != "row_number"
}

// overQuery plans q, which selects aggregates over a frame (overItem).
func (p *planner) overQuery(name string, q *sql.Select) (string, error) {
	first := q.Items[slices.IndexFunc(q.Items, overItem)]
	switch {
	case q.From.Join != nil || q.From.Window != "":
		return "", p.errorf(q.From.Pos, "an aggregate OVER (…) reads one relation: plan joins and windows in a subquery it reads")
	case q.Where != nil:
		return "", p.errorf(q.Where.At(), "WHERE with an aggregate OVER (…) is not supported: filter in the subquery it reads")
	case len(q.GroupBy) > 0 || q.Having != nil:
		return "", p.errorf(q.Pos, "GROUP BY and HAVING with an aggregate OVER (…) are not supported: group in a query of its own")
	}
	if sub := q.From.Subquery; sub != nil {
		if _, err := p.query(name+"-from", sub); err != nil {
			return "", err
		}
		q.From.Relation, q.From.Subquery = name+"-from", nil
	}
	in := p.rels[q.From.Relation]
	if in == nil {
		return "", p.errorf(q.From.RelationPos, "no source or view %s", q.From.Relation)
	}
	if in.updating == nil {
		return "", p.errorf(first.Pos, "%s is not an updating result: an aggregate OVER (…) frames the rows of one (a GROUP BY without a window, or top-N), by their key; over an append-only relation it is not supported yet", q.From.Relation)
	}
	relName := q.From.Relation
	if q.From.Alias != "" {
		relName = q.From.Alias
	}
	tr := &translator{p: p, rel: in, relName: relName}
	// columns are what the query can read: in's, but the operation.
	columns := slices.DeleteFunc(slices.Clone(in.columns), func(c string) bool { return c == aggregate.OpField })
	column := func(e sql.Expr, what string) (string, error) {
		c, ok := e.(*sql.Column)
		if !ok {
			return "", p.errorf(e.At(), "%s: a column of %s (%s)", what, relName, strings.Join(columns, ", "))
		}
		if _, err := tr.column(c); err != nil {
			return "", err
		}
		if !slices.Contains(columns, c.Name) {
			return "", p.errorf(c.Pos, "%s: %s has no column %s (columns: %s)", what, relName, c.Name, strings.Join(columns, ", "))
		}
		return c.Name, nil
	}
	// The other selected columns are read from in too, before the
	// aggregates' hidden columns join them.
	for _, it := range q.Items {
		if it.Expr == nil || overItem(it) {
			continue
		}
		var err error
		walk(it.Expr, func(x sql.Expr) bool {
			if c, ok := x.(*sql.Column); ok && err == nil {
				_, err = column(c, "column")
			}
			return err == nil
		})
		if err != nil {
			return "", err
		}
	}
	// The window, written once and read by every frame-aggregate.
	w := first.Expr.(*sql.Call).Window
	if w.Frame == nil {
		return "", p.errorf(w.Pos, "an aggregate OVER (…) needs its frame: ROWS BETWEEN n PRECEDING AND CURRENT ROW")
	}
	if len(w.OrderBy) == 0 {
		return "", p.errorf(w.Pos, "an aggregate OVER (…) needs ORDER BY: the order whose preceding rows the frame holds")
	}
	if w.Frame.Preceding > over.MaxPreceding {
		return "", p.errorf(w.Frame.Pos, "%d PRECEDING: at most %d (a change computes up to 4n+2 frames of n+1 rows)", w.Frame.Preceding, over.MaxPreceding)
	}
	parts := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: w.Pos.Line, Column: w.Pos.Column}
	var partNames []string
	for _, e := range w.PartitionBy {
		c, err := column(e, "PARTITION BY")
		if err != nil {
			return "", err
		}
		if slices.Contains(partNames, c) {
			return "", p.errorf(e.At(), "PARTITION BY %s: listed twice", c)
		}
		if !slices.Contains(in.updating, c) {
			return "", p.errorf(e.At(), "PARTITION BY %s: partition by columns of %s's key (%s): a row whose partition changes would be deleted from one partition and inserted in another by different subtasks, which a sink could apply in either order",
				c, relName, strings.Join(in.updating, ", "))
		}
		partNames = append(partNames, c)
		parts.Content = append(parts.Content, scalarNode(c, e.At().Line, e.At().Column))
	}
	orders := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: w.Pos.Line, Column: w.Pos.Column}
	for _, o := range w.OrderBy {
		c, err := column(o.Expr, "ORDER BY")
		if err != nil {
			return "", err
		}
		dir := " asc"
		if o.Desc {
			dir = " desc"
		}
		orders.Content = append(orders.Content, scalarNode(c+dir, o.Pos.Line, o.Pos.Column))
	}
	// Each frame-aggregate is a hidden column of the over transform's
	// result, which the projection names.
	out := &relation{columns: slices.Clone(in.columns), types: map[string]colType{}}
	for c, t := range in.types {
		out.types[c] = t
	}
	out.columns = slices.DeleteFunc(out.columns, func(c string) bool { return c == aggregate.OpField })
	aggs := mappingNode(w.Pos)
	items := slices.Clone(q.Items)
	for i, it := range items {
		if it.Expr == nil || !tr.hasWindow(it.Expr) {
			continue
		}
		call, ok := it.Expr.(*sql.Call)
		if !ok {
			return "", p.errorf(it.Pos, "an aggregate OVER (…) is selected as it is, not inside an expression")
		}
		if !sameWindow(call.Window, w, relName) {
			return "", p.errorf(call.Window.Pos, "every aggregate OVER (…) of a query has the same OVER clause, as the first one (line %d) writes it", w.Pos.Line)
		}
		if call.Distinct || call.Filter != nil || !slices.Contains(aggregateFuncs, call.Name) {
			return "", p.errorf(call.Pos, "%s(…) OVER (…): of the aggregates, count, sum, min, max and avg take a frame, without DISTINCT and FILTER", call.Name)
		}
		arg, ct := "", colType{kind: row.Int, notNull: true}
		switch {
		case call.Star && call.Name != "count":
			return "", p.errorf(call.Pos, "%s(*) is not an aggregate: only count takes *", call.Name)
		case call.Star || call.Name == "count" && len(call.Args) == 0:
		case len(call.Args) == 1:
			c, err := column(call.Args[0], call.Name+"(…) OVER (…)")
			if err != nil {
				return "", err
			}
			kind := in.types[c].kind
			switch {
			case call.Name == "count" && !in.types[c].notNull:
				return "", p.errorf(call.Args[0].At(), "count(%s) OVER (…) of a column that may be NULL is not supported: count(*) counts the frame's rows", c)
			case call.Name == "count":
				// Of a column that is never NULL: the frame's rows.
			case (call.Name == "sum" || call.Name == "avg") && !numeric(kind):
				return "", p.errorf(call.Args[0].At(), "%s(%s) OVER (…): %s takes a number, and %s is %s", call.Name, c, call.Name, c, kind)
			case (call.Name == "min" || call.Name == "max") && (kind == row.Bool || kind == row.Null):
				return "", p.errorf(call.Args[0].At(), "%s(%s) OVER (…): %s takes an ordered value, and %s is %s", call.Name, c, call.Name, c, kind)
			default:
				arg, ct = c, colType{kind: kind}
				if call.Name == "avg" {
					ct.kind = row.Float
				}
			}
		default:
			return "", p.errorf(call.Pos, "%s(…) OVER (…) takes one column", call.Name)
		}
		hidden := fmt.Sprintf("_over_%d", i)
		if slices.Contains(in.columns, hidden) {
			return "", p.errorf(it.Pos, "%s has a column %s, the name the query's frame-aggregates take: rename it", relName, hidden)
		}
		aggs.Content = append(aggs.Content, scalarNode(hidden, call.Pos.Line, call.Pos.Column), scalarNode(call.Name+"("+arg+")", call.Pos.Line, call.Pos.Column))
		out.add(hidden, ct)
		items[i].Expr = &sql.Column{Name: hidden, Pos: it.Pos}
	}
	out.add(aggregate.OpField, colType{kind: row.String, notNull: true})
	at := w.Pos
	if err := p.transform(name+"-over", "over", in.node, at,
		scalarNode("partition_by", at.Line, at.Column), parts,
		scalarNode("order_by", at.Line, at.Column), orders,
		scalarNode("preceding", at.Line, at.Column), scalarNode(strconv.FormatInt(w.Frame.Preceding, 10), w.Frame.Pos.Line, w.Frame.Pos.Column),
		scalarNode("aggregates", at.Line, at.Column), aggs); err != nil {
		return "", err
	}
	outer := *q
	outer.Items = starAs(items, slices.DeleteFunc(slices.Clone(in.columns), func(c string) bool { return c == aggregate.OpField }))
	keys := make([]*sql.Column, len(in.updating))
	for i, k := range in.updating {
		keys[i] = &sql.Column{Name: k, Pos: q.Pos}
	}
	ptr := &translator{p: p, rel: out, relName: relName}
	return name, p.projectChangelog(name, name+"-over", &outer, ptr, keys, "key")
}

// hasWindow says whether e calls a window function.
func (t *translator) hasWindow(e sql.Expr) bool {
	found := false
	walk(e, func(x sql.Expr) bool {
		if c, ok := x.(*sql.Call); ok && c.Window != nil {
			found = true
		}
		return !found
	})
	return found
}

// sameWindow reports whether a and b partition, order and frame alike
// (by column names and directions) over relation rel.
func sameWindow(a, b *sql.Over, rel string) bool {
	name := func(e sql.Expr) string {
		if c, ok := e.(*sql.Column); ok && (c.Table == "" || c.Table == rel) {
			return c.Name
		}
		return fmt.Sprintf("%p", e)
	}
	return slices.EqualFunc(a.PartitionBy, b.PartitionBy, func(x, y sql.Expr) bool { return name(x) == name(y) }) &&
		slices.EqualFunc(a.OrderBy, b.OrderBy, func(x, y sql.OrderItem) bool { return name(x.Expr) == name(y.Expr) && x.Desc == y.Desc }) &&
		(a.Frame == nil) == (b.Frame == nil) && (a.Frame == nil || a.Frame.Preceding == b.Frame.Preceding)
}
