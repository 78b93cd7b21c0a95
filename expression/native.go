package expression

import (
	"math"

	"github.com/expr-lang/expr/ast"

	"github.com/ingest-engine/ingest/row"
)

// This file compiles the simplest expressions — arithmetic, comparisons and
// logic over int, float, string and bool fields and constants, the bulk of
// what filters and maps compute — to Go closures, which run without binding
// the record's fields into expr's variables or running its VM.
//
// A closure computes exactly what the VM computes: the same Go operations on
// the same Go types (expr's ints are Go ints, its / is a float division, an
// int and a float compare as floats). Where the VM's result is not a value
// of the node's static kind — a NULL operand, a field holding a value of
// another kind, a modulo by zero (which the VM reports as an error) — the
// closure gives up (ok false) and the Evaluator runs the VM, which gives the
// result or the error it always gave. TestNativeMatchesTheVM compares the
// two over many expressions and values.

// native computes a program's result from a row; ok is false when the VM
// must compute it instead.
type native func(r row.Row) (v row.Value, ok bool)

// compileNative returns the closure of node, whose static kind is kind,
// or nil when a node is not one it compiles.
func compileNative(schema *row.Schema, node ast.Node) (native, row.Kind) {
	switch n := node.(type) {
	case *ast.IntegerNode:
		v := row.IntValue(int64(n.Value))
		return func(row.Row) (row.Value, bool) { return v, true }, row.Int
	case *ast.FloatNode:
		if n.Value == 0 && math.Signbit(n.Value) {
			// expr keeps constants in a map keyed by value, where -0 and
			// +0 are one key: the VM gives one for the other.
			return nil, row.Null
		}
		v := row.FloatValue(n.Value)
		return func(row.Row) (row.Value, bool) { return v, true }, row.Float
	case *ast.BoolNode:
		v := row.BoolValue(n.Value)
		return func(row.Row) (row.Value, bool) { return v, true }, row.Bool
	case *ast.StringNode:
		v := row.StringValue(n.Value)
		return func(row.Row) (row.Value, bool) { return v, true }, row.String
	case *ast.IdentifierNode:
		i := schema.Index(n.Value)
		if i < 0 {
			return nil, row.Null // event_time, $env, …
		}
		k := schema.Fields[i].Kind
		if k != row.Int && k != row.Float && k != row.String && k != row.Bool {
			return nil, row.Null
		}
		return func(r row.Row) (row.Value, bool) {
			if i >= len(r) || r[i].Kind() != k {
				return row.Value{}, false // NULL, or not the declared kind
			}
			return r[i], true
		}, k
	case *ast.UnaryNode:
		return nativeUnary(schema, n)
	case *ast.BinaryNode:
		return nativeBinary(schema, n)
	case *ast.ConditionalNode:
		c, ck := compileNative(schema, n.Cond)
		a, ak := compileNative(schema, n.Exp1)
		b, bk := compileNative(schema, n.Exp2)
		if c == nil || a == nil || b == nil || ck != row.Bool || ak != bk {
			return nil, row.Null
		}
		return func(r row.Row) (row.Value, bool) {
			cond, ok := c(r)
			if !ok {
				return row.Value{}, false
			}
			if cond.Bool() {
				return a(r)
			}
			return b(r)
		}, ak
	}
	return nil, row.Null
}

func nativeUnary(schema *row.Schema, n *ast.UnaryNode) (native, row.Kind) {
	x, k := compileNative(schema, n.Node)
	if x == nil {
		return nil, row.Null
	}
	switch {
	case (n.Operator == "!" || n.Operator == "not") && k == row.Bool:
		return func(r row.Row) (row.Value, bool) {
			v, ok := x(r)
			return row.BoolValue(!v.Bool()), ok
		}, row.Bool
	case n.Operator == "-" && k == row.Int:
		return func(r row.Row) (row.Value, bool) {
			v, ok := x(r)
			return row.IntValue(-v.Int()), ok
		}, row.Int
	case n.Operator == "-" && k == row.Float:
		return func(r row.Row) (row.Value, bool) {
			v, ok := x(r)
			return row.FloatValue(-v.Float()), ok
		}, row.Float
	case n.Operator == "+" && (k == row.Int || k == row.Float):
		return x, k
	}
	return nil, row.Null
}

