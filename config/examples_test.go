package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
)

// Every pipeline file in examples/ (YAML or SQL) is valid, as `ingest validate` checks it,
// and draws no warning: examples show what to write.
func TestConfigExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sqlFiles, err := filepath.Glob(filepath.Join("..", "examples", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sqlFiles...)
	if len(files) < 3 {
		t.Fatalf("examples: %v; want quickstart.yaml, sessions.yaml and joins.yaml at least", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := config.Load(f)
			if err != nil {
				t.Fatalf("%v", err)
			}
			for _, w := range p.Warnings {
				t.Errorf("warning: %s", w)
			}
			if _, err := p.Stream.Plan(); err != nil {
				t.Errorf("plan: %v", err)
			}
		})
	}
}

// The README's pipeline file reference is a valid pipeline, and so is it
// with its commented-out nodes (filter, map, join, a stdout sink) enabled.
func TestConfigReadmeReferenceValidates(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## Pipeline file reference")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml block under ## Pipeline file reference")
	}
	if _, err := config.Parse("README.md", []byte(block)); err != nil {
		t.Errorf("the reference as written:\n%v", err)
	}
	var enabled []string
	for _, l := range strings.Split(block, "\n") {
		if rest, commented := strings.CutPrefix(l, "  # "); commented {
			l = "  " + rest
		}
		enabled = append(enabled, l)
	}
	p, err := config.Parse("README.md", []byte(strings.Join(enabled, "\n")))
	if err != nil {
		t.Fatalf("the reference with its commented nodes enabled:\n%v", err)
	}
	plan, err := p.Stream.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range plan.Nodes {
		ids = append(ids, n.ID)
	}
	for _, id := range []string{"big", "priced", "matched", "log"} {
		if !slices.Contains(ids, id) {
			t.Errorf("nodes %v: %s is missing; the test no longer enables the commented nodes", ids, id)
		}
	}
}
