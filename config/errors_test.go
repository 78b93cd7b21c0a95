package config_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// parseErrs parses src as p.yaml and returns its errors, one per line of the
// joined error, failing the test if parsing succeeds.
func parseErrs(t *testing.T, src string) []string {
	t.Helper()
	_, err := config.Parse("p.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded; want errors for\n%s", src)
	}
	return strings.Split(err.Error(), "\n")
}

// configErrors returns the *config.Error values of err.
func configErrors(err error) []*config.Error {
	var out []*config.Error
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*config.Error); ok {
			out = append(out, ce)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want || strings.HasPrefix(l, want) {
			return true
		}
	}
	return false
}

// base is a valid pipeline; cases below edit it by line number (1-based):
// line 5 is the source's rate, 11 the window size, 13 its aggregate, 16-18
// the sink's type, input and path.
const base = `pipeline: p
sources:
  events:
    type: datagen
    rate: 1000
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

// edit replaces one line (1-based) of base.
func edit(line int, with string) string {
	ls := strings.Split(base, "\n")
	ls[line-1] = with
	return strings.Join(ls, "\n")
}

func TestBaseIsValid(t *testing.T) {
	if _, err := config.Parse("p.yaml", []byte(base)); err != nil {
		t.Fatal(err)
	}
}

// Errors name file:line, the dotted field and what is wrong. The line
// numbers are exact.
func TestErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"negative rate", edit(5, "    rate: -3"), "p.yaml:5: sources.events.rate: must be positive"},
		{"zero rate", edit(5, "    rate: 0"), "p.yaml:5: sources.events.rate: must be positive"},
		{"rate not a number", edit(5, "    rate: fast"), `p.yaml:5: sources.events.rate: "fast" is not a finite number`},
		{"negative count", edit(5, "    count: -1"), "p.yaml:5: sources.events.count: must be positive"},
		{"count not whole", edit(5, "    count: 1.5"), `p.yaml:5: sources.events.count: "1.5" is not a whole number`},
		{"zero keys", edit(5, "    keys: 0"), "p.yaml:5: sources.events.keys: must be positive"},
		{"zero event interval", edit(5, "    event_interval: 0s"), "p.yaml:5: sources.events.event_interval: must be positive"},
		{"bad event interval", edit(5, "    event_interval: 5 seconds"), `p.yaml:5: sources.events.event_interval: "5 seconds" is not a duration`},
		{"bad start time", edit(5, "    start_time: yesterday"), `p.yaml:5: sources.events.start_time: "yesterday" is not an RFC 3339 time`},
		{"zero parallelism", edit(5, "    parallelism: 0"), "p.yaml:5: sources.events.parallelism: must be positive"},
		{"unknown source field", edit(5, "    colour: red"), "p.yaml:5: sources.events.colour: unknown field"},
		{"unknown source type", edit(4, "    type: kinesis"), `p.yaml:4: sources.events.type: unknown source type "kinesis" (known: datagen, file, kafka, nats, nexmark, postgres_cdc)`},
		{"bad window size", edit(11, "    size: 1 sec"), `p.yaml:11: transforms.w.size: "1 sec" is not a duration (Go syntax: 250ms, 1s, 5m)`},
		{"zero window size", edit(11, "    size: 0s"), "p.yaml:11: transforms.w.size: must be positive"},
		{"negative window size", edit(11, "    size: -1s"), "p.yaml:11: transforms.w.size: must be positive"},
		{"unknown window key", edit(10, "    key: colour"), `p.yaml:10: transforms.w.key: input events has no field "colour"`},
		{"bad aggregate", edit(13, "      c: median(value)"), `p.yaml:13: transforms.w.aggregates.c: "median(value)": unknown aggregate median`},
		{"unknown transform type", edit(8, "    type: union"), `p.yaml:8: transforms.w.type: unknown transform type "union" (known: aggregate, filter, join, lookup_join, map, over, top_n, window, window_top)`},
		{"unknown transform input", edit(9, "    input: nowhere"), `p.yaml:9: transforms.w.input: "nowhere" is not a source or transform`},
		{"unknown sink type", edit(16, "    type: s3"), `p.yaml:16: sinks.out.type: unknown sink type "s3" (known: blackhole, file, iceberg, kafka, postgres, stdout)`},
		{"unknown sink input", edit(17, "    input: nowhere"), `p.yaml:17: sinks.out.input: "nowhere" is not a source or transform (known: events, w)`},
		{"unknown sink field", edit(18, "    paht: out"), "p.yaml:18: sinks.out.paht: unknown field"},
		{"unknown top-level field", edit(1, "pipline: p"), "p.yaml:1: pipline: unknown field"},
		{"sink format", edit(18, "    path: out\n    format: csv"), `p.yaml:19: sinks.out.format: unknown format "csv" (known: jsonl, parquet)`},
		{"field given twice", edit(5, "    rate: 1\n    rate: 2"), "p.yaml:6: sources.events.rate: is given twice"},
		{"not a mapping", edit(13, "      c: [count()]"), "p.yaml:13: transforms.w.aggregates.c: must be a single value"},
		{"sources not a mapping", "pipeline: p\nsources: [a]\nsinks:\n  out:\n    type: stdout\n    input: a\n", "p.yaml:2: sources: must be a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseErrs(t, tc.src)
			if !hasLine(lines, tc.want) {
				t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
			}
		})
	}
}

var checkpointBase = `pipeline: p
checkpoint:
  interval: 1s
