package expression_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/row"
)

// schema is the test rows' schema: datagen's fields plus one of every other
// kind.
var schema = &row.Schema{Fields: []row.Field{
	{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int},
	{Name: "price", Kind: row.Float}, {Name: "name", Kind: row.String}, {Name: "ok", Kind: row.Bool},
	{Name: "at", Kind: row.Time},
}}

var t0 = time.Date(2026, 1, 1, 0, 0, 1, 500_000_000, time.UTC)

func testRow() row.Row {
	return row.Row{row.IntValue(7), row.IntValue(3), row.IntValue(700), row.FloatValue(2.5),
		row.StringValue("apple"), row.BoolValue(true), row.TimeValue(t0.Add(time.Hour).UnixNano())}
}

func compile(t *testing.T, src string, want row.Kind) *expression.Program {
	t.Helper()
	p, err := expression.Compile(schema, src, want)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	return p
}

// eval compiles src and runs it on testRow at event time t0.
func eval(t *testing.T, src string, want row.Kind) (row.Value, error) {
	t.Helper()
	p := compile(t, src, want)
	ev, err := expression.NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	ev.Bind(testRow(), t0.UnixNano())
	return ev.Value(p)
}

// The result kind is inferred from expr's type checker.
func TestInferredKinds(t *testing.T) {
	for _, tc := range []struct {
		src  string
		kind row.Kind
	}{
		{"value * 2", row.Int},
		{"value / 2", row.Float}, // expr's / is float division
		{"price + 1", row.Float},
		{"upper(name)", row.String},
		{"value > 5 && ok", row.Bool},
		{"event_time", row.Time},
		{"at - event_time", row.Int}, // a duration: nanoseconds
		{"event_time.Unix()", row.Int},
		{"value > 5 ? 1 : 'x'", row.Null}, // branches of different types
		{"value > 5 ? nil : 1", row.Int},
	} {
		if got := compile(t, tc.src, row.Null).Kind(); got != tc.kind {
			t.Errorf("%q: kind %s, want %s", tc.src, got, tc.kind)
		}
	}
}

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want row.Kind
		out  row.Value
	}{
		{"value * 2", row.Null, row.IntValue(1400)},
		{"value / 8", row.Null, row.FloatValue(87.5)},
		{"value", row.Float, row.FloatValue(700)}, // an integer where a float is asked for
		{"name + '!'", row.Null, row.StringValue("apple!")},
		{"name matches '^a' and not ok", row.Null, row.BoolValue(false)},
		{"event_time", row.Null, row.TimeValue(t0.UnixNano())},
		{"event_time + duration('1s')", row.Null, row.TimeValue(t0.Add(time.Second).UnixNano())},
		{"at - event_time", row.Null, row.IntValue(int64(time.Hour))},
		{"event_time.Hour() * 100 + event_time.Second()", row.Null, row.IntValue(1)},
		{"event_time > date('2026-01-01T00:00:00Z')", row.Null, row.BoolValue(true)},
		{"value > 5 ? nil : 1", row.Null, row.Value{}},
		{"value > 5 ? 1 : 'x'", row.Int, row.IntValue(1)},
		{"$env.value + $env['key']", row.Null, row.IntValue(703)},
	} {
		got, err := eval(t, tc.src, tc.want)
		if err != nil || got != tc.out {
			t.Errorf("%q: %v, %v; want %v", tc.src, got, err, tc.out)
		}
	}
}

// A field of the row named event_time hides the record's event time.
func TestEventTimeFieldWins(t *testing.T) {
	s := &row.Schema{Fields: []row.Field{{Name: "event_time", Kind: row.Int}}}
	p, err := expression.Compile(s, "event_time + 1", row.Null)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := expression.NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	ev.Bind(row.Row{row.IntValue(41)}, t0.UnixNano())
	if v, err := ev.Value(p); err != nil || v != row.IntValue(42) {
		t.Fatalf("event_time + 1 = %v, %v; want the field's 41 + 1", v, err)
	}
}

// Compile errors are *expression.Error with the position in the expression.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want row.Kind
		msg  string
	}{
		{"pricee > 5", row.Bool, `column 1: unknown name pricee (fields: id, key, value, price, name, ok, at; event time: event_time)`},
		{"value > 5 && pricee > 5", row.Bool, `column 14: unknown name pricee`},
		{"value >", row.Bool, "column 7: unexpected token EOF"},
		{"value > 'a'", row.Bool, "column 7: invalid operation: > (mismatched types int and string)"},
		{"value +\n  pricee", row.Null, "line 2, column 3: unknown name pricee"},
		{"value + 1", row.Bool, "the result is int, want bool"},
		{"price", row.Int, "the result is float, want int: convert it with int()"},
		{"[value]", row.Null, "the result is an array; a field holds int, float, string, bool, time or bytes"},
		{"now", row.Null, "the result is a function (call it?)"},
		{"value()", row.Null, "column 1: int is not callable"},
	} {
		_, err := expression.Compile(schema, tc.src, tc.want)
		var e *expression.Error
		if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%q: error %v; want one starting %q", tc.src, err, tc.msg)
		}
	}
}

