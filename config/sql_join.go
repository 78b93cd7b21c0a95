package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file plans a query over `a JOIN b ON …` into a join transform: the
// conditions on one side become filters before the join, an equality of a
// column of each side is the key, and comparisons of the two sides' event
// times bound an interval join; without them the join is an inner join
// whose state lives for SET join.ttl of event time (default: forever). The
// other conditions on both sides filter the join's output.

// groupedJoin plans q, a GROUP BY (or aggregate) over a join: the join,
// selecting every column q reads under the name side_column, is a view the
// GROUP BY then reads (its columns renamed in q's expressions).
func (p *planner) groupedJoin(name string, q *sql.Select, js *joinScope) (string, error) {
	joined := *q
	joined.Items, joined.GroupBy, joined.Having = nil, nil, nil
	var cols []*sql.Column
	exprs := slices.Clone(q.GroupBy)
	for _, it := range q.Items {
		exprs = append(exprs, it.Expr)
	}
	exprs = append(exprs, q.Having)
	var err error
	for _, e := range exprs {
		walk(e, func(x sql.Expr) bool {
			c, ok := x.(*sql.Column)
			if !ok || err != nil {
				return err == nil
			}
			var s int
			if s, err = js.side(c); err == nil {
				// left__c, right__c: distinct for distinct columns.
				alias := []string{"left", "right"}[s] + "__" + c.Name
				if !slices.ContainsFunc(joined.Items, func(it sql.SelectItem) bool { return it.Alias == alias }) {
					joined.Items = append(joined.Items, sql.SelectItem{Expr: &sql.Column{Table: js.inputs[s].Name(), Name: c.Name, Pos: c.Pos}, Alias: alias, Pos: c.Pos})
				}
				cols = append(cols, c)
			}
			return false
		})
	}
	if err != nil {
		return "", err
	}
	if len(joined.Items) == 0 {
		// count(*) alone reads no column: the join still needs one to
		// select, any of the left side's.
		if len(js.rels[0].columns) == 0 {
			return "", p.errorf(q.Pos, "the join's left side has no column")
		}
		c := js.rels[0].columns[0]
		joined.Items = append(joined.Items, sql.SelectItem{Expr: &sql.Column{Table: js.inputs[0].Name(), Name: c, Pos: q.Pos}, Alias: "left__" + c, Pos: q.Pos})
	}
	// The join's columns as the GROUP BY reads them.
	for _, c := range cols {
		s, _ := js.side(c)
		c.Table, c.Name = "", []string{"left", "right"}[s]+"__"+c.Name
	}
	if _, err := p.joinQuery(name+"-joined", &joined, true); err != nil {
		return "", err
	}
	grouped := *q
	grouped.From = sql.From{Relation: name + "-joined", RelationPos: q.From.Pos, Pos: q.From.Pos}
	grouped.Where = nil // the join applied it
	in := p.rels[name+"-joined"]
	return p.groupQuery(name, &grouped, in, &translator{p: p, rel: in, relName: name + "-joined"})
}

