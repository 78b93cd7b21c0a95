// Package doccheck checks that the repository's Markdown stands alone: every
// relative link names a file of the repository, every #anchor names a heading
// (or an explicit HTML anchor) of its target as GitHub renders them, and no
// path in a code span points up and out of the repository.
//
// Its test, TestRepositoryLinks, walks the repository, so the README's test
// command (`go test ./...`) fails on a broken link.
package doccheck

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Slugger turns heading texts into the anchors GitHub gives them, in the order
// the headings appear in one file: a heading whose slug was already taken gets
// "-1", "-2", … appended (github-slugger's rule, which GitHub follows). The
// zero value is ready to use; use one Slugger per file.
type Slugger struct {
	// occurrences maps every slug handed out to how many times its base was
	// taken again since; github-slugger keeps the same table.
	occurrences map[string]int
}

// Slug returns the anchor of the next heading whose rendered text is text,
// taking duplicates in this file into account.
func (s *Slugger) Slug(text string) string {
	if s.occurrences == nil {
		s.occurrences = make(map[string]int)
	}
	base := Slug(text)
	result := base
	for {
		if _, taken := s.occurrences[result]; !taken {
			break
		}
		s.occurrences[base]++
		result = base + "-" + strconv.Itoa(s.occurrences[base])
	}
	s.occurrences[result] = 0
	return result
}

// Slug returns GitHub's anchor of a heading whose rendered text (its text with
// Markdown formatting removed: see HeadingText) is text, without the
// duplicate suffix: the text lower-cased, every character removed that is not
// a letter, a mark, a decimal or letter number, a connector such as '_', a
// hyphen or a space, then every space made a hyphen. Runs of spaces are not
// collapsed, so "a & b" is "a--b".
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-',
			unicode.IsLetter(r),
			unicode.Is(unicode.M, r),
			unicode.Is(unicode.Nd, r),
			unicode.Is(unicode.Nl, r),
			unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	// headingLink matches [text](target) and ![alt](target) within a heading.
	headingLink = regexp.MustCompile(`(!?)\[([^\]]*)\]\([^)]*\)`)
	// headingRefLink matches [text][ref] and [text][] within a heading.
	headingRefLink = regexp.MustCompile(`\[([^\]]*)\]\[[^\]]*\]`)
	// htmlTag matches an inline HTML tag, which renders as no text.
	htmlTag = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>`)
)

// HeadingText returns the text a heading's Markdown source renders as, the
// text GitHub slugs: code spans keep their content without the backticks,
// links and reference links keep their text, images and HTML tags render as
// nothing, backslash escapes and HTML entities are decoded, and the '_'
// delimiters of emphasis are dropped ('_' inside a word, as in snake_case,
// stays).
func HeadingText(src string) string {
	// Code spans first, since their content is literal: each is replaced by
	// a placeholder (NUL, its index, SOH) that the other rules leave alone,
	// and put back at the end.
	var codes []string
	var b strings.Builder
	for _, part := range splitCodeSpans(src) {
		if part.code {
			b.WriteString("\x00" + strconv.Itoa(len(codes)) + "\x01")
			codes = append(codes, part.text)
			continue
		}
		b.WriteString(part.text)
	}
	t := headingLink.ReplaceAllStringFunc(b.String(), func(m string) string {
		sub := headingLink.FindStringSubmatch(m)
		if sub[1] == "!" {
			return ""
		}
		return sub[2]
	})
	t = headingRefLink.ReplaceAllString(t, "$1")
	t = htmlTag.ReplaceAllString(t, "")
	t = html.UnescapeString(unescape(dropEmphasis(t)))
	t = placeholder.ReplaceAllStringFunc(t, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		return codes[i]
	})
	return strings.TrimSpace(t)
}

// placeholder matches what HeadingText puts where a code span was.
var placeholder = regexp.MustCompile("\x00[0-9]+\x01")

// span is a piece of inline Markdown: code (a code span's content) or text.
type span struct {
	text string
	code bool
}

// splitCodeSpans cuts inline Markdown into code spans and the text between
// them. A code span opens with a run of backticks and closes with the next run
// of the same length; a run with no such closer is literal text. A backslash
// before a backtick outside a code span escapes it.
func splitCodeSpans(s string) []span {
	var parts []span
	var text strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '\\' && i+1 < len(s) {
			text.WriteString(s[i : i+2])
			i += 2
			continue
		}
		if s[i] != '`' {
			text.WriteByte(s[i])
			i++
			continue
		}
		n := runLength(s, i, '`')
		end := closingRun(s, i+n, n)
		if end < 0 {
			text.WriteString(s[i : i+n])
			i += n
			continue
		}
		if text.Len() > 0 {
			parts = append(parts, span{text: text.String()})
			text.Reset()
		}
		parts = append(parts, span{text: codeContent(s[i+n : end]), code: true})
		i = end + n
	}
	if text.Len() > 0 {
		parts = append(parts, span{text: text.String()})
	}
	return parts
}

// runLength is the length of the run of c starting at s[i].
func runLength(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingRun returns the index of the first run of exactly n backticks at or
// after from, or -1.
func closingRun(s string, from, n int) int {
	for j := from; j < len(s); {
		if s[j] != '`' {
			j++
			continue
		}
		m := runLength(s, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// codeContent is what a code span renders: line endings become spaces, and
// one space is stripped from each side when both sides have one and the
// content is not all spaces (CommonMark 6.1).
func codeContent(c string) string {
	c = strings.ReplaceAll(c, "\n", " ")
	if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.Trim(c, " ") != "" {
		c = c[1 : len(c)-1]
	}
	return c
}

// unescape decodes backslash escapes of ASCII punctuation.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dropEmphasis removes the '_' runs that delimit emphasis ('*' needs no care:
// Slug removes it anyway): a run that can open (not followed by a space nor
// preceded by a letter or digit) paired with a later run that can close (not
// preceded by a space nor followed by a letter or digit). Escaped
// delimiters stay. This simplifies CommonMark's delimiter rules, and is exact
// for the headings people write.
func dropEmphasis(s string) string {
	type run struct{ start, n int }
	drop := make([]bool, len(s))
	const c = '_'
	{
		var openers []run
		for i := 0; i < len(s); {
			if s[i] == '\\' {
				i += 2
				continue
			}
			if s[i] != c {
				i++
				continue
			}
			n := runLength(s, i, c)
			before, after := rune(' '), rune(' ')
			if i > 0 {
				before = rune(s[i-1])
			}
			if i+n < len(s) {
				after = rune(s[i+n])
			}
			wordy := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r >= 0x80 }
			canClose := !unicode.IsSpace(before) && !wordy(after)
			canOpen := !unicode.IsSpace(after) && !wordy(before)
			if canClose && len(openers) > 0 {
				o := openers[len(openers)-1]
				openers = openers[:len(openers)-1]
				k := min(o.n, n)
				for j := 0; j < k; j++ {
					drop[o.start+o.n-1-j] = true
					drop[i+j] = true
				}
			} else if canOpen {
				openers = append(openers, run{i, n})
			}
			i += n
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !drop[i] {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
