package sql

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgquery "github.com/wasilibs/go-pgquery"
	pgparser "github.com/wasilibs/go-pgquery/parser"
)

// This file parses a SELECT with PostgreSQL's grammar and turns its parse
// tree into this package's nodes, each with its position in the file. What
// the tree may hold but the dialect does not plan is refused here, naming
// the construct.

// query is one SELECT being converted: its source and its offset in it.
type query struct {
	src  *source
	base int
	// text is the query's text as parsed; lookups are the offsets in it
	// where a FOR SYSTEM_TIME AS OF PROCTIME() clause began, blanked out
	// before parsing (PostgreSQL's grammar has no such clause), and used
	// marks those a relation in FROM took.
	text    string
	lookups []int
	used    map[int]bool
}

// systemTime matches the lookup clause (its parentheses may hold spaces),
// its keywords in any ASCII case: (?i) would also take ſ for s and K (the
// Kelvin sign) for k, two bytes where blanking writes one space.
var systemTime = regexp.MustCompile(asciiFold(`\bFOR\s+SYSTEM_TIME\s+AS\s+OF\s+PROCTIME\s*\(\s*\)`))

// asciiFold makes every ASCII letter of pattern a class of its two cases.
func asciiFold(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			b.WriteByte(c)
			i++
			b.WriteByte(pattern[i])
		case c >= 'A' && c <= 'Z':
			b.WriteString("[" + string(c) + string(c+'a'-'A') + "]")
		case c >= 'a' && c <= 'z':
			b.WriteString("[" + string(c-'a'+'A') + string(c) + "]")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// blankLookups replaces every FOR SYSTEM_TIME AS OF PROCTIME() of text by
// spaces (keeping line breaks, so positions stay), returning the new text
// and where each clause began.
func blankLookups(text string) (string, []int) {
	var at []int
	out := systemTime.ReplaceAllStringFunc(text, func(m string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return r
			}
			return ' '
		}, m)
	})
	for _, loc := range systemTime.FindAllStringIndex(text, -1) {
		at = append(at, loc[0])
	}
	return out, at
}

// lookupAfter says whether a lookup clause directly follows the relation
// name at loc (only spaces between), marking it used.
func (q *query) lookupAfter(loc int32, name string) bool {
	end := int(loc) + len(name)
	if end > len(q.text) || !strings.EqualFold(q.text[loc:end], name) {
		// A quoted name: find its end by its closing quote.
		if i := strings.IndexByte(q.text[min(int(loc)+1, len(q.text)):], '"'); int(loc) < len(q.text) && q.text[loc] == '"' && i >= 0 {
			end = int(loc) + 2 + i
		} else {
			return false
		}
	}
	for _, at := range q.lookups {
		if at >= end && strings.TrimSpace(q.text[end:at]) == "" {
			q.used[at] = true
			return true
		}
	}
	return false
}

func (q *query) pos(loc int32) Pos {
	if loc < 0 {
		loc = 0
	}
	return q.src.pos(q.base + int(loc))
}

func (q *query) errorf(loc int32, format string, args ...any) *Error {
	return &Error{File: q.src.file, Pos: q.pos(loc), Msg: fmt.Sprintf(format, args...)}
}

// parseSelect parses text, which starts at byte offset base of the script.
func (s *source) parseSelect(text string, base int) (*Select, error) {
	q := &query{src: s, base: base, used: map[int]bool{}}
	text, q.lookups = blankLookups(text)
	q.text = text
	tree, err := pgquery.Parse(text)
	if err != nil {
		var pe *pgparser.Error
		if errors.As(err, &pe) && pe.Cursorpos > 0 {
			return nil, q.errorf(int32(pe.Cursorpos-1), "%s", pe.Message)
		}
		return nil, q.errorf(0, "%v", err)
	}
	if len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetSelectStmt() == nil {
		return nil, q.errorf(0, "expected one SELECT query")
	}
	sel, err := q.selectStmt(tree.Stmts[0].Stmt.GetSelectStmt(), 0)
	if err != nil {
		return nil, err
	}
	// A clause no relation of a join took (after a subquery, inside a
	// string constant) is refused rather than dropped.
	for _, at := range q.lookups {
		if !q.used[at] {
			return nil, q.errorf(int32(at), "FOR SYSTEM_TIME AS OF PROCTIME() follows a table on one side of a join: FROM s JOIN t FOR SYSTEM_TIME AS OF PROCTIME() AS x ON …")
		}
	}
	return sel, nil
}

