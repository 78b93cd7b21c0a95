package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is a configuration error: the file, line and field it concerns.
type Error struct {
	File string
	Line int
	// Column is the column in the line, from 1; 0 when not given (YAML
	// errors name the line only, SQL ones also the column).
	Column int
	Field  string
	Msg    string
}

// Error formats the error as file:line: field: message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// errs collects the errors of one file, so a user sees them all at once.
type errs struct {
	file string
	// columns says errors give the column too (a SQL script's).
	columns bool
	list    []error
	// unknown are the unknown-field errors: a misspelt field is often the
	// cause of other errors (a required field missing, a node that could not
	// be built), so all lists them first.
	unknown []*Error
	// checks run once the whole file is built (whether anything reads a
	// source's dead-letter output): when the top-level mapping is done, or
	// else first thing in err.
	checks []func()
}

// atEnd adds a check to run once the whole file is built.
func (e *errs) atEnd(check func()) { e.checks = append(e.checks, check) }

// runChecks runs the checks added by atEnd, once.
func (e *errs) runChecks() {
	checks := e.checks
	e.checks = nil
	for _, c := range checks {
		c()
	}
}

func (e *errs) add(n *yaml.Node, field, format string, args ...any) {
	line, col := 0, 0
	if n != nil {
		line = n.Line
		if e.columns {
			col = n.Column
		}
	}
	e.list = append(e.list, &Error{File: e.file, Line: line, Column: col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// all returns the errors: the unknown fields in file order, then the
// others in the order found.
func (e *errs) all() []error {
	out := make([]error, 0, len(e.unknown)+len(e.list))
	slices.SortStableFunc(e.unknown, func(a, b *Error) int { return a.Line - b.Line })
	for _, u := range e.unknown {
		out = append(out, u)
	}
	return append(out, e.list...)
}

// failed says whether any error was found.
func (e *errs) failed() bool { return len(e.list)+len(e.unknown) > 0 }

// mapping is a YAML mapping being read field by field; fields not read are
// reported as unknown by done.
type mapping struct {
	e     *errs
	path  string // dotted path of this mapping, "" at the top
	node  *yaml.Node
	keys  []string
	vals  map[string]*yaml.Node
	knode map[string]*yaml.Node
	read  map[string]bool
	// bad marks keys whose value was already reported, so one mistake gives
	// one error.
	bad map[string]bool
	// decl, when set, are the only fields the mapping may read: it is a
	// connector's, read against its registered spec (see declared).
	decl *declared
}

func newMapping(e *errs, path string, n *yaml.Node) *mapping {
	m := &mapping{e: e, path: path, node: n, vals: map[string]*yaml.Node{}, knode: map[string]*yaml.Node{}, read: map[string]bool{}, bad: map[string]bool{}}
	if n == nil {
		return m
	}
	if n.Kind != yaml.MappingNode {
		e.add(n, path, "must be a mapping of keys to values")
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := m.vals[k.Value]; dup {
			e.add(k, m.field(k.Value), "is given twice")
			continue
		}
		m.keys = append(m.keys, k.Value)
		m.vals[k.Value] = v
		m.knode[k.Value] = k
	}
	return m
}

func (m *mapping) field(key string) string {
	if m.path == "" {
		return key
	}
	return m.path + "." + key
}

// get returns the value node of key, nil when absent.
func (m *mapping) get(key string) *yaml.Node {
	m.checkDeclared(key)
	m.read[key] = true
	return m.vals[key]
}

// line returns the line of key, or of the mapping when key is absent.
func (m *mapping) line(key string) *yaml.Node {
	if k := m.knode[key]; k != nil {
		return k
	}
	return m.node
}

func (m *mapping) scalar(key string) (*yaml.Node, bool) {
	v := m.get(key)
	if v == nil {
		return nil, false
	}
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		m.fail(key, v, "must be a single value")
		return nil, false
	}
	return v, true
}

func (m *mapping) str(key, def string) string {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	return v.Value
}

func (m *mapping) required(key string) string {
	m.checkRequired(key)
	if m.vals[key] == nil {
		m.e.add(m.node, m.field(key), "is required")
	}
	return m.str(key, "")
}

func (m *mapping) int(key string, def int64) int64 {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 10, 64)
	if err != nil {
		m.fail(key, v, "%q is not a whole number", v.Value)
		return def
	}
	return i
}

// size reads a byte size: a whole number of bytes, or one with a unit of
// KiB, MiB, GiB or TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000).
func (m *mapping) size(key string, def int64) int64 {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	n, err := parseSize(v.Value)
	if err != nil {
		m.fail(key, v, "%q is not a size (a whole number of bytes, or with a unit: 512MiB, 2GiB, 100MB)", v.Value)
		return def
	}
	return n
}

// parseSize reads a size as mapping.size does.
func parseSize(text string) (int64, error) {
	s := strings.ReplaceAll(strings.TrimSpace(text), "_", "")
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (n > 0 && mult > math.MaxInt64/n) {
		return 0, fmt.Errorf("%q is not a size", text)
	}
	return n * mult, nil
}

func (m *mapping) float(key string, def float64) float64 {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		m.fail(key, v, "%q is not a finite number", v.Value)
		return def
	}
	return f
}

