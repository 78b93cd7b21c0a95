// Package expression compiles and runs the expressions of YAML pipelines (a
// filter's condition, a map's fields) with github.com/expr-lang/expr.
//
// An expression is compiled once, when the pipeline is loaded, against the
// schema of the rows it will see: an unknown field, a syntax error or a type
// mismatch is found then, with its position, not when the first record
// arrives. Each field of the row is a variable of the field's type (int,
// float, string, bool, time.Time, []byte for bytes); the record's event time is the variable
// event_time (a time.Time in UTC) unless the row has a field of that name.
//
// An Evaluator runs compiled programs record after record with one reused VM
// and one reused variable map, so evaluating allocates nothing per record but
// the boxing of the field values the programs read.
package expression

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/ingest-engine/ingest/row"
)

// EventTime names the variable holding a record's event time, a time.Time in
// UTC. A field of the same name takes precedence.
const EventTime = "event_time"

// envName is expr's name for the whole environment ($env["field"]).
const envName = "$env"

// Error is an expression that does not compile, or whose evaluation failed.
// Line and Column locate the problem in the expression's text, both from 1;
// 0 when expr did not say where.
type Error struct {
	Line, Column int
	// Msg says what is wrong, in one line.
	Msg string
	// Err is the cause, when there is one (often expr's *file.Error).
	Err error
}

// Error formats the error as "column C: message" (or "line L, column C:
// message" for a position past the expression's first line).
func (e *Error) Error() string {
	switch {
	case e.Column > 0 && e.Line > 1:
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
	case e.Column > 0:
		return fmt.Sprintf("column %d: %s", e.Column, e.Msg)
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// fromExpr converts an error of the expr library into an *Error, keeping
// expr's message without its multi-line source snippet.
func fromExpr(err error) *Error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &Error{Line: fe.Line, Column: fe.Column + 1, Msg: fe.Message, Err: err}
	}
	return &Error{Msg: err.Error(), Err: err}
}

// Nondeterminism is a call in an expression whose result can differ when the
// same record is processed again, as it is when records are replayed after a
// recovery: output computed from it is not equal to a failure-free run's.
type Nondeterminism struct {
	// Line and Column locate the call in the expression's text, from 1.
	Line, Column int
	// Func is the function called, e.g. "now".
	Func string
	// Msg explains the problem in one line.
	Msg string
}

// String formats the finding as "column C: message".
func (n Nondeterminism) String() string {
	return (&Error{Line: n.Line, Column: n.Column, Msg: n.Msg}).Error()
}

// Program is a compiled expression. It is immutable and safe to share between
// goroutines; run it with an Evaluator.
type Program struct {
	source string
	schema *row.Schema
	prog   *vm.Program
	// kind is the row kind the result is converted to; Null when it could
	// not be told before running and none was asked for.
	kind row.Kind
	// static is the kind expr's type checker inferred; Null when unknown.
	static row.Kind
	// reads are the variables the program reads: field names and
	// EventTime; all is set when it reads $env, the whole environment.
	reads []string
	all   bool
	// nondet lists the program's nondeterministic calls.
	nondet []Nondeterminism
	// field is the input field the program only names (`price`,
	// `$env["unit price"]`), whose value it gives as it is; -1 when it
	// computes anything.
	field int
	// native computes the program without the VM (native.go); nil when the
	// program has a node it does not compile.
	native native
}

// Field returns the index in the schema of the field the program only
// names, whose value is the program's result as it is (its kind is the
// result's): a caller may copy the field instead of evaluating. It is -1
// for any other program.
func (p *Program) Field() int { return p.field }

// Source returns the expression's text.
func (p *Program) Source() string { return p.source }

// Kind returns the kind of the row value the program produces: the kind asked
// for at compile time, else the inferred one; row.Null when the type is only
// known when the program runs (for example a conditional whose branches have
// different types).
func (p *Program) Kind() row.Kind { return p.kind }

// Nondeterminism lists the program's calls whose results change when records
// are replayed, in the order they appear.
func (p *Program) Nondeterminism() []Nondeterminism { return slices.Clone(p.nondet) }

