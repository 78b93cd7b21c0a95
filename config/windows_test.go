package config_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/row"
)

// A sliding window from a pipeline file commits, for every key and every
// window [k*slide, k*slide+size) holding records of the key, exactly one
// result computed from the records the datagen contract puts in it. size is
// not a multiple of slide, and the start time is not aligned to either.
func TestConfigSlidingWindowRunsToExactOutput(t *testing.T) {
	const (
		count = 3000
		keys  = 7
		size  = 250 * time.Millisecond
		slide = 100 * time.Millisecond
	)
	start := time.Date(2026, 1, 1, 0, 0, 0, int(130*time.Millisecond), time.UTC)
	dir := runYAML(t, fmt.Sprintf(`pipeline: sliding
checkpoint:
  interval: 100ms
  dir: ckpts
restart:
  max_attempts: 0
sources:
  events:
    type: datagen
    parallelism: 2
    count: %d
    keys: %d
    start_time: %s
transforms:
  slid:
    type: window
    kind: sliding
    input: events
    key: key
    size: %v
    slide: %v
    parallelism: 2
    aggregates:
      n: count()
      sum: sum(value)
      lo: min(id)
      hi: max(id)
      distinct: count_distinct(value)
      mean: avg(value)
sinks:
  out:
    type: file
    input: slid
    path: out
    parallelism: 2
`, count, keys, start.Format(time.RFC3339Nano), size, slide))

	type win struct{ key, start int64 }
	type agg struct {
		n, sum, lo, hi int64
		values         map[int64]bool
	}
	aggs := map[win]*agg{}
	for _, r := range datagenRecords(count, keys, start, time.Millisecond) {
		// The windows of r: every start s, a multiple of slide, with
		// s <= r.time < s+size.
		for s := floorTo(r.time, slide); s > r.time-int64(size); s -= int64(slide) {
			a := aggs[win{r.key, s}]
			if a == nil {
				a = &agg{lo: r.id, hi: r.id, values: map[int64]bool{}}
				aggs[win{r.key, s}] = a
			}
			a.n++
			a.sum += r.value
			a.lo, a.hi = min(a.lo, r.id), max(a.hi, r.id)
			a.values[r.value] = true
		}
	}
	schema := &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "window_start", Kind: row.Time}, {Name: "window_end", Kind: row.Time},
		{Name: "n", Kind: row.Int}, {Name: "sum", Kind: row.Int}, {Name: "lo", Kind: row.Int}, {Name: "hi", Kind: row.Int},
		{Name: "distinct", Kind: row.Int}, {Name: "mean", Kind: row.Float}}}
	var want []row.Row
	for w, a := range aggs {
		want = append(want, row.Row{i64(w.key), tval(w.start), tval(w.start + int64(size)),
			i64(a.n), i64(a.sum), i64(a.lo), i64(a.hi), i64(int64(len(a.values))), fval(float64(a.sum) / float64(a.n))})
	}
	sameLines(t, "sliding window results", committedLines(t, dir, "out"), jsonLines(schema, want))
}

