package sql

import (
	"strings"
	"time"
)

// This file parses the statements PostgreSQL's grammar does not have:
// CREATE SOURCE, CREATE SINK, CREATE VIEW's head, SET. The queries inside
// them go to parseSelect (query.go).

// Parse parses a SQL script; file names it in errors.
func Parse(file, text string) (*Script, error) {
	// A UTF-8 byte order mark, which some editors write, is not text, and
	// editors count columns after it.
	text = strings.TrimPrefix(text, "\ufeff")
	src := newSource(file, text)
	stmts, err := src.split()
	if err != nil {
		return nil, err
	}
	out := &Script{File: file}
	for _, st := range stmts {
		s, err := src.statement(st)
		if err != nil {
			return nil, err
		}
		out.Statements = append(out.Statements, s)
	}
	return out, nil
}

// tokKind is a token's kind.
type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokName           // a name: lower-cased unless it was quoted
	tokString         // a '…' string, unquoted
	tokNumber
	tokPunct // one of ( ) , = . - + * ::
)

type token struct {
	kind tokKind
	text string
	off  int // byte offset in the script
	// quoted says a name was written in double quotes (its case is kept,
	// and it is never a keyword).
	quoted bool
	// raw is a name as written, before lower-casing.
	raw string
}

// is says whether t is the keyword kw (lower case).
func (t token) is(kw string) bool { return t.kind == tokName && !t.quoted && t.text == kw }

// lexer reads the tokens of one statement.
type lexer struct {
	src  *source
	text string // the statement
	base int    // the statement's offset in the script
	toks []token
	n    int // next token
}

