package row_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/row"
)

// fuzzSchema has a field of every kind, an empty name, a non-ASCII one and
// one named U+FFFD, which encoding/json would fill from a member named with
// invalid UTF-8.
var fuzzSchema = &row.Schema{Fields: []row.Field{
	{Name: "i", Kind: row.Int},
	{Name: "f", Kind: row.Float},
	{Name: "s", Kind: row.String},
	{Name: "b", Kind: row.Bool},
	{Name: "t", Kind: row.Time},
	{Name: "n", Kind: row.Null},
	{Name: "", Kind: row.Int},
	{Name: "é", Kind: row.String},
	{Name: "y", Kind: row.Bytes},
	{Name: "\ufffd", Kind: row.String},
}}

// FuzzJSONDecode holds the decoder to encoding/json's view of the input
// (the seed corpus is testdata/fuzz/FuzzJSONDecode):
//   - invalid JSON is a *JSONSyntaxError (or ErrNotJSONObject when it does
//     not start as an object), and nothing panics;
//   - a valid non-object is ErrNotJSONObject;
//   - a valid object decodes to what encoding/json reads for each field under
//     the rules of NewJSONDecoder, or, when some member is refused, fails
//     with a *JSONTypeError naming the first refused member. Where
//     encoding/json alters a text (it writes U+FFFD for invalid UTF-8 and
//     lone surrogate escapes), the oracle reads the literal exactly instead
//     (see oracleText): a string field refuses such a text, a bytes field
//     holds its exact bytes, and a member so named fills no field;
//   - InferSchema on the object, when it succeeds, names the object's keys in
//     order, every one of them and every string and nested value is valid
//     text, and the schema decodes the object.
func FuzzJSONDecode(f *testing.F) {
	d := row.NewJSONDecoder(fuzzSchema, row.JSONOptions{})
	f.Fuzz(func(t *testing.T, data []byte) { checkAgainstEncodingJSON(t, d, data) })
}

// The fuzz target's checks on generated objects, which the byte-level
// mutator rarely builds: nested values, escapes, edge numbers and times,
// repeated keys, and each of them cut short or with a byte changed.
func TestJSONDecodeMatchesEncodingJSON(t *testing.T) {
	d := row.NewJSONDecoder(fuzzSchema, row.JSONOptions{})
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		data := genObject(rng, 0)
		checkAgainstEncodingJSON(t, d, data)
		if len(data) > 0 {
			checkAgainstEncodingJSON(t, d, data[:rng.IntN(len(data))])
			mutated := bytes.Clone(data)
			const bytesJSONCares = " \\\"{}[],:-.0eE\x00\xff"
			mutated[rng.IntN(len(mutated))] = bytesJSONCares[rng.IntN(len(bytesJSONCares))]
			checkAgainstEncodingJSON(t, d, mutated)
		}
	}
}

var genKeys = []string{`"i"`, `"f"`, `"s"`, `"b"`, `"t"`, `"n"`, `""`, `"é"`, `"\u00e9"`, `"\u0069"`, `"x"`, `"long key with \"quotes\""`,
	"\"\xff\"", `"y"`, `"\ufffd"`, "\"\ufffd\"", `"\udfff"`}

var genScalars = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `3.0`, `3.5`, `1e3`, `1E-3`, `-2.5e+2`,
	`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `9007199254740993.0`,
	`1e400`, `1e-400`, `1e999999999999`, `0.0000001`, `1767323045123`, `1767323045123.456789`,
	`""`, `"abc"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u0000\u001f\u2028"`, `"\uD834\uDD1E"`, `"\uD834"`, `"\uDD1E\uD834x"`,
	"\"\xff\xc3\xed\xa0\x80\"", `"é☃𝄞"`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05.123456789+01:30"`,
	`"2026-01-02T3:04:05Z"`, `"2026-02-29T00:00:00Z"`, `"2262-04-11T23:47:16.854775808Z"`, `"1677-09-21T00:12:43.145224192Z"`,
	`"2026-01-02T03:04:05\u005a"`, `"an ordinary string long enough for the eight-byte scan"`,
}

func genObject(rng *rand.Rand, depth int) []byte {
	var b bytes.Buffer
	space := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t\r", "  "}[rng.IntN(4)])
		}
	}
	space()
	b.WriteByte('{')
	for n := range rng.IntN(6) {
		if n > 0 {
			b.WriteByte(',')
		}
		space()
		b.WriteString(genKeys[rng.IntN(len(genKeys))])
		space()
		b.WriteByte(':')
		space()
		genValue(rng, &b, depth)
		space()
	}
	b.WriteByte('}')
	space()
	return b.Bytes()
}

