package row_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/row"
)

// fuzzSchema has a field of every kind, an empty name and a non-ASCII one.
var fuzzSchema = &row.Schema{Fields: []row.Field{
	{Name: "i", Kind: row.Int},
	{Name: "f", Kind: row.Float},
	{Name: "s", Kind: row.String},
	{Name: "b", Kind: row.Bool},
	{Name: "t", Kind: row.Time},
	{Name: "n", Kind: row.Null},
	{Name: "", Kind: row.Int},
	{Name: "é", Kind: row.String},
}}

// FuzzJSONDecode holds the decoder to encoding/json's view of the input
// (the seed corpus is testdata/fuzz/FuzzJSONDecode):
//   - invalid JSON is a *JSONSyntaxError (or ErrNotJSONObject when it does
//     not start as an object), and nothing panics;
//   - a valid non-object is ErrNotJSONObject;
//   - a valid object decodes to what encoding/json reads for each field under
//     the rules of NewJSONDecoder, or, when some member is refused, fails
//     with a *JSONTypeError naming the first refused member;
//   - InferSchema on the object, when it succeeds, names the object's keys in
//     order and gives a schema that decodes the object.
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

var genKeys = []string{`"i"`, `"f"`, `"s"`, `"b"`, `"t"`, `"n"`, `""`, `"é"`, `"\u00e9"`, `"\u0069"`, `"x"`, `"long key with \"quotes\""`, "\"\xff\""}

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
		for _, m := range members {
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
			return // a number past float64, a repeated key with two types, no keys
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
	key string
	raw []byte
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
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		members = append(members, oracleMember{k.(string), raw})
	}
	return members, true
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
		if isString {
			return row.StringValue(s), true
		}
		if raw[0] == '{' || raw[0] == '[' {
			return row.StringValue(validUTF8(raw)), true
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

// validUTF8 replaces each byte of invalid UTF-8 by U+FFFD.
func validUTF8(b []byte) string {
	var out []rune
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = append(out, r)
		b = b[n:]
	}
	return string(out)
}
