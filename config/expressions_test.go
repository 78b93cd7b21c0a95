package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/internal/testkit"
)

// runToEnd runs the bounded pipeline p until it finishes.
func runToEnd(t *testing.T, p *config.Pipeline) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return p.Stream.Run(ctx, p.RunOptions())
}

// committedLines returns the committed lines of the file sink at dir/sub,
// sorted.
func committedLines(t *testing.T, dir, sub string) []string {
	t.Helper()
	lines, err := testkit.ReadCommitted(filepath.Join(dir, sub))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	slices.Sort(out)
	return out
}

// A bounded datagen → filter → map pipeline commits exactly the rows the
// datagen contract and the expressions imply, with the inferred types (JSON
// integers, floats, strings, booleans, RFC 3339 times), fields in YAML order,
// the input's fields first with keep_input, and expressions reading the
// record's event time.
func TestFilterAndMapRunToExactOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	const count, keys = 3000, 10
	p, dir := load(t, fmt.Sprintf(`pipeline: exprs
checkpoint:
  interval: 50ms
  dir: ckpts
restart:
  delay: 10ms
  max_attempts: 1
sources:
  events:
    type: datagen
    parallelism: 2
    count: %d
    keys: %d
    start_time: 2026-01-01T00:00:00Z
    event_interval: 1ms
transforms:
  shaped:                # defined before its input: built in dependency order
    type: map
    input: picked
    parallelism: 3       # a rebalancing edge, not chained
    select:
      id: id
      doubled: value * 2
      ms: event_time.UnixMilli()
      ratio: value / 4
      label: "'k' + string(key)"
      late: event_time >= date('2026-01-01T00:00:02Z')
      at: event_time + duration('1s')
      total: {expr: value, type: float}
  picked:
    type: filter
    input: events
    where: value %% 3 == 0 && key < 5
  kept:
    type: map
    input: picked
    keep_input: true
    select:
      value: value + 1   # replaces the input field in place
      big: value >= 500
sinks:
  out:
    type: file
    input: shaped
    path: out
  all:
    type: file
    input: kept
    path: all
`, count, keys))
	if len(p.Warnings) != 0 {
		t.Errorf("warnings: %v", p.Warnings)
	}
	if err := runToEnd(t, p); err != nil {
		t.Fatalf("Run: %v", err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wantOut, wantAll []string
	for i := int64(0); i < count; i++ {
		key, value := i%keys, i%1000
		if value%3 != 0 || key >= 5 {
			continue
		}
		ts := start.Add(time.Duration(i) * time.Millisecond)
		wantOut = append(wantOut, fmt.Sprintf(`{"id":%d,"doubled":%d,"ms":%d,"ratio":%s,"label":"k%d","late":%t,"at":"%s","total":%s}`,
			i, 2*value, ts.UnixMilli(), strconv.FormatFloat(float64(value)/4, 'g', -1, 64), key, i >= 2000,
			ts.Add(time.Second).Format(time.RFC3339Nano), strconv.FormatFloat(float64(value), 'g', -1, 64)))
		wantAll = append(wantAll, fmt.Sprintf(`{"id":%d,"key":%d,"value":%d,"big":%t}`, i, key, value+1, value >= 500))
	}
	slices.Sort(wantOut)
	slices.Sort(wantAll)
	for _, tc := range []struct {
		sub  string
		want []string
	}{{"out", wantOut}, {"all", wantAll}} {
		got := committedLines(t, dir, tc.sub)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d lines committed, want %d", tc.sub, len(got), len(tc.want))
			for i := 0; i < min(len(got), len(tc.want)); i++ {
				if got[i] != tc.want[i] {
					t.Errorf("first difference:\n got %s\nwant %s", got[i], tc.want[i])
					break
				}
			}
		}
	}
}

// A map reads a window's results, whose aggregate fields are named like
// expr builtins (count, sum): fields hide builtins of the same name.
func TestMapAfterWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	p, dir := load(t, `pipeline: after-window
checkpoint:
  dir: ckpts
restart:
  delay: 10ms
  max_attempts: 1
sources:
  events:
    type: datagen
    count: 2000
    keys: 4
transforms:
  per_key:
    type: window
    input: events
    key: key
    size: 250ms
    aggregates:
      count: count()
      sum: sum(value)
  means:
    type: map
    input: per_key
    select:
      key: key
      mean: sum / count
      span: window_end - window_start
sinks:
  out:
    type: file
    input: means
    path: out
`)
	if err := runToEnd(t, p); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lines := committedLines(t, dir, "out")
	if len(lines) != 4*8 { // 4 keys, 2 s of events in 250 ms windows
		t.Errorf("%d windows, want 32", len(lines))
	}
	for _, l := range lines {
		var rec struct {
			Key  *int64
			Mean *float64
			Span *int64
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Key == nil || rec.Mean == nil || rec.Span == nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if *rec.Span != int64(250*time.Millisecond) {
			t.Errorf("line %q: span is not 250ms in nanoseconds", l)
		}
	}
}

