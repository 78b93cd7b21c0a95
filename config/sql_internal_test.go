package config

import (
	"regexp"
	"testing"
)

// LIKE patterns mean what PostgreSQL makes of them: % and _ are wildcards,
// a backslash makes the next character literal, and nothing else is special.
func TestLikeRegexp(t *testing.T) {
	for _, c := range []struct {
		pat, text string
		want      bool
	}{
		{"a%", "abc", true},
		{"a%", "ba", false},
		{"a_c", "abc", true},
		{"a_c", "abbc", false},
		{`100\%`, "100%", true},
		{`100\%`, "1000", false},
		{`a\_b`, "a_b", true},
		{`a\_b`, "axb", false},
		{"a.c", "abc", false},
		{"(x)", "(x)", true},
		{"%\n%", "a\nb", true},
		{`tail\`, `tail\`, true},
	} {
		re := regexp.MustCompile(likeRegexp(c.pat))
		if got := re.MatchString(c.text); got != c.want {
			t.Errorf("%q LIKE %q = %v, want %v (regexp %s)", c.text, c.pat, got, c.want, re)
		}
	}
}

// to_char patterns translate to Go layouts; what is not known is refused,
// not written as it is.
func TestGoLayout(t *testing.T) {
	for _, c := range []struct{ pat, want, err string }{
		{"YYYY-MM-DD", "2006-01-02", ""},
		{"HH24:MI:SS.MS", "15:04:05.000", ""},
		{"YYYY/MM/DD HH24:MI", "2006/01/02 15:04", ""},
		{"DDTHH24", "02T15", ""},
		{"Mon DD", "", `"Mon DD" at 1 is not supported`},
		{"HH12", "", `"HH12" at 1 is not supported`},
		{"MS", "", "MS must follow . or ,"},
		{"SS MS", "", "MS must follow . or ,"},
		{"SS,US", "05,000000", ""},
	} {
		got, err := goLayout(c.pat)
		switch {
		case c.err != "" && (err == nil || !regexp.MustCompile(regexp.QuoteMeta(c.err)).MatchString(err.Error())):
			t.Errorf("%q: %q, %v; want an error containing %s", c.pat, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %q, %v; want %q", c.pat, got, err, c.want)
		}
	}
}
