package config_test

import (
	"strings"
	"testing"
)

// Each file sink needs a directory of its own, apart from the checkpoints:
// two sinks on one path published only one sink's output (each commits by
// checkpoint id and abandons the whole staging area at recovery), and
// checkpoint files inside a sink's directory would read as committed output.
func TestOverlappingPathsRejected(t *testing.T) {
	const head = `pipeline: p
checkpoint:
  dir: %s
sources:
  e: {type: datagen, count: 10}
sinks:
  a: {type: file, input: e, path: %s}
`
	for _, c := range []struct {
		name, src, want string
	}{
		{"same path", strings.Replace(head, "%s", "ck", 1) + "  b: {type: file, input: e, path: out}\n", "p.yaml:8: sinks.b.path: "},
		{"nested path", strings.Replace(head, "%s", "ck", 1) + "  b: {type: file, input: e, path: out/sub}\n", "p.yaml:8: sinks.b.path: "},
		{"checkpoints inside the sink", strings.Replace(head, "%s", "out/ck", 1), "p.yaml:7: sinks.a.path: "},
		{"sink inside the checkpoints", strings.Replace(head, "%s", ".", 1), "p.yaml:7: sinks.a.path: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(c.src, "%s", "out", 1)
			lines := parseErrs(t, src)
			if !hasLine(lines, c.want) {
				t.Fatalf("errors\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), c.want)
			}
		})
	}
}

// An aggregate named like a field every window result has would write JSON
// with a duplicate key.
func TestReservedAggregateNamesRejected(t *testing.T) {
	for _, name := range []string{"key", "window_start", "window_end"} {
		src := strings.Replace(base, "      c: count()", "      "+name+": count()", 1)
		if src == base {
			t.Fatal("the edit did not apply")
		}
		lines := parseErrs(t, src)
		want := "p.yaml:13: transforms.w.aggregates." + name + ": "
		if !hasLine(lines, want) {
			t.Fatalf("errors\n  %s\nwant a line starting %q", strings.Join(lines, "\n  "), want)
		}
	}
}
