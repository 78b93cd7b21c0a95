package config_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// WritesStdout says whether a stdout sink prints to the terminal `ingest
// run` would draw its status line on.
func TestWritesStdout(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
	}{
		{base, false},
		{strings.Replace(base, "    type: file\n    input: w\n    path: out\n", "    type: stdout\n    input: w\n", 1), true},
		{base + "  log:\n    type: stdout\n    input: events\n", true},
	} {
		p, err := config.Parse("p.yaml", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		if p.WritesStdout != c.want {
			t.Errorf("WritesStdout %v, want %v for\n%s", p.WritesStdout, c.want, c.src)
		}
	}
}
