package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file recognises a join of a relation with its own windows' highest
// (or lowest) value, joined back to the rows of each window at that value:
//
//	SELECT B.auction, B.price FROM bid AS B JOIN (
//	  SELECT max(price) AS maxprice, window_end AS t
//	  FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_end
//	) AS W ON B.price = W.maxprice
//	WHERE B.date_time BETWEEN W.t - INTERVAL '10' SECOND AND W.t
//
// (Nexmark q7), or of a window result with the maximum of each of its
// windows (q5: counts JOIN (SELECT max(num) … GROUP BY starttime) ON
// starttime = … AND num >= maxn), and plans it as the window_top transform:
// each window keeps its best value and the rows at it, where the join would
// keep every row of the window in its state. The rows are the same: a row
// joins its window's aggregate exactly when its value equals it and its
// time is in the window (or at its end instant, which BETWEEN includes:
// window_top's through_end). A query of any other shape is an ordinary
// join.

// windowTopMatch is a recognised join: the relation side, and what the
// window_top transform and the projection after it need.
type windowTopMatch struct {
	side    sql.JoinInput // the relation whose rows are selected
	agg     sql.JoinInput // its windows' aggregate
	rel     *relation     // side's relation
	field   string        // the aggregated column
	lowest  bool          // min instead of max
	size    time.Duration // the tumbling windows (over the rows' times)
	through bool          // rows at a window's end instant join it too
	// cols maps the aggregate side's output columns to the window_top
	// output's: the aggregate to field, a window bound to window_start or
	// window_end, a result window's bound column to itself.
	cols map[string]string
}

// windowTopJoin plans q as window_top when its join has the shape above; ok
// is false, with no error and nothing planned, for any other join.
func (p *planner) windowTopJoin(name string, q *sql.Select) (string, bool, error) {
	j := q.From.Join
	if len(q.GroupBy) > 0 || q.Having != nil {
		return "", false, nil
	}
	var m *windowTopMatch
	for _, sides := range [][2]sql.JoinInput{{j.Left, j.Right}, {j.Right, j.Left}} {
		if m = p.matchWindowTop(sides[0], sides[1], append(conjuncts(j.On), conjuncts(q.Where)...)); m != nil {
			break
		}
	}
	if m == nil {
		return "", false, nil
	}
	// The selected columns, read from window_top's output.
	out := &relation{columns: slices.Clone(m.rel.columns), types: map[string]colType{}}
	for c, t := range m.rel.types {
		out.types[c] = t
	}
	out.add("window_start", colType{kind: row.Time, notNull: true})
	out.add("window_end", colType{kind: row.Time, notNull: true})
	resolve := func(c *sql.Column) (string, error) {
		if f, ok := m.column(c); ok {
			return f, nil
		}
		return "", p.errorf(c.Pos, "neither side of the join has a column %s", c.Name)
	}
	for _, it := range q.Items {
		var err error
		walk(it.Expr, func(x sql.Expr) bool {
			if c, ok := x.(*sql.Column); ok && err == nil {
				_, err = resolve(c)
			}
			return err == nil
		})
		if it.Star || err != nil || (&translator{}).hasAggregate(it.Expr) {
			return "", false, nil // the join's planning reports it
		}
	}
	at := j.Pos
	wm := mappingNode(at)
	kv := func(k, v string) {
		wm.Content = append(wm.Content, scalarNode(k, at.Line, at.Column), scalarNode(v, at.Line, at.Column))
	}
	kv("type", "window_top")
	kv("input", m.rel.node)
	kv("size", m.size.String())
	order := m.field + " desc"
	if m.lowest {
		order = m.field + " asc"
	}
	wm.Content = append(wm.Content, scalarNode("order_by", at.Line, at.Column),
		&yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: at.Line, Column: at.Column, Content: []*yaml.Node{scalarNode(order, at.Line, at.Column)}})
	if m.through {
		kv("through_end", "true")
	}
	if agg := m.agg; agg.Subquery == nil {
		p.absorbed = append(p.absorbed, agg.Relation)
	}
	if err := p.add("transforms", name+"-top", at, wm); err != nil {
		return "", false, err
	}
	tr := &translator{p: p, rel: out, relName: m.side.Name(), resolve: resolve}
	res := &relation{node: name}
	if err := p.project(name, name+"-top", q, tr, res); err != nil {
		return "", false, err
	}
	p.rels[name] = res
	return name, true, nil
}

// column names the window_top output's field that c, a column of either
// side of the join, reads.
func (m *windowTopMatch) column(c *sql.Column) (string, bool) {
	onSide := slices.Contains(m.rel.columns, c.Name)
	agg, onAgg := m.cols[c.Name]
	switch {
	case c.Table == m.side.Name() && onSide, c.Table == "" && onSide && !onAgg:
		return c.Name, true
	case c.Table == m.agg.Name() && onAgg, c.Table == "" && onAgg && !onSide:
		return agg, true
	}
	return "", false
}

