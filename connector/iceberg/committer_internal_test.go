//go:build iceberg

package iceberg

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestLostRace: the errors the SQL catalog returns for a commit another
// writer's beat are lost races, whatever the case of their "requirement
// failed" (iceberg-go writes both); other failures are not.
func TestLostRace(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w: table a.b metadata-location moved underneath us", table.ErrCommitFailed), true},
		{errors.New(`requirement failed: branch "main" has changed: expected id 1, found 2`), true},
		{errors.New(`requirement failed: branch "main" was created concurrently`), true},
		{errors.New("Requirement failed: current schema id has changed: expected 0, found 1"), true},
		{errors.New("Requirement failed: last assigned field id has changed: expected 3, found 4"), true},
		{errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"), false},
		{errors.New("staged output lost"), false},
	} {
		if got := lostRace(c.err); got != c.want {
			t.Errorf("lostRace(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