func (q *query) selectStmt(st *pg.SelectStmt, loc int32) (*Select, error) {
	switch {
	case st.Op != pg.SetOperation_SETOP_NONE:
		return nil, q.errorf(loc, "UNION, INTERSECT and EXCEPT are not supported yet")
	case st.WithClause != nil:
		return nil, q.errorf(st.WithClause.Location, "WITH (common table expressions) is not supported yet: use CREATE VIEW")
	case len(st.ValuesLists) > 0:
		return nil, q.errorf(loc, "VALUES is not a streaming query")
	case len(st.SortClause) > 0:
		return nil, q.errorf(loc, "ORDER BY outside a window function has no meaning on an unbounded stream")
	case st.LimitCount != nil || st.LimitOffset != nil:
		return nil, q.errorf(loc, "LIMIT and OFFSET are not supported on a stream")
	case len(st.DistinctClause) > 0:
		return nil, q.errorf(loc, "SELECT DISTINCT is not supported yet")
	case len(st.WindowClause) > 0:
		return nil, q.errorf(loc, "WINDOW clauses are not supported yet")
	}
	out := &Select{Pos: q.pos(loc)}
	if len(st.FromClause) != 1 {
		return nil, q.errorf(loc, "a query reads exactly one relation or window function in FROM (joins are not supported yet)")
	}
	from, err := q.from(st.FromClause[0])
	if err != nil {
		return nil, err
	}
	out.From = from
	for _, n := range st.TargetList {
		rt := n.GetResTarget()
		item := SelectItem{Alias: rt.Name, Pos: q.pos(rt.Location)}
		if cr := rt.Val.GetColumnRef(); cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			item.Star = true
		} else {
			e, err := q.expr(rt.Val)
			if err != nil {
				return nil, err
			}
			item.Expr = e
			if item.Alias == "" {
				item.Alias = defaultName(e)
			}
		}
		out.Items = append(out.Items, item)
	}
	if st.WhereClause != nil {
		if out.Where, err = q.expr(st.WhereClause); err != nil {
			return nil, err
		}
	}
	for _, g := range st.GroupClause {
		e, err := q.expr(g)
		if err != nil {
			return nil, err
		}
		out.GroupBy = append(out.GroupBy, e)
	}
	if st.HavingClause != nil {
		if out.Having, err = q.expr(st.HavingClause); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// defaultName is PostgreSQL's name of an unnamed output column: a column's
// name, a function's name, else "?column?".
func defaultName(e Expr) string {
	switch x := e.(type) {
	case *Column:
		return x.Name
	case *Call:
		return x.Name
	case *Cast:
		return defaultName(x.X)
	case *Subscript:
		return defaultName(x.X)
	}
	return "?column?"
}

// from reads the FROM item: a relation, or TUMBLE/HOP/SESSION over one.
func (q *query) from(n *pg.Node) (From, error) {
	switch {
	case n.GetRangeVar() != nil:
		rv := n.GetRangeVar()
		f := From{Relation: rv.Relname, RelationPos: q.pos(rv.Location), Pos: q.pos(rv.Location)}
		if rv.Alias != nil {
			if len(rv.Alias.Colnames) > 0 {
				return From{}, q.errorf(rv.Location, "renaming a relation's columns in FROM (%s(…)) is not supported: name them with AS in the select list", rv.Alias.Aliasname)
			}
			f.Alias = rv.Alias.Aliasname
		}
		return f, nil
	case n.GetRangeFunction() != nil:
		rf := n.GetRangeFunction()
		if len(rf.Functions) != 1 {
			return From{}, q.errorf(0, "ROWS FROM with several functions is not supported")
		}
		items := rf.Functions[0].GetList().GetItems()
		if len(items) == 0 || items[0].GetFuncCall() == nil {
			return From{}, q.errorf(0, "expected TUMBLE, HOP or SESSION in FROM")
		}
		return q.windowFunction(items[0].GetFuncCall())
	case n.GetJoinExpr() != nil:
		return q.join(n.GetJoinExpr())
	case n.GetRangeSubselect() != nil:
		sub, alias, err := q.subquery(n.GetRangeSubselect())
		if err != nil {
			return From{}, err
		}
		return From{Subquery: sub, Alias: alias, RelationPos: sub.Pos, Pos: sub.Pos}, nil
	}
	return From{}, q.errorf(q.location(n), "unsupported FROM item")
}

// subquery reads a (SELECT …) [AS alias] in FROM.
func (q *query) subquery(rs *pg.RangeSubselect) (*Select, string, error) {
	st := rs.Subquery.GetSelectStmt()
	var loc int32
	if st != nil && len(st.TargetList) > 0 {
		loc = st.TargetList[0].GetResTarget().Location
	}
	switch {
	case st == nil:
		return nil, "", q.errorf(loc, "a subquery in FROM is a SELECT")
	case rs.Lateral:
		return nil, "", q.errorf(loc, "LATERAL subqueries are not supported")
	case rs.Alias != nil && len(rs.Alias.Colnames) > 0:
		return nil, "", q.errorf(loc, "renaming a subquery's columns (%s(…)) is not supported: name them with AS in its select list", rs.Alias.Aliasname)
	}
	sub, err := q.selectStmt(st, loc)
	if err != nil {
		return nil, "", err
	}
	alias := ""
	if rs.Alias != nil {
		alias = rs.Alias.Aliasname
	}
	return sub, alias, nil
}

// join reads `a [INNER] JOIN b ON cond` of two relations.
func (q *query) join(je *pg.JoinExpr) (From, error) {
	at := q.location(je.Larg)
	if je.Jointype != pg.JoinType_JOIN_INNER {
		return From{}, q.errorf(at, "only INNER JOIN is supported yet (LEFT, RIGHT and FULL joins give updating results)")
	}
	if je.IsNatural || len(je.UsingClause) > 0 || je.Quals == nil {
		return From{}, q.errorf(at, "a join needs ON with the join condition (not NATURAL or USING)")
	}
	var sides [2]JoinInput
	for i, n := range []*pg.Node{je.Larg, je.Rarg} {
		if rs := n.GetRangeSubselect(); rs != nil {
			sub, alias, err := q.subquery(rs)
			if err != nil {
				return From{}, err
			}
			if alias == "" {
				return From{}, q.errorf(0, "a subquery in a join needs an alias: (SELECT …) AS name")
			}
			sides[i] = JoinInput{Subquery: sub, Alias: alias, Pos: sub.Pos}
			continue
		}
		rv := n.GetRangeVar()
		if rv == nil {
			return From{}, q.errorf(q.location(n), "each side of a join is a source, a view or a subquery (a window function in a join is not supported yet: join views)")
		}
		sides[i] = JoinInput{Relation: rv.Relname, Pos: q.pos(rv.Location), Lookup: q.lookupAfter(rv.Location, rv.Relname)}
		if rv.Alias != nil {
			if len(rv.Alias.Colnames) > 0 {
				return From{}, q.errorf(rv.Location, "renaming a relation's columns in FROM (%s(…)) is not supported: name them with AS in the select list", rv.Alias.Aliasname)
			}
			sides[i].Alias = rv.Alias.Aliasname
		}
	}
	if sides[0].Name() == sides[1].Name() && sides[0].Name() != "" {
		return From{}, q.errorf(at, "both sides of the join are called %s: give one an alias", sides[0].Name())
	}
	on, err := q.expr(je.Quals)
	if err != nil {
		return From{}, err
	}
	return From{Join: &Join{Left: sides[0], Right: sides[1], On: on, Pos: q.pos(at)}, Pos: q.pos(at)}, nil
}

// location returns a node's location where it has one, else 0.
func (q *query) location(n *pg.Node) int32 {
	switch {
	case n.GetJoinExpr() != nil:
		if l := n.GetJoinExpr().Larg; l != nil {
			return q.location(l)
		}
	case n.GetRangeVar() != nil:
		return n.GetRangeVar().Location
	}
	return 0
}

// windowFunction reads TUMBLE(t, col, size), HOP(t, col, slide, size) or
// SESSION(t, col, gap).
func (q *query) windowFunction(fc *pg.FuncCall) (From, error) {
	name := funcName(fc)
	want := map[string]int{"tumble": 3, "hop": 4, "session": 3}[name]
	if want == 0 {
		return From{}, q.errorf(fc.Location, "%s(…) in FROM: expected TUMBLE, HOP or SESSION", name)
	}
	if len(fc.Args) != want {
		return From{}, q.errorf(fc.Location, "%s takes %d arguments (relation, time column, %s), got %d", strings.ToUpper(name), want,
			map[string]string{"tumble": "size", "hop": "slide, size", "session": "gap"}[name], len(fc.Args))
	}
	f := From{Window: name, Pos: q.pos(fc.Location)}
	rel := fc.Args[0].GetColumnRef()
	col := fc.Args[1].GetColumnRef()
	if rel == nil || len(rel.Fields) != 1 || col == nil || len(col.Fields) != 1 {
		return From{}, q.errorf(fc.Location, "%s: the first two arguments are a relation and its time column", strings.ToUpper(name))
	}
	f.Relation, f.RelationPos = rel.Fields[0].GetString_().GetSval(), q.pos(rel.Location)
	f.TimeColumn = col.Fields[0].GetString_().GetSval()
	var ds []time.Duration
	for _, a := range fc.Args[2:] {
		e, err := q.expr(a)
		if err != nil {
			return From{}, err
		}
		iv, ok := e.(*Interval)
		if !ok || iv.D <= 0 {
			return From{}, q.errorf(fc.Location, "%s: a window's sizes are positive intervals, e.g. INTERVAL '10' SECOND", strings.ToUpper(name))
		}
		ds = append(ds, iv.D)
	}
	switch name {
	case "tumble":
		f.Size = ds[0]
	case "hop":
		f.Slide, f.Size = ds[0], ds[1]
	case "session":
		f.Gap = ds[0]
	}
	return f, nil
}

// funcName is a call's unqualified, lower-case name.
func funcName(fc *pg.FuncCall) string {
	n := fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval()
	return strings.ToLower(n)
}

// binaryOps are the operators of A_Expr kept as they are.
var binaryOps = map[string]string{"+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "=": "=", "<>": "<>", "!=": "<>",
	"<": "<", "<=": "<=", ">": ">", ">=": ">=", "||": "||"}

func (q *query) expr(n *pg.Node) (Expr, error) {
	switch {
	case n.GetColumnRef() != nil:
		cr := n.GetColumnRef()
		var parts []string
		for _, f := range cr.Fields {
			if f.GetAStar() != nil {
				return nil, q.errorf(cr.Location, "* is only allowed alone in the select list")
			}
			parts = append(parts, f.GetString_().GetSval())
		}
		c := &Column{Name: parts[len(parts)-1], Pos: q.pos(cr.Location)}
		if len(parts) == 2 {
			c.Table = parts[0]
		} else if len(parts) > 2 {
			return nil, q.errorf(cr.Location, "column %s: at most one qualifier", strings.Join(parts, "."))
		}
		return c, nil
	case n.GetAConst() != nil:
		return q.constant(n.GetAConst())
	case n.GetTypeCast() != nil:
		return q.cast(n.GetTypeCast())
	case n.GetAExpr() != nil:
		return q.aExpr(n.GetAExpr())
	case n.GetBoolExpr() != nil:
		be := n.GetBoolExpr()
		var args []Expr
		for _, a := range be.Args {
			e, err := q.expr(a)
			if err != nil {
				return nil, err
			}
			args = append(args, e)
		}
		switch be.Boolop {
		case pg.BoolExprType_NOT_EXPR:
			return &Unary{Op: "NOT", X: args[0], Pos: q.pos(be.Location)}, nil
		case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
			op := map[pg.BoolExprType]string{pg.BoolExprType_AND_EXPR: "AND", pg.BoolExprType_OR_EXPR: "OR"}[be.Boolop]
			e := args[0]
			for _, a := range args[1:] {
				e = &Binary{Op: op, L: e, R: a, Pos: q.pos(be.Location)}
			}
			return e, nil
		}
	case n.GetNullTest() != nil:
		nt := n.GetNullTest()
		x, err := q.expr(nt.Arg)
		if err != nil {
			return nil, err
		}
		return &IsNull{X: x, Not: nt.Nulltesttype == pg.NullTestType_IS_NOT_NULL, Pos: q.pos(nt.Location)}, nil
	case n.GetCaseExpr() != nil:
		return q.caseExpr(n.GetCaseExpr())
	case n.GetFuncCall() != nil:
		return q.call(n.GetFuncCall())
	case n.GetCoalesceExpr() != nil:
		ce := n.GetCoalesceExpr()
		c := &Call{Name: "coalesce", Pos: q.pos(ce.Location)}
		for _, a := range ce.Args {
			e, err := q.expr(a)
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, e)
		}
		return c, nil
	case n.GetSubLink() != nil:
		return nil, q.errorf(n.GetSubLink().Location, "subqueries are not supported")
	case n.GetAIndirection() != nil:
		return q.subscript(n.GetAIndirection())
	}
	return nil, q.errorf(0, "unsupported expression %T", n.GetNode())
}