// matchWindowTop returns the match when side JOIN agg ON conds has the
// shape of this file's comment, else nil.
func (p *planner) matchWindowTop(side, agg sql.JoinInput, conds []sql.Expr) *windowTopMatch {
	rel := p.rels[side.Relation]
	if side.Subquery != nil || rel == nil || rel.updating != nil || side.Name() == agg.Name() {
		return nil
	}
	if slices.Contains(rel.columns, "window_start") || slices.Contains(rel.columns, "window_end") {
		return nil // window_top adds these
	}
	ws := agg.Subquery
	if ws == nil {
		ws = p.views[agg.Relation]
	}
	if ws == nil || ws.Where != nil || ws.Having != nil || ws.From.Join != nil || ws.From.Subquery != nil ||
		ws.From.Relation != side.Relation || len(ws.GroupBy) != 1 {
		return nil
	}
	group, ok := ws.GroupBy[0].(*sql.Column)
	if !ok || (group.Table != "" && group.Table != ws.From.Alias && group.Table != ws.From.Relation) {
		return nil
	}
	m := &windowTopMatch{side: side, agg: agg, rel: rel, cols: map[string]string{}}
	// offsets of the aggregate side's time columns from the window's
	// start (q7's shape), or the result window's bound column (q5's).
	offsets := map[string]time.Duration{}
	var boundCol string
	switch {
	case ws.From.Window == "tumble" && rel.timeCol != "" && ws.From.TimeColumn == rel.timeCol && rel.procCol != rel.timeCol &&
		(group.Name == "window_start" || group.Name == "window_end"):
		m.size = ws.From.Size
	case ws.From.Window == "" && rel.window != nil && group.Name != "" && (group.Name == rel.window.start || group.Name == rel.window.end) &&
		rel.window.slide > 0 && rel.window.size%rel.window.slide == 0:
		// Results of one window reach the query together, at its end -
		// 1ns: a tumbling window of the slide holds one window's results
		// (windowResultQuery).
		m.size, boundCol = rel.window.slide, group.Name
	default:
		return nil
	}
	for _, it := range ws.Items {
		switch x := it.Expr.(type) {
		case *sql.Call:
			if m.field != "" || (x.Name != "max" && x.Name != "min") || len(x.Args) != 1 || x.Star || x.Distinct || x.Filter != nil || x.Window != nil {
				return nil
			}
			c, ok := x.Args[0].(*sql.Column)
			if !ok || !slices.Contains(rel.columns, c.Name) || (c.Table != "" && c.Table != ws.From.Alias && c.Table != ws.From.Relation) {
				return nil
			}
			if k := rel.types[c.Name].kind; k != row.Int && k != row.Time {
				// Floats order NaN apart from the aggregates, and max of a
				// bool is refused: the join plans (or refuses) those.
				return nil
			}
			m.field, m.lowest = c.Name, x.Name == "min"
			m.cols[it.Alias] = c.Name
		case *sql.Column:
			switch {
			case boundCol == "" && x.Name == "window_start":
				m.cols[it.Alias], offsets[it.Alias] = "window_start", 0
			case boundCol == "" && x.Name == "window_end":
				m.cols[it.Alias], offsets[it.Alias] = "window_end", m.size
			case boundCol != "" && x.Name == boundCol:
				m.cols[it.Alias] = boundCol
			default:
				return nil
			}
		default:
			return nil
		}
	}
	if m.field == "" {
		return nil
	}
	// Every condition is the value's match or places the row in its
	// window; anything else (a filter of either side, another key) would
	// change which rows the aggregate sees or joins.
	var matched, atLeast, sameWindow bool
	var lower, upper *time.Duration
	for _, c := range conds {
		switch {
		case m.valueMatch(c):
			matched = true
			if b := c.(*sql.Binary); b.Op != "=" {
				atLeast = true
			}
		case boundCol != "" && m.boundMatch(c, boundCol):
			sameWindow = true
		case boundCol == "":
			at, isLower, strict, ok := m.timeBound(c, offsets)
			switch {
			case !ok:
				return nil
			case isLower && (lower != nil || strict):
				return nil
			case isLower:
				lower = &at
			case upper != nil:
				return nil
			default:
				upper = &at
				m.through = !strict
			}
		default:
			return nil
		}
	}
	if boundCol == "" {
		sameWindow = lower != nil && upper != nil && *lower == 0 && *upper == m.size
	}
	// A row at a window's end instant belongs to the next window: at or
	// above this window's maximum it joins it under >=, which window_top
	// (the rows at the maximum) would not give.
	if !matched || !sameWindow || atLeast && m.through {
		return nil
	}
	return m
}