func (s *source) lex(st statement) (*lexer, error) {
	l := &lexer{src: s, text: st.text, base: st.start}
	t := st.text
	for i := 0; i < len(t); {
		c := t[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(t) && t[i+1] == '-':
			for i < len(t) && t[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(t) && t[i+1] == '*':
			j := strings.Index(t[i+2:], "*/")
			i += j + 4
		case c == '\'' || c == '"':
			j := closeQuote(t, i)
			body := strings.ReplaceAll(t[i+1:j], string([]byte{c, c}), string(c))
			if c == '\'' {
				l.toks = append(l.toks, token{kind: tokString, text: body, off: st.start + i})
			} else {
				l.toks = append(l.toks, token{kind: tokName, text: body, off: st.start + i, quoted: true})
			}
			i = j + 1
		case isNameStart(c):
			j := i
			for j < len(t) && isNamePart(t[j]) {
				j++
			}
			l.toks = append(l.toks, token{kind: tokName, text: strings.ToLower(t[i:j]), raw: t[i:j], off: st.start + i})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(t) && (t[j] >= '0' && t[j] <= '9' || t[j] == '.' || t[j] == '_') {
				j++
			}
			l.toks = append(l.toks, token{kind: tokNumber, text: t[i:j], off: st.start + i})
			i = j
		case c == ':' && i+1 < len(t) && t[i+1] == ':':
			l.toks = append(l.toks, token{kind: tokPunct, text: "::", off: st.start + i})
			i += 2
		default:
			l.toks = append(l.toks, token{kind: tokPunct, text: string(c), off: st.start + i})
			i++
		}
	}
	l.toks = append(l.toks, token{kind: tokEOF, off: st.start + len(t)})
	return l, nil
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNamePart(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' || c == '$' }

func (l *lexer) peek() token { return l.toks[l.n] }
func (l *lexer) next() token {
	t := l.toks[l.n]
	if t.kind != tokEOF {
		l.n++
	}
	return t
}

// errorf returns an Error at token t.
func (l *lexer) errorf(t token, format string, args ...any) *Error {
	return l.src.errorf(t.off, format, args...)
}

// describe renders a token for messages.
func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "the end of the statement"
	case tokString:
		return "'" + t.text + "'"
	}
	return `"` + t.text + `"`
}

// expect consumes keyword kw or fails.
func (l *lexer) expect(kw string, what string) error {
	if t := l.next(); !t.is(kw) && !(t.kind == tokPunct && t.text == kw) {
		return l.errorf(t, "%s: expected %s, found %s", what, strings.ToUpper(kw), describe(t))
	}
	return nil
}

// name consumes a name.
func (l *lexer) name(what string) (string, token, error) {
	t := l.next()
	if t.kind != tokName {
		return "", t, l.errorf(t, "expected %s, found %s", what, describe(t))
	}
	return t.text, t, nil
}

// statement parses one statement.
func (s *source) statement(st statement) (Statement, error) {
	l, err := s.lex(st)
	if err != nil {
		return nil, err
	}
	first := l.next()
	if first.is("explain") {
		return l.explain(first)
	}
	switch {
	case first.is("set"):
		return l.set(first)
	case first.is("create"):
		what := l.next()
		switch {
		case what.is("source") || what.is("table"):
			st, err := l.createSource(first)
			if cs, ok := st.(*CreateSource); ok {
				cs.Table = what.is("table")
			}
			return st, err
		case what.is("sink"):
			return l.createSink(first)
		case what.is("view") || what.is("materialized") && l.peek().is("view"):
			if what.is("materialized") {
				l.next()
			}
			return l.createView(first)
		}
		return nil, l.errorf(what, "CREATE %s is not a statement of this dialect (known: CREATE SOURCE, CREATE VIEW, CREATE SINK)", strings.ToUpper(what.text))
	}
	return nil, l.errorf(first, "%s does not start a statement of this dialect (known: SET, CREATE SOURCE, CREATE VIEW, CREATE SINK, EXPLAIN)", describe(first))
}

// explain parses the rest of EXPLAIN (CREATE VIEW … | CREATE SINK … |
// SELECT …).
func (l *lexer) explain(first token) (Statement, error) {
	e := &Explain{Pos: l.src.pos(first.off)}
	t := l.peek()
	switch {
	case t.is("select"):
		q, err := l.query(len(l.toks) - 1)
		if err != nil {
			return nil, err
		}
		e.Query = q
	case t.is("create"):
		l.next()
		what := l.next()
		var err error
		switch {
		case what.is("sink"):
			e.Statement, err = l.createSink(t)
		case what.is("view") || what.is("materialized") && l.peek().is("view"):
			if what.is("materialized") {
				l.next()
			}
			e.Statement, err = l.createView(t)
		default:
			return nil, l.errorf(what, "EXPLAIN CREATE %s: EXPLAIN takes CREATE VIEW, CREATE SINK or SELECT", strings.ToUpper(what.text))
		}
		if err != nil {
			return nil, err
		}
	default:
		return nil, l.errorf(t, "EXPLAIN %s: EXPLAIN takes CREATE VIEW, CREATE SINK or SELECT", describe(t))
	}
	return e, nil
}

// set parses SET name = value (name dotted, value a string, number or name).
func (l *lexer) set(first token) (Statement, error) {
	name, err := l.dotted("the setting's name")
	if err != nil {
		return nil, err
	}
	if t := l.next(); !(t.kind == tokPunct && t.text == "=") && !t.is("to") {
		return nil, l.errorf(t, "SET %s: expected = or TO, found %s", name, describe(t))
	}
	v := l.value()
	if v.kind != tokString && v.kind != tokNumber && v.kind != tokName {
		return nil, l.errorf(v, "SET %s: expected a value, found %s", name, describe(v))
	}
	if t := l.next(); t.kind != tokEOF {
		return nil, l.errorf(t, "SET %s: unexpected %s after the value", name, describe(t))
	}
	return &Set{Name: name, Value: v.text, Pos: l.src.pos(first.off)}, nil
}

// value reads an option's or setting's value: a string, a name, or a
// number with its sign.
func (l *lexer) value() token {
	t := l.next()
	if t.kind == tokPunct && (t.text == "-" || t.text == "+") && l.peek().kind == tokNumber {
		n := l.next()
		if t.text == "-" {
			n.text = "-" + n.text
		}
		n.off = t.off
		return n
	}
	return t
}

// dotted reads name{.name}.
func (l *lexer) dotted(what string) (string, error) {
	n, _, err := l.name(what)
	if err != nil {
		return "", err
	}
	for l.peek().kind == tokPunct && l.peek().text == "." {
		l.next()
		m, _, err := l.name(what)
		if err != nil {
			return "", err
		}
		n += "." + m
	}
	return n, nil
}

// createSource parses the rest of CREATE SOURCE.
func (l *lexer) createSource(first token) (Statement, error) {
	name, _, err := l.name("the source's name")
	if err != nil {
		return nil, err
	}
	cs := &CreateSource{Name: name, Pos: l.src.pos(first.off)}
	if t := l.peek(); t.kind == tokPunct && t.text == "(" {
		l.next()
		if err := l.columns(cs); err != nil {
			return nil, err
		}
	}
	if cs.Options, err = l.with("source " + name); err != nil {
		return nil, err
	}
	if t := l.peek(); t.is("format") {
		l.next()
		f, _, err := l.name("a format (PLAIN)")
		if err != nil {
			return nil, err
		}
		if f != "plain" {
			return nil, l.errorf(l.toks[l.n-1], "FORMAT %s is not supported (known: PLAIN): a change-data envelope read as plain rows would give wrong values", strings.ToUpper(f))
		}
		if err := l.expect("encode", "FORMAT "+strings.ToUpper(f)); err != nil {
			return nil, err
		}
		e, et, err := l.name("an encoding (JSON, CSV)")
		if err != nil {
			return nil, err
		}
		cs.Format, cs.Encode, cs.EncodePos = f, e, l.src.pos(et.off)
	}
	if t := l.next(); t.kind != tokEOF {
		return nil, l.errorf(t, "source %s: unexpected %s", name, describe(t))
	}
	return cs, nil
}

// columns parses the column list after its '(' up to its ')'.
func (l *lexer) columns(cs *CreateSource) error {
	for {
		t := l.peek()
		if t.is("primary") {
			// PRIMARY KEY (a, b)
			l.next()
			if err := l.expect("key", "PRIMARY"); err != nil {
				return err
			}
			if cs.PrimaryKey != nil {
				return l.errorf(t, "source %s: a second PRIMARY KEY", cs.Name)
			}
			cs.KeyPos = l.src.pos(t.off)
			if p := l.next(); p.kind != tokPunct || p.text != "(" {
				return l.errorf(p, "PRIMARY KEY: expected (, found %s", describe(p))
			}
			for {
				name, _, err := l.name("a key column")
				if err != nil {
					return err
				}
				cs.PrimaryKey = append(cs.PrimaryKey, name)
				if p := l.next(); p.kind == tokPunct && p.text == ")" {
					break
				} else if p.kind != tokPunct || p.text != "," {
					return l.errorf(p, "PRIMARY KEY: expected , or ), found %s", describe(p))
				}
			}
			cs.NotEnforced = l.notEnforced()
		} else if t.is("watermark") {
			l.next()
			w, err := l.watermark()
			if err != nil {
				return err
			}
			cs.Watermark = w
		} else {
			name, nt, err := l.name("a column name or WATERMARK FOR")
			if err != nil {
				return err
			}
			typ, err := l.typeName(name)
			if err != nil {
				return err
			}
			def := ColumnDef{Name: name, Type: typ, Pos: l.src.pos(nt.off)}
			if !nt.quoted && nt.raw != name {
				def.Written = nt.raw
			}
			if l.peek().is("as") {
				// A generated column: only AS PROCTIME(), processing time.
				l.next()
				f := l.next()
				if !f.is("proctime") || l.next().text != "(" || l.next().text != ")" {
					return l.errorf(f, "column %s: a generated column is AS PROCTIME() (processing time); other expressions belong in a query", name)
				}
				def.Proctime = true
			}
			if k := l.peek(); k.is("primary") {
				l.next()
				if err := l.expect("key", "PRIMARY"); err != nil {
					return err
				}
				if cs.PrimaryKey != nil {
					return l.errorf(k, "source %s: a second PRIMARY KEY", cs.Name)
				}
				cs.PrimaryKey, cs.KeyPos = []string{name}, l.src.pos(k.off)
				cs.NotEnforced = l.notEnforced()
			}
			cs.Columns = append(cs.Columns, def)
		}
		switch t := l.next(); {
		case t.kind == tokPunct && t.text == ",":
		case t.kind == tokPunct && t.text == ")":
			return nil
		default:
			return l.errorf(t, "source %s: expected , or ) in the column list, found %s", cs.Name, describe(t))
		}
	}
}

// notEnforced reads the NOT ENFORCED that may follow a PRIMARY KEY.
func (l *lexer) notEnforced() bool {
	if !l.peek().is("not") || l.n+1 >= len(l.toks) || !l.toks[l.n+1].is("enforced") {
		return false
	}
	l.next()
	l.next()
	return true
}

// typeName reads a column type: words (double precision, timestamp with
// time zone) and an optional (n[, m]); NOT NULL and NULL are accepted and
// ignored.
func (l *lexer) typeName(col string) (string, error) {
	var words []string
	for {
		t := l.peek()
		if t.kind != tokName || t.quoted || t.is("not") || t.is("null") || t.is("as") || t.is("primary") {
			break
		}
		l.next()
		words = append(words, t.text)
	}
	if len(words) == 0 {
		return "", l.errorf(l.peek(), "column %s: expected a type, found %s", col, describe(l.peek()))
	}
	if t := l.peek(); t.kind == tokPunct && t.text == "(" {
		for t := l.next(); !(t.kind == tokPunct && t.text == ")"); t = l.next() {
			if t.kind == tokEOF {
				return "", l.errorf(t, "column %s: unclosed (", col)
			}
		}
	}
	if l.peek().is("not") {
		l.next()
		if err := l.expect("null", "column "+col); err != nil {
			return "", err
		}
	} else if l.peek().is("null") {
		l.next()
	}
	return strings.Join(words, " "), nil
}

// watermark parses FOR col AS col - INTERVAL 'n' [unit] (or AS col alone,
// a delay of 0).
func (l *lexer) watermark() (*WatermarkDef, error) {
	if err := l.expect("for", "WATERMARK"); err != nil {
		return nil, err
	}
	col, ct, err := l.name("the event-time column")
	if err != nil {
		return nil, err
	}
	w := &WatermarkDef{Column: col, Pos: l.src.pos(ct.off)}
	if err := l.expect("as", "WATERMARK FOR "+col); err != nil {
		return nil, err
	}
	c2, c2t, err := l.name("the event-time column")
	if err != nil {
		return nil, err
	}
	if c2 != col {
		return nil, l.errorf(c2t, "WATERMARK FOR %s AS %s: the watermark must be %s minus an interval", col, c2, col)
	}
	if t := l.peek(); t.kind == tokPunct && t.text == "-" {
		l.next()
		if err := l.expect("interval", "WATERMARK FOR "+col+" AS "+col+" -"); err != nil {
			return nil, err
		}
		v := l.next()
		if v.kind != tokString && v.kind != tokNumber {
			return nil, l.errorf(v, "WATERMARK FOR %s: expected the interval's value, found %s", col, describe(v))
		}
		unit := ""
		if t := l.peek(); t.kind == tokName && !t.quoted {
			if _, ok := intervalUnits[t.text]; ok {
				unit = l.next().text
			}
		}
		d, err := parseInterval(v.text, unit)
		if err != nil {
			return nil, l.errorf(v, "WATERMARK FOR %s: %v", col, err)
		}
		if d < 0 {
			return nil, l.errorf(v, "WATERMARK FOR %s: the delay must not be negative", col)
		}
		w.Delay = d
	}
	return w, nil
}

// with parses WITH (key = value, …); keys are dotted names or strings.
func (l *lexer) with(what string) ([]Option, error) {
	if err := l.expect("with", what); err != nil {
		return nil, err
	}
	if err := l.expect("(", what+" WITH"); err != nil {
		return nil, err
	}
	var opts []Option
	for {
		kt := l.peek()
		var key string
		if kt.kind == tokString {
			key = l.next().text
		} else {
			k, err := l.dotted("an option name")
			if err != nil {
				return nil, err
			}
			key = k
		}
		if err := l.expect("=", what+" option "+key); err != nil {
			return nil, err
		}
		v := l.value()
		if v.kind != tokString && v.kind != tokNumber && v.kind != tokName {
			return nil, l.errorf(v, "%s option %s: expected a value, found %s", what, key, describe(v))
		}
		for _, o := range opts {
			if o.Key == key {
				return nil, l.errorf(kt, "%s: option %s is given twice", what, key)
			}
		}
		opts = append(opts, Option{Key: key, Value: v.text, Pos: l.src.pos(kt.off)})
		switch t := l.next(); {
		case t.kind == tokPunct && t.text == ",":
		case t.kind == tokPunct && t.text == ")":
			return opts, nil
		default:
			return nil, l.errorf(t, "%s WITH: expected , or ), found %s", what, describe(t))
		}
	}
}

// createView parses the rest of CREATE VIEW name AS query.
func (l *lexer) createView(first token) (Statement, error) {
	name, _, err := l.name("the view's name")
	if err != nil {
		return nil, err
	}
	if err := l.expect("as", "view "+name); err != nil {
		return nil, err
	}
	q, err := l.query(len(l.toks) - 1)
	if err != nil {
		return nil, err
	}
	return &CreateView{Name: name, Query: q, Pos: l.src.pos(first.off)}, nil
}

// createSink parses the rest of CREATE SINK name (FROM rel | AS query) WITH (…).
func (l *lexer) createSink(first token) (Statement, error) {
	name, _, err := l.name("the sink's name")
	if err != nil {
		return nil, err
	}
	cs := &CreateSink{Name: name, Pos: l.src.pos(first.off)}
	// The sink's WITH (…) is the last top-level WITH followed by '(': the
	// query before it cannot end with one.
	withAt := -1
	depth := 0
	for i := l.n; i < len(l.toks); i++ {
		t := l.toks[i]
		switch {
		case t.kind == tokPunct && t.text == "(":
			depth++
		case t.kind == tokPunct && t.text == ")":
			depth--
		case depth == 0 && t.is("with") && i+1 < len(l.toks) && l.toks[i+1].kind == tokPunct && l.toks[i+1].text == "(":
			withAt = i
		}
	}
	if withAt < 0 {
		return nil, l.errorf(l.toks[len(l.toks)-1], "sink %s: expected WITH (connector = …)", name)
	}
	switch t := l.next(); {
	case t.is("from"):
		rel, rt, err := l.name("the relation the sink writes")
		if err != nil {
			return nil, err
		}
		cs.From, cs.FromPos = rel, l.src.pos(rt.off)
		if l.n != withAt {
			return nil, l.errorf(l.peek(), "sink %s: expected WITH after FROM %s, found %s", name, rel, describe(l.peek()))
		}
	case t.is("as"):
		if cs.Query, err = l.query(withAt); err != nil {
			return nil, err
		}
		l.n = withAt
	default:
		return nil, l.errorf(t, "sink %s: expected FROM relation or AS SELECT …, found %s", name, describe(t))
	}
	if cs.Options, err = l.with("sink " + name); err != nil {
		return nil, err
	}
	if t := l.peek(); t.is("format") {
		// FORMAT PLAIN ENCODE JSON is what every sink writes (a file sink
		// may write Parquet: format = 'parquet' in WITH); nothing else.
		l.next()
		f, ft, err := l.name("a format (PLAIN)")
		if err != nil {
			return nil, err
		}
		if err := l.expect("encode", "FORMAT "+strings.ToUpper(f)); err != nil {
			return nil, err
		}
		e, _, err := l.name("an encoding (JSON)")
		if err != nil {
			return nil, err
		}
		if f != "plain" || e != "json" {
			return nil, l.errorf(ft, "sink %s: FORMAT %s ENCODE %s is not supported (known: PLAIN ENCODE JSON)", name, strings.ToUpper(f), strings.ToUpper(e))
		}
	}
	if t := l.next(); t.kind != tokEOF {
		return nil, l.errorf(t, "sink %s: unexpected %s", name, describe(t))
	}
	return cs, nil
}

// query parses the tokens from the next one up to token end (exclusive)
// as a SELECT.
func (l *lexer) query(end int) (*Select, error) {
	from, to := l.toks[l.n].off-l.base, l.toks[end].off-l.base
	if from >= to {
		return nil, l.errorf(l.toks[l.n], "expected a SELECT query")
	}
	return l.src.parseSelect(l.text[from:to], l.base+from)
}

// intervalUnits are the units an interval may name, with their length.
var intervalUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"second": time.Second, "seconds": time.Second, "minute": time.Minute, "minutes": time.Minute,
	"hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}
