package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
)

// Every join kind from a pipeline file commits exactly the pairs its
// definition selects from the records the datagen contract implies, each
// once: the interval join pairs with right time - left time in [lower,
// upper], the window join pairs in one tumbling window, the inner join with
// a ttl pairs less than ttl apart, and without one every pair of a key. The
// inputs have different keys, intervals, start times and parallelisms; the
// window join keys its left side by an expression and selects with the list
// form.
func TestConfigJoinsRunToExactOutput(t *testing.T) {
	const (
		lCount, lKeys = 600, 6
		rCount, rKeys = 500, 4
		lInterval     = 3 * time.Millisecond
		rInterval     = 5 * time.Millisecond
		lower, upper  = -10 * time.Millisecond, 4 * time.Millisecond
		size          = 100 * time.Millisecond
		ttl           = 20 * time.Millisecond
	)
	lStart := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rStart := lStart.Add(8 * time.Millisecond)
	dir := runYAML(t, fmt.Sprintf(`pipeline: joins
checkpoint:
  interval: 100ms
  dir: ckpts
restart:
  max_attempts: 0
sources:
  bids:
    type: datagen
    parallelism: 2
    count: %d
    keys: %d
    event_interval: %v
    start_time: %s
  asks:
    type: datagen
    count: %d
    keys: %d
    event_interval: %v
    start_time: %s
    watermark: {max_delay: 3ms}
transforms:
  near:
    type: join
    kind: interval
    left: bids
    right: asks
    on: key
    lower: %v
    upper: %v
    parallelism: 2
    select: {lid: left.id, rid: right.id, k: key}
  same_window:
    type: join
    kind: window
    left: bids
    right: asks
    on:
      left: key %% 4
      right: key
    size: %v
    select: [left.id, key, right.value]
  recent:
    type: join
    kind: inner
    left: bids
    right: asks
    on: {left: key, right: key}
    ttl: %v
    parallelism: 3
    select: {lid: left.id, rid: right.id}
  every:
    type: join
    kind: inner
    left: bids
    right: asks
    on: key
    select: {lid: left.id, rid: right.id}
sinks:
  near_out: {type: file, input: near, path: near}
  window_out: {type: file, input: same_window, path: window}
  recent_out: {type: file, input: recent, path: recent}
  every_out: {type: file, input: every, path: every}
`, lCount, lKeys, lInterval, lStart.Format(time.RFC3339Nano), rCount, rKeys, rInterval, rStart.Format(time.RFC3339Nano),
		lower, upper, size, ttl))

	ls := datagenRecords(lCount, lKeys, lStart, lInterval)
	rs := datagenRecords(rCount, rKeys, rStart, rInterval)
	pairs := func(match func(l, r datagenRecord) bool, out func(l, r datagenRecord) row.Row) []row.Row {
		var rows []row.Row
		for _, l := range ls {
			for _, r := range rs {
				if match(l, r) {
					rows = append(rows, out(l, r))
				}
			}
		}
		if len(rows) == 0 {
			t.Fatal("the model joins nothing: the test's inputs do not exercise the join")
		}
		return rows
	}
	field := func(name string) row.Field { return row.Field{Name: name, Kind: row.Int} }
	ids := &row.Schema{Fields: []row.Field{field("lid"), field("rid")}}
	idPair := func(l, r datagenRecord) row.Row { return row.Row{i64(l.id), i64(r.id)} }

	near := pairs(func(l, r datagenRecord) bool {
		d := r.time - l.time
		return l.key == r.key && d >= int64(lower) && d <= int64(upper)
	}, func(l, r datagenRecord) row.Row { return row.Row{i64(l.id), i64(r.id), i64(l.key)} })
	sameLines(t, "interval join", committedLines(t, dir, "near"),
		jsonLines(&row.Schema{Fields: []row.Field{field("lid"), field("rid"), field("k")}}, near))

	window := pairs(func(l, r datagenRecord) bool {
		return l.key%4 == r.key && floorTo(l.time, size) == floorTo(r.time, size)
	}, func(l, r datagenRecord) row.Row { return row.Row{i64(l.id), i64(r.key), i64(r.value)} })
	sameLines(t, "window join", committedLines(t, dir, "window"),
		jsonLines(&row.Schema{Fields: []row.Field{field("id"), field("key"), field("value")}}, window))

	recent := pairs(func(l, r datagenRecord) bool {
		d := r.time - l.time
		return l.key == r.key && d > -int64(ttl) && d < int64(ttl)
	}, idPair)
	sameLines(t, "inner join with ttl", committedLines(t, dir, "recent"), jsonLines(ids, recent))

	every := pairs(func(l, r datagenRecord) bool { return l.key == r.key }, idPair)
	sameLines(t, "inner join without ttl", committedLines(t, dir, "every"), jsonLines(ids, every))
}