// sideColumn reads e as a column of the relation side named name.
func (m *windowTopMatch) sideColumn(e sql.Expr, name string) bool {
	c, ok := e.(*sql.Column)
	// (The event time may be the record's own, not a column: event_time.)
	return ok && c.Name == name && (c.Table == m.side.Name() || c.Table == "" && m.cols[name] == "") && (slices.Contains(m.rel.columns, name) || name == m.rel.timeCol)
}

// aggColumn reads e as the aggregate side's column that maps to field.
func (m *windowTopMatch) aggColumn(e sql.Expr, field string) bool {
	c, ok := e.(*sql.Column)
	if !ok || (c.Table != m.agg.Name() && (c.Table != "" || slices.Contains(m.rel.columns, c.Name))) {
		return false
	}
	f, ok := m.cols[c.Name]
	return ok && f == field
}

// valueMatch recognises side.field = agg.best, or side.field >= agg.max
// (<= agg.min), either way round: a row joins the best of its window.
func (m *windowTopMatch) valueMatch(e sql.Expr) bool {
	b, ok := e.(*sql.Binary)
	if !ok {
		return false
	}
	atLeast, atMost := ">=", "<="
	if m.lowest {
		atLeast, atMost = atMost, atLeast
	}
	switch {
	case b.Op == "=" && m.sideColumn(b.L, m.field) && m.aggColumn(b.R, m.field),
		b.Op == "=" && m.sideColumn(b.R, m.field) && m.aggColumn(b.L, m.field),
		b.Op == atLeast && m.sideColumn(b.L, m.field) && m.aggColumn(b.R, m.field),
		b.Op == atMost && m.sideColumn(b.R, m.field) && m.aggColumn(b.L, m.field):
		return true
	}
	return false
}

// boundMatch recognises side.bound = agg.bound for a result window's bound
// column.
func (m *windowTopMatch) boundMatch(e sql.Expr, bound string) bool {
	b, ok := e.(*sql.Binary)
	return ok && b.Op == "=" && (m.sideColumn(b.L, bound) && m.aggColumn(b.R, bound) || m.sideColumn(b.R, bound) && m.aggColumn(b.L, bound))
}

// timeBound reads `side.time op agg.bound ± interval` (either way round) as
// a bound of the row's time: the instant, as an offset from its window's
// start, whether it is the lower one, and whether it excludes the instant.
func (m *windowTopMatch) timeBound(e sql.Expr, offsets map[string]time.Duration) (at time.Duration, isLower, strict, ok bool) {
	b, isBin := e.(*sql.Binary)
	if !isBin {
		return 0, false, false, false
	}
	op, x, y := b.Op, b.L, b.R
	if !m.sideColumn(x, m.rel.timeCol) {
		x, y = y, x
		op = map[string]string{">=": "<=", "<=": ">=", ">": "<", "<": ">"}[op]
	}
	if op == "" || !m.sideColumn(x, m.rel.timeCol) {
		return 0, false, false, false
	}
	var off time.Duration
	if bin, isBin := y.(*sql.Binary); isBin && (bin.Op == "+" || bin.Op == "-") {
		iv, isIv := bin.R.(*sql.Interval)
		if !isIv {
			return 0, false, false, false
		}
		off = iv.D
		if bin.Op == "-" {
			off = -off
		}
		y = bin.L
	}
	c, isCol := y.(*sql.Column)
	if !isCol || !m.aggColumn(c, m.cols[c.Name]) {
		return 0, false, false, false
	}
	base, isTime := offsets[c.Name]
	if !isTime {
		return 0, false, false, false
	}
	return base + off, op == ">=" || op == ">", op == ">" || op == "<", true
}

// dropAbsorbedViews removes the transforms of absorbed views (the view's
// node and those named view-…) that nothing reads: a view is not
// materialised, so a view whose only reader computes it otherwise runs
// nowhere.
func (p *planner) dropAbsorbedViews() {
	ts := p.sections["transforms"]
	if ts == nil || len(p.absorbed) == 0 {
		return
	}
	ofAbsorbed := func(name string) bool {
		return slices.ContainsFunc(p.absorbed, func(v string) bool { return name == v || strings.HasPrefix(name, v+"-") })
	}
	for changed := true; changed; {
		changed = false
		read := map[string]bool{}
		for _, sec := range []*yaml.Node{ts, p.sections["sinks"]} {
			if sec == nil {
				continue
			}
			for i := 1; i < len(sec.Content); i += 2 {
				fields := sec.Content[i]
				for j := 0; j+1 < len(fields.Content); j += 2 {
					if k := fields.Content[j].Value; k == "input" || k == "left" || k == "right" {
						ref, _, _ := strings.Cut(fields.Content[j+1].Value, ".")
						read[ref] = true
					}
				}
			}
		}
		for i := 0; i < len(ts.Content); i += 2 {
			if name := ts.Content[i].Value; ofAbsorbed(name) && !read[name] {
				ts.Content = slices.Delete(ts.Content, i, i+2)
				changed = true
				break
			}
		}
	}
}
