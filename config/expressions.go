package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the expression transforms, filter and map: their YAML,
// the compilation of their expressions against the input's schema, and the
// operators that run them.

// Warning is a finding that does not stop a pipeline but that whoever runs
// it should know of, such as an expression whose result changes when records
// are replayed. It names the file, line and field as Error does.
type Warning struct {
	// File is the pipeline file as given to Load or Parse.
	File string
	// Line is the line the finding concerns, from 1.
	Line int
	// Field is the dotted path of the field, e.g. transforms.m.select.ts.
	Field string
	// Msg says what was found and why it matters.
	Msg string
}

// String formats the warning as file:line: field: message.
func (w Warning) String() string {
	return (&Error{File: w.File, Line: w.Line, Field: w.Field, Msg: w.Msg}).Error()
}

// compiled is an expression compiled from one YAML value.
type compiled struct {
	prog *expression.Program
	// file, node and field say where the expression is written.
	file  string
	node  *yaml.Node
	field string
}

// locate places a position in the expression of YAML value n (line and
// column from 1 in the expression's text, 0 when unknown) in the file: its
// file line, and msg prefixed with the position left to give within that
// line. A literal block scalar (|) keeps the expression's lines, so its line
// L is the file line n.Line+L; the other styles fold lines together, so the
// expression's first line is the best line to give, with the position in the
// expression.
func locate(n *yaml.Node, line, col int, msg string) (int, string) {
	if n.Style&yaml.LiteralStyle != 0 && line >= 1 {
		if col > 0 {
			msg = fmt.Sprintf("column %d: %s", col, msg)
		}
		return n.Line + line, msg
	}
	return n.Line, (&expression.Error{Line: line, Column: col, Msg: msg}).Error()
}

// runError is a failed evaluation of c on record r of schema at event time
// t: it names the expression's file, line and field, shows the record and
// wraps the cause.
func (c *compiled) runError(err error, schema *row.Schema, r row.Row, t int64) error {
	line, msg := c.node.Line, err.Error()
	var ee *expression.Error
	if errors.As(err, &ee) {
		line, msg = locate(c.node, ee.Line, ee.Column, ee.Msg)
	}
	rec := schema.AppendJSON(nil, r)
	if len(rec) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(rec[cut]) {
			cut--
		}
		rec = append(rec[:cut:cut], "…"...)
	}
	return &evalError{err: err, msg: fmt.Sprintf("%s:%d: %s: %s (record %s, event time %s)",
		c.file, line, c.field, msg, rec, time.Unix(0, t).UTC().Format(time.RFC3339Nano))}
}

// evalError is an expression that failed on a record; it wraps the
// *expression.Error.
type evalError struct {
	msg string
	err error
}

func (e *evalError) Error() string { return e.msg }
func (e *evalError) Unwrap() error { return e.err }

// expression compiles the expression in value n of field for rows of
// schema, the result being of kind want (row.Null: inferred). It reports
// errors and nondeterministic calls at the line of the expression; the
// program is nil when it does not compile.
func (b *builder) expression(n *yaml.Node, field string, schema *row.Schema, want row.Kind) *compiled {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || strings.TrimSpace(n.Value) == "" {
		b.e.add(n, field, "must be an expression, e.g. value > 500")
		return nil
	}
	p, err := expression.Compile(schema, n.Value, want)
	if err != nil {
		line, msg := n.Line, err.Error()
		var ee *expression.Error
		if errors.As(err, &ee) {
			line, msg = locate(n, ee.Line, ee.Column, ee.Msg)
		}
		b.e.list = append(b.e.list, &Error{File: b.e.file, Line: line, Field: field, Msg: msg})
		return nil
	}
	for _, nd := range p.Nondeterminism() {
		line, msg := locate(n, nd.Line, nd.Column, nd.Msg)
		b.warnings = append(b.warnings, Warning{File: b.e.file, Line: line, Field: field, Msg: msg})
		b.nondeterministic(field, line, nd)
	}
	return &compiled{prog: p, file: b.e.file, node: n, field: field}
}

