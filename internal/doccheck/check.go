package doccheck

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Problem is one link of a Markdown file that does not resolve.
type Problem struct {
	// File is the Markdown file, relative to the checked root, with '/'.
	File string
	// Line is the 1-based line the link starts on.
	Line int
	// Target is the link's destination as written.
	Target string
	// Reason says what is wrong, e.g. "no such file" or "no heading …".
	Reason string
}

// String formats the problem as "file:line: target: reason".
func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Reason)
}

// Link is a link destination found in Markdown.
type Link struct {
	// Line is the 1-based line the link starts on.
	Line int
	// Target is the destination as written (without angle brackets).
	Target string
	// Reason, when not empty, says why the link is broken whatever it
	// points at (a reference to an undefined label).
	Reason string
}

// Check reads every *.md file under root, skipping directories whose names
// start with '.' (.git) and testdata directories (fixtures, not
// documentation), and returns the relative links that do not resolve: the
// file or directory must exist inside root, and an #anchor must name a
// heading (GitHub's slug, see Slugger) or an HTML id or name of a Markdown
// target, or be a line anchor (#L10, #L10-L20) of another file. Links with a
// scheme (https:, mailto:) are not checked. A path going up a directory in a
// code span (`../shared/notes.txt`) must name a file or directory inside root
// too: a reader of the repository cannot follow that citation either. The problems are in file
// and line order; the error is for a root that cannot be read.
func Check(root string) ([]Problem, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && isMarkdown(path) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("doccheck: walking %s: %w", root, err)
	}
	c := checker{root: root, anchors: make(map[string]map[string]bool)}
	var problems []Problem
	for _, f := range files {
		ps, err := c.file(f)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	return problems, nil
}

// isMarkdown reports whether path names a Markdown file.
func isMarkdown(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".md" || ext == ".markdown"
}

// checker resolves links against one root, reading each target's anchors
// once.
type checker struct {
	root    string
	anchors map[string]map[string]bool // by absolute path
}

// file returns the problems of the Markdown file at the absolute path f, in
// line order.
func (c *checker) file(f string) ([]Problem, error) {
	src, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	rel, err := filepath.Rel(c.root, f)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	var problems []Problem
	for _, m := range PathMentions(string(src)) {
		if reason := c.escapes(f, m.Target); reason != "" {
			problems = append(problems, Problem{File: filepath.ToSlash(rel), Line: m.Line, Target: m.Target, Reason: reason})
		}
	}
	for _, l := range Links(string(src)) {
		reason := l.Reason
		if reason == "" {
			reason, err = c.resolve(f, l.Target)
			if err != nil {
				return nil, err
			}
		}
		if reason != "" {
			problems = append(problems, Problem{File: filepath.ToSlash(rel), Line: l.Line, Target: l.Target, Reason: reason})
		}
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return a.Line - b.Line })
	return problems, nil
}

var (
	// scheme matches a destination with a URL scheme (https:, mailto:).
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// lineAnchor matches GitHub's anchors of lines of a file.
	lineAnchor = regexp.MustCompile(`^L[0-9]+(C[0-9]+)?(-L[0-9]+(C[0-9]+)?)?$`)
)

// resolve returns why target, a link of the Markdown file from, does not
// resolve, or "" when it does. The error is for a target that exists but
// cannot be read.
func (c *checker) resolve(from, target string) (string, error) {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", nil
	}
	path, frag, hasFrag := strings.Cut(target, "#")
	path, _, _ = strings.Cut(path, "?")
	path, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Sprintf("bad escape in the path: %v", err), nil
	}
	abs := from
	switch {
	case path == "":
	case strings.HasPrefix(path, "/"):
		abs = filepath.Join(c.root, filepath.FromSlash(path))
	default:
		abs = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
	}
	if !c.inside(abs) {
		return "outside the repository", nil
	}
	info, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file in the repository", nil
	}
	if err != nil {
		return "", fmt.Errorf("doccheck: %w", err)
	}
	if !hasFrag || frag == "" {
		return "", nil
	}
	anchor, err := url.PathUnescape(frag)
	if err != nil {
		return fmt.Sprintf("bad escape in the anchor: %v", err), nil
	}
	if info.IsDir() {
		return "an anchor on a directory", nil
	}
	if !isMarkdown(abs) {
		if lineAnchor.MatchString(anchor) {
			return "", nil
		}
		return "an anchor in a file that is not Markdown is not a line anchor (#L10, #L10-L20)", nil
	}
	anchors, ok := c.anchors[abs]
	if !ok {
		src, err := os.ReadFile(abs)
		if err != nil {
			return "", fmt.Errorf("doccheck: %w", err)
		}
		anchors = Anchors(string(src))
		c.anchors[abs] = anchors
	}
	if anchors[anchor] {
		return "", nil
	}
	name, _ := filepath.Rel(c.root, abs)
	return fmt.Sprintf("no heading of %s has the anchor #%s%s", filepath.ToSlash(name), anchor, suggest(anchor, anchors)), nil
}