func nativeBinary(schema *row.Schema, n *ast.BinaryNode) (native, row.Kind) {
	a, ak := compileNative(schema, n.Left)
	b, bk := compileNative(schema, n.Right)
	if a == nil || b == nil {
		return nil, row.Null
	}
	num := func(k row.Kind) bool { return k == row.Int || k == row.Float }
	both := func(f func(x, y row.Value) (row.Value, bool)) native {
		return func(r row.Row) (row.Value, bool) {
			x, ok := a(r)
			if !ok {
				return row.Value{}, false
			}
			y, ok := b(r)
			if !ok {
				return row.Value{}, false
			}
			return f(x, y)
		}
	}
	op := n.Operator
	switch {
	case (op == "and" || op == "&&") && ak == row.Bool && bk == row.Bool:
		return func(r row.Row) (row.Value, bool) {
			x, ok := a(r)
			if !ok || !x.Bool() {
				return x, ok
			}
			return b(r)
		}, row.Bool
	case (op == "or" || op == "||") && ak == row.Bool && bk == row.Bool:
		return func(r row.Row) (row.Value, bool) {
			x, ok := a(r)
			if !ok || x.Bool() {
				return x, ok
			}
			return b(r)
		}, row.Bool
	case (op == "+" || op == "-" || op == "*") && ak == row.Int && bk == row.Int:
		return both(func(x, y row.Value) (row.Value, bool) {
			switch op {
			case "+":
				return row.IntValue(x.Int() + y.Int()), true
			case "-":
				return row.IntValue(x.Int() - y.Int()), true
			}
			return row.IntValue(x.Int() * y.Int()), true
		}), row.Int
	case (op == "+" || op == "-" || op == "*") && num(ak) && num(bk):
		return both(func(x, y row.Value) (row.Value, bool) {
			switch op {
			case "+":
				return row.FloatValue(x.Float() + y.Float()), true
			case "-":
				return row.FloatValue(x.Float() - y.Float()), true
			}
			return row.FloatValue(x.Float() * y.Float()), true
		}), row.Float
	case op == "+" && ak == row.String && bk == row.String:
		return both(func(x, y row.Value) (row.Value, bool) { return row.StringValue(x.Str() + y.Str()), true }), row.String
	case op == "/" && num(ak) && num(bk):
		// expr divides as floats, whatever the operands.
		return both(func(x, y row.Value) (row.Value, bool) { return row.FloatValue(x.Float() / y.Float()), true }), row.Float
	case op == "%" && ak == row.Int && bk == row.Int:
		return both(func(x, y row.Value) (row.Value, bool) {
			if y.Int() == 0 {
				return row.Value{}, false // the VM's error
			}
			return row.IntValue(x.Int() % y.Int()), true
		}), row.Int
	case isComparison(op) && num(ak) && num(bk):
		if ak == row.Int && bk == row.Int {
			return both(func(x, y row.Value) (row.Value, bool) {
				return row.BoolValue(compare(op, cmpInt(x.Int(), y.Int()))), true
			}), row.Bool
		}
		return both(func(x, y row.Value) (row.Value, bool) {
			fx, fy := x.Float(), y.Float()
			switch op { // NaN: every comparison but != is false
			case "==":
				return row.BoolValue(fx == fy), true
			case "!=":
				return row.BoolValue(fx != fy), true
			case "<":
				return row.BoolValue(fx < fy), true
			case "<=":
				return row.BoolValue(fx <= fy), true
			case ">":
				return row.BoolValue(fx > fy), true
			}
			return row.BoolValue(fx >= fy), true
		}), row.Bool
	case isComparison(op) && ak == row.String && bk == row.String:
		return both(func(x, y row.Value) (row.Value, bool) {
			c := 0
			if x.Str() < y.Str() {
				c = -1
			} else if x.Str() > y.Str() {
				c = 1
			}
			return row.BoolValue(compare(op, c)), true
		}), row.Bool
	case (op == "==" || op == "!=") && ak == row.Bool && bk == row.Bool:
		return both(func(x, y row.Value) (row.Value, bool) {
			return row.BoolValue((x.Bool() == y.Bool()) == (op == "==")), true
		}), row.Bool
	}
	return nil, row.Null
}

func isComparison(op string) bool {
	switch op {
	case "==", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// compare is a comparison's result from the operands' order c (-1, 0, 1).
func compare(op string, c int) bool {
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}
