package config

import (
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans top-N and deduplication, written as RisingWave and Flink
// write them:
//
//	SELECT … FROM (
//	  SELECT …, ROW_NUMBER() OVER (PARTITION BY k ORDER BY c DESC) AS rn FROM t
//	) WHERE rn <= N
//
// into the top_n transform, whose result is a changelog keyed by the
// partition columns and the rank (the partition columns alone for N = 1
// when the rank is not selected).

// rankItem returns the position of q's ROW_NUMBER() OVER (…) item, or -1.
func rankItem(q *sql.Select) int {
	return slices.IndexFunc(q.Items, func(it sql.SelectItem) bool {
		c, ok := it.Expr.(*sql.Call)
		return ok && c.Window != nil
	})
}

// topNQuery plans q, whose FROM is a subquery with a ROW_NUMBER() item.
func (p *planner) topNQuery(name string, q *sql.Select) (string, error) {
	sub := q.From.Subquery
	at := rankItem(sub)
	item := sub.Items[at]
	call := item.Expr.(*sql.Call)
	over := call.Window
	switch {
	case call.Name != "row_number":
		return "", p.errorf(call.Pos, "%s() OVER (…) is not supported: of the window functions, ROW_NUMBER() is (top-N and deduplication)", call.Name)
	case len(call.Args) > 0 || call.Star || call.Filter != nil:
		return "", p.errorf(call.Pos, "ROW_NUMBER() takes no argument")
	case len(over.OrderBy) == 0:
		return "", p.errorf(over.Pos, "ROW_NUMBER() OVER (…) needs ORDER BY: the order that ranks rows")
	case over.Frame != nil:
		return "", p.errorf(over.Frame.Pos, "ROW_NUMBER() OVER (…) takes no frame (ROWS …): it ranks a whole partition")
	case q.Where == nil:
		return "", p.errorf(q.Pos, "a ROW_NUMBER() is planned as top-N: filter the query by the rank (WHERE %s <= N)", item.Alias)
	case len(q.GroupBy) > 0 || q.Having != nil:
		return "", p.errorf(q.Pos, "GROUP BY and HAVING of a ROW_NUMBER() query are not supported: its result is updating; group it in a query of its own")
	}
	// The rank filter, and nothing else.
	rank := item.Alias
	limit, err := p.rankLimit(q.Where, rank)
	if err != nil {
		return "", err
	}
	// The subquery without the rank is a view the top_n reads; * in it is
	// the relation's columns.
	in := *sub
	in.Items = slices.Delete(slices.Clone(sub.Items), at, at+1)
	if slices.ContainsFunc(in.Items, func(it sql.SelectItem) bool { return it.Star }) {
		items, err := p.expandStar(name+"-ranked", &in)
		if err != nil {
			return "", err
		}
		in.Items = items
	}
	if rankItem(&in) >= 0 {
		return "", p.errorf(in.Items[rankItem(&in)].Pos, "one window function per query")
	}
	inName := name + "-ranked"
	node, err := p.query(inName, &in)
	if err != nil {
		return "", err
	}
	rel := p.rels[inName]
	// PARTITION BY and ORDER BY name columns of the subquery's FROM: each
	// is the output column that selects it (B.date_time AS bid_date_time
	// is bid_date_time, not the date_time another side gives).
	column := func(e sql.Expr, what string) (*sql.Column, error) {
		c, ok := e.(*sql.Column)
		if !ok {
			return nil, p.errorf(e.At(), "%s: a column the subquery selects (%s)", what, strings.Join(rel.columns, ", "))
		}
		for _, exact := range []bool{true, false} {
			for _, it := range in.Items {
				x, ok := it.Expr.(*sql.Column)
				if ok && x.Name == c.Name && (x.Table == c.Table || !exact && (x.Table == "" || c.Table == "")) {
					return &sql.Column{Name: it.Alias, Pos: c.Pos}, nil
				}
			}
		}
		return nil, p.errorf(e.At(), "%s %s: select it in the subquery (its columns: %s)", what, c.Name, strings.Join(rel.columns, ", "))
	}
	keyList := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: over.Pos.Line, Column: over.Pos.Column}
	var keys []*sql.Column
	for _, e := range over.PartitionBy {
		c, err := column(e, "PARTITION BY")
		if err != nil {
			return "", err
		}
		keys = append(keys, c)
		keyList.Content = append(keyList.Content, scalarNode(c.Name, c.Pos.Line, c.Pos.Column))
	}
	orderList := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: over.Pos.Line, Column: over.Pos.Column}
	for _, o := range over.OrderBy {
		c, err := column(o.Expr, "ORDER BY")
		if err != nil {
			return "", err
		}
		dir := " asc"
		if o.Desc {
			dir = " desc"
		}
		orderList.Content = append(orderList.Content, scalarNode(c.Name+dir, o.Pos.Line, o.Pos.Column))
	}
	// The outer query reads the subquery's columns and the rank.
	selected := slices.ContainsFunc(q.Items, func(it sql.SelectItem) bool {
		c, ok := it.Expr.(*sql.Column)
		return it.Star || ok && c.Name == rank
	})
	withRank := limit > 1 || selected
	if withRank && !selected {
		return "", p.errorf(q.Pos, "select the rank %s too: the top %d rows of a partition are updated by their rank, and a sink applies the updates by it", rank, limit)
	}
	tm := mappingNode(over.Pos)
	add := func(k string, v *yaml.Node) {
		tm.Content = append(tm.Content, scalarNode(k, over.Pos.Line, over.Pos.Column), v)
	}
	add("type", scalarNode("top_n", over.Pos.Line, over.Pos.Column))
	add("input", scalarNode(node, over.Pos.Line, over.Pos.Column))
	add("key", keyList)
	add("order_by", orderList)
	add("limit", scalarNode(strconv.Itoa(limit), q.Where.At().Line, q.Where.At().Column))
	ranked := &relation{columns: slices.Clone(rel.columns), types: map[string]colType{}}
	for c, t := range rel.types {
		ranked.types[c] = t
	}
	if withRank {
		add("rank", scalarNode(rank, item.Pos.Line, item.Pos.Column))
		ranked.add(rank, colType{kind: row.Int, notNull: true})
		keys = append(keys, &sql.Column{Name: rank, Pos: item.Pos})
	}
	if err := p.add("transforms", name+"-top", over.Pos, tm); err != nil {
		return "", err
	}
	outer := *q
	outer.Where = nil
	outer.Items = starAs(q.Items, ranked.columns)
	tr := &translator{p: p, rel: ranked, relName: q.From.Alias}
	if tr.relName == "" {
		tr.relName = inName
	}
	return name, p.projectChangelog(name, name+"-top", &outer, tr, keys, "PARTITION BY")
}