// kindNames are the values of a map field's type.
var kindNames = map[string]row.Kind{"int": row.Int, "float": row.Float, "string": row.String, "bool": row.Bool, "time": row.Time, "bytes": row.Bytes}

// filter builds a filter transform: the records for which where is true.
func (b *builder) filter(name string, m *mapping) {
	in, ok := b.input(m)
	ok = ok && b.appendOnly(m, "input", "a filter", in)
	where := m.get("where")
	if where == nil {
		b.e.add(m.node, m.field("where"), "is required")
	}
	par := b.parallelism(m)
	if !ok || where == nil {
		return
	}
	c := b.expression(where, m.field("where"), in.schema, row.Bool)
	if c == nil {
		return
	}
	schema := in.schema
	n := &runtime.Node{ID: name, Type: "filter", Describe: "filter " + oneLine(c.prog.Source()),
		NewOperator: func() runtime.Operator { return &filterOp{where: c, schema: schema} }}
	b.streams[name] = named{s: stream.Add[row.Row, row.Row](in.s, n, par), schema: schema}
}

// mapTransform builds a map transform: a new row per record, of the fields
// of select in their YAML order, after the input's fields when keep_input is
// true (a selected field named like an input field replaces it in place).
func (b *builder) mapTransform(name string, m *mapping) {
	in, ok := b.input(m)
	keep := m.boolean("keep_input", false) // by its text: keep_input: ${KEEP} works too
	par := b.parallelism(m)
	sel := m.sub("select")
	if len(sel.keys) == 0 {
		b.e.add(m.line("select"), m.field("select"), "name at least one output field, e.g. doubled: value * 2")
	}
	var schema row.Schema
	if ok && keep {
		schema.Fields = append(schema.Fields, in.schema.Fields...)
	}
	var progs []*compiled
	var pos []int
	valid := ok
	for _, k := range sel.keys {
		v := sel.get(k)
		field := sel.field(k)
		if k == "" {
			b.e.add(sel.line(k), field, "an output field needs a name")
			valid = false
			continue
		}
		src, want := v, row.Null
		if v.Kind == yaml.MappingNode { // {expr: ..., type: ...}
			typed := newMapping(b.e, field, v)
			src = typed.get("expr")
			if src == nil {
				b.e.add(v, typed.field("expr"), "is required")
			}
			if t := typed.str("type", ""); t != "" {
				if want = kindNames[t]; want == row.Null {
					typed.fail("type", typed.get("type"), "unknown type %q (known: bool, bytes, float, int, string, time)", t)
				}
			}
			typed.done()
			field = typed.field("expr")
			if src == nil || typed.bad["type"] {
				valid = false
				continue
			}
		}
		if !ok {
			continue
		}
		c := b.expression(src, field, in.schema, want)
		if c == nil {
			valid = false
			continue
		}
		kind := c.prog.Kind()
		if kind == row.Null {
			b.e.add(src, field, "the result's type is only known when it runs (are the branches of different types?); "+
				"convert it with int(), float() or string(), or give the type: %s: {expr: %q, type: int}", k, src.Value)
			valid = false
			continue
		}
		at := schema.Index(k)
		if at < 0 {
			at = len(schema.Fields)
			schema.Fields = append(schema.Fields, row.Field{Name: k})
		}
		schema.Fields[at].Kind = kind
		progs = append(progs, c)
		pos = append(pos, at)
	}
	sel.done()
	if !valid || len(progs) == 0 {
		return
	}
	names := make([]string, len(progs))
	for i, at := range pos {
		names[i] = schema.Fields[at].Name
	}
	describe := "map " + strings.Join(names, ", ")
	if keep {
		describe = "map input fields, " + strings.Join(names, ", ")
	}
	out := &schema
	// A field that only names an input field is copied, not evaluated.
	copyFrom := make([]int, len(progs))
	for i, c := range progs {
		copyFrom[i] = c.prog.Field()
	}
	var changelog []string
	if in.changelog != nil {
		if changelog, ok = b.mapChangelog(m, in, out, copyFrom, pos, keep); !ok {
			return
		}
	}
	n := &runtime.Node{ID: name, Type: "map", Describe: describe,
		NewOperator: func() runtime.Operator {
			return &mapOp{fields: progs, pos: pos, copyFrom: copyFrom, keep: keep, in: in.schema, width: len(out.Fields)}
		}}
	b.streams[name] = named{s: stream.Add[row.Row, row.Row](routed(in), n, par), schema: out, changelog: changelog}
}

