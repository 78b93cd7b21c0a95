package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/sql"
)

// This file translates SQL expressions into the expression language of
// filter and map (package expression), keeping SQL's meaning:
//
//   - NULL: an operator or function with a NULL operand gives NULL, AND and OR
//     follow three-valued logic, and a condition (WHERE, HAVING, WHEN, a join
//     filter) keeps a row only when it is true. Guards are written only where
//     an operand may be NULL: columns of datagen and nexmark tables (but
//     channel and url) never are, so their expressions stay plain.
//   - Types: the kind of every subexpression is inferred where it can be, so
//     that a construct whose meaning depends on it (integer division, CAST to
//     BIGINT, which rounds a float, ||) is translated right or refused.

// colType is what is known of a column: its kind (row.Null: unknown) and
// whether it is never NULL.
type colType struct {
	kind    row.Kind
	notNull bool
}

// tx is a translated expression: its code, whether its value may be NULL,
// and its kind (row.Null: unknown).
type tx struct {
	code string
	null bool
	kind row.Kind
}

// translator writes SQL expressions over a relation's columns, or past a
// window over its key, window bounds and aggregates.
type translator struct {
	p       *planner
	rel     *relation
	relName string
	window  *windowPlan
	// resolve, when set, names a column's field (past a join).
	resolve func(*sql.Column) (string, error)
	// vars counts the variables guarded made.
	vars int
}

// hasAggregate says whether e calls an aggregate.
func (t *translator) hasAggregate(e sql.Expr) bool {
	found := false
	walk(e, func(x sql.Expr) bool {
		if c, ok := x.(*sql.Call); ok && slices.Contains(aggregateFuncs, c.Name) {
			found = true
		}
		return !found
	})
	return found
}

// identifier matches the names the expression language reads directly.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exprName is a field reference in the expression language.
func exprName(n string) string {
	if identifier.MatchString(n) && !slices.Contains([]string{"and", "or", "not", "in", "nil", "true", "false", "matches", "contains", "let"}, n) {
		return n
	}
	return "$env[" + strconv.Quote(n) + "]"
}

// cond translates e as a condition: true keeps the row; false and NULL do
// not.
func (t *translator) cond(e sql.Expr) (string, error) {
	x, err := t.tx(e)
	if err != nil {
		return "", err
	}
	if x.kind != row.Bool && x.kind != row.Null {
		return "", t.p.errorf(e.At(), "a condition must be a boolean, not a %s", x.kind)
	}
	if x.null {
		return "((" + x.code + ") == true)", nil
	}
	return x.code, nil
}

// guarded returns the code build makes of operands, NULL when any of the
// nullable ones is. A nullable operand that is not a plain name or constant
// is evaluated once, into a variable (let) that both the test and build
// read: nested guards do not repeat their operands, whose text would
// otherwise double at each level.
func (t *translator) guarded(build func() string, operands ...*tx) string {
	var lets, tests []string
	for _, o := range operands {
		if !o.null {
			continue
		}
		if !plainCode(o.code) {
			t.vars++
			v := fmt.Sprintf("_sql_v%d", t.vars)
			lets = append(lets, "let "+v+" = "+o.code+"; ")
			o.code = v
		}
		tests = append(tests, "("+o.code+") == nil")
	}
	code := build()
	if len(tests) > 0 {
		code = "((" + strings.Join(tests, " || ") + ") ? nil : " + code + ")"
	}
	if len(lets) > 0 {
		code = "(" + strings.Join(lets, "") + code + ")"
	}
	return code
}

// plainCode says whether code is a name, $env[…] or a constant: cheap to
// evaluate twice.
func plainCode(code string) bool {
	return identifier.MatchString(code) || code == "nil" ||
		strings.HasPrefix(code, "$env[") && strings.Count(code, "]") == 1 && strings.HasSuffix(code, "]")
}