// exprBase is a valid pipeline with a filter and a map; the cases below edit
// it by line number: 10 is the filter's where, 14 the map's select, 15 its
// field.
const exprBase = `pipeline: p
sources:
  events:
    type: datagen
    count: 10
transforms:
  f:
    type: filter
    input: events
    where: value > 5
  m:
    type: map
    input: f
    select:
      doubled: value * 2
sinks:
  out:
    type: stdout
    input: m
`

func exprEdit(line int, with string) string {
	ls := strings.Split(exprBase, "\n")
	ls[line-1] = with
	return strings.Join(ls, "\n")
}

func TestExprBaseIsValid(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(exprBase))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "f (parallelism 1): filter value > 5") || !strings.Contains(d, "m (parallelism 1): map doubled") {
		t.Errorf("plan:\n%s", d)
	}
}

// Expression errors name the file line of the expression, the field, the
// column in the expression and what is wrong.
func TestExpressionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown name", exprEdit(10, "    where: pricee > 5"),
			"p.yaml:10: transforms.f.where: column 1: unknown name pricee (fields: id, key, value; event time: event_time)"},
		{"unknown name later", exprEdit(10, "    where: value > 5 && pricee > 5"),
			"p.yaml:10: transforms.f.where: column 14: unknown name pricee"},
		{"syntax", exprEdit(10, "    where: value >"), "p.yaml:10: transforms.f.where: column 7: unexpected token EOF"},
		{"mismatched types", exprEdit(10, "    where: value > 'a'"),
			"p.yaml:10: transforms.f.where: column 7: invalid operation: > (mismatched types int and string)"},
		{"not a condition", exprEdit(10, "    where: value + 1"), "p.yaml:10: transforms.f.where: the result is int, want bool"},
		{"literal block", exprEdit(10, "    where: |\n      value > 5 &&\n        pricee > 1"),
			"p.yaml:12: transforms.f.where: column 3: unknown name pricee"},
		{"quoted", exprEdit(10, `    where: "value > 5 && name == 'x'"`), "p.yaml:10: transforms.f.where: column 14: unknown name name"},
		{"empty", exprEdit(10, "    where: ''"), "p.yaml:10: transforms.f.where: must be an expression, e.g. value > 500"},
		{"not a scalar", exprEdit(15, "      doubled: [value]"), "p.yaml:15: transforms.m.select.doubled: must be an expression"},
		{"unquoted ternary", exprEdit(15, "      x: value > 5 ? 1 : 2"),
			`p.yaml:15: mapping values are not allowed in this context (a value containing ": " must be quoted, e.g. x: "value > 5 ? 'big' : 'small'")`},
		{"map type unknown", exprEdit(15, `      x: "value > 5 ? 1 : 'a'"`),
			`p.yaml:15: transforms.m.select.x: the result's type is only known when it runs (are the branches of different types?); convert it with int(), float() or string(), or give the type: x: {expr: "value > 5 ? 1 : 'a'", type: int}`},
		{"map array", exprEdit(15, "      x: '[value]'"),
			"p.yaml:15: transforms.m.select.x: the result is an array; a field holds int, float, string, bool, time or bytes"},
		{"bad declared type", exprEdit(15, "      x: {expr: value * 2, type: text}"),
			`p.yaml:15: transforms.m.select.x.type: unknown type "text" (known: bool, bytes, float, int, string, time)`},
		{"declared type mismatch", exprEdit(15, "      x: {expr: value / 2, type: int}"),
			"p.yaml:15: transforms.m.select.x.expr: the result is float, want int: convert it with int()"},
		{"typed expr missing", exprEdit(15, "      x: {exp: value}"), "p.yaml:15: transforms.m.select.x.expr: is required"},
		{"typed unknown field", exprEdit(15, "      x: {exp: value}"), "p.yaml:15: transforms.m.select.x.exp: unknown field"},
		{"keep_input", exprEdit(14, "    keep_input: yes\n    select:"), `p.yaml:14: transforms.m.keep_input: "yes" is not true or false`},
		{"unknown filter field", exprEdit(10, "    where: value > 5\n    select: x"), "p.yaml:11: transforms.f.select: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseErrs(t, tc.src)
			if !hasLine(lines, tc.want) {
				t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
			}
		})
	}
}

// A transform's output schema is what the next expression is checked
// against: a map keeps only its select (unless keep_input), with the
// inferred types.
func TestExpressionSchemasFlow(t *testing.T) {
	// A filter reading the map m's output, declared as a transform.
	after := func(where string) string {
		return strings.Replace(exprBase, "sinks:\n  out:\n    type: stdout\n    input: m\n",
			"  g:\n    type: filter\n    input: m\n    where: "+where+"\nsinks:\n  out:\n    type: stdout\n    input: g\n", 1)
	}
	for _, tc := range []struct{ where, want string }{
		{"value > 1", "p.yaml:19: transforms.g.where: column 1: unknown name value (fields: doubled; event time: event_time)"},
		{"doubled > 'x'", "p.yaml:19: transforms.g.where: column 9: invalid operation: > (mismatched types int and string)"},
	} {
		lines := parseErrs(t, after(tc.where))
		if !hasLine(lines, tc.want) {
			t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
		}
	}
	if _, err := config.Parse("p.yaml", []byte(after("doubled > 10"))); err != nil {
		t.Fatal(err)
	}
	kept := strings.Replace(after("doubled > value && key >= 0"), "    select:\n", "    keep_input: true\n    select:\n", 1)
	if _, err := config.Parse("p.yaml", []byte(kept)); err != nil {
		t.Fatalf("keep_input: the input's fields should flow on: %v", err)
	}
}