// subscript reads (x)[n] with a constant n: the only indirection the
// dialect has (field selection, slices and subscripts of several dimensions
// are refused).
func (q *query) subscript(ind *pg.A_Indirection) (Expr, error) {
	x, err := q.expr(ind.Arg)
	if err != nil {
		return nil, err
	}
	at := x.At()
	if len(ind.Indirection) != 1 || ind.Indirection[0].GetAIndices() == nil || ind.Indirection[0].GetAIndices().IsSlice {
		return nil, &Error{File: q.src.file, Pos: at, Msg: "only one subscript of an array, (x)[n], is supported (no slices, field selection or several dimensions)"}
	}
	idx, err := q.expr(ind.Indirection[0].GetAIndices().Uidx)
	if err != nil {
		return nil, err
	}
	lit, ok := idx.(*Literal)
	n, isInt := int64(0), false
	if ok {
		n, isInt = lit.Value.(int64)
	}
	if !isInt {
		return nil, &Error{File: q.src.file, Pos: idx.At(), Msg: "an array subscript is a constant integer, e.g. (regexp_match(url, '(\\w+)=(\\w+)'))[2]"}
	}
	return &Subscript{X: x, Index: n, Pos: at}, nil
}

func (q *query) constant(c *pg.A_Const) (Expr, error) {
	p := q.pos(c.Location)
	switch {
	case c.Isnull:
		return &Literal{Value: nil, Pos: p}, nil
	case c.GetIval() != nil:
		return &Literal{Value: int64(c.GetIval().Ival), Pos: p}, nil
	case c.GetFval() != nil:
		s := c.GetFval().Fval
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return &Literal{Value: i, Pos: p}, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, q.errorf(c.Location, "number %s: %v", s, err)
		}
		return &Literal{Value: f, Pos: p}, nil
	case c.GetBoolval() != nil:
		return &Literal{Value: c.GetBoolval().Boolval, Pos: p}, nil
	case c.GetSval() != nil:
		return &Literal{Value: c.GetSval().Sval, Pos: p}, nil
	}
	return nil, q.errorf(c.Location, "unsupported constant")
}