// A session window from a pipeline file: a filter leaves bursts of records
// (value % 100 < 50), each key's records in a burst are exactly gap apart
// (touching sessions merge) and bursts are 55 ms apart, so every key has one
// session per burst, [first record, last record + gap). Allowed lateness
// and a late side output do not change the results, and since datagen is in
// order, the side output's sink commits nothing.
func TestConfigSessionWindowRunsToExactOutput(t *testing.T) {
	const (
		count = 2000
		keys  = 5
		gap   = 5 * time.Millisecond
	)
	dir := runYAML(t, fmt.Sprintf(`pipeline: sessions
checkpoint:
  interval: 100ms
  dir: ckpts
restart:
  max_attempts: 0
sources:
  events:
    type: datagen
    parallelism: 2
    count: %d
    keys: %d
transforms:
  bursts:
    type: filter
    input: events
    where: value %% 100 < 50
  sess:
    type: window
    kind: session
    input: bursts
    key: key
    gap: %v
    allowed_lateness: 1s
    late_records: late
    parallelism: 2
    aggregates:
      n: count()
      sum: sum(value)
      first: min(id)
      last: max(id)
sinks:
  out:
    type: file
    input: sess
    path: out
  late:
    type: file
    input: sess.late
    path: late
`, count, keys, gap))

	// Sessions per key: records sorted by time, a new session where the
	// next record is more than gap after the last.
	byKey := map[int64][]datagenRecord{}
	for _, r := range datagenRecords(count, keys, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond) {
		if r.value%100 < 50 {
			byKey[r.key] = append(byKey[r.key], r)
		}
	}
	schema := &row.Schema{Fields: []row.Field{{Name: "key", Kind: row.Int}, {Name: "window_start", Kind: row.Time}, {Name: "window_end", Kind: row.Time},
		{Name: "n", Kind: row.Int}, {Name: "sum", Kind: row.Int}, {Name: "first", Kind: row.Int}, {Name: "last", Kind: row.Int}}}
	var want []row.Row
	for k, rs := range byKey {
		slices.SortFunc(rs, func(a, b datagenRecord) int { return int(a.time - b.time) })
		var cur []datagenRecord
		flush := func() {
			var sum int64
			for _, r := range cur {
				sum += r.value
			}
			want = append(want, row.Row{i64(k), tval(cur[0].time), tval(cur[len(cur)-1].time + int64(gap)),
				i64(int64(len(cur))), i64(sum), i64(cur[0].id), i64(cur[len(cur)-1].id)})
		}
		for _, r := range rs {
			if len(cur) > 0 && r.time-cur[len(cur)-1].time > int64(gap) {
				flush()
				cur = nil
			}
			cur = append(cur, r)
		}
		flush()
	}
	if len(want) != keys*(count/100) {
		t.Fatalf("the model has %d sessions, want %d (one per key and burst)", len(want), keys*(count/100))
	}
	sameLines(t, "session window results", committedLines(t, dir, "out"), jsonLines(schema, want))
	if late := committedLines(t, dir, "late"); len(late) != 0 {
		t.Errorf("in-order input sent %d records to the late side output, e.g. %s", len(late), late[0])
	}
}

// windowBase is a valid pipeline with a window; cases edit it by line.
const windowBase = `pipeline: p
sources:
  events:
    type: datagen
    count: 10
transforms:
  w:
    type: window
    input: events
    key: key
    size: 1s
    aggregates:
      c: count()
sinks:
  out:
    type: file
    input: w
    path: out
`

// editIn replaces line (1-based) of src with with.
func editIn(src string, line int, with string) string {
	ls := strings.Split(src, "\n")
	ls[line-1] = with
	return strings.Join(ls, "\n")
}

