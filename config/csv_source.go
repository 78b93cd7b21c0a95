package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the file source's CSV format: the columns come from each
// file's header line, the fields' types from `fields:` or, as for JSON, from
// the first record.

// csvFileSource builds `type: file` with `format: csv` from cfg, the source
// config fileSource read (path, stop_at, watermark). The fields are the
// declared ones, each of which must be a column of every file's header, or
// those of the first record, typed as the JSON sources type theirs: the
// record is sampled as a JSON object (see csvSampleJSON) and handed to the
// same inference, so both formats infer alike.
func (b *builder) csvFileSource(name string, m *mapping, par stream.NodeOption, cfg file.SourceConfig) (named, bool) {
	cfg.Format = file.FormatCSV
	policy, policyOK := b.badRecords(name, m)
	sample := func() ([]byte, error) {
		raw, err := file.NewSource(cfg, func(l file.Line) ([]byte, int64, error) { return csvSampleJSON(l), 0, nil })
		if err != nil {
			return nil, err
		}
		return sampleSource[[]byte](raw, sampleTimeout, samplingPolicy(policy))
	}
	schema, ti, ok := b.jsonSchema(m, sample)
	if !ok {
		return named{}, false
	}
	if ti < 0 {
		b.e.add(m.node, m.field("event_time"), "is required for this source: name the column with the event time, e.g. event_time: {field: ts}")
		return named{}, false
	}
	if m.vals["fields"] != nil && !b.checkCSVHeaders(m, cfg, policy.MaxRecordBytes, schema) || !policyOK {
		return named{}, false
	}
	src, err := file.NewSource(cfg, csvDecoder(schema, ti))
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return named{}, false
	}
	s := stream.From(b.p, name, src, par)
	s.Node().Describe += describeWatermark(cfg.Watermark)
	s = b.applyBadRecords(name, s, policy)
	return named{s: s, schema: schema}, true
}

// csvSampleJSON renders a CSV record as the JSON object inference reads: a
// value written as a JSON number, true or false stays that literal, an
// empty value is null, and anything else is a string. jsonSchema's
// inference then types the fields as it types JSON members (int, float,
// bool, string; time for the event-time field), and csvValue parses each
// of those kinds from the same text.
func csvSampleJSON(l file.Line) []byte {
	out := []byte{'{'}
	for i, name := range l.Header.Names {
		if i > 0 {
			out = append(out, ',')
		}
		out = row.StringValue(name).AppendJSON(out)
		out = append(out, ':')
		switch v := l.Fields[i]; {
		case v == "":
			out = append(out, "null"...)
		case v == "true", v == "false", isJSONNumber(v):
			out = append(out, v...)
		default:
			out = row.StringValue(v).AppendJSON(out)
		}
	}
	return append(out, '}')
}

// isJSONNumber says whether s is a JSON number lexeme:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// checkCSVHeaders reads the header of every file the source would read now
// (with its reader, file.CSVHeaders: a byte order mark is no part of the
// first name) and reports each declared field that one of them lacks, at
// the field's line. Files that appear later are checked as they are read
// (see csvDecoder).
func (b *builder) checkCSVHeaders(m *mapping, cfg file.SourceConfig, maxRecordBytes int, schema *row.Schema) bool {
	headers, err := file.CSVHeaders(cfg, maxRecordBytes)
	if err != nil {
		b.e.add(m.get("path"), m.field("path"), "%v", err)
		return false
	}
	ok := true
	missing := map[string]bool{}
	for _, h := range headers {
		if h.Err != nil {
			b.e.add(m.get("path"), m.field("path"), "%v", h.Err)
			ok = false
			continue
		}
		if h.Names == nil {
			continue // empty so far: checked when its header is read
		}
		for _, fld := range schema.Fields {
			if missing[fld.Name] || slices.Contains(h.Names, fld.Name) {
				continue
			}
			missing[fld.Name] = true
			ok = false
			b.e.add(fieldKey(m, fld.Name), m.field("fields")+"."+fld.Name, "no column %q in the header of %s (columns: %s)", fld.Name, b.relPath(h.Path), showNames(h.Names))
		}
	}
	return ok
}

// showNames lists column names for an error message: as they are when
// plain, quoted with Go escapes when a name holds an invisible or
// non-printing character (a byte order mark, a zero-width space), a quote,
// a comma or a space, so the reader sees why "qty" is not "qty".
func showNames(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = showName(n)
	}
	return strings.Join(out, ", ")
}

// showName renders one name as showNames does.
func showName(n string) string {
	if q := strconv.Quote(n); n == "" || q[1:len(q)-1] != n || strings.ContainsAny(n, ", ") {
		return q
	}
	return n
}

