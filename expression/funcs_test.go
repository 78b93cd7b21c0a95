package expression

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// splitPart and regexpGroup, as YAML expressions call them: the values
// PostgreSQL's split_part and (regexp_match(…))[n] give, nil where it gives
// NULL, and an error for field 0.
func TestStringFunctionsInExpressions(t *testing.T) {
	urls := &row.Schema{Fields: []row.Field{{Name: "url", Kind: row.String}}}
	for _, c := range []struct {
		src, url string
		want     any
	}{
		{`splitPart(url, "/", 4)`, "https://x.com/a/b", "a"},
		{`splitPart(url, "/", 9)`, "https://x.com/a/b", ""},
		{`splitPart(url, "/", -1)`, "https://x.com/a/b", "b"},
		{`splitPart(url, "", 1)`, "a/b", "a/b"},
		{`regexpGroup(url, "id=([0-9]+)", 1)`, "?id=42&x", "42"},
		{`regexpGroup(url, "id=([0-9]+)", 1)`, "?x", nil},
		{`regexpGroup(url, "(x)|(y)", 1)`, "y", nil},
		{`regexpGroup(url, "b+", 1)`, "abbc", "bb"},
	} {
		p, err := Compile(urls, c.src, row.Null)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		ev, err := NewEvaluator(p)
		if err != nil {
			t.Fatal(err)
		}
		ev.Bind(row.Row{row.StringValue(c.url)}, 0)
		v, err := ev.Value(p)
		if err != nil {
			t.Fatalf("%s on %q: %v", c.src, c.url, err)
		}
		var got any
		if v.Kind() != row.Null {
			got = v.Str()
		}
		if got != c.want {
			t.Errorf("%s on %q = %v, want %v", c.src, c.url, got, c.want)
		}
	}
	p, err := Compile(urls, `splitPart(url, "/", 0)`, row.Null)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := NewEvaluator(p)
	ev.Bind(row.Row{row.StringValue("a")}, 0)
	if _, err := ev.Value(p); err == nil {
		t.Fatal("splitPart with field 0 gave no error")
	}
}

// A regexpGroup pattern is a constant checked when the expression
// compiles: a bad one is an error then, not on every record, and one read
// from a field (each distinct value compiled and cached) is refused.
func TestRegexpGroupPatternIsAConstant(t *testing.T) {
	urls := &row.Schema{Fields: []row.Field{{Name: "url", Kind: row.String}, {Name: "p", Kind: row.String}}}
	for src, want := range map[string]string{
		`regexpGroup(url, "(", 1)`:             "regexpGroup pattern \"(\"",
		`regexpGroup(url, p, 1)`:               "regexpGroup's pattern is a constant string",
		`regexpGroup(url, "a", 1, url == "x")`: "fourth argument, longest, is a constant",
	} {
		if _, err := Compile(urls, src, row.Null); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", src, err, want)
		}
	}
	p, err := Compile(urls, `regexpGroup(url, "a|ab", 0 + 1, true)`, row.Null)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := NewEvaluator(p)
	ev.Bind(row.Row{row.StringValue("ab"), row.Value{}}, 0)
	if v, err := ev.Value(p); err != nil || v.Str() != "ab" {
		t.Fatalf("leftmost-longest: %v %v, want ab", v, err)
	}
}