// intervalMask are the bits of an INTERVAL type modifier naming its unit
// (PostgreSQL's INTERVAL_MASK), finest first; months and years, whose
// length varies, are refused ("" unit).
var intervalMask = []struct {
	bit  int64
	unit string
}{{1 << 12, "second"}, {1 << 11, "minute"}, {1 << 10, "hour"}, {1 << 3, "day"}, {1 << 1, ""}, {1 << 2, ""}}

func (q *query) cast(tc *pg.TypeCast) (Expr, error) {
	typ := typeName(tc.TypeName)
	if typ == "interval" {
		lit := tc.Arg.GetAConst()
		if lit == nil || (lit.GetSval() == nil && lit.GetIval() == nil) {
			return nil, q.errorf(tc.Location, "INTERVAL takes a constant, e.g. INTERVAL '10' SECOND")
		}
		v := lit.GetSval().GetSval()
		if lit.GetIval() != nil {
			v = strconv.FormatInt(int64(lit.GetIval().Ival), 10)
		}
		unit := ""
		if mods := tc.TypeName.Typmods; len(mods) > 0 {
			mask := int64(mods[0].GetAConst().GetIval().GetIval())
			for _, m := range intervalMask {
				if mask&m.bit != 0 && mask != 0x7fff {
					if m.unit == "" {
						return nil, q.errorf(tc.Location, "INTERVAL in months or years is not supported: their length varies; give days or finer")
					}
					unit = m.unit
					break
				}
			}
		}
		d, err := parseInterval(v, unit)
		if err != nil {
			return nil, q.errorf(tc.Location, "INTERVAL '%s': %v", v, err)
		}
		return &Interval{D: d, Pos: q.pos(tc.Location)}, nil
	}
	x, err := q.expr(tc.Arg)
	if err != nil {
		return nil, err
	}
	return &Cast{X: x, Type: typ, Pos: q.pos(tc.Location)}, nil
}

