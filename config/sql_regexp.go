package config

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// This file checks the patterns of SQL's regexp_match. PostgreSQL's
// regular expressions (its "advanced" REs) and Go's RE2 share a syntax for
// the common constructs but not every meaning: PostgreSQL's . matches a
// newline, a match is leftmost-longest (for an RE without non-greedy
// quantifiers), \w \d \s and [[:alpha:]] follow the server's locale
// (Unicode letters under UTF-8) where RE2's are ASCII, and \b is a
// backspace. A pattern is translated where the meaning can be kept ((?s),
// leftmost-longest matching) and refused, naming the construct, where it
// cannot: the same text never gives other rows than PostgreSQL would.

// pgPattern returns the Go pattern that matches as PostgreSQL's pattern
// does (with leftmost-longest matching, which the caller asks for), or an
// error naming what has no equal meaning.
func pgPattern(pat string) (string, error) {
	// Escapes: punctuation stands for itself in both; of the letters, only
	// these mean the same.
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		if c == '[' && strings.HasPrefix(pat[i:], "[[:") || c == '[' && i > 0 && strings.HasPrefix(pat[i:], "[:") {
			return "", fmt.Errorf("character classes such as [[:alpha:]] follow the server's locale in PostgreSQL (Unicode letters under UTF-8) and are ASCII here: write the characters out, e.g. [A-Za-z]")
		}
		if c != '\\' || i+1 == len(pat) {
			continue
		}
		i++
		e := pat[i]
		switch {
		case strings.IndexByte("afnrtv", e) >= 0:
		case e >= '0' && e <= '9':
			return "", fmt.Errorf(`\%c: back references and octal escapes are not supported`, e)
		case e == 'w' || e == 'W' || e == 'd' || e == 'D' || e == 's' || e == 'S':
			return "", fmt.Errorf(`\%c follows the server's locale in PostgreSQL (Unicode under UTF-8) and is ASCII here: write the characters out, e.g. [0-9] for \d, [A-Za-z0-9_] for \w`, e)
		case e == 'b' || e == 'B':
			return "", fmt.Errorf(`\%c: in PostgreSQL \b is a backspace and \B a backslash, here word boundaries; write \x08 or \\ instead`, e)
		case e >= 'A' && e <= 'Z' || e >= 'a' && e <= 'z':
			return "", fmt.Errorf(`\%c has no equal meaning in PostgreSQL and here (escapes kept: \a \f \n \r \t \v and escaped punctuation)`, e)
		}
	}
	// Flags: PostgreSQL takes embedded options only at the start.
	body := strings.TrimPrefix(pat, "(?i)")
	if i := strings.Index(body, "(?"); i >= 0 && !strings.HasPrefix(body[i:], "(?:") {
		return "", fmt.Errorf("(?%s: of the (?…) forms only a leading (?i) and non-capturing groups (?:…) mean the same in PostgreSQL and here", strings.TrimPrefix(body[i:min(len(body), i+4)], "(?"))
	}
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return "", err
	}
	// Without groups only the whole match counts, which leftmost-longest
	// matching decides as PostgreSQL does.
	if msg := ambiguousAlternation(re); msg != "" && re.MaxCap() > 0 {
		return "", fmt.Errorf("%s: PostgreSQL gives the earlier groups the longest text the match allows, this engine the first alternative that matches; write each alternation as single characters or classes that exclude each other, an anchor ^ or $ last (as in (&|^))", msg)
	}
	if op := nonGreedy(re); op != "" {
		return "", fmt.Errorf("the non-greedy %s changes which match PostgreSQL picks (the whole RE takes the greediness of its first quantifier), which this engine cannot follow: write the pattern with greedy quantifiers", op)
	}
	if _, err := regexp.Compile("(?s)" + pat); err != nil {
		return "", err
	}
	return "(?s)" + pat, nil
}

// nonGreedy names the first non-greedy quantifier of re, "" for none.
func nonGreedy(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		if re.Flags&syntax.NonGreedy != 0 {
			return map[syntax.Op]string{syntax.OpStar: "*?", syntax.OpPlus: "+?", syntax.OpQuest: "??", syntax.OpRepeat: "{m,n}?"}[re.Op]
		}
	}
	for _, sub := range re.Sub {
		if op := nonGreedy(sub); op != "" {
			return op
		}
	}
	return ""
}

// ambiguousAlternation names the first alternation of re whose choice could
// divide a match between groups otherwise than PostgreSQL does, "" for
// none. An alternation is safe when its alternatives are single characters
// or classes no two of which share a character, then at most one anchor: at
// any position at most one character alternative applies, and it is tried
// before the empty anchor, as PostgreSQL prefers the longer text.
func ambiguousAlternation(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpAlternate:
		var seen []rune // the ranges of the character alternatives so far
		anchor := false
		for _, alt := range re.Sub {
			switch alt.Op {
			case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
				if anchor {
					return "two anchors in one alternation"
				}
				anchor = true
				continue
			}
			if anchor {
				return "an anchor before other alternatives"
			}
			r, ok := oneChar(alt)
			if !ok {
				return "alternatives other than single characters"
			}
			if overlaps(seen, r) {
				return "alternatives that match the same character"
			}
			seen = append(seen, r...)
		}
	case syntax.OpCharClass:
		// Go's parser factors a|b into [ab]: one class, no alternation.
	}
	for _, sub := range re.Sub {
		if msg := ambiguousAlternation(sub); msg != "" {
			return msg
		}
	}
	return ""
}

// oneChar returns the ranges of the characters re matches when it matches
// exactly one character.
func oneChar(re *syntax.Regexp) ([]rune, bool) {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) != 1 || re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		return []rune{re.Rune[0], re.Rune[0]}, true
	case syntax.OpCharClass:
		return re.Rune, true
	}
	return nil, false
}

// overlaps says whether two lists of rune ranges (lo, hi pairs) share a
// rune.
func overlaps(a, b []rune) bool {
	for i := 0; i+1 < len(a); i += 2 {
		for j := 0; j+1 < len(b); j += 2 {
			if a[i] <= b[j+1] && b[j] <= a[i+1] {
				return true
			}
		}
	}
	return false
}