// joinQuery plans q, whose FROM is a join, as node name. grouped says a
// GROUP BY reads the result (groupedJoin): when the join closes the rows of
// each left key (closingRows), it then also selects the left bound column.
func (p *planner) joinQuery(name string, q *sql.Select, grouped bool) (string, error) {
	if lookup := q.From.Join.Left.Lookup || q.From.Join.Right.Lookup; !lookup {
		if node, ok, err := p.windowTopJoin(name, q); ok || err != nil {
			return node, err
		}
	}
	j := q.From.Join
	inputs := [2]sql.JoinInput{j.Left, j.Right}
	var rels [2]*relation
	for i, in := range inputs {
		if in.Subquery != nil {
			// A subquery is planned as a view of its own, which the join
			// reads.
			sub := fmt.Sprintf("%s-%s", name, in.Alias)
			if _, err := p.query(sub, in.Subquery); err != nil {
				return "", err
			}
			inputs[i].Relation, inputs[i].Subquery = sub, nil
			in = inputs[i]
		}
		if rels[i] = p.rels[in.Relation]; rels[i] == nil {
			return "", p.errorf(in.Pos, "no source or view %s", in.Relation)
		}
		if rels[i].updating != nil {
			return "", p.errorf(in.Pos, "%s is an updating result (a GROUP BY without a window): a join cannot read it yet", in.Relation)
		}
	}
	j.Left, j.Right = inputs[0], inputs[1]
	js := &joinScope{p: p, inputs: inputs, rels: rels}
	for _, it := range q.Items {
		if it.Star {
			return "", p.errorf(it.Pos, "SELECT * over a join is not supported: list the columns")
		}
	}
	if len(q.GroupBy) > 0 || q.Having != nil || slices.ContainsFunc(q.Items, func(it sql.SelectItem) bool { return (&translator{}).hasAggregate(it.Expr) }) {
		return p.groupedJoin(name, q, js)
	}
	if inputs[0].Lookup || inputs[1].Lookup || rels[0].table != nil || rels[1].table != nil {
		return p.lookupQuery(name, q, inputs, rels)
	}
	var pre [2][]sql.Expr
	// post are the conditions on both sides that are neither the key nor a
	// time bound: a filter after the join.
	var post, where []sql.Expr
	var key, boundKey [2]*sql.Column
	var bounds [2]*time.Duration // lower, upper of right time - left time
	for _, part := range []struct {
		e    sql.Expr
		isOn bool
	}{{j.On, true}, {q.Where, false}} {
		for _, c := range conjuncts(part.e) {
			sides, err := js.sidesOf(c)
			if err != nil {
				return "", err
			}
			switch {
			case len(sides) == 1:
				pre[sides[0]] = append(pre[sides[0]], c)
			case len(sides) == 0:
				return "", p.errorf(c.At(), "a join condition that reads neither side is not supported")
			case !part.isOn:
				// Of an inner join, WHERE means what ON does: its time
				// bounds may bound the join (below). The key is ON's.
				where = append(where, c)
			default:
				// The key is the first equality of a column of each side
				// that is not a window bound (those say which windows pair:
				// sameWindows below).
				if l, r, ok := js.keyPair(c); ok && key[0] == nil && !js.isWindowBound(0, l.Name) && !js.isWindowBound(1, r.Name) {
					key = [2]*sql.Column{l, r}
					continue
				} else if ok && boundKey[0] == nil {
					boundKey = [2]*sql.Column{l, r} // the key when there is no other
				}
				if isBound, err := js.timeBound(c, &bounds); err != nil {
					return "", err
				} else if !isBound {
					post = append(post, c)
				}
			}
		}
	}
	// WHERE's conditions on both sides bound the join's event times when
	// they complete the bounds both ways; else they filter its output.
	if len(where) > 0 {
		b, ok := bounds, true
		var timed []sql.Expr
		for _, c := range where {
			isBound, err := js.timeBound(c, &b)
			switch {
			case err != nil:
				ok = false // bounded twice: a filter
				timed = append(timed, c)
			case isBound:
				timed = append(timed, c)
			default:
				post = append(post, c)
			}
		}
		if ok && b[0] != nil && b[1] != nil {
			bounds = b
		} else {
			post = append(post, timed...)
		}
	}
	// right.t <= left.c, with c a time column of the left side (an
	// auction's expiry), and a lower bound: an interval join whose upper
	// bound is each left row's own, whose state the watermark frees.
	var upperCol string
	var closing *closingRows
	if bounds[1] == nil {
		for i, c := range post {
			col, ok := js.untilBound(c)
			if !ok {
				continue
			}
			// The lower bound: from ON, or a condition of post.
			b := bounds
			var lower sql.Expr
			for k, o := range post {
				if k == i || b[0] != nil {
					continue
				}
				if isBound, err := js.timeBound(o, &b); err == nil && isBound && b[1] == nil {
					lower = o
				} else {
					b = bounds // an upper bound, or none
				}
			}
			if b[0] == nil {
				continue
			}
			bounds, upperCol = b, col
			post = slices.DeleteFunc(post, func(e sql.Expr) bool { return e == c || e == lower })
			break
		}
	}
	if key[0] == nil {
		key = boundKey
	}
	if key[0] == nil {
		return "", p.errorf(j.Pos, "a join needs an equality of a column of each side in ON (the key), e.g. a.seller = p.id")
	}
	if bounds[0] == nil && bounds[1] == nil && js.sameWindows(post) {
		// Results of equal windows on both sides, paired by their bounds:
		// a window's results all have its end - 1ns as their time, so an
		// interval join of [0, 0] pairs exactly the same windows' results
		// and forgets them once the watermark passes (the equalities stay
		// as a filter after it).
		zero := time.Duration(0)
		bounds = [2]*time.Duration{&zero, &zero}
	}
	// A NULL key matches nothing, not even another NULL.
	for i, k := range key {
		if !rels[i].types[k.Name].notNull {
			pre[i] = append(pre[i], &sql.IsNull{X: k, Not: true, Pos: k.Pos})
		}
	}
	// Filters before the join.
	var nodes [2]string
	for i := range inputs {
		nodes[i] = rels[i].node
		if len(pre[i]) == 0 {
			continue
		}
		tr := &translator{p: p, rel: rels[i], relName: inputs[i].Name()}
		filter := name + "-" + []string{"left", "right"}[i]
		if err := p.filter(filter, nodes[i], tr, pre[i]...); err != nil {
			return "", err
		}
		nodes[i] = filter
	}
	// The join, selecting every column the query reads.
	at := j.Pos
	m := mappingNode(at)
	kv := func(m *yaml.Node, k string, v *yaml.Node) {
		m.Content = append(m.Content, scalarNode(k, at.Line, at.Column), v)
	}
	str := func(v string) *yaml.Node { return scalarNode(v, at.Line, at.Column) }
	kv(m, "type", str("join"))
	kv(m, "left", str(nodes[0]))
	kv(m, "right", str(nodes[1]))
	on := mappingNode(at)
	kv(on, "left", str(key[0].Name))
	kv(on, "right", str(key[1].Name))
	kv(m, "on", on)
	switch {
	case bounds[0] != nil && upperCol != "":
		kv(m, "kind", str("interval"))
		kv(m, "lower", str(bounds[0].String()))
		kv(m, "upper", str("left."+upperCol))
		if slices.Equal(rels[0].unique, []string{key[0].Name}) {
			// The left side is unique by the key (declared): no right row
			// that met its left one needs keeping, and no row of a key
			// comes once the watermark passes its left row's bound.
			kv(m, "unique", str("left"))
			if grouped && *bounds[0] >= 0 {
				// Every pair comes at or after its right row, so not
				// after the watermark passes the left row's bound. With
				// a negative lower bound a left row may come after its
				// bound and still join rows that waited for it.
				closing = js.closingRows(q, key[0].Name, upperCol)
			}
		}
	case bounds[0] != nil && bounds[1] != nil:
		kv(m, "kind", str("interval"))
		kv(m, "lower", str(bounds[0].String()))
		kv(m, "upper", str(bounds[1].String()))
	case bounds[0] != nil || bounds[1] != nil:
		return "", p.errorf(j.Pos, "an interval join bounds the two sides' event times both ways, e.g. a.t BETWEEN b.t - INTERVAL '5' SECOND AND b.t")
	default:
		kv(m, "kind", str("inner"))
		kv(m, "ttl", str(orDefault(p.joinTTL, "0s")))
	}
	// Output: the columns read, named side_column, then a map naming the
	// query's columns (the join's select takes columns only).
	sel, inner, types, err := js.readColumns(q, post, at)
	if err != nil {
		return "", err
	}
	kv(m, "select", sel)
	tr := &translator{p: p, rel: &relation{columns: inner, types: types}, relName: "the join", resolve: js.columnName}
	if err := p.add("transforms", name+"-join", at, m); err != nil {
		return "", err
	}
	node := name + "-join"
	if grouped && len(post) == 0 {
		// groupedJoin's items are the join's columns as the join names
		// them, in its order: the join is the relation, with no map after.
		out := &relation{node: node, closing: closing}
		for _, it := range q.Items {
			e, err := tr.tx(it.Expr)
			if err != nil {
				return "", err
			}
			out.add(it.Alias, colType{kind: e.kind, notNull: !e.null})
		}
		if !slices.Equal(out.columns, inner) {
			return "", p.errorf(at, "internal: a grouped join selects %v, its items are %v", inner, out.columns)
		}
		p.rels[name] = out
		return node, nil
	}
	if len(post) > 0 {
		if err := p.filter(name+"-where", node, tr, post...); err != nil {
			return "", err
		}
		node = name + "-where"
	}
	out := &relation{node: name, closing: closing}
	if err := p.project(name, node, q, tr, out); err != nil {
		return "", err
	}
	p.rels[name] = out
	return name, nil
}

