// Package row is the record model of YAML pipelines: a Row is a slice of
// Values indexed by field position, and a Schema names the positions once at
// plan time, so the hot path never looks a field up by name.
package row

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Kind is the type of a Value.
type Kind uint8

const (
	// Null is the zero Value.
	Null Kind = iota
	// Int is a 64-bit signed integer.
	Int
	// Float is a 64-bit float.
	Float
	// String is a UTF-8 string. The decoders of input (JSON, CSV) refuse
	// text that is not valid UTF-8 for it, so two distinct inputs never
	// become one value.
	String
	// Bool is true or false.
	Bool
	// Time is an instant in Unix nanoseconds, written as RFC 3339 UTC.
	Time
	// Bytes is a byte string of any content, kept exactly: for input whose
	// text need not be UTF-8. It is written to JSON as a base64 string
	// (standard, padded), as encoding/json writes a []byte. Its kind number
	// follows the others' so encoded state keeps its meaning.
	Bytes
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Int:
		return "int"
	case Float:
		return "float"
	case String:
		return "string"
	case Bool:
		return "bool"
	case Time:
		return "time"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Value is one field of a row. It is comparable, so it can be a state key.
type Value struct {
	kind Kind
	n    uint64 // Int, Time: int64 bits; Float: float64 bits; Bool: 0 or 1
	s    string // String, Bytes
}

// IntValue returns an Int value.
func IntValue(i int64) Value { return Value{kind: Int, n: uint64(i)} }

// FloatValue returns a Float value.
func FloatValue(f float64) Value { return Value{kind: Float, n: math.Float64bits(f)} }

// StringValue returns a String value.
func StringValue(s string) Value { return Value{kind: String, s: s} }

// BytesValue returns a Bytes value holding the bytes of b, which may be
// anything (a Go string is an immutable byte sequence, valid UTF-8 or not).
func BytesValue(b string) Value { return Value{kind: Bytes, s: b} }

// BoolValue returns a Bool value.
func BoolValue(b bool) Value {
	if b {
		return Value{kind: Bool, n: 1}
	}
	return Value{kind: Bool}
}

// TimeValue returns a Time value from Unix nanoseconds.
func TimeValue(ns int64) Value { return Value{kind: Time, n: uint64(ns)} }

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// Int returns an Int or Time value's integer.
func (v Value) Int() int64 { return int64(v.n) }

// Float returns a Float value, or an Int value converted.
func (v Value) Float() float64 {
	if v.kind == Int {
		return float64(int64(v.n))
	}
	return math.Float64frombits(v.n)
}

// Str returns a String value's string, or a Bytes value's bytes.
func (v Value) Str() string { return v.s }

// Bool returns a Bool value.
func (v Value) Bool() bool { return v.n == 1 }

// HashKey hashes the value stably across processes, for key groups.
func (v Value) HashKey() uint64 {
	h := uint64(14695981039346656037) ^ uint64(v.kind)
	h *= 1099511628211
	if v.kind == String || v.kind == Bytes {
		for i := 0; i < len(v.s); i++ {
			h ^= uint64(v.s[i])
			h *= 1099511628211
		}
		return h
	}
	return (h ^ v.n) * 0x9E3779B97F4A7C15
}

// String formats the value for messages.
func (v Value) String() string { return string(v.AppendJSON(nil)) }

// AppendJSON appends the value's JSON encoding.
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.kind {
	case Int:
		return strconv.AppendInt(dst, int64(v.n), 10)
	case Float:
		f := math.Float64frombits(v.n)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	case String:
		return appendJSONString(dst, v.s)
	case Bytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, []byte(v.s))
		return append(dst, '"')
	case Bool:
		return strconv.AppendBool(dst, v.n == 1)
	case Time:
		dst = append(dst, '"')
		dst = time.Unix(0, int64(v.n)).UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, '"')
	}
	return append(dst, "null"...)
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// Row is one record of a YAML pipeline: values by field position.
type Row []Value

// Field is a named, typed position of a Schema.
type Field struct {
	Name string
	Kind Kind
}

// Schema names the fields of the rows on one stream.
type Schema struct {
	Fields []Field
}

// Index returns the position of field name, or -1.
func (s *Schema) Index(name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Names lists the field names.
func (s *Schema) Names() []string {
	names := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		names[i] = f.Name
	}
	return names
}

// AppendJSON appends r as a JSON object with the schema's field names, in
// schema order.
func (s *Schema) AppendJSON(dst []byte, r Row) []byte {
	dst = append(dst, '{')
	for i, f := range s.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f.Name)
		dst = append(dst, ':')
		if i < len(r) {
			dst = r[i].AppendJSON(dst)
		} else {
			dst = append(dst, "null"...)
		}
	}
	return append(dst, '}')
}