// oneLine shortens an expression for the plan.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// filterOp keeps the records for which its expression is true.
type filterOp struct {
	stream.Stateless
	where  *compiled
	schema *row.Schema
	ev     *expression.Evaluator
	buf    runtime.BatchBuffer[row.Row]
}

// BorrowsBatches implements runtime.BatchBorrower: kept records are copied.
func (o *filterOp) BorrowsBatches() {}

func (o *filterOp) Open(ctx *runtime.Context) error {
	var err error
	o.ev, err = expression.NewEvaluator(o.where.prog)
	if err != nil {
		return fmt.Errorf("transform %s: %w", ctx.Task.Operator, err)
	}
	o.buf.Open(ctx.Output)
	return o.Stateless.Open(ctx)
}

func (o *filterOp) ProcessBatch(_ int, r runtime.Records) error {
	in := r.(stream.Batch[row.Row])
	out := o.buf.Get(len(in))
	for _, rec := range in {
		o.ev.Bind(rec.Value, rec.Time)
		keep, err := o.ev.Bool(o.where.prog)
		if err != nil {
			return o.where.runError(err, o.schema, rec.Value, rec.Time)
		}
		if keep {
			out = append(out, rec)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return o.buf.Emit(out)
}

// mapOp makes a new row per record from its expressions; event times are
// kept.
type mapOp struct {
	stream.Stateless
	fields []*compiled
	// pos[i] is the output position of fields[i].
	pos []int
	// copyFrom[i] is the input field fields[i] only names, copied as it
	// is; -1 for an expression evaluated.
	copyFrom []int
	// computed says whether any field is evaluated (else nothing is bound).
	computed bool
	// keep copies the input row into the first positions of the output.
	keep  bool
	in    *row.Schema
	width int
	ev    *expression.Evaluator
	buf   runtime.BatchBuffer[row.Row]
}

// BorrowsBatches implements runtime.BatchBorrower: the input rows are read
// into new ones.
func (o *mapOp) BorrowsBatches() {}

func (o *mapOp) Open(ctx *runtime.Context) error {
	if len(o.copyFrom) != len(o.fields) {
		o.copyFrom = slices.Repeat([]int{-1}, len(o.fields)) // every field evaluated
	}
	var progs []*expression.Program
	for i, c := range o.fields {
		if o.copyFrom[i] < 0 {
			progs = append(progs, c.prog)
		}
	}
	o.computed = len(progs) > 0
	if o.computed {
		var err error
		if o.ev, err = expression.NewEvaluator(progs...); err != nil {
			return fmt.Errorf("transform %s: %w", ctx.Task.Operator, err)
		}
	}
	o.buf.Open(ctx.Output)
	return o.Stateless.Open(ctx)
}

func (o *mapOp) ProcessBatch(_ int, r runtime.Records) error {
	in := r.(stream.Batch[row.Row])
	out := o.buf.Get(len(in))[:len(in)]
	// One allocation holds the batch's rows; each row's capacity ends at its
	// width, so appending to one cannot overwrite the next. It is new for
	// every batch, reused or not: receivers may keep the rows.
	vals := make([]row.Value, len(in)*o.width)
	for i, rec := range in {
		dst := vals[i*o.width : (i+1)*o.width : (i+1)*o.width]
		if o.keep {
			copy(dst, rec.Value)
		}
		if o.computed {
			o.ev.Bind(rec.Value, rec.Time)
		}
		for j, c := range o.fields {
			if f := o.copyFrom[j]; f >= 0 {
				dst[o.pos[j]] = rec.Value[f]
				continue
			}
			v, err := o.ev.Value(c.prog)
			if err != nil {
				return c.runError(err, o.in, rec.Value, rec.Time)
			}
			dst[o.pos[j]] = v
		}
		out[i] = stream.Record[row.Row]{Value: dst, Time: rec.Time}
	}
	return o.buf.Emit(out)
}
