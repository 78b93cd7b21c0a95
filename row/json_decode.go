package row

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/internal/decimal"
	"github.com/ingest-engine/ingest/internal/jsonscan"
)

// JSONSyntaxError reports input that is not valid JSON. The record cannot be
// decoded whatever the schema: a source should treat it as a poison record.
type JSONSyntaxError = jsonscan.SyntaxError

// ErrNotJSONObject marks valid-looking input whose top-level value is not an
// object (an array, a string, a number, a bool or null): rows are read from
// flat objects only.
var ErrNotJSONObject = jsonscan.ErrNotObject

// JSONOptions configures reading rows from JSON objects.
type JSONOptions struct {
	// TimeFields names the fields that hold instants: InferSchema types them
	// Time (an RFC 3339 string or a number of epoch milliseconds, see
	// NewJSONDecoder) and fails when a sample holds anything else there or
	// when no sample has the field. Without it every string infers String and
	// every number Int or Float, since neither says it is a time. A source's
	// event_time field belongs here. The default is none.
	//
	// NewJSONDecoder does not read it: the schema's kinds decide.
	TimeFields []string
}

// JSONDecoder reads flat JSON objects (a Kafka message value, a line of JSON
// Lines) into rows of one schema. It is immutable, so one decoder may serve
// every subtask at once.
type JSONDecoder struct {
	names []string
	kinds []Kind
	// index maps a field name to its position. Looking it up with
	// index[string(key)] does not allocate.
	index map[string]int
}

// NewJSONDecoder returns a decoder of objects into rows of schema, which it
// copies. Members are matched to fields by exact name; a member the schema
// does not name is validated and ignored, and when a name repeats the last
// one counts (as in encoding/json). A missing member or a JSON null gives
// the null Value. Otherwise each field kind accepts:
//
//   - Int: an integer in int64 range; a number with a fraction or exponent
//     only when its value is exactly integral (3.0 and 1e3, not 3.5).
//   - Float: any number in float64 range.
//   - String: a string, with escapes resolved; an object or array as its raw
//     JSON text (escapes as written). The text must be valid Unicode: invalid
//     UTF-8, or a \u escape of a lone surrogate (\ud800), is a
//     *JSONTypeError. (encoding/json writes U+FFFD for both, which makes
//     "a\xff", "a\xfe", "a\ud800" and "a\ufffd" one key.)
//   - Bytes: what String accepts and also any bytes, kept exactly: a string's
//     bytes as written with escapes resolved (a lone surrogate as the three
//     bytes of its code point, as WTF-8 writes it), an object's or array's
//     raw text.
//   - Bool: true or false.
//   - Time: an RFC 3339 string as time.Parse(time.RFC3339Nano) reads it
//     ("2026-01-02T15:04:05.123+01:00"), or a number of milliseconds since the
//     Unix epoch, integral or with up to six exact decimals. Instants outside
//     what int64 nanoseconds hold (years 1678 to 2262) are errors.
//   - Null: only null.
//
// A value of any other JSON type is a *JSONTypeError. Schema field names
// should be distinct: a repeated one receives the value at its first
// position only.
func NewJSONDecoder(schema *Schema, opts JSONOptions) *JSONDecoder {
	_ = opts // the schema's kinds decide; see JSONOptions.TimeFields
	d := &JSONDecoder{
		names: make([]string, len(schema.Fields)),
		kinds: make([]Kind, len(schema.Fields)),
		index: make(map[string]int, len(schema.Fields)),
	}
	for i, f := range schema.Fields {
		d.names[i], d.kinds[i] = f.Name, f.Kind
		if _, dup := d.index[f.Name]; !dup {
			d.index[f.Name] = i
		}
	}
	return d
}

// JSONTypeError reports a member whose JSON value its field's kind does not
// accept. The record is valid JSON of the wrong shape: a source should treat
// it as a poison record, as a syntax error.
type JSONTypeError struct {
	// Field is the schema field's name.
	Field string
	// Want is the field's kind.
	Want Kind
	// Got is the JSON type of the value: string, number, bool, object or array.
	Got string
	// Value is the value as written, shortened, or "" for objects and arrays.
	Value string
	// Reason says why a value of an accepted JSON type was refused
	// ("not an integer"), or is "".
	Reason string
	// Offset is the position of the value in the input, counted from 0.
	Offset int
}

