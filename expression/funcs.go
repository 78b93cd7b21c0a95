package expression

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
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
		return regexpGroup(args[0].(string), args[1].(string), args[2].(int))
	}, new(func(string, string, int) string)),
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

// patterns caches compiled regular expressions by their text: a pattern is
// compiled once, not per record. Patterns are constants in a pipeline, so
// the cache stays as small as the pipelines' texts.
var patterns sync.Map // string → *regexp.Regexp

// compilePattern compiles a pattern once.
func compilePattern(pattern string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(pattern); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	patterns.Store(pattern, re)
	return re, nil
}

// regexpGroup is PostgreSQL's (regexp_match(s, pattern))[n]: of pattern's
// first match in s, the text of capture group n (counted from 1), or the
// whole match when pattern has no groups and n is 1. It is nil (NULL) when
// there is no match, when n names no group, and when group n took no part
// in the match. Patterns are Go's RE2 syntax, which PostgreSQL's common
// patterns share (RE2 has no backreferences or lookaround).
func regexpGroup(s, pattern string, n int) (any, error) {
	re, err := compilePattern(pattern)
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
