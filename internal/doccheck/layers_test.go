package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureLayers holds the package graph of docs/architecture.md's
// "Layers" section (the block fenced as ```imports) to the module's real
// imports: each line is a package followed by the module packages it
// imports, internal ones left out. A package added, removed or rewired
// without the page fails the test, which prints the block as it should be.
func TestArchitectureLayers(t *testing.T) {
	root := moduleRoot(t)
	out, err := exec.Command("go", "list", "-C", root, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Skipf("go list: %v (the test needs the go command)", err)
	}
	const module = "github.com/ingest-engine/ingest/"
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok || documentedAway(pkg) {
			continue
		}
		var deps []string
		for _, imp := range fields[1:] {
			if d, ok := strings.CutPrefix(imp, module); ok && !documentedAway(d) {
				deps = append(deps, d)
			}
		}
		slices.Sort(deps)
		want = append(want, strings.TrimSpace(pkg+" ─► "+strings.Join(deps, " ")))
	}
	slices.Sort(want)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "\n```imports\n")
	if !ok {
		t.Fatal("docs/architecture.md has no ```imports block")
	}
	block, _, _ = strings.Cut(block, "\n```")
	var got []string
	for _, line := range strings.Split(block, "\n") {
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/architecture.md's imports block is not the module's package graph; it should read:\n```imports\n%s\n```", strings.Join(want, "\n"))
	}
}

// documentedAway reports whether a package stays out of the graph: internal
// helpers, examples and benchmark tools.
func documentedAway(pkg string) bool {
	return strings.HasPrefix(pkg, "internal/") || strings.Contains(pkg, "/internal/") ||
		strings.HasPrefix(pkg, "examples/") || strings.HasPrefix(pkg, "docs/")
}
