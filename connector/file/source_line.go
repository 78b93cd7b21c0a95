package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/internal/jsonscan"
)

// Line is one record of an input file as the source hands it to a Decoder:
// where it is, and its content, raw JSON for JSON Lines or the fields and
// the file's header for CSV. The YAML layer turns it into a row by looking
// its columns up with Field (or, faster, by Header.Index once per header).
type Line struct {
	// Path is the file's path as the glob matched it.
	Path string
	// Number is the 1-based line number the record starts on (a CSV record
	// may span lines inside quotes; the header is line 1).
	Number int64
	// Offset is the byte offset of the record's first byte in the file.
	Offset int64
	// JSON is the line without its line terminator (JSON Lines only). It
	// aliases the source's read buffer: valid only during the Decoder
	// call; copy what must outlive it.
	JSON []byte
	// Fields are the CSV record's fields (CSV only). The slice is reused
	// for the next record; the strings themselves stay valid.
	Fields []string
	// Header is the CSV file's header (CSV only), shared by every record of
	// the file. Do not modify it.
	Header *Header
	// raw is the record's bytes without its line terminator, aliasing the
	// read buffer (the dead-letter output copies them).
	raw []byte
}

// String locates the line as path:number.
func (l Line) String() string { return fmt.Sprintf("%s:%d", l.Path, l.Number) }

// Field returns the value of the named field: for CSV the field under that
// header name; for JSON Lines the top-level member of that name, a string
// unescaped, a number, true or false as written, an object or array as its
// raw JSON. ok is false when the field is absent or JSON null.
func (l Line) Field(name string) (value string, ok bool) {
	if l.Header != nil {
		i := l.Header.Index(name)
		if i < 0 || i >= len(l.Fields) {
			return "", false
		}
		return l.Fields[i], true
	}
	raw, ok := jsonMember(l.JSON, name)
	if !ok || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		if s, plain := plainJSONString(raw); plain {
			return s, true
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(raw), true
}

// Header is a CSV file's first record: the names of its columns.
type Header struct {
	// Names are the column names in file order.
	Names []string
	index map[string]int
}

// newHeader indexes names; a name that appears twice is an error.
func newHeader(names []string) (*Header, error) {
	h := &Header{Names: names, index: make(map[string]int, len(names))}
	for i, n := range names {
		if _, dup := h.index[n]; dup {
			return nil, fmt.Errorf("the header names column %q twice", n)
		}
		h.index[n] = i
	}
	return h, nil
}

// Index returns the position of column name, or -1.
func (h *Header) Index(name string) int {
	if i, ok := h.index[name]; ok {
		return i
	}
	return -1
}

// Decoder turns a Line into a record and its event time in Unix
// nanoseconds. An error makes the line a bad record: it fails the source
// subtask (the source adds the file, line number and byte offset to the
// error) unless the source's bad-record policy skips it or sends it to the
// dead-letter output (see stream.OnBadRecords).
type Decoder[T any] func(Line) (T, int64, error)

// TimeFormat says how an event-time field is written.
type TimeFormat string

const (
	// TimeRFC3339 is an RFC 3339 timestamp with optional fractional
	// seconds: 2026-01-02T03:04:05.123Z.
	TimeRFC3339 TimeFormat = "rfc3339"
	// TimeEpochMillis is milliseconds since the Unix epoch, an integer or a
	// decimal with up to six fractional digits (a JSON number or string).
	TimeEpochMillis TimeFormat = "epoch_ms"
)

// Validate reports an unknown format.
func (f TimeFormat) Validate() error {
	switch f {
	case TimeRFC3339, TimeEpochMillis:
		return nil
	}
	return fmt.Errorf("time format %q: want %s or %s", string(f), TimeRFC3339, TimeEpochMillis)
}

// ParseEventTime parses s, written as f, into Unix nanoseconds
// (eventtime.RFC3339 or eventtime.EpochMillis). Instants outside what int64
// nanoseconds represent (years 1678 to 2262) are errors.
func ParseEventTime(s string, f TimeFormat) (int64, error) {
	var (
		ns  int64
		err error
	)
	switch f {
	case TimeRFC3339:
		ns, err = eventtime.RFC3339([]byte(s))
	case TimeEpochMillis:
		ns, err = eventtime.EpochMillis([]byte(s))
	default:
		return 0, f.Validate()
	}
	if err != nil {
		return 0, fmt.Errorf("event time %w", err)
	}
	return ns, nil
}

// WithEventTime returns a Decoder that builds each record with build and
// takes its event time from field (see Line.Field), written as tf. A line
// without the field, or with one that does not parse, is an error. With
// field "" every record gets event time 0.
func WithEventTime[T any](build func(Line) (T, error), field string, tf TimeFormat) (Decoder[T], error) {
	if build == nil {
		return nil, errors.New("file source: WithEventTime needs a build function")
	}
	if field == "" {
		return func(l Line) (T, int64, error) {
			v, err := build(l)
			return v, 0, err
		}, nil
	}
	if err := tf.Validate(); err != nil {
		return nil, fmt.Errorf("file source: event-time field %q: %w", field, err)
	}
	return func(l Line) (T, int64, error) {
		v, err := build(l)
		if err != nil {
			return v, 0, err
		}
		s, ok := l.Field(field)
		if !ok {
			return v, 0, fmt.Errorf("event-time field %q is missing or null", field)
		}
		t, err := ParseEventTime(s, tf)
		if err != nil {
			return v, 0, fmt.Errorf("event-time field %q: %w", field, err)
		}
		return v, t, nil
	}, nil
}

// DecodeJSON returns a Decoder for JSON Lines that unmarshals each line into
// T with encoding/json and takes the event time from the top-level member
// timeField written as tf ("" for none: event time 0). A line that is not
// valid UTF-8, or has a lone surrogate escape, is an error
// (jsonscan.CheckText): encoding/json would read U+FFFD there and make
// distinct values one.
func DecodeJSON[T any](timeField string, tf TimeFormat) (Decoder[T], error) {
	return WithEventTime(func(l Line) (T, error) {
		var v T
		if l.JSON == nil {
			return v, errors.New("DecodeJSON reads JSON Lines, not CSV")
		}
		if err := json.Unmarshal(l.JSON, &v); err != nil {
			return v, err
		}
		if err := jsonscan.CheckText(l.JSON); err != nil {
			return v, fmt.Errorf("the line is not valid text: %w", err)
		}
		return v, nil
	}, timeField, tf)
}

// plainJSONString returns the content of a JSON string literal without
// escapes; plain is false when it has escapes (or is not valid UTF-8).
func plainJSONString(raw []byte) (s string, plain bool) {
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}
