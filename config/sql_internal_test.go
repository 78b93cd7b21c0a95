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