// Failures while running are *expression.Error with the position of the
// failing operation, not panics.
func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want row.Kind
		msg  string
	}{
		{"value % (key - 3)", row.Null, "column 7: runtime error: integer divide by zero"},
		{"value > 5 ? 'x' : 1", row.Int, `the result is string "x", want int`},
		{"int(name)", row.Null, "column 1: invalid operation: int(apple)"},
		{"event_time + duration('2000000h') + duration('2000000h')", row.Null, "the result 2482-"},
	} {
		_, err := eval(t, tc.src, tc.want)
		var e *expression.Error
		if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%q: error %v; want one starting %q", tc.src, err, tc.msg)
		}
	}
	// A condition whose type is only known at run time is checked then.
	p := compile(t, "value > 5 ? 'yes' : true", row.Bool)
	ev, _ := expression.NewEvaluator(p)
	ev.Bind(testRow(), 0)
	if _, err := ev.Bool(p); err == nil || err.Error() != `the result is string "yes", want bool` {
		t.Errorf("Bool: %v", err)
	}
}

// Null values are nil in expressions.
func TestNullInput(t *testing.T) {
	p := compile(t, "name == nil ? 'none' : name", row.Null)
	ev, _ := expression.NewEvaluator(p)
	r := testRow()
	r[4] = row.Value{}
	ev.Bind(r, 0)
	if v, err := ev.Value(p); err != nil || v != row.StringValue("none") {
		t.Fatalf("%v, %v", v, err)
	}
	q := compile(t, "value + 1", row.Null)
	ev, _ = expression.NewEvaluator(q)
	r[2] = row.Value{}
	ev.Bind(r, 0)
	if _, err := ev.Value(q); err == nil {
		t.Fatal("null + 1: no error")
	}
}

func TestNondeterminism(t *testing.T) {
	for _, tc := range []struct {
		src   string
		funcs []string
		at    []int // columns
	}{
		{"value > 5", nil, nil},
		{"event_time < now()", []string{"now"}, []int{14}},
		{"now() - event_time > duration('1h') || now().Hour() > 3", []string{"now", "now"}, []int{1, 40}},
		{"first(keys({'a': value, 'b': 2})) == 'a'", []string{"keys"}, []int{7}},
		{"sort(keys({'a': value}))[0] == 'a'", nil, nil},
		{"len(values({'a': value})) > 0", nil, nil},
		// The optimizer fuses map() into filter(); the mapper is still seen.
		{"map(filter([1, 2], # > 1), now())[0] == event_time", []string{"now"}, []int{28}},
	} {
		nd := compile(t, tc.src, row.Bool).Nondeterminism()
		if len(nd) != len(tc.funcs) {
			t.Errorf("%q: %v; want calls of %v", tc.src, nd, tc.funcs)
			continue
		}
		for i, n := range nd {
			if n.Func != tc.funcs[i] || n.Column != tc.at[i] || n.Line != 1 {
				t.Errorf("%q: finding %d is %s at %d:%d; want %s at 1:%d", tc.src, i, n.Func, n.Line, n.Column, tc.funcs[i], tc.at[i])
			}
		}
	}
	nd := compile(t, "now()", row.Null).Nondeterminism()
	want := "column 1: now() is nondeterministic: its result changes when records are replayed after a recovery, so output is not exactly-once equal; use event_time, the record's event time, instead"
	if len(nd) != 1 || nd[0].String() != want {
		t.Errorf("now(): %v; want %q", nd, want)
	}
}

func TestEvaluatorNeedsOneSchema(t *testing.T) {
	other := &row.Schema{Fields: schema.Fields}
	a := compile(t, "value", row.Null)
	b, err := expression.Compile(other, "value", row.Null)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := expression.NewEvaluator(a, b); err == nil {
		t.Fatal("programs of two schemas: no error")
	}
	if _, err := expression.NewEvaluator(); err == nil {
		t.Fatal("no programs: no error")
	}
}

// A field's value changes from record to record: no stale bindings.
func TestRebind(t *testing.T) {
	p := compile(t, "value * 2 + (event_time.UnixNano() % 10)", row.Null)
	ev, _ := expression.NewEvaluator(p)
	for i := int64(0); i < 1000; i++ {
		r := testRow()
		r[2] = row.IntValue(i)
		ev.Bind(r, i%10)
		v, err := ev.Value(p)
		if err != nil || v != row.IntValue(2*i+i%10) {
			t.Fatalf("record %d: %v, %v", i, v, err)
		}
	}
	if _, err := eval(t, "float(value) / 0", row.Null); err != nil {
		t.Fatal(err) // +Inf is a float
	}
	v, _ := eval(t, "price / 0", row.Null)
	if !math.IsInf(v.Float(), 1) {
		t.Fatalf("price / 0 = %v", v)
	}
}

// A program that only names a field says which: its value is the field's as
// it is. Anything else, a declared type that converts it, or the event time
// is no field.
func TestProgramField(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "unit price", Kind: row.Float}, {Name: "len", Kind: row.String}}}
	for _, c := range []struct {
		src  string
		want row.Kind
		f    int
	}{
		{"id", row.Null, 0},
		{`$env["unit price"]`, row.Null, 1},
		{"len", row.Null, 2}, // a field hides the builtin
		{" id ", row.Null, 0},
		{"id + 0", row.Null, -1},
		{"id", row.Float, -1}, // converted to float
		{"event_time", row.Null, -1},
		{`$env?.["id"]`, row.Null, -1},
		{"true", row.Null, -1},
	} {
		p, err := expression.Compile(schema, c.src, c.want)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if got := p.Field(); got != c.f {
			t.Errorf("%q (want %v): Field() = %d, want %d", c.src, c.want, got, c.f)
		}
	}
}
