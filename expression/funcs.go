package expression

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
)

// This file holds the functions this engine adds to expr's builtins: the
// PostgreSQL string functions the SQL dialect translates to, which expr
// has no exact equivalent of. They are also there for YAML expressions.

// functions are the options that add this package's functions to a
// compilation.
var functions = []expr.Option{
	expr.Function("splitPart", func(args ...any) (any, error) {
		return splitPart(args[0].(string), args[1].(string), args[2].(int))
	}, new(func(string, string, int) string)),
	expr.Function("regexpGroup", func(args ...any) (any, error) {
		longest := len(args) == 4 && args[3].(bool)
		return regexpGroup(args[0].(string), args[1].(string), args[2].(int), longest)
	}, new(func(string, string, int) string), new(func(string, string, int, bool) string)),
}

// splitPart is PostgreSQL's split_part(s, delim, n): the n-th field of s
// split at delim, counted from 1, or from the end when n is negative; ""
// past the last field. An empty delim leaves s one field. n = 0 is an
// error, as in PostgreSQL.
func splitPart(s, delim string, n int) (string, error) {
	if n == 0 {
		return "", fmt.Errorf("splitPart: field position must not be zero")
	}
	fields := []string{s}
	if delim != "" {
		fields = strings.Split(s, delim)
	}
	i := n - 1
	if n < 0 {
		i = len(fields) + n
	}
	if i < 0 || i >= len(fields) {
		return "", nil
	}
	return fields[i], nil
}

// patternKey is a compiled pattern's cache key.
type patternKey struct {
	pattern string
	longest bool
}

// patterns caches compiled regular expressions: a pattern is compiled once,
// not per record. A pattern is a constant of an expression (Compile refuses
// any other), so the cache stays as small as the pipelines' texts.
var patterns sync.Map // patternKey → *regexp.Regexp

// compilePattern compiles a pattern once; longest makes it match leftmost-
// longest (POSIX's and PostgreSQL's rule) instead of leftmost-first.
func compilePattern(pattern string, longest bool) (*regexp.Regexp, error) {
	k := patternKey{pattern, longest}
	if re, ok := patterns.Load(k); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if longest {
		re.Longest()
	}
	patterns.Store(k, re)
	return re, nil
}

// regexpGroup is, of pattern's first match in s, the text of capture
// group n (counted from 1), or the whole match when pattern has no groups
// and n is 1: the shape of PostgreSQL's (regexp_match(s, pattern))[n],
// which the SQL dialect translates to it with longest set and a pattern it
// checked (config). It is nil (NULL) when there is no match, when n names
// no group, and when group n took no part in the match. Patterns are Go's
// RE2 syntax.
func regexpGroup(s, pattern string, n int, longest bool) (any, error) {
	re, err := compilePattern(pattern, longest)
	if err != nil {
		return nil, fmt.Errorf("regexpGroup: pattern %q: %w", pattern, err)
	}
	m := re.FindStringSubmatchIndex(s)
	if m == nil {
		return nil, nil
	}
	if re.NumSubexp() == 0 {
		if n != 1 {
			return nil, nil
		}
		return s[m[0]:m[1]], nil
	}
	if n < 1 || n > re.NumSubexp() || m[2*n] < 0 {
		return nil, nil
	}
	return s[m[2*n]:m[2*n+1]], nil
}

// checkRegexpGroup refuses a regexpGroup call whose pattern is not a
// constant string (each distinct value would be compiled and cached for
// good) or does not compile, so that a bad pattern is found when the
// pipeline loads, not on every record.
func checkRegexpGroup(c *ast.CallNode) *Error {
	if len(c.Arguments) < 2 {
		return nil // expr's checker reports the arity
	}
	pat, ok := c.Arguments[1].(*ast.StringNode)
	if !ok {
		return &Error{Msg: "regexpGroup's pattern is a constant string, e.g. regexpGroup(url, \"id=([0-9]+)\", 1)"}
	}
	longest := false
	if len(c.Arguments) == 4 {
		b, ok := c.Arguments[3].(*ast.BoolNode)
		if !ok {
			return &Error{Msg: "regexpGroup's fourth argument, longest, is a constant true or false"}
		}
		longest = b.Value
	}
	if _, err := compilePattern(pat.Value, longest); err != nil {
		return &Error{Msg: fmt.Sprintf("regexpGroup pattern %q: %v", pat.Value, err)}
	}
	return nil
}