// typeName is a type's name, lower case, without pg_catalog.
func typeName(t *pg.TypeName) string {
	var parts []string
	for _, n := range t.Names {
		if s := n.GetString_().GetSval(); s != "pg_catalog" {
			parts = append(parts, strings.ToLower(s))
		}
	}
	return strings.Join(parts, ".")
}

func (q *query) aExpr(a *pg.A_Expr) (Expr, error) {
	op := ""
	if len(a.Name) > 0 {
		op = a.Name[len(a.Name)-1].GetString_().GetSval()
	}
	p := q.pos(a.Location)
	side := func(n *pg.Node) (Expr, error) {
		if n == nil {
			return nil, nil
		}
		return q.expr(n)
	}
	l, err := side(a.Lexpr)
	if err != nil {
		return nil, err
	}
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		r, err := side(a.Rexpr)
		if err != nil {
			return nil, err
		}
		if l == nil && op == "-" {
			return &Unary{Op: "-", X: r, Pos: p}, nil
		}
		if o, ok := binaryOps[op]; ok && l != nil {
			return &Binary{Op: o, L: l, R: r, Pos: p}, nil
		}
		return nil, q.errorf(a.Location, "operator %s is not supported", op)
	case pg.A_Expr_Kind_AEXPR_LIKE:
		r, err := side(a.Rexpr)
		if err != nil {
			return nil, err
		}
		var e Expr = &Binary{Op: "LIKE", L: l, R: r, Pos: p}
		if op == "!~~" {
			e = &Unary{Op: "NOT", X: e, Pos: p}
		}
		return e, nil
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		bounds := a.Rexpr.GetList().GetItems()
		lo, err := q.expr(bounds[0])
		if err != nil {
			return nil, err
		}
		hi, err := q.expr(bounds[1])
		if err != nil {
			return nil, err
		}
		var e Expr = &Binary{Op: "AND", L: &Binary{Op: ">=", L: l, R: lo, Pos: p}, R: &Binary{Op: "<=", L: l, R: hi, Pos: p}, Pos: p}
		if a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN {
			e = &Unary{Op: "NOT", X: e, Pos: p}
		}
		return e, nil
	case pg.A_Expr_Kind_AEXPR_IN:
		var e Expr
		for _, item := range a.Rexpr.GetList().GetItems() {
			v, err := q.expr(item)
			if err != nil {
				return nil, err
			}
			eq := &Binary{Op: "=", L: l, R: v, Pos: p}
			if e == nil {
				e = eq
			} else {
				e = &Binary{Op: "OR", L: e, R: eq, Pos: p}
			}
		}
		if op == "<>" {
			e = &Unary{Op: "NOT", X: e, Pos: p}
		}
		return e, nil
	}
	return nil, q.errorf(a.Location, "this form of operator %s is not supported", op)
}

