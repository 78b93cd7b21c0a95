package doccheck

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRepositoryLinks checks every relative link and anchor of every *.md
// file of this repository: the docs must stand alone, so a link to a file
// outside the repository, a missing file or an anchor no heading has fails
// the README's test command.
func TestRepositoryLinks(t *testing.T) {
	root := moduleRoot(t)
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s", p)
	}
}

// moduleRoot is the directory of the repository's go.mod, found upwards
// from the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