// joinBase is a valid pipeline with a join; cases edit it by line.
const joinBase = `pipeline: p
sources:
  a:
    type: datagen
    count: 10
  b:
    type: datagen
    count: 10
transforms:
  j:
    type: join
    kind: interval
    left: a
    right: b
    on: {left: key, right: key}
    lower: -1s
    upper: 1s
    select: {l: left.id, r: right.id}
sinks:
  out:
    type: file
    input: j
    path: out
`

// Every bad value of a join is an error naming the file, line and field.
func TestConfigJoinErrors(t *testing.T) {
	if _, err := config.Parse("p.yaml", []byte(joinBase)); err != nil {
		t.Fatalf("joinBase: %v", err)
	}
	e := func(line int, with string) string { return editIn(joinBase, line, with) }
	for _, tc := range []struct {
		name, src, want string
	}{
		{"key types differ", e(15, `    on: {left: key, right: "string(key)"}`),
			"p.yaml:15: transforms.j.on.right: the keys must have the same type, but the left key (field key) is int and the right key (expression string(key)) is string; convert one, e.g. with int() or string()"},
		{"key types differ, block mapping", e(15, "    on:\n      left: id\n      right: key > 3"),
			"p.yaml:17: transforms.j.on.right: the keys must have the same type, but the left key (field id) is int and the right key (expression key > 3) is bool"},
		{"key expression does not compile", e(15, `    on: {left: key, right: "kee + 1"}`),
			"p.yaml:15: transforms.j.on.right: column 1: unknown name kee"},
		{"key expression of unknown type", e(15, `    on: {left: key, right: "key > 3 ? 1 : 'x'"}`),
			"p.yaml:15: transforms.j.on.right: the key's type is only known when it runs; convert it with int(), float() or string()"},
		{"same key on both sides, unknown", e(15, "    on: colour"),
			"p.yaml:15: transforms.j.on: column 1: unknown name colour"},
		{"on without right", e(15, "    on: {left: key}"),
			"p.yaml:15: transforms.j.on.right: is required: a field or an expression of the right input"},
		{"on misspelt", e(15, "    on: {left: key, rigth: key}"),
			"p.yaml:15: transforms.j.on.rigth: unknown field"},
		{"empty on", e(15, "    on:"),
			"p.yaml:15: transforms.j.on: must be a field or an expression of both inputs, or {left: <key>, right: <key>}"},
		{"empty left key", e(15, "    on: {left: '', right: key}"),
			"p.yaml:15: transforms.j.on.left: must be a field or an expression of the left input"},
		{"on a list", e(15, "    on: [key, key]"),
			"p.yaml:15: transforms.j.on: must be a mapping of keys to values"},
		{"no on", e(15, ""),
			"p.yaml:11: transforms.j.on: is required, e.g. on: {left: key, right: key}"},
		{"key node name taken", strings.Replace(e(15, `    on: {left: "key % 2", right: key}`), "  b:\n", "  j-left-key:\n", 1),
			`p.yaml:15: transforms.j.on.left: a key expression runs in a node named j-left-key, which the name at line 6 takes`},
		{"unknown select field", e(18, "    select: {l: left.id, r: right.price}"),
			`p.yaml:18: transforms.j.select.r: the right input has no field "price" (fields: id, key, value)`},
		{"unknown select field, list form", e(18, "    select: [left.id, left.name]"),
			`p.yaml:18: transforms.j.select[1]: the left input has no field "name" (fields: id, key, value)`},
		{"select reference without side", e(18, "    select: {l: id}"),
			`p.yaml:18: transforms.j.select.l: "id" is not left.<field>, right.<field> or key`},
		{"select names a field twice", e(18, "    select: [left.id, right.id]"),
			`p.yaml:18: transforms.j.select[1]: left.id and right.id both make an output field "id"; name them with the mapping form, e.g. select: {id: left.id, right_id: right.id}`},
		{"select star collides", e(18, "    select: [left.*, right.*]"),
			`p.yaml:18: transforms.j.select[1]: left.id and right.id both make an output field "id"`},
		{"select key collides", e(18, "    select: [left.key, key]"),
			`p.yaml:18: transforms.j.select[1]: left.key and key both make an output field "key"; name them with the mapping form, e.g. select: {key: left.key, join_key: key}`},
		{"no select, fields collide", e(18, ""),
			"p.yaml:11: transforms.j.select: is required here: without it the output has every field of both inputs, but both have fields named id, key, value"},
		{"empty select", e(18, "    select: []"),
			"p.yaml:18: transforms.j.select: name at least one field"},
		{"select not a list or mapping", e(18, "    select: left.id"),
			"p.yaml:18: transforms.j.select: must be a list of fields"},
		{"lower after upper", e(16, "    lower: 2s"),
			"p.yaml:16: transforms.j.lower: 2s is after upper 1s: a right record joins a left one when right time - left time is in [lower, upper]"},
		{"no upper", e(17, ""),
			"p.yaml:11: transforms.j.upper: is required"},
		{"bad lower", e(16, "    lower: -1 second"),
			`p.yaml:16: transforms.j.lower: "-1 second" is not a duration`},
		{"size on an interval join", e(17, "    upper: 1s\n    size: 1s"),
			"p.yaml:18: transforms.j.size: an interval join takes no size (size is for window joins)"},
		{"ttl on a window join", e(12, "    kind: window\n    size: 1s\n    ttl: 1s"),
			"p.yaml:14: transforms.j.ttl: a window join takes no ttl (ttl is for inner joins)"},
		{"zero window size", e(12, "    kind: window\n    size: 0s"),
			"p.yaml:13: transforms.j.size: must be positive"},
		{"no window size", e(12, "    kind: window"),
			"p.yaml:11: transforms.j.size: is required"},
		{"negative ttl", editIn(e(12, "    kind: inner\n    ttl: -1s"), 17, ""),
			"p.yaml:13: transforms.j.ttl: must not be negative"},
		{"lower on an inner join", e(12, "    kind: inner"),
			"p.yaml:16: transforms.j.lower: an inner join takes no lower (lower is for interval joins)"},
		{"unknown kind", e(12, "    kind: outer"),
			`p.yaml:12: transforms.j.kind: unknown join kind "outer" (known: inner, interval, window)`},
		{"no kind", e(12, ""),
			"p.yaml:11: transforms.j.kind: is required"},
		{"unknown left input", e(13, "    left: nowhere"),
			`p.yaml:13: transforms.j.left: "nowhere" is not a source or transform (known: a, b)`},
		{"no right input", e(14, ""),
			"p.yaml:11: transforms.j.right: is required"},
		{"negative max_delay", e(5, "    watermark: {max_delay: -1s}"),
			"p.yaml:5: sources.a.watermark.max_delay: must not be negative"},
		{"negative idle_timeout", e(5, "    watermark: {idle_timeout: -5s}"),
			"p.yaml:5: sources.a.watermark.idle_timeout: must not be negative"},
		{"bad idle_timeout", e(5, "    watermark: {idle_timeout: soon}"),
			`p.yaml:5: sources.a.watermark.idle_timeout: "soon" is not a duration (Go syntax: 250ms, 1s, 5m)`},
		{"unknown watermark option", e(5, "    watermark: {delay: 1s}"),
			"p.yaml:5: sources.a.watermark.delay: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseErrs(t, tc.src)
			if !hasLine(lines, tc.want) {
				t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
			}
		})
	}
}

