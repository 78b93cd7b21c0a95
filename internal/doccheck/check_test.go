package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLinksFindsWhatRendersAsALink checks which destinations Links reports:
// inline links and images (also across a line break, with titles, with an
// image inside the link's text), reference definitions, undefined reference
// labels and HTML href/src, but nothing inside code blocks, code spans or
// HTML comments.
func TestLinksFindsWhatRendersAsALink(t *testing.T) {
	src := strings.Join([]string{
		"# Title", // 1
		"See [the guide](docs/guide.md#setup) and",    // 2
		"[a link broken over",                         // 3
		"two lines](two.md \"its title\").",           // 4
		"[![badge](badge.svg)](ci.md)",                // 5
		"`[not a link](code-span.md)` and ``[x](y)``", // 6
		"```go", // 7
		"p := stream.From[datagen.Event](p, \"e\", s)", // 8
		"```",                              // 9
		"<!-- [commented](comment.md) -->", // 10
		"[ref text][Guide] and [missing][nowhere]", // 11
		"",                             // 12
		"[guide]: <docs/guide two.md>", // 13
		"<a href=\"html.md#top\">x</a> <img src='i.png'>", // 14
		"    ~~~",                          // 15
		"    [in a tilde fence](fence.md)", // 16
		"    ~~~",                          // 17
		"[angle](<with space.md>) [empty]() [p](a_(b).md)", // 18
		"an [unclosed bracket",                             // 19
		"",                                                 // 20
		"then [a real one](real.md)",                       // 21
	}, "\n")
	var got []string
	for _, l := range Links(src) {
		s := strings.Join([]string{strconv.Itoa(l.Line), l.Target}, " ")
		if l.Reason != "" {
			s += " (" + l.Reason + ")"
		}
		got = append(got, s)
	}
	want := []string{
		"2 docs/guide.md#setup",
		"3 two.md",
		"5 ci.md",
		"5 badge.svg",
		"11 [missing][nowhere] (reference to an undefined label)",
		"13 docs/guide two.md",
		"14 html.md#top",
		"14 i.png",
		"18 with space.md",
		"18 ",
		"18 a_(b).md",
		"21 real.md",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAnchorsOfAFile checks the anchors a file defines: ATX headings (with
// closing hashes), setext headings, numbered duplicates, HTML ids and names,
// and no heading from a code block.
func TestAnchorsOfAFile(t *testing.T) {
	src := strings.Join([]string{
		"# Guide #",
		"## Setup",
		"```sh",
		"# not a heading",
		"```",
		"## Setup",
		"Setext heading",
		"==============",
		"",
		"- a list item",
		"---",
		"<a name=\"custom-name\"></a><span id='custom-id'>x</span>",
		"#no-space is not a heading",
		"   ### Indented three",
	}, "\n")
	var got []string
	for a := range Anchors(src) {
		got = append(got, a)
	}
	slices.Sort(got)
	want := []string{"custom-id", "custom-name", "guide", "indented-three", "setext-heading", "setup", "setup-1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anchors %v, want %v", got, want)
	}
}

// TestCheckReportsEveryKindOfBrokenLink builds a small repository beside a
// file outside it and checks that Check reports exactly the broken links,
// each with its file, line and reason, and accepts the good ones.
func TestCheckReportsEveryKindOfBrokenLink(t *testing.T) {
	outer := t.TempDir()
	root := filepath.Join(outer, "repo")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outer, "shared.md"), []byte("# Shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("README.md", strings.Join([]string{
		"# Project",
		"[good](docs/a.md#the-ab-section) [self](#project) [dir](cmd) [code](cmd/main.go#L3-L5)",
		"[missing file](docs/nope.md) [missing anchor](docs/a.md#setup)",
		"[outside](../shared.md) [rooted](/docs/a.md#the-ab-section) [web](https://example.com/x.md#y)",
		"[bad line anchor](cmd/main.go#main) [dir anchor](cmd#x) [escaped](docs/a%20b.md)",
		"The notes are in `../shared.md`; see ``../elsewhere/DESIGN.md`` too, not `..` alone.",
		"```sh",
		"cat ../shared.md # a command, not a citation",
		"```",
	}, "\n"))
	write("docs/a.md", "# A\n## The `a`/`b` section\nBack [up](../README.md#project), or `../README.md`; not `../shared/notes.txt`.\n")
	write("docs/a b.md", "# Spaced name\n")
	write("cmd/main.go", "package main\n")
	write(".git/ignored.md", "[broken](nowhere.md)\n")
	write("pkg/testdata/fixture.md", "[broken](nowhere.md)\n")

	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:3: docs/nope.md: no such file in the repository",
		"README.md:3: docs/a.md#setup: no heading of docs/a.md has the anchor #setup",
		"README.md:4: ../shared.md: outside the repository",
		"README.md:5: cmd/main.go#main: an anchor in a file that is not Markdown is not a line anchor (#L10, #L10-L20)",
		"README.md:5: cmd#x: an anchor on a directory",
		"README.md:6: ../shared.md: a path outside the repository: quote or summarise what it holds, or link within the repository",
		"README.md:6: ../elsewhere/DESIGN.md: a path outside the repository: quote or summarise what it holds, or link within the repository",
		"docs/a.md:3: ../shared/notes.txt: a path to nothing in the repository: quote or summarise what it holds, or link within the repository",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A renamed heading is reported with the anchors it may have become.
	write("docs/a.md", "# A\n## The a/b section, renamed\n")
	problems, err = Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var renamed []string
	for _, p := range problems {
		if strings.Contains(p.Target, "the-ab-section") {
			renamed = append(renamed, p.String())
		}
	}
	wantRenamed := []string{
		"README.md:2: docs/a.md#the-ab-section: no heading of docs/a.md has the anchor #the-ab-section (did you mean #the-ab-section-renamed?)",
		"README.md:4: /docs/a.md#the-ab-section: no heading of docs/a.md has the anchor #the-ab-section (did you mean #the-ab-section-renamed?)",
	}
	if !reflect.DeepEqual(renamed, wantRenamed) {
		t.Errorf("after the rename:\n%s\nwant:\n%s", strings.Join(renamed, "\n"), strings.Join(wantRenamed, "\n"))
	}
}