// rankLimit returns N of the rank filter where (rank <= N, rank < N + 1,
// rank = 1, or the same written the other way round), refusing any other
// condition.
func (p *planner) rankLimit(where sql.Expr, rank string) (int, error) {
	b, ok := where.(*sql.Binary)
	if ok {
		l, lok := b.L.(*sql.Column)
		r, rok := b.R.(*sql.Literal)
		op := b.Op
		if !lok || !rok {
			// N >= rank: the same, mirrored.
			l, lok = b.R.(*sql.Column)
			r, rok = b.L.(*sql.Literal)
			op = map[string]string{">=": "<=", ">": "<", "=": "="}[op]
		}
		if lok && rok && l.Name == rank {
			n, isInt := r.Value.(int64)
			switch {
			case !isInt:
			case op == "<=" && n >= 1:
				return int(n), nil
			case op == "<" && n >= 2:
				return int(n - 1), nil
			case op == "=" && n == 1:
				return 1, nil
			}
		}
	}
	return 0, p.errorf(where.At(), "a ROW_NUMBER() query is filtered by its rank alone: WHERE %s <= N (or %s = 1); filter the rows in the subquery", rank, rank)
}

// expandStar returns q's items with * replaced by the columns of q's FROM
// relation. A subquery in FROM is planned first, as view name-from, which
// q then reads.
func (p *planner) expandStar(name string, q *sql.Select) ([]sql.SelectItem, error) {
	if sub := q.From.Subquery; sub != nil && q.From.Join == nil && q.From.Window == "" {
		if _, err := p.query(name+"-from", sub); err != nil {
			return nil, err
		}
		q.From.Relation, q.From.Subquery = name+"-from", nil
	}
	rel := p.rels[q.From.Relation]
	if rel == nil || q.From.Join != nil || q.From.Window != "" || q.From.Subquery != nil {
		return nil, p.errorf(q.Pos, "* beside other columns reads a source or view: list the columns")
	}
	return starAs(q.Items, rel.columns), nil
}

// starAs returns items with each * replaced, in place, by columns.
func starAs(items []sql.SelectItem, columns []string) []sql.SelectItem {
	var out []sql.SelectItem
	for _, it := range items {
		if !it.Star {
			out = append(out, it)
			continue
		}
		for _, c := range columns {
			out = append(out, sql.SelectItem{Expr: &sql.Column{Name: c, Pos: it.Pos}, Alias: c, Pos: it.Pos})
		}
	}
	return out
}