// fieldKey returns the key node of field name under m's fields, or the
// fields node itself.
func fieldKey(m *mapping, name string) *yaml.Node {
	n := m.vals["fields"]
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i]
		}
	}
	return n
}

// relPath shows path relative to the pipeline file's directory when it is
// under it.
func (b *builder) relPath(path string) string {
	if rel, err := filepath.Rel(b.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// csvColumns maps the fields of a schema to the columns of one header.
type csvColumns struct {
	header *file.Header
	// index holds each field's column in header, by field position.
	index []int
}

// columnsOf maps schema's fields to h's columns; a field h lacks is an
// error.
func columnsOf(schema *row.Schema, h *file.Header) (*csvColumns, error) {
	c := &csvColumns{header: h, index: make([]int, len(schema.Fields))}
	for i, f := range schema.Fields {
		if c.index[i] = h.Index(f.Name); c.index[i] < 0 {
			return nil, fmt.Errorf("no column %q in the header (columns: %s)", f.Name, showNames(h.Names))
		}
	}
	return c, nil
}

// csvDecoder turns a CSV record into a row of schema, the event time being
// field ti. A value that does not parse as its field's kind is an error
// naming the column; the source adds the file, line and byte offset.
func csvDecoder(schema *row.Schema, ti int) file.Decoder[row.Row] {
	// The JSON decoder is used for its event-time rule only (a time as it
	// is, an int as epoch milliseconds), which keeps CSV and JSON alike.
	et := row.NewJSONDecoder(schema, row.JSONOptions{})
	// Every record of a file shares its header: the last mapping serves
	// until another file's record comes. Subtasks share it, hence atomic.
	var last atomic.Pointer[csvColumns]
	return func(l file.Line) (row.Row, int64, error) {
		cols := last.Load()
		if cols == nil || cols.header != l.Header {
			var err error
			if cols, err = columnsOf(schema, l.Header); err != nil {
				return nil, 0, err
			}
			last.Store(cols)
		}
		r := make(row.Row, len(schema.Fields))
		for i, f := range schema.Fields {
			j := cols.index[i]
			v, err := csvValue(l.Fields[j], f.Kind)
			if err != nil {
				return nil, 0, fmt.Errorf("column %d %q: %w", j+1, f.Name, err)
			}
			r[i] = v
		}
		t, err := et.EventTime(r, ti)
		if err != nil {
			return nil, 0, fmt.Errorf("column %d %q: %w", cols.index[ti]+1, schema.Fields[ti].Name, err)
		}
		return r, t, nil
	}
}

// csvValue parses the CSV text s as a value of kind k. An empty s is null,
// except for a string or bytes, where it is empty. A string must be valid
// UTF-8: the file's bytes are kept as they are, so that two distinct values
// never become one, and a bytes field takes any.
func csvValue(s string, k row.Kind) (row.Value, error) {
	if s == "" && k != row.String && k != row.Bytes {
		return row.Value{}, nil
	}
	switch k {
	case row.String:
		if !utf8.ValidString(s) {
			return row.Value{}, fmt.Errorf("%q: invalid UTF-8 at byte %d; a bytes field keeps it", s, invalidUTF8At(s))
		}
		return row.StringValue(s), nil
	case row.Bytes:
		return row.BytesValue(s), nil
	case row.Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return row.Value{}, fmt.Errorf("%q is not an int", s)
		}
		return row.IntValue(n), nil
	case row.Float:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return row.Value{}, fmt.Errorf("%q is not a finite float", s)
		}
		return row.FloatValue(f), nil
	case row.Bool:
		switch s {
		case "true":
			return row.BoolValue(true), nil
		case "false":
			return row.BoolValue(false), nil
		}
		return row.Value{}, fmt.Errorf("%q is not a bool (true or false)", s)
	case row.Time:
		tf := file.TimeRFC3339
		if isJSONNumber(s) {
			tf = file.TimeEpochMillis
		}
		ns, err := file.ParseEventTime(s, tf)
		if err != nil {
			return row.Value{}, fmt.Errorf("%q is not a time: want RFC 3339 (2026-01-02T03:04:05Z) or epoch milliseconds, in the years 1678 to 2262", s)
		}
		return row.TimeValue(ns), nil
	}
	return row.Value{}, fmt.Errorf("unsupported kind %v", k)
}

// invalidUTF8At returns the offset of the first byte of s that is not valid
// UTF-8, len(s) when s is valid.
func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			return i
		}
	}
	return len(s)
}