func genValue(rng *rand.Rand, b *bytes.Buffer, depth int) {
	switch k := rng.IntN(8); {
	case k == 0 && depth < 3:
		b.Write(genObject(rng, depth+1))
	case k == 1 && depth < 3:
		b.WriteByte('[')
		for n := range rng.IntN(4) {
			if n > 0 {
				b.WriteByte(',')
			}
			genValue(rng, b, depth+1)
		}
		b.WriteByte(']')
	default:
		b.WriteString(genScalars[rng.IntN(len(genScalars))])
	}
}

func checkAgainstEncodingJSON(t *testing.T, d *row.JSONDecoder, data []byte) {
	t.Helper()
	{
		r, err := d.Decode(data)
		var se *row.JSONSyntaxError
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("Decode accepted invalid JSON %q: %v", data, r)
			}
			if !errors.As(err, &se) && !errors.Is(err, row.ErrNotJSONObject) {
				t.Fatalf("invalid JSON %q: error %v is neither a syntax error nor ErrNotJSONObject", data, err)
			}
			if se != nil && (se.Offset < 0 || se.Offset > len(data)) {
				t.Fatalf("invalid JSON %q: offset %d", data, se.Offset)
			}
			if _, ierr := row.InferSchema(data); ierr == nil {
				t.Fatalf("InferSchema accepted invalid JSON %q", data)
			}
			return
		}
		members, isObject := oracleMembers(t, data)
		if !isObject {
			if !errors.Is(err, row.ErrNotJSONObject) {
				t.Fatalf("%q is not an object: error %v, want ErrNotJSONObject", data, err)
			}
			return
		}

		want := make(row.Row, len(fuzzSchema.Fields))
		firstRefused := ""
		refused := false
		allText := true // every key and string or nested value is valid text
		for _, m := range members {
			allText = allText && m.exact && (m.raw[0] != '"' && m.raw[0] != '{' && m.raw[0] != '[' || utf8.Valid(oracleBytes(m.raw)))
			if !m.exact {
				continue // encoding/json reads another name; the real one is in no schema
			}
			fi := fuzzSchema.Index(m.key)
			if fi < 0 {
				continue
			}
			v, ok := oracleValue(t, fuzzSchema.Fields[fi].Kind, m.raw)
			if !ok && !refused {
				firstRefused, refused = m.key, true
			}
			want[fi] = v
		}
		if refused {
			var te *row.JSONTypeError
			if !errors.As(err, &te) || te.Field != firstRefused {
				t.Fatalf("%q: error %v, want a *JSONTypeError for field %q", data, err, firstRefused)
			}
		} else {
			if err != nil {
				t.Fatalf("%q: %v", data, err)
			}
			for i := range want {
				if r[i] != want[i] {
					t.Fatalf("%q field %q: %s %v, encoding/json reads %s %v", data, fuzzSchema.Fields[i].Name, r[i].Kind(), r[i], want[i].Kind(), want[i])
				}
			}
		}

		s, ierr := row.InferSchema(data)
		if ierr != nil {
			return // a number past float64, a repeated key with two types, no keys, invalid text
		}
		if !allText {
			t.Fatalf("%q: InferSchema accepted a key or value that is not valid text: %v", data, s.Fields)
		}
		var keys []string
		for _, m := range members {
			if !slices.Contains(keys, m.key) {
				keys = append(keys, m.key)
			}
		}
		if !slices.Equal(s.Names(), keys) {
			t.Fatalf("%q: inferred fields %q, keys %q", data, s.Names(), keys)
		}
		if _, err := row.NewJSONDecoder(s, row.JSONOptions{}).Decode(data); err != nil {
			t.Fatalf("%q: the inferred schema does not decode it: %v", data, err)
		}
	}
}

type oracleMember struct {
	// key is the member's name as encoding/json reads it; exact says it is
	// the name's text (see oracleText).
	key   string
	exact bool
	raw   []byte
}