// One bad value is one error: a join with a bad key does not make its
// consumers report it undefined, and a negative watermark option is not
// reported again by the source.
func TestConfigJoinErrorReportedOnce(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{editIn(joinBase, 15, `    on: {left: key, right: "string(key)"}`), "p.yaml:15: transforms.j.on.right: the keys must have the same type"},
		{editIn(joinBase, 5, "    watermark: {max_delay: -1s}"), "p.yaml:5: sources.a.watermark.max_delay: must not be negative"},
		{editIn(joinBase, 13, "    left: nowhere"), `p.yaml:13: transforms.j.left: "nowhere" is not a source or transform`},
	} {
		lines := parseErrs(t, tc.src)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
			t.Errorf("errors:\n  %s\nwant exactly one, starting %q", strings.Join(lines, "\n  "), tc.want)
		}
	}
}

// An inner join without a ttl keeps its state forever: loading warns,
// at the ttl when it is given as 0, else at the kind.
func TestConfigInnerJoinWithoutTTLWarns(t *testing.T) {
	msg := "an inner join with ttl 0 keeps every record of both inputs in state forever: its state grows without bound unless the inputs are bounded; " +
		"set ttl to join only records less than ttl apart in event time and let older ones go"
	for _, tc := range []struct{ src, want string }{
		{editIn(editIn(joinBase, 17, ""), 16, ""), "p.yaml:12: transforms.j.kind: " + msg},
		{editIn(editIn(joinBase, 17, ""), 16, "    ttl: 0s"), "p.yaml:16: transforms.j.ttl: " + msg},
	} {
		p, err := config.Parse("p.yaml", []byte(strings.Replace(tc.src, "kind: interval", "kind: inner", 1)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range p.Warnings {
			got = append(got, w.String())
		}
		if !slices.Equal(got, []string{tc.want}) {
			t.Errorf("warnings:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), tc.want)
		}
	}
	p, err := config.Parse("p.yaml", []byte(strings.Replace(editIn(editIn(joinBase, 17, ""), 16, "    ttl: 1h"), "kind: interval", "kind: inner", 1)))
	if err != nil || len(p.Warnings) != 0 {
		t.Errorf("ttl 1h: error %v, warnings %v; want neither", err, p.Warnings)
	}
}

// A join's plan: both inputs hash-partitioned into one node (a side may be
// read twice, a self-join; an input may be defined after the join), and an
// expression key computed by a map node chained to its input.
func TestConfigJoinPlan(t *testing.T) {
	p, _ := load(t, `pipeline: p
sources:
  a:
    type: datagen
    parallelism: 2
    count: 10
transforms:
  j:
    type: join
    kind: window
    left: named
    right: a
    on: {left: name, right: "'n' + string(key % 10)"}
    size: 1m
    select: {name: left.name, at: left.at, v: right.value, k: key}
  self:
    type: join
    kind: inner
    left: a
    right: a
    on: key
    ttl: 1s
    select: [left.id, right.value]
  named:
    type: map
    input: a
    select:
      name: "'n' + string(key)"
      at: event_time
sinks:
  out:
    type: stdout
    input: j
  out2:
    type: stdout
    input: self
`)
	ns := nodes(t, p)
	j, key, self := ns["j"], ns["j-right-key"], ns["self"]
	if j == nil || key == nil || self == nil {
		t.Fatalf("nodes %v", ns)
	}
	if len(j.Inputs) != 2 || j.Inputs[0].From != ns["named"] || j.Inputs[1].From != key || j.Inputs[0].Input != 0 || j.Inputs[1].Input != 1 {
		t.Errorf("j inputs %+v; want named (left) and j-right-key (right)", j.Inputs)
	}
	if key.Parallelism != 2 || len(key.Inputs) != 1 || key.Inputs[0].From != ns["a"] {
		t.Errorf("j-right-key: parallelism %d, inputs %+v; want a's parallelism, 2, fed by a", key.Parallelism, key.Inputs)
	}
	if len(self.Inputs) != 2 || self.Inputs[0].From != ns["a"] || self.Inputs[1].From != ns["a"] {
		t.Errorf("self inputs %+v; want a twice", self.Inputs)
	}
	if !strings.Contains(j.Describe, "window join, tumbling event-time windows of 1m0s") {
		t.Errorf("j describes itself as %q", j.Describe)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if d := plan.Describe(); !strings.Contains(d, "right key of join j: expression 'n' + string(key % 10) <- a [forward]") {
		t.Errorf("plan:\n%s\nwant the right key node chained to a", d)
	}
}

// A join's output fields have the types of the fields they read, strings
// and times included, and key has the key's type.
func TestConfigJoinOutputTypes(t *testing.T) {
	dir := runYAML(t, `pipeline: types
checkpoint:
  dir: ckpts
sources:
  a:
    type: datagen
    count: 4
    keys: 2
transforms:
  named:
    type: map
    input: a
    select:
      name: "'n' + string(key)"
      at: event_time
      half: value / 2
  j:
    type: join
    kind: window
    left: named
    right: a
    on: {left: name, right: "'n' + string(key)"}
    size: 1m
    select: {name: left.name, at: left.at, half: left.half, v: right.value, k: key}
sinks:
  out:
    type: file
    input: j
    path: out
`)
	schema := &row.Schema{Fields: []row.Field{{Name: "name", Kind: row.String}, {Name: "at", Kind: row.Time}, {Name: "half", Kind: row.Float},
		{Name: "v", Kind: row.Int}, {Name: "k", Kind: row.String}}}
	var want []row.Row
	rs := datagenRecords(4, 2, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond)
	for _, l := range rs {
		for _, r := range rs {
			if l.key == r.key {
				name := row.StringValue(fmt.Sprintf("n%d", l.key))
				want = append(want, row.Row{name, tval(l.time), fval(float64(l.value) / 2), i64(r.value), name})
			}
		}
	}
	got := committedLines(t, dir, "out")
	sameLines(t, "join output", got, jsonLines(schema, want))
	if line := `{"name":"n0","at":"2026-01-01T00:00:00Z","half":0,"v":0,"k":"n0"}`; !slices.Contains(got, line) {
		t.Errorf("no line %s in\n%s", line, strings.Join(got, "\n"))
	}
}

// A join's state names the fields of the rows it keeps and their key: after
// an input's fields or the keys changed, the next run refuses the checkpoint
// with state.ErrStateMismatch instead of reading old rows at the new fields'
// positions or under keys of another field; unchanged, it restores.
func TestConfigJoinRefusesStateOfOtherFields(t *testing.T) {
	src := `pipeline: restore
checkpoint:
  dir: ckpts
restart:
  max_attempts: 0
sources:
  a:
    type: datagen
    count: 20
    keys: 2
transforms:
  m:
    type: map
    input: a
    select:
      key: key
      v: value
  j:
    type: join
    kind: inner
    left: m
    right: a
    on: key
    ttl: 0s
    select: {v: left.v, id: right.id}
sinks:
  out:
    type: file
    input: j
    path: out
`
	dir := runYAML(t, src) // the inner join keeps every record: the final checkpoint holds them
	path := filepath.Join(dir, "p.yaml")
	run := func(src string) error {
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return p.Stream.Run(ctx, p.RunOptions())
	}
	if err := run(strings.Replace(src, "      v: value\n", "      w: id\n      v: value\n", 1)); !errors.Is(err, state.ErrStateMismatch) {
		t.Errorf("after the left input gained a field: Run = %v, want state.ErrStateMismatch", err)
	}
	if err := run(strings.Replace(src, "    on: key\n", "    on: {left: v, right: value}\n", 1)); !errors.Is(err, state.ErrStateMismatch) {
		t.Errorf("after the keys changed: Run = %v, want state.ErrStateMismatch", err)
	}
	if err := run(src); err != nil {
		t.Errorf("with the same fields: Run = %v, want the finished pipeline to restore", err)
	}
}
