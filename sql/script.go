// Package sql parses pipelines written in SQL: the PostgreSQL-based dialect
// RisingWave documents (CREATE SOURCE … WITH (connector = …), CREATE SINK,
// CREATE VIEW, SELECT with TUMBLE, HOP and SESSION in FROM). It only parses:
// package config plans the parsed script into the same graph YAML builds.
//
// SELECT statements are parsed by PostgreSQL's own grammar (libpg_query,
// run in pure Go by github.com/wasilibs/go-pgquery). The statements around
// them that PostgreSQL does not have (CREATE SOURCE, CREATE SINK, WATERMARK
// FOR, WITH options with dotted names, FORMAT … ENCODE …) are parsed here by
// hand. Every node carries its position (line and column in the file) so
// errors name where they come from.
package sql

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a script: line and column from 1 (columns count
// bytes).
type Pos struct{ Line, Column int }

// Error is a problem in a script, at a position, with the construct it
// concerns.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

// Error formats the error as file:line:column: message.
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Column, e.Msg)
}

// source is the text of a script with its line starts, to turn byte offsets
// into positions.
type source struct {
	file  string
	text  string
	lines []int // byte offset of each line's start
}

func newSource(file, text string) *source {
	s := &source{file: file, text: text, lines: []int{0}}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	return s
}

// pos returns the position of byte offset off.
func (s *source) pos(off int) Pos {
	l := sort.Search(len(s.lines), func(i int) bool { return s.lines[i] > off }) - 1
	return Pos{Line: l + 1, Column: off - s.lines[l] + 1}
}

// errorf returns an Error at byte offset off.
func (s *source) errorf(off int, format string, args ...any) *Error {
	return &Error{File: s.file, Pos: s.pos(off), Msg: fmt.Sprintf(format, args...)}
}

// statement is one statement's text (without its ';') and where it starts.
type statement struct {
	text  string
	start int
}

// split cuts the script at the semicolons outside strings, quoted names and
// comments. Statements holding only blanks and comments are left out.
func (s *source) split() ([]statement, error) {
	var out []statement
	t := s.text
	start := 0
	content := false // a statement's text outside blanks and comments was seen
	emit := func(end int) {
		if content {
			out = append(out, statement{text: t[start:end], start: start})
		}
		start, content = end+1, false
	}
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '\'' || c == '"':
			j := closeQuote(t, i)
			if j < 0 {
				what := "string"
				if c == '"' {
					what = "quoted name"
				}
				return nil, s.errorf(i, "unterminated %s", what)
			}
			i, content = j, true
		case c == '-' && i+1 < len(t) && t[i+1] == '-':
			for i < len(t) && t[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(t) && t[i+1] == '*':
			j := strings.Index(t[i+2:], "*/")
			if j < 0 {
				return nil, s.errorf(i, "unterminated comment")
			}
			i += j + 3
		case c == ';':
			emit(i)
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			content = true
		}
	}
	emit(len(t))
	return out, nil
}

// closeQuote returns the offset of the quote closing the one at i (a
// doubled quote is one quote character), -1 if none.
func closeQuote(t string, i int) int {
	q := t[i]
	for j := i + 1; j < len(t); j++ {
		if t[j] == q {
			if j+1 < len(t) && t[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return -1
}