// Every bad value of a window's kind, shape, lateness and late side output
// is an error naming the file, line and field.
func TestConfigWindowErrors(t *testing.T) {
	if _, err := config.Parse("p.yaml", []byte(windowBase)); err != nil {
		t.Fatalf("windowBase: %v", err)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown kind", editIn(windowBase, 11, "    kind: hopping"),
			`p.yaml:11: transforms.w.kind: unknown window kind "hopping" (known: session, sliding, tumbling)`},
		{"sliding without slide", editIn(windowBase, 11, "    kind: sliding\n    size: 1s"),
			"p.yaml:8: transforms.w.slide: is required"},
		{"zero slide", editIn(windowBase, 11, "    kind: sliding\n    size: 1s\n    slide: 0s"),
			"p.yaml:13: transforms.w.slide: must be positive"},
		{"negative slide", editIn(windowBase, 11, "    kind: sliding\n    size: 1s\n    slide: -1s"),
			"p.yaml:13: transforms.w.slide: must be positive"},
		{"slide on a tumbling window", editIn(windowBase, 11, "    size: 1s\n    slide: 1s"),
			"p.yaml:12: transforms.w.slide: a tumbling window takes no slide (slide is for sliding windows)"},
		{"gap on a sliding window", editIn(windowBase, 11, "    kind: sliding\n    size: 1s\n    slide: 1s\n    gap: 1s"),
			"p.yaml:14: transforms.w.gap: a sliding window takes no gap (gap is for session windows)"},
		{"size on a session window", editIn(windowBase, 11, "    kind: session\n    gap: 1s\n    size: 1s"),
			"p.yaml:13: transforms.w.size: a session window takes no size (size is for tumbling and sliding windows)"},
		{"session without gap", editIn(windowBase, 11, "    kind: session"),
			"p.yaml:8: transforms.w.gap: is required"},
		{"zero gap", editIn(windowBase, 11, "    kind: session\n    gap: 0s"),
			"p.yaml:12: transforms.w.gap: must be positive"},
		{"bad gap", editIn(windowBase, 11, "    kind: session\n    gap: long"),
			`p.yaml:12: transforms.w.gap: "long" is not a duration (Go syntax: 250ms, 1s, 5m)`},
		{"negative allowed lateness", editIn(windowBase, 11, "    size: 1s\n    allowed_lateness: -1s"),
			"p.yaml:12: transforms.w.allowed_lateness: must not be negative"},
		{"bad late_records", editIn(windowBase, 11, "    size: 1s\n    late_records: w.late"),
			`p.yaml:12: transforms.w.late_records: "w.late" is neither drop nor a side output name (letters, digits, '_' and '-'; consumers then read input: w.<name>)`},
		{"late_records not a value", editIn(windowBase, 11, "    size: 1s\n    late_records: [a]"),
			"p.yaml:12: transforms.w.late_records: must be a single value"},
		{"unknown side output", editIn(editIn(windowBase, 17, "    input: w.tardy"), 11, "    size: 1s\n    late_records: late"),
			`p.yaml:18: sinks.out.input: w has no side output "tardy" (its side outputs: late)`},
		{"side output of a window that drops", editIn(windowBase, 17, "    input: w.late"),
			`p.yaml:17: sinks.out.input: w has no side outputs, so "late" names nothing (a window declares one with late_records: <name>)`},
		{"side output of a source", editIn(windowBase, 9, "    input: events.late"),
			`p.yaml:9: transforms.w.input: events has no side outputs, so "late" names nothing`},
		{"side output of nothing", editIn(windowBase, 17, "    input: nowhere.late"),
			`p.yaml:17: sinks.out.input: "nowhere.late" is not a source or transform (known: events, w)`},
		{"key list naming a missing field", editIn(windowBase, 10, "    key: [key, nope]"),
			`p.yaml:10: transforms.w.key: input events has no field "nope" (fields: id, key, value)`},
		{"key list naming a field twice", editIn(windowBase, 10, "    key: [key, key]"),
			`p.yaml:10: transforms.w.key: field "key" is listed twice`},
		{"key list field named like a result field", editIn(editIn(windowBase, 13, "      value: count()"), 10, "    key: [value]"),
			`p.yaml:10: transforms.w.key: key field "value" would share its name with a field of the window result`},
		{"a window reading its own late records", editIn(editIn(windowBase, 11, "    size: 1s\n    late_records: late"), 9, "    input: w.late"),
			"p.yaml:7: transforms: transforms w feed each other in a cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseErrs(t, tc.src)
			if !hasLine(lines, tc.want) {
				t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
			}
		})
	}
}

// One bad shape value is one error: the window's consumers do not report
// it as undefined, nor its side output's.
func TestConfigWindowErrorReportedOnce(t *testing.T) {
	src := editIn(windowBase, 11, "    kind: session\n    gap: -1s\n    late_records: late")
	src = strings.Replace(src, "sinks:\n", "sinks:\n  late:\n    type: file\n    input: w.late\n    path: late\n", 1)
	lines := parseErrs(t, src)
	if want := "p.yaml:12: transforms.w.gap: must be positive"; len(lines) != 1 || lines[0] != want {
		t.Errorf("errors:\n  %s\nwant exactly %q", strings.Join(lines, "\n  "), want)
	}
}