// goType is the Go type a field of kind k has in expressions.
func goType(k row.Kind) types.Type {
	switch k {
	case row.Int:
		return types.Int
	case row.Float:
		return types.Float64
	case row.String:
		return types.String
	case row.Bool:
		return types.Bool
	case row.Time:
		return types.TypeOf(time.Time{})
	case row.Bytes:
		return types.TypeOf([]byte(nil))
	}
	return types.Any
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

// kindOf maps the static result type of an expression to a row kind; ok is
// false for a type no row field can hold (arrays, maps, functions, …).
// Unknown types (interfaces) are row.Null with ok true.
func kindOf(t reflect.Type) (row.Kind, bool) {
	if t == nil {
		return row.Null, true
	}
	if t == timeType {
		return row.Time, true
	}
	if t == bytesType {
		return row.Bytes, true
	}
	switch t.Kind() {
	case reflect.Interface:
		return row.Null, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return row.Int, true
	case reflect.Float32, reflect.Float64:
		return row.Float, true
	case reflect.String:
		return row.String, true
	case reflect.Bool:
		return row.Bool, true
	}
	return row.Null, false
}

// Compile compiles source for rows of schema. want is the kind the result
// must have: a statically known result of another kind is an error (an
// integer result is accepted for row.Float and converted); a result whose
// type is only known at run time is checked by the Evaluator. With want
// row.Null the kind is inferred, and Program.Kind is row.Null when it cannot
// be. Errors are *Error.
func Compile(schema *row.Schema, source string, want row.Kind) (p *Program, err error) {
	// The library panics on a few malformed trees; no panic leaves this
	// package.
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, &Error{Msg: fmt.Sprintf("internal error of the expression compiler: %v", r)}
		}
	}()
	env := types.Map{}
	env[EventTime] = goType(row.Time)
	for _, f := range schema.Fields {
		env[f.Name] = goType(f.Kind)
	}
	prog, err := expr.Compile(source, append([]expr.Option{expr.Env(env)}, functions...)...)
	if err != nil {
		e := fromExpr(err)
		if strings.HasPrefix(e.Msg, "unknown name ") {
			known := fmt.Sprintf(" (fields: %s", strings.Join(schema.Names(), ", "))
			if schema.Index(EventTime) < 0 {
				known += "; event time: " + EventTime
			}
			e.Msg += known + ")"
		}
		return nil, e
	}
	p = &Program{source: source, schema: schema, prog: prog, field: -1}
	node := prog.Node()
	static, ok := kindOf(node.Type())
	if !ok {
		return nil, &Error{Msg: fmt.Sprintf("the result is %s; a field holds int, float, string, bool, time or bytes", describeType(node.Type()))}
	}
	p.static, p.kind = static, static
	if want != row.Null {
		p.kind = want
		if static != row.Null && static != want && !(static == row.Int && want == row.Float) {
			msg := fmt.Sprintf("the result is %s, want %s", static, want)
			if want == row.Int && static == row.Float {
				msg += ": convert it with int(), which truncates, or round() first"
			}
			if static == row.Time && want == row.Int {
				msg += ": use .UnixNano() for nanoseconds"
			}
			return nil, &Error{Msg: msg}
		}
	}
	if err := p.inspect(node); err != nil {
		return nil, err
	}
	if f := fieldNamed(schema, node); f >= 0 && schema.Fields[f].Kind == p.kind {
		p.field = f // a declared type other than the field's converts it
	}
	if n, k := compileNative(schema, node); n != nil && k == p.static && (k == p.kind || k == row.Int && p.kind == row.Float) {
		p.native = n
		if k != p.kind { // an int result asked for as a float
			p.native = func(r row.Row) (row.Value, bool) {
				v, ok := n(r)
				return row.FloatValue(float64(v.Int())), ok
			}
		}
	}
	return p, nil
}

// fieldNamed returns the index of the field that node only names, -1 when
// it is anything else.
func fieldNamed(schema *row.Schema, node ast.Node) int {
	switch n := node.(type) {
	case *ast.IdentifierNode:
		return schema.Index(n.Value) // event_time, unless a field is named so, is none
	case *ast.MemberNode:
		env, isEnv := n.Node.(*ast.IdentifierNode)
		name, isName := n.Property.(*ast.StringNode)
		if isEnv && isName && env.Value == envName && !n.Optional {
			return schema.Index(name.Value)
		}
	}
	return -1
}

// describeType names a Go type for messages ("array", "map", …).
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map:
		return "a map"
	case reflect.Func:
		return "a function (call it?)"
	}
	return t.String()
}

// orderFree are builtins whose result does not depend on the order of the
// array they are given: keys() and values() are deterministic under them.
var orderFree = map[string]bool{"sort": true, "sortBy": true, "len": true, "count": true, "all": true, "any": true,
	"none": true, "one": true, "min": true, "max": true}

// unordered are builtins returning a map's entries in Go's randomised map
// order.
var unordered = map[string]bool{"keys": true, "values": true, "toPairs": true}