func (m *mapping) duration(key string, def time.Duration) time.Duration {
	m.checkDefault(key, def)
	v, ok := m.scalar(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		m.fail(key, v, "%q is not a duration (Go syntax: 250ms, 1s, 5m)", v.Value)
		return def
	}
	return d
}

// fail reports the value v of key.
func (m *mapping) fail(key string, v *yaml.Node, format string, args ...any) {
	m.bad[key] = true
	m.e.add(v, m.field(key), format, args...)
}

// positive reports a field whose value must be > 0, unless its value was
// already reported.
func (m *mapping) positive(key string, ok bool) {
	if !ok && m.vals[key] != nil && !m.bad[key] {
		m.fail(key, m.vals[key], "must be positive")
	}
}

// nonNegative reports a field whose value must be >= 0, unless its value was
// already reported.
func (m *mapping) nonNegative(key string, ok bool) {
	if !ok && m.vals[key] != nil && !m.bad[key] {
		m.fail(key, m.vals[key], "must not be negative")
	}
}

// requiredDuration reads a duration that must be given; it is 0 when absent
// or invalid, both reported.
func (m *mapping) requiredDuration(key string) time.Duration {
	if m.vals[key] == nil {
		m.read[key] = true
		m.e.add(m.node, m.field(key), "is required")
		return 0
	}
	return m.duration(key, 0)
}

// has says whether key is given, and marks it read: a caller that rejects a
// field for another reason than its name reports it itself.
func (m *mapping) has(key string) bool {
	m.checkDeclared(key)
	m.read[key] = true
	return m.vals[key] != nil
}

// sub returns the mapping under key (empty when absent).
func (m *mapping) sub(key string) *mapping {
	sub := newMapping(m.e, m.field(key), m.get(key))
	sub.decl = m.decl.sub(key)
	return sub
}

// unknownType reports an unknown (non-empty) type and marks the node's other
// fields read: they cannot be checked against an unknown type.
func (m *mapping) unknownType(what, typ, known string) {
	if typ != "" {
		hint := ""
		if s := closest(typ, strings.Split(known, ", ")); s != "" {
			hint = ", did you mean " + s + "?"
		}
		m.e.add(m.get("type"), m.field("type"), "unknown %s type %q%s (known: %s)", what, typ, hint, known)
	}
	for _, k := range m.keys {
		m.read[k] = true
	}
}

// done reports every key that was not read. The top-level mapping is done
// last, once the whole file is built: then the end-of-file checks run.
func (m *mapping) done() {
	if m.path == "" {
		defer m.e.runChecks()
	}
	for _, k := range m.keys {
		if !m.read[k] {
			known := slices.Sorted(func(yield func(string) bool) {
				for r := range m.read {
					if !yield(r) {
						return
					}
				}
			})
			msg := "unknown field"
			if s := m.suggest(k, known); s != "" {
				msg += ", did you mean " + s + "?"
			}
			col := 0
			if m.e.columns {
				col = m.knode[k].Column
			}
			m.e.unknown = append(m.e.unknown, &Error{File: m.e.file, Line: m.knode[k].Line, Column: col, Field: m.field(k),
				Msg: fmt.Sprintf("%s (known here: %s)", msg, strings.Join(known, ", "))})
		}
	}
}

// suggest returns the field of known, not given in m, that key is most
// likely a misspelling of; "" when none is close.
func (m *mapping) suggest(key string, known []string) string {
	var candidates []string
	for _, k := range known {
		if m.vals[k] == nil {
			candidates = append(candidates, k)
		}
	}
	return closest(key, candidates)
}

// closest returns the word of words nearest to s by edit distance (a
// letter added, removed, changed, or two neighbours swapped), if it is near
// enough to be a misspelling: one edit per three letters of s, at least
// one and at most three; ties go to the first. "" when none is.
func closest(s string, words []string) string {
	best, bestD := "", min(max(1, len(s)/3), 3)+1
	for _, w := range words {
		if d := editDistance(strings.ToLower(s), strings.ToLower(w)); d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b (bytes).
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