// A window's late records reach the node that names window.<late_records>
// as its input through the window's side output, whatever the order of the
// file; the side output carries the window's input rows.
func TestConfigLateSideOutputWiring(t *testing.T) {
	p, _ := load(t, `pipeline: p
sources:
  events:
    type: datagen
    count: 10
    watermark: {max_delay: 2s}
sinks:
  out:
    type: file
    input: w
    path: out
  late:
    type: file
    input: tagged
    path: late
transforms:
  tagged:
    type: map
    input: w.too_late
    keep_input: true
    select:
      at: event_time
  w:
    type: window
    kind: session
    input: events
    key: key
    gap: 1s
    allowed_lateness: 5s
    late_records: too_late
    aggregates:
      c: count()
`)
	ns := nodes(t, p)
	w, tagged := ns["w"], ns["tagged"]
	if w == nil || tagged == nil {
		t.Fatalf("nodes %v", ns)
	}
	if !slices.Equal(w.SideOutputs, []string{"too_late"}) {
		t.Errorf("w declares side outputs %q, want [too_late]", w.SideOutputs)
	}
	if len(tagged.Inputs) != 1 || tagged.Inputs[0].From != w || tagged.Inputs[0].Output != "too_late" {
		t.Errorf("tagged inputs %+v; want w's side output too_late", tagged.Inputs)
	}
	for _, s := range []string{"session event-time window gap 1s", "allowed lateness 5s", `late records to side output "too_late"`} {
		if !strings.Contains(w.Describe, s) {
			t.Errorf("w describes itself as %q, missing %q", w.Describe, s)
		}
	}
	if !strings.Contains(ns["events"].Describe, "watermark max delay 2s") {
		t.Errorf("events describes itself as %q, missing its watermark", ns["events"].Describe)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings %v, want none", p.Warnings)
	}
}

// Findings that do not stop a window: a side output nothing reads, and
// sliding windows with gaps between them.
func TestConfigWindowWarnings(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(editIn(windowBase, 11, "    kind: sliding\n    size: 1s\n    slide: 2s\n    late_records: late")))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		"p.yaml:13: transforms.w.slide: slide 2s is longer than size 1s: the windows leave gaps, and records in a gap belong to no window and are ignored",
		"p.yaml:14: transforms.w.late_records: nothing reads side output w.late (a transform or sink would with input: w.late), so its records are dropped and counted as with late_records: drop",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// kind: tumbling is the default: a window without kind is the same node.
func TestConfigTumblingIsTheDefaultKind(t *testing.T) {
	p1, _ := load(t, windowBase)
	p2, _ := load(t, editIn(windowBase, 11, "    kind: tumbling\n    size: 1s"))
	d1, d2 := nodes(t, p1)["w"].Describe, nodes(t, p2)["w"].Describe
	if d1 != d2 || d1 != "tumbling event-time window 1s" {
		t.Errorf("without kind: %q; kind: tumbling: %q; want both %q", d1, d2, "tumbling event-time window 1s")
	}
}

// -0 and +0 are one group of a window's key, whether the key is one field
// (key: k) or a list of one (key: [k]): every window commits one row per
// key, and its count is all of the window's records.
func TestConfigWindowKeyZeroesAreOneGroup(t *testing.T) {
	const count = 400
	for _, key := range []string{"k", "[k]"} {
		t.Run(key, func(t *testing.T) {
			dir := runYAML(t, fmt.Sprintf(`pipeline: zeroes
checkpoint:
  interval: 50ms
  dir: ckpts
sources:
  events:
    type: datagen
    count: %d
    keys: 4
transforms:
  signed: {type: map, input: events, select: {k: -(value %% 2) * 0.0, id: id}}
  w:
    type: window
    input: signed
    key: %s
    size: 100ms
    aggregates: {n: count()}
sinks:
  out: {type: file, input: w, path: out}
`, count, key))
			perWindow := map[string]int64{}
			for _, l := range committedLines(t, dir, "out") {
				var r struct {
					K     *float64 `json:"k"`
					Key   *float64 `json:"key"`
					Start string   `json:"window_start"`
					N     int64    `json:"n"`
				}
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
				if _, dup := perWindow[r.Start]; dup {
					t.Fatalf("window %s has two rows; second: %s", r.Start, l)
				}
				perWindow[r.Start] = r.N
			}
			total := int64(0)
			for _, n := range perWindow {
				total += n
			}
			if total != count || len(perWindow) < 2 {
				t.Fatalf("%d windows counting %d records; want %d records in at least two windows", len(perWindow), total, count)
			}
		})
	}
}