// inspector walks a compiled tree: the variables it reads and its
// nondeterministic calls.
type inspector struct {
	// safe are unordered() calls whose order an order-free caller discards.
	safe  map[ast.Node]bool
	reads map[string]bool
	calls []*ast.BuiltinNode
	// bad is the first call whose arguments are refused (a regexpGroup
	// pattern that is no constant, or does not compile).
	bad *Error
}

// Visit implements ast.Visitor. Walk visits children first.
func (in *inspector) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.IdentifierNode:
		in.reads[x.Value] = true
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok && id.Value == "regexpGroup" && in.bad == nil {
			in.bad = checkRegexpGroup(x)
		}
	case *ast.BuiltinNode:
		if orderFree[x.Name] && len(x.Arguments) > 0 {
			in.safe[x.Arguments[0]] = true
		}
		if x.Name == "now" || unordered[x.Name] {
			in.calls = append(in.calls, x)
		}
		// The optimizer folds map() into filter() as Map, which Walk does
		// not visit.
		if x.Map != nil {
			ast.Walk(&x.Map, in)
		}
	}
}

// inspect records what the program reads and its nondeterministic calls.
func (p *Program) inspect(node ast.Node) (err error) {
	defer func() {
		if r := recover(); r != nil { // ast.Walk panics on node types it does not know
			err = &Error{Msg: fmt.Sprintf("internal error inspecting the expression: %v", r)}
		}
	}()
	in := &inspector{safe: map[ast.Node]bool{}, reads: map[string]bool{}}
	ast.Walk(&node, in)
	if in.bad != nil {
		return in.bad
	}
	p.all = in.reads[envName]
	for name := range in.reads {
		if name == EventTime || p.schema.Index(name) >= 0 {
			p.reads = append(p.reads, name)
		}
	}
	slices.Sort(p.reads)
	for _, c := range in.calls {
		if unordered[c.Name] && in.safe[ast.Node(c)] {
			continue
		}
		line, col := position(p.source, c.Location().From)
		msg := fmt.Sprintf("%s() is nondeterministic: its result changes when records are replayed after a recovery, so output is not exactly-once equal", c.Name)
		if c.Name == "now" {
			msg += "; use event_time, the record's event time, instead"
		} else {
			msg = fmt.Sprintf("%s() is nondeterministic: it returns a map's entries in an order that changes from run to run, so output computed from that order is not exactly-once equal after a recovery; sort(%s(...)) is deterministic", c.Name, c.Name)
		}
		p.nondet = append(p.nondet, Nondeterminism{Line: line, Column: col, Func: c.Name, Msg: msg})
	}
	slices.SortFunc(p.nondet, func(a, b Nondeterminism) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Column - b.Column
	})
	return nil
}