func (q *query) caseExpr(c *pg.CaseExpr) (Expr, error) {
	out := &Case{Pos: q.pos(c.Location)}
	var subject Expr
	if c.Arg != nil {
		s, err := q.expr(c.Arg)
		if err != nil {
			return nil, err
		}
		subject = s
	}
	for _, w := range c.Args {
		cw := w.GetCaseWhen()
		cond, err := q.expr(cw.Expr)
		if err != nil {
			return nil, err
		}
		if subject != nil {
			cond = &Binary{Op: "=", L: subject, R: cond, Pos: q.pos(cw.Location)}
		}
		res, err := q.expr(cw.Result)
		if err != nil {
			return nil, err
		}
		out.Whens = append(out.Whens, When{Cond: cond, Result: res})
	}
	if c.Defresult != nil {
		e, err := q.expr(c.Defresult)
		if err != nil {
			return nil, err
		}
		out.Else = e
	}
	return out, nil
}

func (q *query) call(fc *pg.FuncCall) (Expr, error) {
	c := &Call{Name: funcName(fc), Star: fc.AggStar, Distinct: fc.AggDistinct, Over: fc.Over != nil, Pos: q.pos(fc.Location)}
	if len(fc.AggOrder) > 0 {
		return nil, q.errorf(fc.Location, "%s(… ORDER BY …) is not supported", c.Name)
	}
	for _, a := range fc.Args {
		e, err := q.expr(a)
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, e)
	}
	if fc.AggFilter != nil {
		f, err := q.expr(fc.AggFilter)
		if err != nil {
			return nil, err
		}
		c.Filter = f
	}
	if fc.Over != nil {
		w, err := q.over(fc.Over, fc.Location)
		if err != nil {
			return nil, err
		}
		c.Window = w
	}
	return c, nil
}