// inside reports whether the absolute path abs is within the root.
func (c *checker) inside(abs string) bool {
	rel, err := filepath.Rel(c.root, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// escapes returns why a path that the Markdown file from mentions in a code
// span, relative to that file, is a problem: it names a place outside the
// repository, or nothing in it — a citation a reader of the repository
// cannot follow. It returns "" for a file or directory of the repository.
func (c *checker) escapes(from, path string) string {
	abs := filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
	if !c.inside(abs) {
		return "a path outside the repository: quote or summarise what it holds, or link within the repository"
	}
	if _, err := os.Stat(abs); err != nil {
		return "a path to nothing in the repository: quote or summarise what it holds, or link within the repository"
	}
	return ""
}

// suggest names the anchors that share a prefix of four characters with
// anchor, or contain it or are contained in it, to help fix a typo or follow
// a renamed heading.
func suggest(anchor string, anchors map[string]bool) string {
	var near []string
	for a := range anchors {
		n := 0
		for n < len(a) && n < len(anchor) && a[n] == anchor[n] {
			n++
		}
		if n >= 4 || len(a) >= 4 && len(anchor) >= 4 && (strings.Contains(a, anchor) || strings.Contains(anchor, a)) {
			near = append(near, "#"+a)
		}
	}
	if len(near) == 0 {
		return ""
	}
	slices.Sort(near)
	return " (did you mean " + strings.Join(near, " or ") + "?)"
}

var (
	// atxHeading matches "## text ##" and captures the text; the closing
	// hashes must follow a space.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	// setextUnderline matches the line under a setext heading.
	setextUnderline = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	// notParagraph matches a line that starts a block other than a
	// paragraph, which a setext underline cannot turn into a heading.
	notParagraph = regexp.MustCompile(`^(?: {4}|\t| {0,3}(?:[-+*>|#]|[0-9]+[.)])(?:\s|$))`)
	// htmlAnchor matches an id or name attribute of an HTML tag.
	htmlAnchor = regexp.MustCompile(`(?is)<[a-z][a-z0-9]*\s[^>]*?\b(?:id|name)\s*=\s*(?:"([^"]*)"|'([^']*)')`)
)

// Anchors returns the anchors a Markdown source defines: the slug of every
// heading (ATX and setext, outside code blocks), with GitHub's "-1", "-2" for
// repeated ones, and every id or name attribute of its HTML.
func Anchors(src string) map[string]bool {
	anchors := make(map[string]bool)
	var slugger Slugger
	lines := strings.Split(blankFences(src), "\n")
	var para []string // the paragraph that a setext underline would make a heading
	for _, line := range lines {
		switch {
		case strings.TrimSpace(line) == "":
			para = nil
		case setextUnderline.MatchString(line):
			if len(para) > 0 {
				anchors[slugger.Slug(HeadingText(strings.Join(para, "\n")))] = true
			}
			para = nil
		case atxHeading.MatchString(line):
			anchors[slugger.Slug(HeadingText(atxHeading.FindStringSubmatch(line)[1]))] = true
			para = nil
		case len(para) == 0 && notParagraph.MatchString(line):
			para = nil
		default:
			para = append(para, strings.TrimSpace(line))
		}
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(blankComments(blankFences(src)), -1) {
		anchors[m[1]+m[2]] = true
	}
	delete(anchors, "")
	return anchors
}

var (
	// inlineLink matches [text](destination "title") and images; the text may
	// hold one level of brackets (an image in a link) and span lines.
	inlineLink = regexp.MustCompile(`(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?\s*\)`)
	// refDefinition matches "[label]: destination" at the start of a line.
	refDefinition = regexp.MustCompile(`(?m)^ {0,3}\[((?:[^\[\]]|\\[\[\]])+)\]:[ \t]*(<[^<>\n]*>|\S+)`)
	// refLink matches [text][label] and [label][].
	refLink = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[((?:[^\[\]]|\\[\[\]])*)\]`)
	// htmlLink matches the href or src of an HTML a, img or source tag.
	htmlLink = regexp.MustCompile(`(?is)<(?:a|img|source)\s[^>]*?\b(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')`)
)

// Links returns the link destinations of a Markdown source, in order: inline
// links and images, reference definitions, and the href and src of HTML a,
// img and source tags, outside code blocks, code spans and HTML comments. A
// full or collapsed reference link ([text][label], [label][]) whose label is
// not defined comes back with a Reason.
func Links(src string) []Link {
	text := blankCodeSpans(blankComments(blankFences(src)))
	var links []Link
	add := func(offset int, target, reason string) {
		target = strings.TrimSpace(target)
		target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
		links = append(links, Link{Line: 1 + strings.Count(text[:offset], "\n"), Target: target, Reason: reason})
	}
	var inline func(base int, s string)
	inline = func(base int, s string) {
		for _, m := range inlineLink.FindAllStringSubmatchIndex(s, -1) {
			add(base+m[0], s[m[6]:m[7]], "")
			inline(base+m[4], s[m[4]:m[5]]) // an image inside the link's text
		}
	}
	// Per paragraph, so that an unclosed '[' cannot pair with a later one.
	start := 0
	for _, loc := range paragraphEnd.FindAllStringIndex(text, -1) {
		inline(start, text[start:loc[0]])
		start = loc[1]
	}
	inline(start, text[start:])
	defined := make(map[string]bool)
	for _, m := range refDefinition.FindAllStringSubmatchIndex(text, -1) {
		defined[normalizeLabel(text[m[2]:m[3]])] = true
		add(m[0], text[m[4]:m[5]], "")
	}
	withoutInline := inlineLink.ReplaceAllStringFunc(text, func(m string) string { return strings.Repeat(" ", len(m)) })
	for _, m := range refLink.FindAllStringSubmatchIndex(withoutInline, -1) {
		label := withoutInline[m[4]:m[5]]
		if label == "" {
			label = withoutInline[m[2]:m[3]]
		}
		if !defined[normalizeLabel(label)] {
			add(m[0], withoutInline[m[0]:m[1]], "reference to an undefined label")
		}
	}
	for _, m := range htmlLink.FindAllStringSubmatchIndex(text, -1) {
		if m[2] >= 0 {
			add(m[0], text[m[2]:m[3]], "")
		} else {
			add(m[0], text[m[4]:m[5]], "")
		}
	}
	slices.SortStableFunc(links, func(a, b Link) int { return a.Line - b.Line })
	return links
}

// relativeMention matches a code span's content that is a relative path
// going up a directory: `../shared/notes.txt`.
var relativeMention = regexp.MustCompile(`^(?:\./)?\.\./\S*$`)

// PathMentions returns the code spans of a Markdown source (outside code
// blocks and HTML comments) whose content is a relative path that goes up a
// directory, as `../shared/notes.txt`: Check reports those that leave the
// repository or name nothing in it, since such a path is a citation a reader
// cannot follow either.
func PathMentions(src string) []Link {
	text := blankComments(blankFences(src))
	var mentions []Link
	for _, sp := range codeSpans(text) {
		n := runLength(text, sp[0], '`')
		content := codeContent(text[sp[0]+n : sp[1]-n])
		if relativeMention.MatchString(content) {
			mentions = append(mentions, Link{Line: 1 + strings.Count(text[:sp[0]], "\n"), Target: content})
		}
	}
	return mentions
}

// normalizeLabel folds a reference label as CommonMark matches them: case
// and runs of white space do not matter.
func normalizeLabel(l string) string {
	return strings.ToLower(strings.Join(strings.Fields(l), " "))
}

// blank replaces s[i:j] by spaces, keeping line breaks, so that offsets and
// line numbers stay those of the source.
func blank(b []byte, i, j int) {
	for k := i; k < j; k++ {
		if b[k] != '\n' {
			b[k] = ' '
		}
	}
}

// fence matches a line opening or closing a fenced code block; its
// indentation is not limited, so fences inside list items count.
var fence = regexp.MustCompile("^[ \t]*(`{3,}|~{3,})")

// blankFences blanks the content of fenced code blocks (the fence lines
// too); an unclosed fence runs to the end, as CommonMark says.
func blankFences(src string) string {
	b := []byte(src)
	open := "" // the opening fence's run, while inside a block
	start := 0
	for offset := 0; offset < len(src); {
		end := strings.IndexByte(src[offset:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += offset
		}
		line := src[offset:end]
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				// A backtick fence's info string may not hold a backtick.
				if m[1][0] != '`' || !strings.Contains(line[len(m[0]):], "`") {
					open, start = m[1], offset
				}
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line[len(m[0]):]) == "":
				blank(b, start, end)
				open = ""
			}
		}
		offset = end + 1
	}
	if open != "" {
		blank(b, start, len(b))
	}
	return string(b)
}

// blankComments blanks HTML comments, whose links do not render.
func blankComments(src string) string {
	b := []byte(src)
	for i := 0; ; {
		start := strings.Index(src[i:], "<!--")
		if start < 0 {
			break
		}
		start += i
		end := strings.Index(src[start+4:], "-->")
		if end < 0 {
			blank(b, start, len(b))
			break
		}
		end += start + 4 + 3
		blank(b, start, end)
		i = end
	}
	return string(b)
}

// paragraphEnd matches a blank line, which a code span cannot cross.
var paragraphEnd = regexp.MustCompile(`\n[ \t]*\n`)

// blankCodeSpans blanks code spans, backticks included.
func blankCodeSpans(src string) string {
	b := []byte(src)
	for _, sp := range codeSpans(src) {
		blank(b, sp[0], sp[1])
	}
	return string(b)
}

// codeSpans returns the start and end offsets of the code spans of src,
// backticks included. A run of backticks with no run of the same length
// after it in its paragraph is literal; a backslash escapes a backtick.
func codeSpans(src string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(src); {
		switch src[i] {
		case '\\':
			i += 2
			continue
		case '`':
		default:
			i++
			continue
		}
		n := runLength(src, i, '`')
		limit := len(src)
		if loc := paragraphEnd.FindStringIndex(src[i:]); loc != nil {
			limit = i + loc[0]
		}
		end := closingRun(src[:limit], i+n, n)
		if end < 0 {
			i += n
			continue
		}
		spans = append(spans, [2]int{i, end + n})
		i = end + n
	}
	return spans
}