func TestMissingExpressionFields(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{strings.Replace(exprBase, "    where: value > 5\n", "", 1), "p.yaml:8: transforms.f.where: is required"},
		{strings.Replace(exprBase, "    select:\n      doubled: value * 2\n", "", 1), "p.yaml:12: transforms.m.select: name at least one output field, e.g. doubled: value * 2"},
	} {
		lines := parseErrs(t, tc.src)
		if !hasLine(lines, tc.want) {
			t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
		}
	}
}

// A transform whose expression does not compile is still defined: its
// consumers do not report it undefined, and one mistake is one error.
func TestExpressionErrorReportedOnce(t *testing.T) {
	lines := parseErrs(t, exprEdit(10, "    where: pricee > 5"))
	if len(lines) != 1 {
		t.Errorf("errors:\n  %s\nwant exactly one", strings.Join(lines, "\n  "))
	}
	lines = parseErrs(t, exprEdit(15, "      doubled: value +"))
	if len(lines) != 1 {
		t.Errorf("errors:\n  %s\nwant exactly one", strings.Join(lines, "\n  "))
	}
}

// Calls whose results change on replay are warnings: the file still loads,
// and each call is named with its line, field and column.
func TestNondeterminismWarnings(t *testing.T) {
	src := exprEdit(10, "    where: event_time < now()")
	src = strings.Replace(src, "      doubled: value * 2\n", "      doubled: value * 2\n      ts: now()\n      first: \"string(first(keys({'a': value, 'b': 1})))\"\n      sorted: \"string(sort(keys({'a': value}))[0])\"\n      block: |\n        value +\n          now().Second()\n", 1)
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.String())
	}
	const now = "now() is nondeterministic: its result changes when records are replayed after a recovery, so output is not exactly-once equal; use event_time, the record's event time, instead"
	want := []string{
		"p.yaml:10: transforms.f.where: column 14: " + now,
		"p.yaml:16: transforms.m.select.ts: column 1: " + now,
		"p.yaml:17: transforms.m.select.first: column 14: keys() is nondeterministic: it returns a map's entries in an order that changes from run to run, so output computed from that order is not exactly-once equal after a recovery; sort(keys(...)) is deterministic",
		"p.yaml:21: transforms.m.select.block: column 3: " + now,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if w := p.Warnings[0]; w.File != "p.yaml" || w.Line != 10 || w.Field != "transforms.f.where" {
		t.Errorf("warning fields: %+v", w)
	}
}

// A value of the wrong type at run time fails the job with an error naming
// the transform's field, its line and the record, not a panic.
func TestRunTimeTypeErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline")
	}
	for _, tc := range []struct {
		name, transform, want string
	}{
		{"map", `  m:
    type: map
    input: events
    select:
      x: {expr: "value > 50 ? 'big' : value", type: int}`,
			`p.yaml:16: transforms.m.select.x.expr: the result is string "big", want int (record {"id":51,"key":51,"value":51}, event time 2026-01-01T00:00:00.051Z)`},
		{"filter", `  m:
    type: filter
    input: events
    where: "value > 50 ? 'yes' : true"`,
			`p.yaml:15: transforms.m.where: the result is string "yes", want bool (record {"id":51,"key":51,"value":51}, event time 2026-01-01T00:00:00.051Z)`},
		{"division by zero", `  m:
    type: map
    input: events
    select:
      x: 1000 % (value - 60)`,
			`p.yaml:16: transforms.m.select.x: column 6: runtime error: integer divide by zero (record {"id":60,"key":60,"value":60}, event time 2026-01-01T00:00:00.06Z)`},
		{"literal block", `  m:
    type: map
    input: events
    select:
      x: |
        value +
          1000 % (value - 60)`,
			`p.yaml:18: transforms.m.select.x: column 8: runtime error: integer divide by zero (record {"id":60,"key":60,"value":60}, event time 2026-01-01T00:00:00.06Z)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "p.yaml", `pipeline: p
checkpoint:
  dir: ckpts
restart:
  delay: 10ms
  max_attempts: 0
sources:
  events:
    type: datagen
    count: 100
transforms:
`+tc.transform+`
sinks:
  out:
    type: file
    input: m
    path: out
`)
			p, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			err = runToEnd(t, p)
			if err == nil || !strings.Contains(err.Error(), strings.Replace(tc.want, "p.yaml", path, 1)) {
				t.Fatalf("Run: %v\nwant an error containing %s", err, tc.want)
			}
			var ee *expression.Error
			if !errors.As(err, &ee) {
				t.Errorf("Run error does not wrap an *expression.Error: %v", err)
			}
		})
	}
}