restart:
  delay: 1s
sources:
  events:
    type: datagen
sinks:
  out:
    type: stdout
    input: events
`

func TestCheckpointAndRestartErrors(t *testing.T) {
	edit := func(line int, with string) string {
		ls := strings.Split(checkpointBase, "\n")
		ls[line-1] = with
		return strings.Join(ls, "\n")
	}
	for _, tc := range []struct {
		src, want string
	}{
		{edit(3, "  interval: soon"), `p.yaml:3: checkpoint.interval: "soon" is not a duration`},
		{edit(3, "  interval: -1s"), "p.yaml:3: checkpoint.interval: must not be negative"},
		{edit(3, "  timeout: 0s"), "p.yaml:3: checkpoint.timeout: must be positive"},
		{edit(3, "  min_pause: -5s"), "p.yaml:3: checkpoint.min_pause: must not be negative"},
		{edit(3, "  max_concurrent: 0"), "p.yaml:3: checkpoint.max_concurrent: must be positive"},
		{edit(3, "  tolerable_failures: -1"), "p.yaml:3: checkpoint.tolerable_failures: must not be negative"},
		{edit(3, "  retain: 0"), "p.yaml:3: checkpoint.retain: must be positive"},
		{edit(3, "  mode: sometimes"), `p.yaml:3: checkpoint.mode: unknown checkpoint mode "sometimes"`},
		{edit(3, "  intervall: 1s"), "p.yaml:3: checkpoint.intervall: unknown field"},
		{edit(5, "  delay: -1s"), "p.yaml:5: restart.delay: must not be negative"},
		{edit(5, "  delay: 1"), `p.yaml:5: restart.delay: "1" is not a duration`},
		{edit(5, "  max_attempts: -2"), "p.yaml:5: restart.max_attempts: must not be negative"},
		{edit(5, "  max_delay: 0s"), "p.yaml:5: restart.max_delay: must be positive"},
		{edit(5, "  max_delay: 500ms"), "p.yaml:5: restart.max_delay: 500ms is shorter than delay 1s"},
		{edit(5, "  multiplier: 0.5"), "p.yaml:5: restart.multiplier: must be at least 1"},
		{edit(5, "  jitter: 1.5"), "p.yaml:5: restart.jitter: must be at least 0 and below 1"},
		{edit(5, "  give_up_after: -1m"), "p.yaml:5: restart.give_up_after: must not be negative"},
		{edit(5, "  give_up_after: 0s"), "p.yaml:5: restart.give_up_after: 0 (no time limit) needs max_attempts: restarts must end"},
		{edit(5, "  delay: 0s"), "p.yaml:5: restart.delay: 0 never grows: give a positive delay, or multiplier: 1"},
		{edit(1, "parallelism: 0"), "p.yaml:1: parallelism: must be positive"},
		{edit(1, "max_parallelism: -4"), "p.yaml:1: max_parallelism: must be between 1 and 32768"},
	} {
		lines := parseErrs(t, tc.src)
		if !hasLine(lines, tc.want) {
			t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), tc.want)
		}
	}
}

func TestMissingRequiredFields(t *testing.T) {
	for _, tc := range []struct {
		src   string
		field string
	}{
		{strings.Replace(base, "pipeline: p\n", "", 1), "pipeline"},
		{strings.Replace(base, "    type: datagen\n", "", 1), "sources.events.type"},
		{strings.Replace(base, "    input: events\n", "", 1), "transforms.w.input"},
		{strings.Replace(base, "    key: key\n", "", 1), "transforms.w.key"},
		{strings.Replace(base, "    size: 1s\n", "", 1), "transforms.w.size"},
		{strings.Replace(base, "    input: w\n", "", 1), "sinks.out.input"},
		{strings.Replace(base, "    path: out\n", "", 1), "sinks.out.path"},
		{strings.Replace(base, "    type: file\n", "", 1), "sinks.out.type"},
	} {
		lines := parseErrs(t, tc.src)
		re := regexp.MustCompile(`^p\.yaml:\d+: ` + regexp.QuoteMeta(tc.field) + `: is required$`)
		found := false
		for _, l := range lines {
			found = found || re.MatchString(l)
		}
		if !found {
			t.Errorf("without %s: errors\n  %s\nwant p.yaml:<line>: %s: is required", tc.field, strings.Join(lines, "\n  "), tc.field)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"pipeline: p\nsinks:\n  out:\n    type: stdout\n    input: x\n", "sources: a pipeline needs at least one source"},
		{"pipeline: p\nsources:\n  events:\n    type: datagen\n", "sinks: a pipeline needs at least one sink"},
		{strings.Replace(base, "    aggregates:\n      c: count()\n", "", 1), "transforms.w.aggregates: name at least one aggregate"},
		{"", "the file is empty"},
	} {
		lines := parseErrs(t, tc.src)
		if !strings.Contains(strings.Join(lines, "\n"), tc.want) {
			t.Errorf("errors\n  %s\nwant %q", strings.Join(lines, "\n  "), tc.want)
		}
	}
}

func TestTransformCycle(t *testing.T) {
	src := `pipeline: p