// oracleMembers lists the top-level members of data, valid JSON, as
// encoding/json reads them, repeats included.
func oracleMembers(t *testing.T, data []byte) ([]oracleMember, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	if tok != json.Delim('{') {
		return nil, false
	}
	var members []oracleMember
	for dec.More() {
		before := dec.InputOffset()
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		lit := bytes.TrimLeft(data[before:dec.InputOffset()], " \t\r\n,")
		text, exact := oracleText(lit)
		if exact && text != k.(string) {
			t.Fatalf("%q: encoding/json reads key %s as %q, the oracle as %q", data, lit, k, text)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		members = append(members, oracleMember{k.(string), exact, raw})
	}
	return members, true
}

// oracleText reads the string literal lit (valid JSON) exactly: its bytes as
// written, each escape or surrogate pair as encoding/json reads it, but a
// lone surrogate escape as the three bytes of its code point (WTF-8) where
// encoding/json writes U+FFFD. exact says the text is valid UTF-8, which is
// when encoding/json reads the same (checked by the callers).
func oracleText(lit []byte) (string, bool) {
	var out []byte
	body := lit[1 : len(lit)-1]
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			out = append(out, body[i])
			i++
			continue
		}
		n := 2
		if body[i+1] == 'u' {
			n = 6
			r, _ := strconv.ParseUint(string(body[i+2:i+6]), 16, 32)
			if utf16.IsSurrogate(rune(r)) {
				var lo uint64
				if i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
					lo, _ = strconv.ParseUint(string(body[i+8:i+12]), 16, 32)
				}
				if utf16.DecodeRune(rune(r), rune(lo)) == utf8.RuneError {
					out = append(out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
					i += 6
					continue
				}
				n = 12
			}
		}
		var s string
		if err := json.Unmarshal([]byte(`"`+string(body[i:i+n])+`"`), &s); err != nil {
			panic(fmt.Sprintf("escape %s: %v", body[i:i+n], err))
		}
		out = append(out, s...)
		i += n
	}
	return string(out), utf8.Valid(out)
}

// oracleBytes is what a bytes field holds for the JSON value raw, a string
// or a nested value: the string's text read exactly, a nested value's raw
// text.
func oracleBytes(raw []byte) []byte {
	if raw[0] == '"' {
		text, _ := oracleText(raw)
		return []byte(text)
	}
	return raw
}

// oracleValue is what a field of kind k holds for the JSON value raw, read
// with encoding/json, math/big and time.Parse; ok is false when k refuses it.
func oracleValue(t *testing.T, k row.Kind, raw []byte) (row.Value, bool) {
	if string(raw) == "null" {
		return row.Value{}, true
	}
	var s string
	isString := json.Unmarshal(raw, &s) == nil
	isNumber := raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9'
	switch k {
	case row.Int:
		if isNumber {
			if n, ok := exactInt(raw, 0); ok {
				return row.IntValue(n), true
			}
		}
	case row.Float:
		var f float64
		if isNumber && json.Unmarshal(raw, &f) == nil {
			return row.FloatValue(f), true
		}
	case row.String:
		if (isString || raw[0] == '{' || raw[0] == '[') && !utf8.Valid(oracleBytes(raw)) {
			return row.Value{}, false // encoding/json would alter the text
		}
		if isString {
			if text, _ := oracleText(raw); text != s {
				panic(fmt.Sprintf("%s: encoding/json reads %q, the oracle %q", raw, s, text))
			}
			return row.StringValue(s), true
		}
		if raw[0] == '{' || raw[0] == '[' {
			return row.StringValue(string(raw)), true
		}
	case row.Bytes:
		if isString || raw[0] == '{' || raw[0] == '[' {
			return row.BytesValue(string(oracleBytes(raw))), true
		}
	case row.Bool:
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			return row.BoolValue(b), true
		}
	case row.Time:
		if isString {
			tp, err := time.Parse(time.RFC3339Nano, s)
			if err == nil && !tp.Before(time.Unix(0, math.MinInt64)) && !tp.After(time.Unix(0, math.MaxInt64)) {
				return row.TimeValue(tp.UnixNano()), true
			}
		}
		if isNumber {
			if n, ok := exactInt(raw, 6); ok {
				return row.TimeValue(n), true
			}
		}
	}
	return row.Value{}, false
}

// exactInt returns the number raw times 10^scale when that is an integer in
// int64 range, with math/big.
func exactInt(raw []byte, scale int) (int64, bool) {
	mant, exp, _ := bytes.Cut(bytes.ToLower(raw), []byte("e"))
	if len(exp) > 0 {
		e, err := strconv.Atoi(string(exp))
		if err != nil || e > 400 || e < -400 { // too far for big.Rat to be quick
			var z big.Rat
			if _, ok := z.SetString(string(mant)); !ok {
				return 0, false // not a number at all
			}
			return 0, z.Sign() == 0 // nonzero: a fraction or out of range
		}
	}
	var z big.Rat
	if _, ok := z.SetString(string(raw)); !ok {
		return 0, false
	}
	z.Mul(&z, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !z.IsInt() || !z.Num().IsInt64() {
		return 0, false
	}
	return z.Num().Int64(), true
}