func (t *translator) tx(e sql.Expr) (tx, error) {
	switch x := e.(type) {
	case *sql.Column:
		return t.column(x)
	case *sql.Literal:
		switch v := x.Value.(type) {
		case nil:
			return tx{code: "nil", null: true}, nil
		case int64:
			return tx{code: strconv.FormatInt(v, 10), kind: row.Int}, nil
		case float64:
			s := strconv.FormatFloat(v, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eE") {
				s += ".0"
			}
			return tx{code: s, kind: row.Float}, nil
		case string:
			return tx{code: strconv.Quote(v), kind: row.String}, nil
		case bool:
			return tx{code: strconv.FormatBool(v), kind: row.Bool}, nil
		}
	case *sql.Interval:
		return tx{code: "duration(" + strconv.Quote(x.D.String()) + ")"}, nil
	case *sql.Unary:
		a, err := t.tx(x.X)
		if err != nil {
			return tx{}, err
		}
		if x.Op == "NOT" {
			return tx{code: t.guarded(func() string { return "(not (" + a.code + "))" }, &a), null: a.null, kind: row.Bool}, nil
		}
		return tx{code: t.guarded(func() string { return "(-(" + a.code + "))" }, &a), null: a.null, kind: a.kind}, nil
	case *sql.IsNull:
		a, err := t.tx(x.X)
		if err != nil {
			return tx{}, err
		}
		op := "=="
		if x.Not {
			op = "!="
		}
		return tx{code: "((" + a.code + ") " + op + " nil)", kind: row.Bool}, nil
	case *sql.Binary:
		return t.binary(x)
	case *sql.Case:
		out := tx{code: "nil", null: true}
		if x.Else != nil {
			var err error
			if out, err = t.tx(x.Else); err != nil {
				return tx{}, err
			}
		}
		for i := len(x.Whens) - 1; i >= 0; i-- {
			c, err := t.cond(x.Whens[i].Cond)
			if err != nil {
				return tx{}, err
			}
			r, err := t.tx(x.Whens[i].Result)
			if err != nil {
				return tx{}, err
			}
			kind := r.kind
			if kind == row.Null {
				kind = out.kind
			}
			out = tx{code: "((" + c + ") ? (" + r.code + ") : (" + out.code + "))", null: r.null || out.null, kind: kind}
		}
		return out, nil
	case *sql.Cast:
		return t.cast(x)
	case *sql.Call:
		return t.call(x)
	case *sql.Subscript:
		return t.subscript(x)
	}
	return tx{}, t.p.errorf(e.At(), "unsupported expression")
}

// column translates a column reference.
func (t *translator) column(x *sql.Column) (tx, error) {
	if t.resolve != nil {
		n, err := t.resolve(x)
		if err != nil {
			return tx{}, err
		}
		ct := t.rel.types[n]
		return tx{code: exprName(n), null: !ct.notNull, kind: ct.kind}, nil
	}
	if x.Table != "" && x.Table != t.relName {
		return tx{}, t.p.errorf(x.Pos, "%s.%s: the query reads %s, not %s", x.Table, x.Name, t.relName, x.Table)
	}
	if t.window != nil {
		switch {
		case !t.window.updating && (x.Name == "window_start" || x.Name == "window_end"):
			return tx{code: x.Name, kind: row.Time}, nil
		}
		if ct, ok := t.window.keyTypes[x.Name]; ok {
			return tx{code: exprName(x.Name), null: !ct.notNull, kind: ct.kind}, nil
		}
		return tx{}, t.p.errorf(x.Pos, "column %s must be in GROUP BY or inside an aggregate", x.Name)
	}
	if x.Name == t.rel.procCol && x.Name != "" {
		return tx{code: "now()", kind: row.Time}, nil // the processing time
	}
	if x.Name == "event_time" && !slices.Contains(t.rel.columns, x.Name) {
		return tx{code: "event_time", kind: row.Time}, nil // the record's event time
	}
	if !slices.Contains(t.rel.columns, x.Name) {
		return tx{}, t.p.errorf(x.Pos, "%s has no column %s (columns: %s)", t.relName, x.Name, strings.Join(t.rel.columns, ", "))
	}
	ct := t.rel.types[x.Name]
	return tx{code: exprName(x.Name), null: !ct.notNull, kind: ct.kind}, nil
}

