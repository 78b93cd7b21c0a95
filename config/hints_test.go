package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// A misspelt field is reported first, with the field it probably means,
// before the errors it causes (here: the window has no aggregates, so it
// cannot be built); the other errors follow in file order.
func TestMisspeltFieldComesFirstWithSuggestion(t *testing.T) {
	src := strings.Replace(base, "    aggregates:\n", "    aggregate:\n", 1)
	src = strings.Replace(src, "    rate: 1000\n", "    rate: -1\n    kyes: 3\n", 1)
	lines := parseErrs(t, src)
	want := []string{
		"p.yaml:6: sources.events.kyes: unknown field, did you mean keys? (known here: ",
		"p.yaml:13: transforms.w.aggregate: unknown field, did you mean aggregates? (known here: aggregates, ",
		"p.yaml:5: sources.events.rate: must be positive",
		"p.yaml:9: transforms.w.aggregates: name at least one aggregate",
	}
	if len(lines) != len(want) {
		t.Fatalf("errors:\n  %s\nwant %d", strings.Join(lines, "\n  "), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d: %s\nwant it to start %q", i+1, lines[i], w)
		}
	}
}

// Suggestions: a letter missing, added, changed or two swapped, in any
// case; nothing for a name far from every known one, or for a known field
// already given.
func TestSuggestions(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{edit(18, "    paht: out"), "p.yaml:18: sinks.out.paht: unknown field, did you mean path? "},
		{edit(11, "    Size: 1s"), "p.yaml:11: transforms.w.Size: unknown field, did you mean size? "},
		{edit(11, "    sizes: 1s"), "p.yaml:11: transforms.w.sizes: unknown field, did you mean size? "},
		{edit(1, "pipline: p"), "p.yaml:1: pipline: unknown field, did you mean pipeline? "},
		{edit(11, "    size: 1s\n    colour: red"), "p.yaml:12: transforms.w.colour: unknown field (known here: "},
		{edit(11, "    size: 1s\n    sise: 2s"), "p.yaml:12: transforms.w.sise: unknown field (known here: "},
		{edit(5, "    ra: 1"), "p.yaml:5: sources.events.ra: unknown field (known here: "},
		{edit(8, "    type: windw"), `p.yaml:8: transforms.w.type: unknown transform type "windw", did you mean window? (known: aggregate, filter, join, lookup_join, map, over, top_n, window, window_top)`},
		{edit(16, "    type: stdot"), `p.yaml:16: sinks.out.type: unknown sink type "stdot", did you mean stdout? (known: `},
		{edit(16, "    type: s3"), `p.yaml:16: sinks.out.type: unknown sink type "s3" (known: `},
		{edit(17, "    input: ww"), `p.yaml:17: sinks.out.input: "ww" is not a source or transform, did you mean w? (known: events, w)`},
		{edit(9, "    input: evnets"), `p.yaml:9: transforms.w.input: "evnets" is not a source or transform, did you mean events? (known: events)`},
	} {
		lines := parseErrs(t, c.src)
		if !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("errors:\n  %s\nwant the first to start %q", strings.Join(lines, "\n  "), c.want)
		}
	}
}

// The unknown-input message lists every source and transform, including
// those defined later in the file (transforms may come in any order), and
// does not claim that inputs must come first.
func TestUnknownInputListsLaterTransforms(t *testing.T) {
	src := `pipeline: p
sources:
  events:
    type: datagen
transforms:
  first:
    type: filter
    input: nowhere
    where: value > 1
  later:
    type: filter
    input: events
    where: value > 2
sinks:
  out:
    type: stdout
    input: later
`
	lines := parseErrs(t, src)
	want := `p.yaml:8: transforms.first.input: "nowhere" is not a source or transform (known: events, later)`
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("errors:\n  %s\nwant only %s", strings.Join(lines, "\n  "), want)
	}
}

// A transform that nothing reads (neither its output nor a side output) is
// a warning, not an error; one whose side output alone is read is not.
func TestUnreadTransformWarns(t *testing.T) {
	src := base + `  late:
    type: stdout
    input: lw.late
transforms2:
`
	src = strings.Replace(src, "transforms2:\n", "", 1)
	src = strings.Replace(src, "sinks:\n", `  unused:
    type: filter
    input: events
    where: value > 3
  lw:
    type: window
    input: events
    key: key
    size: 1s
    late_records: late
    aggregates:
      c: count()
sinks:
`, 1)
	p, err := config.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range p.Warnings {
		got = append(got, w.String())
	}
	want := "p.yaml:14: transforms.unused: nothing reads transform unused (a sink or transform would with input: unused), so its results are computed and dropped"
	if len(got) != 1 || got[0] != want {
		t.Errorf("warnings:\n  %s\nwant only %s", strings.Join(got, "\n  "), want)
	}
	if _, err := config.Parse("p.yaml", []byte(base)); err != nil {
		t.Fatal(err)
	}
}