// position converts expr's rune offset into a line and column, both from 1.
func position(src string, from int) (line, col int) {
	line, col = 1, 1
	runes := 0
	for _, r := range src {
		if runes == from {
			break
		}
		runes++
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// minTime and maxTime bound the instants a row.Time (int64 Unix
// nanoseconds) can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Evaluator runs compiled programs on rows, one record at a time. It reuses
// one VM and one variable map for every record, so it must not be used by
// two goroutines at once: give each operator subtask its own.
type Evaluator struct {
	vm     vm.VM
	schema *row.Schema
	vars   map[string]any
	// row and time are the bound record; bound says vars hold it (they are
	// filled when the VM first runs on it: native programs read row).
	row   row.Row
	time  int64
	bound bool
	// fields are the positions of the fields any program reads, names their
	// names, in the same order.
	fields []int
	names  []string
	// eventTime is set when a program reads the record's event time.
	eventTime bool
}

// NewEvaluator returns an evaluator for programs compiled against the same
// schema; Bind fills in only the variables the programs read.
func NewEvaluator(programs ...*Program) (*Evaluator, error) {
	if len(programs) == 0 {
		return nil, errors.New("expression: an evaluator needs at least one program")
	}
	e := &Evaluator{schema: programs[0].schema}
	reads := map[string]bool{}
	all := false
	for _, p := range programs {
		if p.schema != e.schema {
			return nil, fmt.Errorf("expression: %q was compiled for another schema than %q", p.source, programs[0].source)
		}
		all = all || p.all
		for _, r := range p.reads {
			reads[r] = true
		}
	}
	for i, f := range e.schema.Fields {
		if all || reads[f.Name] {
			e.fields = append(e.fields, i)
			e.names = append(e.names, f.Name)
		}
	}
	e.eventTime = (all || reads[EventTime]) && e.schema.Index(EventTime) < 0
	e.vars = make(map[string]any, len(e.fields)+1)
	return e, nil
}

// Bind makes r, with event time eventTime (Unix nanoseconds), the record the
// next evaluations see.
func (e *Evaluator) Bind(r row.Row, eventTime int64) {
	e.row, e.time, e.bound = r, eventTime, false
}

// bindVars fills the VM's variables with the bound record, once.
func (e *Evaluator) bindVars() {
	if e.bound {
		return
	}
	e.bound = true
	r, eventTime := e.row, e.time
	for j, i := range e.fields {
		var v row.Value
		if i < len(r) {
			v = r[i]
		}
		e.vars[e.names[j]] = toGo(v)
	}
	if e.eventTime {
		e.vars[EventTime] = time.Unix(0, eventTime).UTC()
	}
}

// toGo returns the Go value an expression sees for v.
func toGo(v row.Value) any {
	switch v.Kind() {
	case row.Int:
		return int(v.Int())
	case row.Float:
		return v.Float()
	case row.String:
		return v.Str()
	case row.Bool:
		return v.Bool()
	case row.Time:
		return time.Unix(0, v.Int()).UTC()
	case row.Bytes:
		return []byte(v.Str())
	}
	return nil
}

// run runs p on the bound record.
func (e *Evaluator) run(p *Program) (any, error) {
	e.bindVars()
	out, err := e.vm.Run(p.prog, e.vars)
	if err != nil {
		return nil, fromExpr(err)
	}
	return out, nil
}

// Bool runs p on the bound record; its result must be a bool. Errors are
// *Error.
func (e *Evaluator) Bool(p *Program) (bool, error) {
	if p.native != nil {
		if v, ok := p.native(e.row); ok {
			return v.Bool(), nil
		}
	}
	out, err := e.run(p)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, &Error{Msg: fmt.Sprintf("the result is %s, want bool", describeValue(out))}
	}
	return b, nil
}

// Value runs p on the bound record and converts its result to a row value of
// p.Kind(); nil is the null value. A result of another kind is an error (an
// *Error), as is any result when p.Kind() is row.Null.
func (e *Evaluator) Value(p *Program) (row.Value, error) {
	if p.native != nil {
		if v, ok := p.native(e.row); ok {
			return v, nil
		}
	}
	out, err := e.run(p)
	if err != nil {
		return row.Value{}, err
	}
	if out == nil {
		return row.Value{}, nil
	}
	if v, ok := convert(out, p.kind); ok {
		return v, nil
	}
	msg := fmt.Sprintf("the result is %s, want %s", describeValue(out), p.kind)
	if t, ok := out.(time.Time); ok && p.kind == row.Time {
		msg = fmt.Sprintf("the result %s is outside the times a field can hold (years 1678 to 2262)", t.Format(time.RFC3339Nano))
	}
	return row.Value{}, &Error{Msg: msg}
}

// convert converts a result to a row value of kind k.
func convert(out any, k row.Kind) (row.Value, bool) {
	switch k {
	case row.Bool:
		b, ok := out.(bool)
		return row.BoolValue(b), ok
	case row.String:
		s, ok := out.(string)
		return row.StringValue(s), ok
	case row.Bytes:
		b, ok := out.([]byte)
		return row.BytesValue(string(b)), ok
	case row.Time:
		t, ok := out.(time.Time)
		if !ok || t.Before(minTime) || t.After(maxTime) {
			return row.Value{}, false
		}
		return row.TimeValue(t.UnixNano()), true
	case row.Int:
		i, ok := toInt(out)
		return row.IntValue(i), ok
	case row.Float:
		switch f := out.(type) {
		case float64:
			return row.FloatValue(f), true
		case float32:
			return row.FloatValue(float64(f)), true
		}
		if i, ok := toInt(out); ok {
			return row.FloatValue(float64(i)), true
		}
	}
	return row.Value{}, false
}

// toInt converts any Go integer (and time.Duration) that fits an int64.
func toInt(out any) (int64, bool) {
	switch i := out.(type) {
	case int:
		return int64(i), true
	case int64:
		return i, true
	case time.Duration:
		return int64(i), true
	}
	v := reflect.ValueOf(out)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := v.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}

// describeValue names a result for messages: its kind and, for scalars, the
// value.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("bool %t", x)
	case time.Time:
		return "time " + x.Format(time.RFC3339Nano)
	}
	if k, ok := kindOf(reflect.TypeOf(v)); ok && k != row.Null {
		return fmt.Sprintf("%s %v", k, v)
	}
	return describeType(reflect.TypeOf(v))
}