// sqlOps are the binary operators with the same meaning in the expression
// language (on operands of the right kinds), by their SQL spelling.
var sqlOps = map[string]string{"+": "+", "-": "-", "*": "*", "%": "%", "=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func numeric(k row.Kind) bool { return k == row.Int || k == row.Float }

func (t *translator) binary(x *sql.Binary) (tx, error) {
	a, err := t.tx(x.L)
	if err != nil {
		return tx{}, err
	}
	if x.Op == "LIKE" {
		lit, ok := x.R.(*sql.Literal)
		var pat string
		if ok {
			pat, ok = lit.Value.(string)
		}
		if !ok {
			return tx{}, t.p.errorf(x.Pos, "LIKE takes a constant pattern (without ESCAPE: a backslash escapes)")
		}
		return tx{code: t.guarded(func() string { return "((" + a.code + ") matches " + strconv.Quote(likeRegexp(pat)) + ")" }, &a), null: a.null, kind: row.Bool}, nil
	}
	b, err := t.tx(x.R)
	if err != nil {
		return tx{}, err
	}
	switch x.Op {
	case "AND", "OR":
		if !a.null && !b.null {
			return tx{code: "((" + a.code + ") " + strings.ToLower(x.Op) + " (" + b.code + "))", kind: row.Bool}, nil
		}
		// Three-valued: FALSE AND NULL is FALSE, TRUE OR NULL is TRUE.
		decisive, other := "false", "true"
		if x.Op == "OR" {
			decisive, other = "true", "false"
		}
		var lets string
		for _, o := range []*tx{&a, &b} { // each evaluated once
			if !plainCode(o.code) {
				t.vars++
				v := fmt.Sprintf("_sql_v%d", t.vars)
				lets += "let " + v + " = " + o.code + "; "
				o.code = v
			}
		}
		code := "(" + lets + "((" + a.code + ") == " + decisive + " || (" + b.code + ") == " + decisive + ") ? " + decisive +
			" : (((" + a.code + ") == nil || (" + b.code + ") == nil) ? nil : " + other + "))"
		return tx{code: code, null: true, kind: row.Bool}, nil
	case "||":
		if a.kind != row.String || b.kind != row.String {
			return tx{}, t.p.errorf(x.Pos, "|| joins text: CAST the other side to VARCHAR")
		}
		null := a.null || b.null
		return tx{code: t.guarded(func() string { return "((" + a.code + ") + (" + b.code + "))" }, &a, &b), null: null, kind: row.String}, nil
	case "/":
		// The expression language's / always divides as floats; SQL's
		// divides integers with a truncated result.
		if a.kind != row.Float && b.kind != row.Float {
			return tx{}, t.p.errorf(x.Pos, "division: write one side as a real number (CAST(x AS DOUBLE PRECISION), or a constant such as 2.0); integer division is not supported yet")
		}
		null := a.null || b.null
		return tx{code: t.guarded(func() string { return "((" + a.code + ") / (" + b.code + "))" }, &a, &b), null: null, kind: row.Float}, nil
	}
	op, ok := sqlOps[x.Op]
	if !ok {
		return tx{}, t.p.errorf(x.Pos, "operator %s is not supported", x.Op)
	}
	kind := row.Bool
	switch x.Op {
	case "+", "-", "*", "%":
		switch {
		case a.kind == row.Int && b.kind == row.Int:
			kind = row.Int
		case numeric(a.kind) && numeric(b.kind):
			kind = row.Float
		case a.kind == row.Time && (x.Op == "+" || x.Op == "-") && b.kind == row.Null:
			kind = row.Time // time ± interval
		default:
			kind = row.Null
		}
	}
	null := a.null || b.null
	return tx{code: t.guarded(func() string { return "((" + a.code + ") " + op + " (" + b.code + "))" }, &a, &b), null: null, kind: kind}, nil
}

// likeRegexp turns a LIKE pattern into an anchored regular expression: %
// is any text, _ any one character, and a backslash makes the character
// after it literal (PostgreSQL's default escape).
func likeRegexp(pat string) string {
	var b strings.Builder
	b.WriteString("(?s)^")
	escaped := false
	for _, r := range pat {
		switch {
		case escaped:
			b.WriteString(regexp.QuoteMeta(string(r)))
			escaped = false
		case r == '\\':
			escaped = true
		case r == '%':
			b.WriteString(".*")
		case r == '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if escaped { // a trailing backslash stands for itself
		b.WriteString(regexp.QuoteMeta("\\"))
	}
	b.WriteString("$")
	return b.String()
}

// castKinds are the SQL types a CAST may name, by the kind they make.
var castKinds = map[string]row.Kind{"bigint": row.Int, "int": row.Int, "integer": row.Int, "int8": row.Int, "int4": row.Int,
	"double precision": row.Float, "float8": row.Float, "float": row.Float, "real": row.Float, "numeric": row.Float,
	"varchar": row.String, "text": row.String, "string": row.String}

func (t *translator) cast(x *sql.Cast) (tx, error) {
	a, err := t.tx(x.X)
	if err != nil {
		return tx{}, err
	}
	to, ok := castKinds[x.Type]
	if !ok {
		return tx{}, t.p.errorf(x.Pos, "CAST to %s is not supported (known: BIGINT, DOUBLE PRECISION, VARCHAR)", strings.ToUpper(x.Type))
	}
	var fn string
	switch {
	case to == row.Int && a.kind == row.Float:
		fn = "int(round(%s))" // PostgreSQL rounds, half away from zero
	case to == row.Int && (a.kind == row.Int || a.kind == row.String):
		fn = "int(%s)"
	case to == row.Float && (numeric(a.kind) || a.kind == row.String):
		fn = "float(%s)"
	case to == row.String && (numeric(a.kind) || a.kind == row.String):
		fn = "string(%s)"
	default:
		what := a.kind.String()
		if a.kind == row.Null {
			what = "an expression of unknown type"
		}
		return tx{}, t.p.errorf(x.Pos, "CAST of %s to %s is not supported", what, strings.ToUpper(x.Type))
	}
	null := a.null
	return tx{code: t.guarded(func() string { return fmt.Sprintf(fn, a.code) }, &a), null: null, kind: to}, nil
}

// extractFields are the fields EXTRACT takes, as methods of a time (UTC).
var extractFields = map[string]string{"year": "Year()", "month": "Month()", "day": "Day()", "hour": "Hour()",
	"minute": "Minute()", "second": "", "epoch": ""}

// charPatterns are the to_char patterns translated, longest first, with
// their Go layout.
var charPatterns = []struct{ pat, layout string }{
	{"YYYY", "2006"}, {"HH24", "15"}, {"MM", "01"}, {"DD", "02"}, {"MI", "04"}, {"SS", "05"}, {"MS", "000"}, {"US", "000000"},
}

// goLayout translates a to_char pattern of charPatterns and the separators
// - : / . , space and T into a Go time layout; any other letter is refused
// rather than written as it is.
func goLayout(pat string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(pat); {
		matched := false
		for _, p := range charPatterns {
			if strings.HasPrefix(pat[i:], p.pat) {
				if (p.pat == "MS" || p.pat == "US") && (i == 0 || (pat[i-1] != '.' && pat[i-1] != ',')) {
					// Go writes fractional seconds only after . or ,.
					return "", fmt.Errorf("%s must follow . or , (SS.MS)", p.pat)
				}
				b.WriteString(p.layout)
				i += len(p.pat)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		switch c := pat[i]; {
		case strings.IndexByte("-:/., T", c) >= 0:
			b.WriteByte(c)
			i++
		default:
			return "", fmt.Errorf("%q at %d is not supported (known: YYYY, MM, DD, HH24, MI, SS, MS, US and - : / . , space T)", pat[i:], i+1)
		}
	}
	return b.String(), nil
}

// scalarFuncs are the SQL functions translated: their name in the
// expression language and the kind of their result (row.Null: the
// argument's).
var scalarFuncs = map[string]struct {
	fn   string
	kind row.Kind
}{
	"lower": {"lower", row.String}, "upper": {"upper", row.String}, "abs": {"abs", row.Null},
	"length": {"len", row.Int}, "char_length": {"len", row.Int},
}

// nullConstant says whether one of args is the constant NULL: a strict
// function of it is NULL (and expr's checker refuses nil where a typed
// function takes a string or an int).
func nullConstant(args ...tx) bool {
	return slices.ContainsFunc(args, func(a tx) bool { return a.code == "nil" })
}

// stringish and intish say whether an argument is a string (an int), or a
// NULL constant, whose kind is not known.
func stringish(a tx) bool { return a.kind == row.String || a.kind == row.Null }
func intish(a tx) bool    { return a.kind == row.Int || a.kind == row.Null }

// subscript translates (regexp_match(s, pattern))[n], the one array the
// dialect has: group n of pattern's first match, NULL without one. The
// pattern is a constant, compiled when the script is loaded.
func (t *translator) subscript(x *sql.Subscript) (tx, error) {
	c, ok := x.X.(*sql.Call)
	if !ok || c.Name != "regexp_match" {
		return tx{}, t.p.errorf(x.Pos, "subscripts apply only to regexp_match's result: (regexp_match(s, pattern))[n]")
	}
	if len(c.Args) == 3 {
		return tx{}, t.p.errorf(c.Args[2].At(), "regexp_match: flags are not supported; write them into the pattern, e.g. '(?i)…' for case-insensitive")
	}
	if len(c.Args) != 2 {
		return tx{}, t.p.errorf(c.Pos, "regexp_match takes a string and a constant pattern")
	}
	lit, ok := c.Args[1].(*sql.Literal)
	var pat string
	if ok {
		pat, ok = lit.Value.(string)
	}
	if !ok {
		return tx{}, t.p.errorf(c.Args[1].At(), "regexp_match's pattern is a constant string")
	}
	goPat, err := pgPattern(pat)
	if err != nil {
		return tx{}, t.p.errorf(c.Args[1].At(), "regexp_match pattern %q: %v", pat, err)
	}
	re := regexp.MustCompile(goPat)
	if x.Index < 1 || x.Index > int64(max(1, re.NumSubexp())) {
		return tx{}, t.p.errorf(x.Pos, "regexp_match pattern %q has %d groups: [%d] is always NULL", pat, re.NumSubexp(), x.Index)
	}
	a, err := t.tx(c.Args[0])
	if err != nil {
		return tx{}, err
	}
	if !stringish(a) {
		return tx{}, t.p.errorf(c.Args[0].At(), "regexp_match takes a string, not %s", a.kind)
	}
	if nullConstant(a) {
		return tx{code: "nil", null: true, kind: row.String}, nil
	}
	return tx{code: t.guarded(func() string {
		return "regexpGroup(" + a.code + ", " + strconv.Quote(goPat) + ", " + strconv.FormatInt(x.Index, 10) + ", true)"
	}, &a), null: true, kind: row.String}, nil
}

func (t *translator) call(c *sql.Call) (tx, error) {
	if slices.Contains(aggregateFuncs, c.Name) {
		if t.window == nil {
			return tx{}, t.p.errorf(c.Pos, "aggregate %s outside a windowed query", c.Name)
		}
		a, ok := t.window.lookup(c)
		if !ok {
			return tx{}, t.p.errorf(c.Pos, "aggregate %s is not computed by the window", c.Name)
		}
		return tx{code: a.field, kind: a.kind, null: a.null}, nil
	}
	if c.Over || c.Filter != nil || c.Star || c.Distinct {
		return tx{}, t.p.errorf(c.Pos, "%s: OVER, FILTER, * and DISTINCT apply to aggregates", c.Name)
	}
	var args []tx
	for _, a := range c.Args {
		x, err := t.tx(a)
		if err != nil {
			return tx{}, err
		}
		args = append(args, x)
	}
	switch c.Name {
	case "now", "proctime":
		// Processing time: the plan reports it as nondeterministic.
		if len(args) != 0 {
			return tx{}, t.p.errorf(c.Pos, "%s() takes no argument", c.Name)
		}
		return tx{code: "now()", kind: row.Time}, nil
	case "random":
		return tx{}, t.p.errorf(c.Pos, "random() is not supported: its values would change when records are replayed after a recovery, so output could not be exact; derive a value from a column instead (e.g. hash a key)")
	case "coalesce":
		if len(args) == 0 {
			return tx{}, t.p.errorf(c.Pos, "coalesce needs an argument")
		}
		out := args[len(args)-1]
		for i := len(args) - 2; i >= 0; i-- {
			kind := args[i].kind
			if kind == row.Null {
				kind = out.kind
			}
			out = tx{code: "((" + args[i].code + ") ?? (" + out.code + "))", null: args[i].null && out.null, kind: kind}
		}
		return out, nil
	case "to_char":
		if len(c.Args) != 2 {
			return tx{}, t.p.errorf(c.Pos, "to_char takes a timestamp and a constant pattern, e.g. to_char(ts, 'YYYY-MM-DD')")
		}
		lit, ok := c.Args[1].(*sql.Literal)
		var pat string
		if ok {
			pat, ok = lit.Value.(string)
		}
		if len(args) != 2 || args[0].kind != row.Time || !ok {
			return tx{}, t.p.errorf(c.Pos, "to_char takes a timestamp and a constant pattern, e.g. to_char(ts, 'YYYY-MM-DD')")
		}
		layout, err := goLayout(pat)
		if err != nil {
			return tx{}, t.p.errorf(c.Args[1].At(), "to_char pattern %q: %v", pat, err)
		}
		a := args[0]
		null := a.null
		return tx{code: t.guarded(func() string { return "((" + a.code + ").Format(" + strconv.Quote(layout) + "))" }, &a), null: null, kind: row.String}, nil
	case "date_part", "extract":
		if len(c.Args) != 2 {
			return tx{}, t.p.errorf(c.Pos, "EXTRACT takes a field (year, month, day, hour, minute, second, epoch) and a timestamp")
		}
		lit, ok := c.Args[0].(*sql.Literal)
		var field string
		if ok {
			field, ok = lit.Value.(string)
		}
		field = strings.ToLower(field)
		method, known := extractFields[field]
		if len(args) != 2 || args[1].kind != row.Time || !ok || !known {
			return tx{}, t.p.errorf(c.Pos, "EXTRACT takes a field (year, month, day, hour, minute, second, epoch) and a timestamp")
		}
		a := args[1]
		null := a.null
		kind, build := row.Int, func() string { return "((" + a.code + ")." + method + ")" }
		switch field {
		case "second": // with its fraction, as PostgreSQL gives it
			kind, build = row.Float, func() string {
				return "(float((" + a.code + ").Second()) + float((" + a.code + ").Nanosecond()) / 1e9)"
			}
		case "epoch":
			kind, build = row.Float, func() string { return "(float((" + a.code + ").Unix()) + float((" + a.code + ").Nanosecond()) / 1e9)" }
		}
		return tx{code: t.guarded(build, &a), null: null, kind: kind}, nil
	case "regexp_match":
		return tx{}, t.p.errorf(c.Pos, "regexp_match returns an array, which no column can hold: take one group with (regexp_match(s, pattern))[n]")
	case "mod":
		if len(c.Args) != 2 {
			return tx{}, t.p.errorf(c.Pos, "mod takes two arguments: mod(a, b) is a %% b")
		}
		return t.binary(&sql.Binary{Op: "%", L: c.Args[0], R: c.Args[1], Pos: c.Pos})
	case "split_part":
		if len(args) != 3 || !stringish(args[0]) || !stringish(args[1]) || !intish(args[2]) {
			return tx{}, t.p.errorf(c.Pos, "split_part takes a string, a delimiter and a field number, e.g. split_part(url, '/', 4)")
		}
		if lit, ok := c.Args[2].(*sql.Literal); ok && lit.Value == int64(0) {
			return tx{}, t.p.errorf(c.Args[2].At(), "split_part: field position must not be zero")
		}
		if nullConstant(args...) {
			return tx{code: "nil", null: true, kind: row.String}, nil
		}
		a, d, n := args[0], args[1], args[2]
		return tx{code: t.guarded(func() string { return "splitPart(" + a.code + ", " + d.code + ", " + n.code + ")" }, &a, &d, &n),
			null: a.null || d.null || n.null, kind: row.String}, nil
	case "replace":
		if len(args) != 3 || !stringish(args[0]) || !stringish(args[1]) || !stringish(args[2]) {
			return tx{}, t.p.errorf(c.Pos, "replace takes three strings: replace(s, from, to)")
		}
		if nullConstant(args...) {
			return tx{code: "nil", null: true, kind: row.String}, nil
		}
		a, from, to := args[0], args[1], args[2]
		// PostgreSQL leaves s as it is for an empty from, where Go's
		// ReplaceAll would insert to between every character.
		return tx{code: t.guarded(func() string {
			if plainCode(from.code) {
				return "((" + from.code + ") == \"\" ? (" + a.code + ") : replace(" + a.code + ", " + from.code + ", " + to.code + "))"
			}
			t.vars++
			v := fmt.Sprintf("_sql_v%d", t.vars)
			return "(let " + v + " = " + from.code + "; " + v + " == \"\" ? (" + a.code + ") : replace(" + a.code + ", " + v + ", " + to.code + "))"
		}, &a, &from, &to), null: a.null || from.null || to.null, kind: row.String}, nil
	case "btrim", "trim":
		if len(args) != 1 {
			return tx{}, t.p.errorf(c.Pos, "trim takes one argument (trimming other characters is not supported)")
		}
		// PostgreSQL trims spaces only.
		a := args[0]
		null := a.null
		return tx{code: t.guarded(func() string { return "trim(" + a.code + ", \" \")" }, &a), null: null, kind: row.String}, nil
	}
	f, ok := scalarFuncs[c.Name]
	if !ok {
		known := slices.Sorted(func(yield func(string) bool) {
			for k := range scalarFuncs {
				if !yield(k) {
					return
				}
			}
		})
		return tx{}, t.p.errorf(c.Pos, "function %s is not supported (known: %s, coalesce, now, trim, mod, replace, split_part, regexp_match; aggregates: %s)", c.Name, strings.Join(known, ", "), strings.Join(aggregateFuncs, ", "))
	}
	if len(args) != 1 {
		return tx{}, t.p.errorf(c.Pos, "%s takes one argument", c.Name)
	}
	kind := f.kind
	if kind == row.Null {
		kind = args[0].kind
	}
	a := args[0]
	null := a.null
	return tx{code: t.guarded(func() string { return f.fn + "(" + a.code + ")" }, &a), null: null, kind: kind}, nil
}
