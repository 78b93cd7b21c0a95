package row

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ingest-engine/ingest/internal/decimal"
	"github.com/ingest-engine/ingest/internal/jsonscan"
)

// InferSchema infers the schema of JSON objects from samples with the
// default JSONOptions; see JSONOptions.InferSchema.
func InferSchema(samples ...[]byte) (*Schema, error) {
	return JSONOptions{}.InferSchema(samples...)
}

// InferSchema returns a schema with a field for every top-level member of the
// sample objects, in the order of first appearance, typed so that
// NewJSONDecoder decodes every sample:
//
//   - integers written without a fraction or exponent, in int64 range: Int;
//   - other numbers (3.0, 1e3, integers past int64): Float, since producers
//     write floats that way; a field with both is Float;
//   - strings: String, or Time when o.TimeFields names the field (see there);
//     a string that is not valid Unicode text (see NewJSONDecoder) is an
//     error, as is a member name that is not: inference does not guess Bytes;
//   - true and false: Bool;
//   - objects and arrays: String, holding the raw JSON text; a field with
//     both strings and nested values is String;
//   - null: says nothing, and a field that is null in every sample is String
//     (Time if named in o.TimeFields).
//
// Strings that look like times stay String unless named: guessing would
// turn an ID such as "2026-01-02" into an instant. Other mixes of JSON types
// in one field (a number and a string) are an error naming both samples,
// counted from 1, as is invalid JSON, a sample that is not an object, no
// samples or no fields.
func (o JSONOptions) InferSchema(samples ...[]byte) (*Schema, error) {
	if len(samples) == 0 {
		return nil, errors.New("infer schema: no samples")
	}
	var fields []inferred
	index := make(map[string]int)
	for n, data := range samples {
		err := inferSample(data, func(name string, t jsonType, raw []byte, flags uint8) error {
			fi, ok := index[name]
			if !ok {
				fi = len(fields)
				index[name] = fi
				fields = append(fields, inferred{name: name, timeField: slices.Contains(o.TimeFields, name)})
			}
			return fields[fi].add(t, raw, flags, n+1)
		})
		if err != nil {
			return nil, fmt.Errorf("infer schema: sample %d: %w", n+1, err)
		}
	}
	for _, name := range o.TimeFields {
		if _, ok := index[name]; !ok {
			return nil, fmt.Errorf("infer schema: time field %q is in no sample", name)
		}
	}
	if len(fields) == 0 {
		return nil, errors.New("infer schema: the samples have no fields")
	}
	s := &Schema{Fields: make([]Field, len(fields))}
	for i, f := range fields {
		s.Fields[i] = Field{Name: f.name, Kind: f.kind}
		if f.kind == Null { // null in every sample
			s.Fields[i].Kind = String
			if f.timeField {
				s.Fields[i].Kind = Time
			}
		}
	}
	// The rules above are the decoder's; prove it on the samples, which also
	// catches a value no kind holds (a number past float64).
	d := NewJSONDecoder(s, o)
	for n, data := range samples {
		if _, err := d.Decode(data); err != nil {
			return nil, fmt.Errorf("infer schema: sample %d: %w", n+1, err)
		}
	}
	return s, nil
}

// jsonType is the JSON type of a value, with numbers split as InferSchema
// types them.
type jsonType uint8

const (
	jsonNull  jsonType = iota
	jsonInt            // an integer lexeme in int64 range
	jsonFloat          // any other number
	jsonString
	jsonBool
	jsonObject
	jsonArray
)

func (t jsonType) String() string {
	return [...]string{"null", "an integer", "a non-integer number", "a string", "a bool", "an object", "an array"}[t]
}

// inferred is what the samples say about one field so far.
type inferred struct {
	name      string
	timeField bool     // named in JSONOptions.TimeFields
	kind      Kind     // Null until a sample has a non-null value
	by        jsonType // the value that set kind…
	at        int      // …and its sample
}

// add merges value raw of JSON type t, from sample n, into f.
func (f *inferred) add(t jsonType, raw []byte, flags uint8, n int) error {
	if t == jsonNull {
		return nil
	}
	var k Kind
	switch {
	case f.timeField:
		switch t {
		case jsonString:
			if _, reason := parseTimeString(raw[1:len(raw)-1], flags); reason != "" {
				return fmt.Errorf("time field %q: %s is %s", f.name, raw, reason)
			}
		case jsonInt, jsonFloat:
			switch _, st := decimal.Int(raw, 6); st {
			case decimal.Fraction:
				return fmt.Errorf("time field %q: %s is epoch milliseconds finer than a nanosecond", f.name, raw)
			case decimal.Range:
				return fmt.Errorf("time field %q: %s is epoch milliseconds %s", f.name, raw, timeRangeReason)
			}
		default:
			return fmt.Errorf("time field %q is %s; want an RFC 3339 string or a number of epoch milliseconds", f.name, t)
		}
		k = Time
	case t == jsonInt:
		k = Int
		if f.kind == Float {
			k = Float
		}
	case t == jsonFloat:
		k = Float
		if f.kind == Int {
			f.kind = Float // by and at still name a number
		}
	case t == jsonBool:
		k = Bool
	default: // strings, objects, arrays
		k = String
	}
	switch f.kind {
	case Null:
		f.kind, f.by, f.at = k, t, n
	case k:
	default:
		return fmt.Errorf("field %q is %s, but sample %d has %s there", f.name, t, f.at, f.by)
	}
	return nil
}

// inferSample calls member with each top-level member of the object data:
// its name, its JSON type, its raw text and, for a string, its flags.
func inferSample(data []byte, member func(name string, t jsonType, raw []byte, flags uint8) error) error {
	var memberErr error // the first, reported once data is known to be valid
	i, done, err := jsonscan.OpenObject(data)
	for err == nil && !done {
		var key []byte
		var val int
		if key, _, val, err = jsonscan.MemberKey(data, i); err != nil {
			break
		}
		var t jsonType
		var flags uint8
		end := val
		switch c := byteAt(data, val); {
		case c == '"':
			end, flags, err = jsonscan.ScanString(data, val)
			t = jsonString
		case c == '-' || '0' <= c && c <= '9':
			var nflags uint8
			end, nflags, err = jsonscan.ScanNumber(data, val)
			t = jsonFloat
			if err == nil && nflags == 0 {
				if _, st := decimal.Int(data[val:end], 0); st == decimal.OK {
					t = jsonInt
				}
			}
		default:
			end, err = jsonscan.SkipValue(data, val, 1)
			switch c {
			case 'n':
				t = jsonNull
			case 't', 'f':
				t = jsonBool
			case '{':
				t = jsonObject
			case '[':
				t = jsonArray
			}
		}
		if err != nil {
			break
		}
		if memberErr == nil {
			name, fault := jsonscan.AppendUnquoted(nil, key)
			if fault != "" {
				memberErr = fmt.Errorf("member name %q: %s; declare the fields (members of other names are ignored)", name, fault)
			} else {
				memberErr = member(string(name), t, data[val:end], flags)
			}
		}
		i, done, err = jsonscan.NextMember(data, end)
	}
	if err == nil {
		err = jsonscan.CloseObject(data, i)
	}
	if err == nil {
		err = memberErr
	}
	return err
}

// byteAt returns data[i], or 0 past the end.
func byteAt(data []byte, i int) byte {
	if i < len(data) {
		return data[i]
	}
	return 0
}
