package expression

import (
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// Review: (regexp_match(s, p))[n] is translated to regexpGroup, which runs
// Go's RE2 (Perl leftmost-first semantics, '.' not matching '\n', \b a word
// boundary). PostgreSQL runs its ARE engine with other semantics for the
// SAME pattern text, so the pipeline silently gives other values than
// PostgreSQL (exit 0, no error at load). Expected values below are
// PostgreSQL's, per its documentation (functions-matching, 9.7.3):
//
//   - "By default, newline is an ordinary character with no special
//     meaning": '.' matches '\n'.
//   - \b in an ARE is backspace (Table "Regular Expression Character-entry
//     Escapes"), not a word boundary (PostgreSQL's is \y, which RE2
//     rejects).
//   - Longest/shortest match of the RE as a whole: the documented example
//     SUBSTRING('XY1234Z', 'Y*?([0-9]{1,3})') is '1' (the whole RE is
//     non-greedy because its first quantifier is), and an RE of two or more
//     branches connected by | is always greedy, so 'a|ab' on 'ab' is 'ab'.
func TestReviewRegexpGroupDiffersFromPostgreSQL(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{{Name: "s", Kind: row.String}}}
	for _, c := range []struct {
		name, src, s string
		pg           any // PostgreSQL's (regexp_match(s, p))[n]; nil for NULL
	}{
		{"dot matches newline", `regexpGroup(s, "a.b", 1)`, "a\nb", "a\nb"},
		{"\\b is backspace", `regexpGroup(s, "\\bcat", 1)`, "a cat", nil},
		{"whole RE non-greedy (documented example)", `regexpGroup(s, "Y*?([0-9]{1,3})", 1)`, "XY1234Z", "1"},
		{"alternation is greedy", `regexpGroup(s, "a|ab", 1)`, "ab", "ab"},
	} {
		p, err := Compile(schema, c.src, row.Null)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		ev, err := NewEvaluator(p)
		if err != nil {
			t.Fatal(err)
		}
		ev.Bind(row.Row{row.StringValue(c.s)}, 0)
		v, err := ev.Value(p)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		var got any
		if v.Kind() != row.Null {
			got = v.Str()
		}
		if got != c.pg {
			t.Errorf("%s: %s on %q = %#v, PostgreSQL gives %#v", c.name, c.src, c.s, got, c.pg)
		}
	}
}

// Review: a YAML expression may call regexpGroup with a pattern that is not
// a constant; every distinct pattern is compiled and kept forever in the
// package-level cache (memory grows with the data, never freed), and a
// constant pattern that does not compile is only found when the first
// record arrives, not when the pipeline loads (as the package comment
// promises for errors).
func TestReviewRegexpGroupBadConstantPatternFoundAtLoad(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{{Name: "s", Kind: row.String}}}
	if _, err := Compile(schema, `regexpGroup(s, "(", 1)`, row.Null); err == nil {
		t.Errorf(`regexpGroup(s, "(", 1) compiled without error; the bad pattern is found only per record`)
	}
}