sources:
  events:
    type: datagen
transforms:
  a:
    type: window
    input: b
    key: key
    size: 1s
    aggregates:
      c: count()
  b:
    type: window
    input: a
    key: key
    size: 1s
    aggregates:
      c: count()
  self:
    type: window
    input: self
    key: key
    size: 1s
    aggregates:
      c: count()
sinks:
  out:
    type: stdout
    input: events
`
	lines := parseErrs(t, src)
	found := false
	for _, l := range lines {
		if strings.HasPrefix(l, "p.yaml:6: transforms: ") && strings.Contains(l, "a, b, self") && strings.Contains(l, "cycle") {
			found = true
		}
	}
	if !found {
		t.Errorf("errors\n  %s\nwant p.yaml:6: transforms: ... a, b, self ... cycle", strings.Join(lines, "\n  "))
	}
}

// Every independent problem is reported in one go, each as a *config.Error
// with its file, line and field.
func TestMultipleErrorsAtOnce(t *testing.T) {
	src := edit(18, "    path: out\n    colour: blue")
	src = strings.Replace(src, "    rate: 1000", "    rate: -1", 1)
	src = strings.Replace(src, "    size: 1s", "    size: forever", 1)
	_, err := config.Parse("p.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	want := map[string]int{
		"sources.events.rate": 5,
		"transforms.w.size":   11,
		"sinks.out.colour":    19,
	}
	got := map[string]int{}
	for _, e := range configErrors(err) {
		if e.File != "p.yaml" {
			t.Errorf("error %q names file %q", e, e.File)
		}
		got[e.Field] = e.Line
	}
	for f, l := range want {
		if got[f] != l {
			t.Errorf("error for %s at line %d, want line %d (all: %v)", f, got[f], l, err)
		}
	}
}

// Load names the file as given.
func TestLoadNamesFile(t *testing.T) {
	path := writeFile(t, "dir/pipe.yaml", edit(5, "    rate: -3"))
	_, err := config.Load(path)
	if err == nil || !strings.Contains(err.Error(), path+":5: sources.events.rate: must be positive") {
		t.Fatalf("Load error %v; want it to start with %s:5:", err, path)
	}
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != path || ce.Line != 5 || ce.Field != "sources.events.rate" {
		t.Fatalf("errors.As *config.Error: %+v", ce)
	}
	if _, err := config.Load(path + ".missing"); err == nil {
		t.Fatal("Load of a missing file: no error")
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    config.Error
		want string
	}{
		{config.Error{File: "f.yaml", Line: 3, Field: "a.b", Msg: "bad"}, "f.yaml:3: a.b: bad"},
		{config.Error{File: "f.yaml", Msg: "bad"}, "f.yaml: bad"},
		{config.Error{File: "f.yaml", Line: 2, Msg: "bad"}, "f.yaml:2: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v formats as %q, want %q", tc.e, got, tc.want)
		}
	}
}

// The errors below pin defects: each names the file, line and field the
// README promises for every error, or reports a problem exactly once.

// A node name used twice is reported at the second name's line and points
// at the first name's line (not at the first field under each name).
func TestDuplicateNodeNameLines(t *testing.T) {
	lines := parseErrs(t, edit(15, "  events:"))
	want := `p.yaml:15: sinks.events: the name "events" is already used at line 3`
	if !hasLine(lines, want) {
		t.Errorf("errors:\n  %s\nwant %q (line 3 declares events, line 15 reuses it)", strings.Join(lines, "\n  "), want)
	}
}

// Problems found when the graph is planned also name file, line and field.
func TestPlanErrorsNameLineAndField(t *testing.T) {
	lines := parseErrs(t, edit(5, "    parallelism: 200"))
	if want := "p.yaml:5: sources.events.parallelism: "; !hasLine(lines, want) {
		t.Errorf("parallelism above max_parallelism: errors\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), want)
	}

	src := strings.ReplaceAll(base, "events", `"my events"`)
	src = strings.Replace(src, `input: "my events"`, `input: my events`, 1)
	lines = parseErrs(t, src)
	re := regexp.MustCompile(`^p\.yaml:\d+: sources\.my events: `)
	found := false
	for _, l := range lines {
		found = found || re.MatchString(l)
	}
	if !found {
		t.Errorf("invalid node name: errors\n  %s\nwant p.yaml:<line>: sources.my events: ...", strings.Join(lines, "\n  "))
	}
}

// One bad value is one error: not repeated without its field, and not
// followed by errors claiming the node it belongs to is undefined.
func TestInvalidSourceValueReportedOnce(t *testing.T) {
	for _, tc := range []struct{ line, field string }{
		{"    count: -1", "count"},
		{"    keys: -1", "keys"},
		{"    rate: -1", "rate"},
	} {
		lines := parseErrs(t, edit(5, tc.line))
		want := "p.yaml:5: sources.events." + tc.field + ": must be positive"
		if len(lines) != 1 || lines[0] != want {
			t.Errorf("%s: errors\n  %s\nwant exactly %q", strings.TrimSpace(tc.line), strings.Join(lines, "\n  "), want)
		}
	}
}

// A node that fails validation is still defined: its consumers must not
// report that their input does not exist.
func TestNoCascadingUndefinedInputErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, node string
	}{
		{"unknown source type", edit(4, "    type: kafka"), "events"},
		{"window with a bad aggregate field", edit(13, "      c: sum(nope)"), "w"},
		{"window with an unknown key", edit(10, "    key: colour"), "w"},
	} {
		lines := parseErrs(t, tc.src)
		for _, l := range lines {
			if strings.Contains(l, fmt.Sprintf("%q is not a source or transform defined", tc.node)) {
				t.Errorf("%s: spurious error %q (%s is defined in the file)", tc.name, l, tc.node)
			}
		}
	}
}

// An aggregate whose field does not fit names that aggregate and its line.
func TestAggregateFieldErrorNamesAggregate(t *testing.T) {
	lines := parseErrs(t, edit(13, "      c: count()\n      s: sum(nope)"))
	want := `p.yaml:14: transforms.w.aggregates.s: `
	if !hasLine(lines, want) {
		t.Errorf("errors:\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), want)
	}
}

// rate: inf is not a rate; accepted, it makes datagen emit nothing, forever.
func TestInfiniteRateRejected(t *testing.T) {
	for _, v := range []string{"inf", "+Inf", "infinity", "1e400"} {
		_, err := config.Parse("p.yaml", []byte(edit(5, "    rate: "+v)))
		if err == nil || !strings.Contains(err.Error(), "p.yaml:5: sources.events.rate: ") {
			t.Errorf("rate: %s: error %v; want p.yaml:5: sources.events.rate: ...", v, err)
		}
	}
}

// Key groups are bounded (state.UpperBoundMaxParallelism = 32768); a larger
// max_parallelism must be a configuration error, not a panic when the job
// starts (state.KeyGroupRangeFor panics from runtime's job build).
func TestMaxParallelismUpperBound(t *testing.T) {
	if _, err := config.Parse("p.yaml", []byte("max_parallelism: 32768\n"+base)); err != nil {
		t.Fatalf("max_parallelism 32768 (the upper bound) rejected: %v", err)
	}
	_, err := config.Parse("p.yaml", []byte("max_parallelism: 40000\n"+base))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:1: max_parallelism: ") {
		t.Fatalf("max_parallelism 40000: error %v; want p.yaml:1: max_parallelism: ...", err)
	}
}
