package query

import (
	"testing"

	"github.com/ingest-engine/ingest/state"
)

// queryLSM is the state backend runQuery gives its jobs: nil (memory)
// unless a test runs the queries on the pebble backend.
var queryLSM *state.LSMOptions

// The stateful queries' results on the pebble backend equal their
// references: the pebble backend stores an encoding of each value, so a
// query that changed a state's value in place after writing it (which the
// memory backend, holding the value itself, tolerates) would lose the
// change.
func TestQueriesOnPebble(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{{"q3", TestQ3}, {"q4", TestQ4}, {"q5", TestQ5}, {"q7", TestQ7}, {"q8", TestQ8}, {"q11", TestQ11}, {"q12", TestQ12}} {
		t.Run(c.name, func(t *testing.T) {
			queryLSM = &state.LSMOptions{Dir: t.TempDir(), CacheBytes: 8 << 20}
			defer func() { queryLSM = nil }()
			c.f(t)
		})
	}
}
