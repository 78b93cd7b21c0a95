package sql

import (
	"strconv"
	"strings"
	"testing"
)

// The lookup clause is blanked byte for byte, so positions after it stay
// those of the text; its keywords match in ASCII cases only, so a
// look-alike letter (ſ for s, as Unicode case folding has it) is left to
// PostgreSQL's grammar, which refuses it.
func TestLookupClauseBlanking(t *testing.T) {
	for _, clause := range []string{"FOR SYSTEM_TIME AS OF PROCTIME()", "for System_Time as of proctime( )", "FOR\n  SYSTEM_TIME AS OF PROCTIME()"} {
		text := "SELECT b.id FROM bids b JOIN side " + clause + " s ON b.id = s.key"
		out, at := blankLookups(text)
		if len(out) != len(text) || len(at) != 1 || strings.Count(out, "\n") != strings.Count(text, "\n") {
			t.Errorf("%q: blanked %q (%d clauses)", clause, out, len(at))
		}
	}
	if out, at := blankLookups("SELECT 1 FROM t FOR ſYSTEM_TIME AS OF PROCTIME()"); len(at) != 0 || !strings.Contains(out, "ſ") {
		t.Errorf("FOR ſYSTEM_TIME was taken for the clause: %q", out)
	}
	bad := "CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR ſYSTEM_TIME AS OF PROCTIME() s ON b.id = s.key WITH (connector = 'stdout');"
	if _, err := Parse("q.sql", bad); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("FOR ſYSTEM_TIME: %v, want PostgreSQL's syntax error", err)
	}
	// An error after the clause points at its place in the text.
	after := "CREATE SINK o AS SELECT b.id FROM bids b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON b.id = s.key AND (regexp_match(b.u, 'a'))[b.n] = 'x' WITH (connector = 'stdout');"
	_, err := Parse("q.sql", after)
	col := strings.Index(after, "b.n]") + 1
	if err == nil || !strings.Contains(err.Error(), "q.sql:1:"+strconv.Itoa(col)+":") {
		t.Errorf("error %v, want it at column %d", err, col)
	}
}