// closingRows is what a grouped join's result says of when its rows stop
// (see relation.closing): the left side is unique by column key and bounds
// each pair by its column at. It selects the left key and at as
// left__key and left__at, adding the latter to q's items (the GROUP BY
// groups by it too, a column the key determines); nil when q does not
// select the key, which the groups then do not hold.
func (js *joinScope) closingRows(q *sql.Select, key, at string) *closingRows {
	selected := func(name string) bool {
		return slices.ContainsFunc(q.Items, func(it sql.SelectItem) bool { return it.Alias == "left__"+name })
	}
	if !selected(key) {
		return nil
	}
	if !selected(at) {
		q.Items = append(q.Items, sql.SelectItem{Expr: &sql.Column{Table: js.inputs[0].Name(), Name: at, Pos: q.Pos}, Alias: "left__" + at, Pos: q.Pos})
	}
	return &closingRows{key: []string{"left__" + key}, at: "left__" + at}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// isWindowBound says whether column name of side i is its window's start or
// end.
func (js *joinScope) isWindowBound(i int, name string) bool {
	w := js.rels[i].window
	return w != nil && (name == w.start || name == w.end)
}

// sameWindows says whether both sides are results of windows of one shape
// (tumbling or sliding, same size and slide) and conds equate their starts
// or their ends.
func (js *joinScope) sameWindows(conds []sql.Expr) bool {
	l, r := js.rels[0].window, js.rels[1].window
	if l == nil || r == nil || l.shape != r.shape {
		return false
	}
	for _, c := range conds {
		a, b, ok := js.keyPair(c)
		if ok && (a.Name == l.start && l.start != "" && b.Name == r.start || a.Name == l.end && l.end != "" && b.Name == r.end) {
			return true
		}
	}
	return false
}

// conjuncts splits e at its top-level ANDs.
func conjuncts(e sql.Expr) []sql.Expr {
	if e == nil {
		return nil
	}
	if b, ok := e.(*sql.Binary); ok && b.Op == "AND" {
		return append(conjuncts(b.L), conjuncts(b.R)...)
	}
	return []sql.Expr{e}
}

// joinScope resolves the columns of a join's two sides.
type joinScope struct {
	p      *planner
	inputs [2]sql.JoinInput
	rels   [2]*relation
}

// side returns which side (0 left, 1 right) column c belongs to: its
// qualifier's, or the one side that has a column of its name.
func (js *joinScope) side(c *sql.Column) (int, error) {
	if c.Table != "" {
		for i, in := range js.inputs {
			if c.Table == in.Name() {
				if !slices.Contains(js.rels[i].columns, c.Name) && c.Name != js.rels[i].timeCol {
					return 0, js.p.errorf(c.Pos, "%s has no column %s (columns: %s)", in.Name(), c.Name, strings.Join(js.rels[i].columns, ", "))
				}
				return i, nil
			}
		}
		return 0, js.p.errorf(c.Pos, "%s.%s: the join reads %s and %s", c.Table, c.Name, js.inputs[0].Name(), js.inputs[1].Name())
	}
	in0, in1 := slices.Contains(js.rels[0].columns, c.Name), slices.Contains(js.rels[1].columns, c.Name)
	switch {
	case in0 && in1:
		return 0, js.p.errorf(c.Pos, "column %s is on both sides of the join: qualify it (%s.%s or %s.%s)", c.Name, js.inputs[0].Name(), c.Name, js.inputs[1].Name(), c.Name)
	case in0:
		return 0, nil
	case in1:
		return 1, nil
	}
	return 0, js.p.errorf(c.Pos, "neither side of the join has a column %s", c.Name)
}

// columnName is the join output's name of column c: left__name or
// right__name.
func (js *joinScope) columnName(c *sql.Column) (string, error) {
	s, err := js.side(c)
	if err != nil {
		return "", err
	}
	return []string{"left", "right"}[s] + "__" + c.Name, nil
}

// sidesOf returns the sides e reads, increasing.
func (js *joinScope) sidesOf(e sql.Expr) ([]int, error) {
	var out []int
	var err error
	walk(e, func(x sql.Expr) bool {
		c, ok := x.(*sql.Column)
		if !ok || err != nil {
			return err == nil
		}
		var s int
		if s, err = js.side(c); err == nil && !slices.Contains(out, s) {
			out = append(out, s)
		}
		return false
	})
	slices.Sort(out)
	return out, err
}

// keyPair recognises `l = r` of a column of each side.
func (js *joinScope) keyPair(e sql.Expr) (l, r *sql.Column, ok bool) {
	b, isBin := e.(*sql.Binary)
	if !isBin || b.Op != "=" {
		return nil, nil, false
	}
	x, ok1 := b.L.(*sql.Column)
	y, ok2 := b.R.(*sql.Column)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	sx, _ := js.side(x)
	if sx == 1 {
		x, y = y, x
	}
	return x, y, true
}

// timeBound reads `x op y` where x and y are each a side's event-time column
// plus or minus an interval, as a bound of right time - left time.
// It returns false, and no error, for a condition of another form, which
// the caller applies after the join.
func (js *joinScope) timeBound(e sql.Expr, bounds *[2]*time.Duration) (bool, error) {
	b, ok := e.(*sql.Binary)
	if !ok || (b.Op != ">=" && b.Op != "<=") {
		return false, nil
	}
	term := func(x sql.Expr) (side int, off time.Duration, ok bool) {
		if bin, isBin := x.(*sql.Binary); isBin && (bin.Op == "+" || bin.Op == "-") {
			iv, isIv := bin.R.(*sql.Interval)
			if !isIv {
				return 0, 0, false
			}
			off = iv.D
			if bin.Op == "-" {
				off = -off
			}
			x = bin.L
		}
		c, isCol := x.(*sql.Column)
		if !isCol {
			return 0, 0, false
		}
		s, err := js.side(c)
		if err != nil {
			return 0, 0, false
		}
		// A window result's bounds are its time (its window's end - 1ns)
		// plus a constant.
		if w := js.rels[s].window; w != nil && c.Name != "" && (c.Name == w.end || c.Name == w.start) {
			if c.Name == w.end {
				return s, off + time.Nanosecond, true
			}
			return s, off + time.Nanosecond - w.size, true
		}
		if js.rels[s].timeCol == "" || c.Name != js.rels[s].timeCol {
			return 0, 0, false
		}
		return s, off, true
	}
	sx, ox, ok1 := term(b.L)
	sy, oy, ok2 := term(b.R)
	if !ok1 || !ok2 || sx == sy {
		return false, nil
	}
	// x + ox op y + oy, as right - left op' d.
	op := b.Op
	var d time.Duration
	if sx == 0 { // left + ox op right + oy  ⟺  right - left op⁻¹ ox - oy
		d = ox - oy
		op = map[string]string{">=": "<=", "<=": ">="}[op]
	} else { // right + ox op left + oy  ⟺  right - left op oy - ox
		d = oy - ox
	}
	i := 0 // lower
	if op == "<=" {
		i = 1 // upper
	}
	if bounds[i] != nil {
		return false, js.p.errorf(e.At(), "the join's event times are bounded twice on this side")
	}
	bounds[i] = &d
	return true, nil
}

// untilBound recognises `right.t <= left.c` (or `left.c >= right.t`), with t
// the right side's event time and c a time column of the left side other
// than its event time: an upper bound of the pair that is the left row's
// own. It returns c.
func (js *joinScope) untilBound(e sql.Expr) (string, bool) {
	b, ok := e.(*sql.Binary)
	if !ok || (b.Op != "<=" && b.Op != ">=") {
		return "", false
	}
	x, y := b.L, b.R
	if b.Op == ">=" {
		x, y = y, x
	}
	rt, ok1 := x.(*sql.Column)
	lc, ok2 := y.(*sql.Column)
	if !ok1 || !ok2 {
		return "", false
	}
	if s, err := js.side(rt); err != nil || s != 1 || rt.Name != js.rels[1].timeCol || js.rels[1].timeCol == "" {
		return "", false
	}
	if s, err := js.side(lc); err != nil || s != 0 || lc.Name == js.rels[0].timeCol || !slices.Contains(js.rels[0].columns, lc.Name) ||
		js.rels[0].types[lc.Name].kind != row.Time {
		return "", false
	}
	return lc.Name, true
}

// readColumns is the select of a join's node: every column of either side
// that conds or q's items read, named side__column, as a mapping of those
// names to side.column references; with the names in order and their
// types, for the translator of what follows the join.
func (js *joinScope) readColumns(q *sql.Select, conds []sql.Expr, at sql.Pos) (*yaml.Node, []string, map[string]colType, error) {
	sel := mappingNode(at)
	var inner []string
	types := map[string]colType{}
	read := slices.Clone(conds)
	for _, it := range q.Items {
		if it.Star {
			return nil, nil, nil, js.p.errorf(it.Pos, "SELECT * over a join is not supported: list the columns")
		}
		read = append(read, it.Expr)
	}
	for _, e := range read {
		var err error
		walk(e, func(x sql.Expr) bool {
			c, ok := x.(*sql.Column)
			if !ok || err != nil {
				return err == nil
			}
			var n string
			if n, err = js.columnName(c); err == nil && !slices.Contains(inner, n) {
				inner = append(inner, n)
				side, col, _ := strings.Cut(n, "__")
				sel.Content = append(sel.Content, scalarNode(n, at.Line, at.Column), scalarNode(side+"."+col, at.Line, at.Column))
				types[n] = js.rels[map[string]int{"left": 0, "right": 1}[side]].types[col]
			}
			return false
		})
		if err != nil {
			return nil, nil, nil, err
		}
	}
	return sel, inner, types, nil
}
