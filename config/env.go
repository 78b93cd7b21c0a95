package config

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file substitutes environment variables into a parsed pipeline file:
// ${VAR}, ${VAR:-default} and $$ for a literal $, so secrets such as DSNs
// come from the environment instead of the file.
//
// Substitution happens after the YAML is parsed, in the text of each scalar
// value, and nowhere else. So a variable's value is always text inside one
// scalar: whatever it holds (": ", "- ", "#", "{", a newline) it cannot add
// a key, a list item, a comment or a document, and it cannot end a quoted
// string early; comments are never looked at, so a "${" in a comment is no
// error. A value is read once: a "${" or "$$" in it stays as it is. Mapping
// keys are not substituted (they are node and field names, which belong in
// the file). The cost is that a plain ${VAR} cannot stand inside a flow
// collection ([...], {...}), where YAML reads "{" as syntax: quote it there,
// ["${BROKER}"].

// lookupEnv returns the value of an environment variable and whether it is
// set; Parse uses os.LookupEnv.
type lookupEnv func(name string) (string, bool)

// substitute replaces the references in every scalar value under n, in
// place, and reports each missing variable and malformed reference with its
// file line and field. path is the dotted field of n.
func substitute(e *errs, n *yaml.Node, path string, lookup lookupEnv) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			substitute(e, c, path, lookup)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			field := n.Content[i].Value
			if path != "" {
				field = path + "." + field
			}
			substitute(e, n.Content[i+1], field, lookup)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			substitute(e, c, fmt.Sprintf("%s[%d]", path, i), lookup)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := expand(n.Value, lookup)
		if err != nil {
			e.list = append(e.list, &Error{File: e.file, Line: scalarLine(n, err.at), Field: path, Msg: err.msg})
			return
		}
		n.Value = v
	}
	// An alias node shares its anchor's node, which was substituted where
	// it is defined: following it would substitute twice ($$$$ to $).
}

// scalarLine returns the file line of byte offset at in n's value: exact in
// a literal block scalar (|), whose lines are the file's; the scalar's first
// line otherwise (YAML folds the lines of other multi-line scalars).
func scalarLine(n *yaml.Node, at int) int {
	if n.Style&yaml.LiteralStyle != 0 {
		return n.Line + 1 + strings.Count(n.Value[:at], "\n")
	}
	return n.Line
}

// refError is a reference that cannot be substituted, at byte offset at of
// the value.
type refError struct {
	at  int
	msg string
}

// expand returns s with its references replaced: $$ by $, ${NAME} by the
// variable's value, ${NAME:-default} by the value, or default when the
// variable is unset or empty. Any other $ is itself.
func expand(s string, lookup lookupEnv) (string, *refError) {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : i+j])
		i += j
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i += 2
			continue
		case !strings.HasPrefix(s[i:], "${"):
			b.WriteByte('$') // $x, a trailing $, $env in an expression: not a reference
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", &refError{at: i, msg: fmt.Sprintf("%s has no closing } (write $$ for a literal $)", quoteRef(s[i:]))}
		}
		ref := s[i+2 : i+end] // between ${ and }
		name, def, hasDef := strings.Cut(ref, ":-")
		if err := checkRef(name, def, hasDef); err != "" {
			return "", &refError{at: i, msg: fmt.Sprintf("%s: %s (write $$ for a literal $)", quoteRef(s[i:i+end+1]), err)}
		}
		v, set := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !set:
			return "", &refError{at: i, msg: fmt.Sprintf("environment variable %s is not set (${%s:-default} gives a default)", name, name)}
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}

// checkRef checks the parts of a reference ${name:-def}; it returns what is
// wrong, or "".
func checkRef(name, def string, hasDef bool) string {
	switch {
	case name == "":
		return "no variable name"
	case !isEnvName(name):
		if i := strings.IndexAny(name, ":-?+="); i > 0 && isEnvName(name[:i]) {
			return "the only forms are ${NAME} and ${NAME:-default}"
		}
		return "a variable name is letters, digits and _, not starting with a digit"
	case hasDef && strings.Contains(def, "${"):
		return "a default cannot hold another reference"
	}
	return ""
}

// isEnvName reports whether s is a portable environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func isEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return s != ""
}

// quoteRef quotes a reference for a message, shortened to 40 bytes: it may
// run to the end of a long value.
func quoteRef(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