func (e *JSONTypeError) Error() string {
	msg := fmt.Sprintf("field %q: want %s, got %s", e.Field, e.Want, e.Got)
	if e.Value != "" {
		msg += " " + e.Value
	}
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// maxErrorValue bounds how much of a refused value an error message quotes.
const maxErrorValue = 64

func (d *JSONDecoder) typeError(fi int, got string, value []byte, reason string, off int) error {
	v := string(value)
	if got == "string" {
		b, _ := jsonscan.AppendUnquoted(nil, value)
		v = string(b)
	}
	if len(v) > maxErrorValue {
		n := maxErrorValue
		for n > 0 && !utf8.RuneStart(v[n]) {
			n-- // do not cut a character in two
		}
		v = v[:n] + "…"
	}
	if got == "string" {
		v = strconv.Quote(v)
	}
	return &JSONTypeError{Field: d.names[fi], Want: d.kinds[fi], Got: got, Value: v, Reason: reason, Offset: off}
}

// Decode reads one JSON object, optionally surrounded by space, into a new
// Row. It allocates the Row and the text of each String and Bytes value,
// nothing else (bar errors and rare inputs: a time string time.Parse must
// judge), and keeps no reference to data, which the caller may reuse.
//
// It returns a *JSONSyntaxError for invalid JSON, ErrNotJSONObject (wrapped)
// for a top-level value that is not an object, and a *JSONTypeError for the
// first member its field refuses, but only once the whole input is known to
// be valid JSON, so a truncated record is never blamed on a field.
func (d *JSONDecoder) Decode(data []byte) (Row, error) {
	i, done, err := jsonscan.OpenObject(data)
	if err != nil {
		return nil, err
	}
	r := make(Row, len(d.kinds))
	var typeErr error
	next := 0 // the field the next member likely fills: producers keep an order
	var keyBuf [64]byte
	for !done {
		key, flags, val, err := jsonscan.MemberKey(data, i)
		if err != nil {
			return nil, err
		}
		fi := -1
		if name := jsonscan.UnquoteKey(keyBuf[:0], key, flags); next < len(d.names) && string(name) == d.names[next] {
			fi = next
		} else if f, ok := d.index[string(name)]; ok {
			fi = f
		}
		if fi < 0 {
			i, err = jsonscan.SkipValue(data, val, 1)
		} else {
			next = fi + 1
			r[fi], i, err = d.value(data, val, fi)
		}
		if err != nil {
			if _, ok := err.(*JSONTypeError); !ok {
				return nil, err
			}
			if typeErr == nil {
				typeErr = err
			}
			// value has skipped the refused value and set i past it.
		}
		if i, done, err = jsonscan.NextMember(data, i); err != nil {
			return nil, err
		}
	}
	if err := jsonscan.CloseObject(data, i); err != nil {
		return nil, err
	}
	if typeErr != nil {
		return nil, typeErr
	}
	return r, nil
}

// value reads the value at data[i] for field fi and returns the offset after
// it. On a *JSONTypeError the offset is still valid: the value was skipped.
func (d *JSONDecoder) value(data []byte, i, fi int) (Value, int, error) {
	if i >= len(data) {
		return Value{}, 0, jsonscan.Unexpected(data, i, "")
	}
	kind := d.kinds[fi]
	switch c := data[i]; c {
	case '"':
		end, flags, err := jsonscan.ScanString(data, i)
		if err != nil {
			return Value{}, 0, err
		}
		body := data[i+1 : end-1]
		switch kind {
		case String:
			// Text without escapes, the common case, is checked here: a call
			// to stringOf costs it 10%.
			if flags&jsonscan.StrEscaped == 0 && (flags == 0 || utf8.Valid(body)) {
				return StringValue(string(body)), end, nil
			}
			s, fault := stringOf(body, flags)
			if fault != "" {
				return Value{}, end, d.typeError(fi, "string", body, fault+bytesHint, i)
			}
			return StringValue(s), end, nil
		case Bytes:
			return BytesValue(bytesOf(body, flags)), end, nil
		case Time:
			ns, reason := parseTimeString(body, flags)
			if reason != "" {
				return Value{}, end, d.typeError(fi, "string", body, reason, i)
			}
			return TimeValue(ns), end, nil
		}
		return Value{}, end, d.typeError(fi, "string", body, "", i)
	case '{', '[':
		end, err := jsonscan.SkipNested(data, i, 2)
		if err != nil {
			return Value{}, 0, err
		}
		got := "object"
		if c == '[' {
			got = "array"
		}
		switch raw := data[i:end]; kind {
		case String:
			if !utf8.Valid(raw) {
				return Value{}, end, d.typeError(fi, got, nil, jsonscan.InvalidUTF8(raw, 0)+bytesHint, i)
			}
			return StringValue(string(raw)), end, nil
		case Bytes:
			return BytesValue(string(raw)), end, nil
		}
		return Value{}, end, d.typeError(fi, got, nil, "", i)
	case 'n':
		end, err := jsonscan.ScanLiteral(data, i, "null")
		return Value{}, end, err
	case 't', 'f':
		lit := "true"
		if c == 'f' {
			lit = "false"
		}
		end, err := jsonscan.ScanLiteral(data, i, lit)
		if err != nil {
			return Value{}, 0, err
		}
		if kind == Bool {
			return BoolValue(c == 't'), end, nil
		}
		return Value{}, end, d.typeError(fi, "bool", data[i:end], "", i)
	}
	if c := data[i]; c != '-' && (c < '0' || c > '9') {
		return Value{}, 0, jsonscan.Unexpected(data, i, "looking for beginning of value")
	}
	end, flags, err := jsonscan.ScanNumber(data, i)
	if err != nil {
		return Value{}, 0, err
	}
	lex := data[i:end]
	var reason string
	switch kind {
	case Int:
		if flags == 0 && len(lex) <= 18 { // at most 18 digits: cannot overflow
			return IntValue(smallInt(lex)), end, nil
		}
		n, st := decimal.Int(lex, 0)
		if st == decimal.OK {
			return IntValue(n), end, nil
		}
		reason = "out of int64 range"
		if st == decimal.Fraction {
			reason = "not an integer"
		}
	case Float:
		// A []byte converted in the call does not allocate: ParseFloat's
		// error copies the string it keeps.
		f, err := strconv.ParseFloat(string(lex), 64)
		if err == nil {
			return FloatValue(f), end, nil
		}
		reason = "out of float64 range"
	case Time:
		ns, st := decimal.Int(lex, 6)
		if st == decimal.OK {
			return TimeValue(ns), end, nil
		}
		reason = "epoch milliseconds " + timeRangeReason
		if st == decimal.Fraction {
			reason = "epoch milliseconds finer than a nanosecond"
		}
	}
	return Value{}, end, d.typeError(fi, "number", lex, reason, i)
}

// bytesHint ends the reason of a string field's refusal of a value that is
// not valid Unicode text.
const bytesHint = "; a bytes field keeps it"

// stringOf returns the text of a string literal's body with the flags
// jsonscan.ScanString gave it, in one allocation, or why it is not valid Unicode
// (see jsonscan.AppendUnquoted). Plain ASCII is copied unchecked.
func stringOf(body []byte, flags uint8) (s, fault string) {
	if flags&jsonscan.StrEscaped == 0 {
		if flags&jsonscan.StrNonASCII != 0 && !utf8.Valid(body) {
			return "", jsonscan.InvalidUTF8(body, 0)
		}
		return string(body), ""
	}
	b, fault := jsonscan.AppendUnquoted(make([]byte, 0, len(body)), body)
	if fault != "" {
		return "", fault
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), "" // b is never written again
}

// bytesOf returns the bytes of a string literal's body (see jsonscan.AppendUnquoted)
// in one allocation.
func bytesOf(body []byte, flags uint8) string {
	if flags&jsonscan.StrEscaped == 0 {
		return string(body)
	}
	b, _ := jsonscan.AppendUnquoted(make([]byte, 0, len(body)), body)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// smallInt parses an integer lexeme of at most 18 digits.
func smallInt(lex []byte) int64 {
	neg := lex[0] == '-'
	if neg {
		lex = lex[1:]
	}
	var n int64
	for _, c := range lex {
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// timeRangeReason is eventtime.ErrRange's text, for reasons built here.
var timeRangeReason = eventtime.ErrRange.Error()

// parseTimeString reads the body of a string literal as an RFC 3339 time in
// Unix nanoseconds (eventtime.RFC3339), or returns why it cannot.
func parseTimeString(body []byte, flags uint8) (int64, string) {
	var buf [40]byte
	ns, err := eventtime.RFC3339(jsonscan.UnquoteKey(buf[:0], body, flags))
	switch {
	case err == nil:
		return ns, ""
	case errors.Is(err, eventtime.ErrRange):
		return 0, timeRangeReason
	}
	return 0, "not RFC 3339"
}

// EventTime returns field fi of r, a row this decoder made, as an event time
// in Unix nanoseconds: a Time value as it is, an Int value as epoch
// milliseconds. It is for sources' event_time: {field: …}. A null (missing)
// value or one of another kind is an error, which should fail the record.
func (d *JSONDecoder) EventTime(r Row, fi int) (int64, error) {
	if fi < 0 || fi >= len(d.names) || fi >= len(r) {
		return 0, fmt.Errorf("event time: no field %d in a row of %d", fi, len(r))
	}
	v := r[fi]
	switch v.Kind() {
	case Time:
		return v.Int(), nil
	case Int:
		const maxMillis = math.MaxInt64 / int64(time.Millisecond)
		if ms := v.Int(); ms >= -maxMillis && ms <= maxMillis {
			return ms * int64(time.Millisecond), nil
		}
		return 0, fmt.Errorf("event time field %q: %d ms is %s", d.names[fi], v.Int(), timeRangeReason)
	case Null:
		return 0, fmt.Errorf("event time field %q is missing or null", d.names[fi])
	}
	return 0, fmt.Errorf("event time field %q is a %s; want a time or an int of epoch milliseconds", d.names[fi], v.Kind())
}