// over reads an OVER clause: PARTITION BY and ORDER BY, with the default
// frame and nulls order.
func (q *query) over(wd *pg.WindowDef, loc int32) (*Over, error) {
	if wd.Refname != "" || wd.Name != "" {
		return nil, q.errorf(loc, "named windows (OVER %s) are not supported: write the OVER clause out", wd.Refname+wd.Name)
	}
	o := &Over{Pos: q.pos(loc)}
	if wd.FrameOptions&frameOptionNonDefault != 0 {
		f, err := q.frame(wd, loc)
		if err != nil {
			return nil, err
		}
		o.Frame = f
	}
	for _, n := range wd.PartitionClause {
		e, err := q.expr(n)
		if err != nil {
			return nil, err
		}
		o.PartitionBy = append(o.PartitionBy, e)
	}
	for _, n := range wd.OrderClause {
		sb := n.GetSortBy()
		if sb == nil {
			return nil, q.errorf(loc, "unsupported ORDER BY item")
		}
		if sb.SortbyNulls != pg.SortByNulls_SORTBY_NULLS_DEFAULT {
			return nil, q.errorf(sb.Location, "NULLS FIRST and NULLS LAST are not supported: NULLs sort last ascending, first descending")
		}
		if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
			return nil, q.errorf(sb.Location, "ORDER BY … USING is not supported")
		}
		e, err := q.expr(sb.Node)
		if err != nil {
			return nil, err
		}
		o.OrderBy = append(o.OrderBy, OrderItem{Expr: e, Desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC, Pos: e.At()})
	}
	return o, nil
}

// The frame options of PostgreSQL's nodes/parsenodes.h (FRAMEOPTION_…)
// that the dialect reads: a frame named, its mode, and its bounds.
const (
	frameOptionNonDefault           = 0x00001
	frameOptionRows                 = 0x00004
	frameOptionStartOffsetPreceding = 0x00800
	frameOptionEndCurrentRow        = 0x00400
	// frameOptionExclusions are EXCLUDE CURRENT ROW, GROUP and TIES.
	frameOptionExclusions = 0x08000 | 0x10000 | 0x20000
)

// frame reads a window's frame: ROWS BETWEEN n PRECEDING AND CURRENT ROW,
// or ROWS n PRECEDING, with n a whole number.
func (q *query) frame(wd *pg.WindowDef, loc int32) (*Frame, error) {
	const want = "ROWS BETWEEN n PRECEDING AND CURRENT ROW"
	opts := wd.FrameOptions
	switch {
	case opts&frameOptionRows == 0:
		return nil, q.errorf(loc, "RANGE and GROUPS frames are not supported: the frame is %s", want)
	case opts&frameOptionExclusions != 0:
		return nil, q.errorf(loc, "EXCLUDE in a frame is not supported: the frame is %s", want)
	case opts&frameOptionStartOffsetPreceding == 0 || opts&frameOptionEndCurrentRow == 0 || wd.EndOffset != nil:
		return nil, q.errorf(loc, "this frame is not supported: the frame is %s (UNBOUNDED and FOLLOWING bounds are not)", want)
	}
	c := wd.StartOffset.GetAConst()
	if c == nil || c.GetIval() == nil {
		return nil, q.errorf(loc, "the frame's n PRECEDING takes a whole number: %s", want)
	}
	n := int64(c.GetIval().Ival)
	if n < 0 {
		return nil, q.errorf(c.Location, "%d PRECEDING: the frame's n is not negative", n)
	}
	return &Frame{Preceding: n, Pos: q.pos(c.Location)}, nil
}

// parseInterval reads an interval's value: a number of unit (seconds when
// unit is ""), or "n unit" (e.g. '5 seconds', '1.5 minutes').
func parseInterval(v, unit string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if f := strings.Fields(v); len(f) == 2 && unit == "" {
		v, unit = f[0], strings.ToLower(f[1])
	}
	per := time.Second
	if unit != "" {
		u, ok := intervalUnits[unit]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q (known: millisecond, second, minute, hour, day)", unit)
		}
		per = u
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	d := n * float64(per)
	if d != float64(time.Duration(d)) {
		return 0, fmt.Errorf("%s %s is not a whole number of nanoseconds", v, unit)
	}
	return time.Duration(d), nil
}
