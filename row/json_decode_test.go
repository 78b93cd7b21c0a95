package row_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/row"
)

// decodeOne decodes {"x": raw} into a one-field row of kind k.
func decodeOne(k row.Kind, raw string) (row.Value, error) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "x", Kind: k}}}, row.JSONOptions{})
	r, err := d.Decode([]byte(`{"x":` + raw + `}`))
	if err != nil {
		return row.Value{}, err
	}
	return r[0], nil
}

func ms(t string) int64 {
	p, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		panic(err)
	}
	return p.UnixNano()
}

// Each row is a rule of NewJSONDecoder's doc: what a field kind accepts, and
// the exact error for what it refuses.
func TestJSONDecodeTypeRules(t *testing.T) {
	for _, tc := range []struct {
		kind    row.Kind
		raw     string
		want    row.Value
		wantErr string
	}{
		// Null for any kind.
		{row.Int, `null`, row.Value{}, ""},
		{row.String, `null`, row.Value{}, ""},
		{row.Time, `null`, row.Value{}, ""},
		// Int: integers, and numbers whose value is exactly integral.
		{row.Int, `0`, row.IntValue(0), ""},
		{row.Int, `-0`, row.IntValue(0), ""},
		{row.Int, `42`, row.IntValue(42), ""},
		{row.Int, `-17`, row.IntValue(-17), ""},
		{row.Int, `9223372036854775807`, row.IntValue(math.MaxInt64), ""},
		{row.Int, `-9223372036854775808`, row.IntValue(math.MinInt64), ""},
		{row.Int, `3.0`, row.IntValue(3), ""},
		{row.Int, `-3.000`, row.IntValue(-3), ""},
		{row.Int, `1e3`, row.IntValue(1000), ""},
		{row.Int, `1.5E+1`, row.IntValue(15), ""},
		{row.Int, `12300e-2`, row.IntValue(123), ""},
		{row.Int, `0.0e5`, row.IntValue(0), ""},
		{row.Int, `9007199254740993.0`, row.IntValue(9007199254740993), ""}, // not rounded through float64
		{row.Int, `9.223372036854775807e18`, row.IntValue(math.MaxInt64), ""},
		{row.Int, `3.5`, row.Value{}, `field "x": want int, got number 3.5 (not an integer)`},
		{row.Int, `1e-1`, row.Value{}, `field "x": want int, got number 1e-1 (not an integer)`},
		{row.Int, `1.0000000000000000000001`, row.Value{}, `field "x": want int, got number 1.0000000000000000000001 (not an integer)`},
		{row.Int, `9223372036854775808`, row.Value{}, `field "x": want int, got number 9223372036854775808 (out of int64 range)`},
		{row.Int, `-9223372036854775809`, row.Value{}, `field "x": want int, got number -9223372036854775809 (out of int64 range)`},
		{row.Int, `1e19`, row.Value{}, `field "x": want int, got number 1e19 (out of int64 range)`},
		{row.Int, `1e999999999999`, row.Value{}, `field "x": want int, got number 1e999999999999 (out of int64 range)`},
		{row.Int, `"abc"`, row.Value{}, `field "x": want int, got string "abc"`},
		{row.Int, `"12"`, row.Value{}, `field "x": want int, got string "12"`},
		{row.Int, `true`, row.Value{}, `field "x": want int, got bool true`},
		{row.Int, `{"a":1}`, row.Value{}, `field "x": want int, got object`},
		{row.Int, `[1]`, row.Value{}, `field "x": want int, got array`},
		// Float: any number in range.
		{row.Float, `2.5`, row.FloatValue(2.5), ""},
		{row.Float, `7`, row.FloatValue(7), ""},
		{row.Float, `-1.25e-3`, row.FloatValue(-1.25e-3), ""},
		{row.Float, `1e-400`, row.FloatValue(0), ""}, // underflow rounds, as in encoding/json
		{row.Float, `1e400`, row.Value{}, `field "x": want float, got number 1e400 (out of float64 range)`},
		{row.Float, `"2.5"`, row.Value{}, `field "x": want float, got string "2.5"`},
		{row.Float, `false`, row.Value{}, `field "x": want float, got bool false`},
		// String: strings; nested values as raw JSON text.
		{row.String, `"hello"`, row.StringValue("hello"), ""},
		{row.String, `""`, row.StringValue(""), ""},
		{row.String, `"a\"b\\c\/d\n\t"`, row.StringValue("a\"b\\c/d\n\t"), ""},
		{row.String, `{"a": [1, {"b":null}] }`, row.StringValue(`{"a": [1, {"b":null}] }`), ""},
		{row.String, `[]`, row.StringValue(`[]`), ""},
		{row.String, `["é\u00e9"]`, row.StringValue(`["é\u00e9"]`), ""},
		{row.String, "[\"\xff\"]", row.Value{}, `field "x": want string, got array (invalid UTF-8 at byte 2; a bytes field keeps it)`},
		{row.String, "\"\xff\"", row.Value{}, `field "x": want string, got string "\xff" (invalid UTF-8 at byte 0; a bytes field keeps it)`},
		{row.String, `"\udfff"`, row.Value{}, `field "x": want string, got string "\xed\xbf\xbf" (lone surrogate \udfff; a bytes field keeps it)`},
		{row.String, `12`, row.Value{}, `field "x": want string, got number 12`},
		{row.String, `true`, row.Value{}, `field "x": want string, got bool true`},
		// Bytes: what String takes, and any bytes, exactly.
		{row.Bytes, `"hello"`, row.BytesValue("hello"), ""},
		{row.Bytes, "\"a\xff\\n\"", row.BytesValue("a\xff\n"), ""},
		{row.Bytes, `"\ud800"`, row.BytesValue("\xed\xa0\x80"), ""},
		{row.Bytes, "[\"\xff\"]", row.BytesValue("[\"\xff\"]"), ""},
		{row.Bytes, `12`, row.Value{}, `field "x": want bytes, got number 12`},
		{row.Bytes, `false`, row.Value{}, `field "x": want bytes, got bool false`},
		// Bool.
		{row.Bool, `true`, row.BoolValue(true), ""},
		{row.Bool, `false`, row.BoolValue(false), ""},
		{row.Bool, `1`, row.Value{}, `field "x": want bool, got number 1`},
		{row.Bool, `"true"`, row.Value{}, `field "x": want bool, got string "true"`},
		// Time: RFC 3339 strings and epoch milliseconds.
		{row.Time, `"2026-01-02T03:04:05Z"`, row.TimeValue(ms("2026-01-02T03:04:05Z")), ""},
		{row.Time, `"2026-01-02T03:04:05.123456789+01:30"`, row.TimeValue(ms("2026-01-02T01:34:05.123456789Z")), ""},
		{row.Time, `"2026-01-02T03:04:05.5-08:00"`, row.TimeValue(ms("2026-01-02T11:04:05.5Z")), ""},
		{row.Time, `"1970-01-01T00:00:00Z"`, row.TimeValue(0), ""},
		{row.Time, `"1969-12-31T23:59:59.999Z"`, row.TimeValue(-1e6), ""},
		{row.Time, `"2026-01-02T03:04:05\u005A"`, row.TimeValue(ms("2026-01-02T03:04:05Z")), ""}, // an escaped Z
		{row.Time, `1767323045123`, row.TimeValue(1767323045123 * 1e6), ""},
		{row.Time, `-1`, row.TimeValue(-1e6), ""},
		{row.Time, `1.5`, row.TimeValue(1500000), ""},
		{row.Time, `0.000001`, row.TimeValue(1), ""},
		{row.Time, `1.767323045123e12`, row.TimeValue(1767323045123 * 1e6), ""},
		{row.Time, `0.0000001`, row.Value{}, `field "x": want time, got number 0.0000001 (epoch milliseconds finer than a nanosecond)`},
		{row.Time, `9223372036855`, row.Value{}, `field "x": want time, got number 9223372036855 (epoch milliseconds outside the years 1678 to 2262)`},
		{row.Time, `"yesterday"`, row.Value{}, `field "x": want time, got string "yesterday" (not RFC 3339)`},
		{row.Time, `"2026-02-30T00:00:00Z"`, row.Value{}, `field "x": want time, got string "2026-02-30T00:00:00Z" (not RFC 3339)`},
		{row.Time, `"1767323045123"`, row.Value{}, `field "x": want time, got string "1767323045123" (not RFC 3339)`},
		{row.Time, `"3000-01-01T00:00:00Z"`, row.Value{}, `field "x": want time, got string "3000-01-01T00:00:00Z" (outside the years 1678 to 2262)`},
		{row.Time, `true`, row.Value{}, `field "x": want time, got bool true`},
		{row.Time, `{}`, row.Value{}, `field "x": want time, got object`},
		// Null fields hold only null.
		{row.Null, `1`, row.Value{}, `field "x": want null, got number 1`},
	} {
		got, err := decodeOne(tc.kind, tc.raw)
		name := fmt.Sprintf("%s field from %s", tc.kind, tc.raw)
		if tc.wantErr != "" {
			var te *row.JSONTypeError
			if err == nil || err.Error() != tc.wantErr || !errors.As(err, &te) {
				t.Errorf("%s: error %v, want *JSONTypeError %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if got != tc.want {
			t.Errorf("%s: %s %s, want %s %s", name, got.Kind(), got, tc.want.Kind(), tc.want)
		}
	}
}

// A refused value long enough to flood a log is shortened in the message.
func TestJSONTypeErrorShortensValue(t *testing.T) {
	_, err := decodeOne(row.Int, `"`+strings.Repeat("a", 1000)+`"`)
	want := `field "x": want int, got string "` + strings.Repeat("a", 64) + `…"`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	_, err = decodeOne(row.Int, `"a`+strings.Repeat("é", 100)+`"`)
	want = `field "x": want int, got string "a` + strings.Repeat("é", 31) + `…"`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s, cut between characters", err, want)
	}
}

func TestJSONDecodeSyntaxErrors(t *testing.T) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "a", Kind: row.Int}, {Name: "s", Kind: row.String}}}, row.JSONOptions{})
	for _, tc := range []struct{ in, want string }{
		{``, `invalid JSON at byte 0: unexpected end of input`},
		{`   `, `invalid JSON at byte 3: unexpected end of input`},
		{`{`, `invalid JSON at byte 1: unexpected end of input`},
		{`{"a":1`, `invalid JSON at byte 6: unexpected end of input`},
		{`{"a":1,`, `invalid JSON at byte 7: unexpected end of input`},
		{`{"a" 1}`, `invalid JSON at byte 5: invalid character '1' after object key`},
		{`{"a":1 "s":"x"}`, `invalid JSON at byte 7: invalid character '"' after object key:value pair`},
		{`{"a":1,}`, `invalid JSON at byte 7: invalid character '}' looking for beginning of object key string`},
		{`{a:1}`, `invalid JSON at byte 1: invalid character 'a' looking for beginning of object key string`},
		{`{"a":01}`, `invalid JSON at byte 6: invalid character '1' after object key:value pair`},
		{`{"a":1.}`, `invalid JSON at byte 7: invalid character '}' after decimal point in numeric literal`},
		{`{"a":1e}`, `invalid JSON at byte 7: invalid character '}' in exponent of numeric literal`},
		{`{"a":-}`, `invalid JSON at byte 6: invalid character '}' in numeric literal`},
		{`{"a":+1}`, `invalid JSON at byte 5: invalid character '+' looking for beginning of value`},
		{`{"a":tru}`, `invalid JSON at byte 8: invalid character '}' in literal true (expecting 'e')`},
		{`{"a":nul`, `invalid JSON at byte 8: unexpected end of input`},
		{`{"s":"a` + "\n" + `"}`, `invalid JSON at byte 7: invalid character '\n' in string literal`},
		{`{"s":"\x"}`, `invalid JSON at byte 7: invalid character 'x' in string escape code`},
		{`{"s":"\u12g4"}`, `invalid JSON at byte 10: invalid character 'g' in \u hexadecimal character escape`},
		{`{"s":"abc`, `invalid JSON at byte 9: unexpected end of input`},
		{`{"s":[1,2}`, `invalid JSON at byte 9: invalid character '}' after array element`},
		{`{"s":{"k":1]}`, `invalid JSON at byte 11: invalid character ']' after object key:value pair`},
		{`{"zz":[1,}`, `invalid JSON at byte 9: invalid character '}' looking for beginning of value`},
		{`{"a":1} x`, `invalid JSON at byte 8: invalid character 'x' after top-level value`},
		{`{"a":1}{}`, `invalid JSON at byte 7: invalid character '{' after top-level value`},
		{`x`, `invalid JSON at byte 0: invalid character 'x' looking for beginning of value`},
		{"\ufeff{}", `invalid JSON at byte 0: invalid character 'ï' looking for beginning of value`},
	} {
		_, err := d.Decode([]byte(tc.in))
		var se *row.JSONSyntaxError
		if err == nil || err.Error() != tc.want || !errors.As(err, &se) {
			t.Errorf("Decode(%q): error %v, want *JSONSyntaxError %q", tc.in, err, tc.want)
		}
		if json.Valid([]byte(tc.in)) {
			t.Errorf("%q: encoding/json says it is valid", tc.in)
		}
	}
}

// A type error is reported only for input that is valid JSON: a truncated
// record is a syntax error even when a field before the cut was refused.
func TestJSONDecodeSyntaxBeatsTypeError(t *testing.T) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "a", Kind: row.Int}}}, row.JSONOptions{})
	_, err := d.Decode([]byte(`{"a":"x","b":[1,`))
	if want := "invalid JSON at byte 16: unexpected end of input"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	_, err = d.Decode([]byte(`{"a":"x","a":"y"}`))
	if want := `field "a": want int, got string "x"`; err == nil || err.Error() != want {
		t.Errorf("error %v, want the first refusal, %s", err, want)
	}
}

func TestJSONDecodeNotObject(t *testing.T) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "a", Kind: row.Int}}}, row.JSONOptions{})
	for in, want := range map[string]string{
		`[1,2]`:  "not a JSON object (got array)",
		` "x"`:   "not a JSON object (got string)",
		`12`:     "not a JSON object (got number)",
		`-1`:     "not a JSON object (got number)",
		`true`:   "not a JSON object (got bool)",
		"\nnull": "not a JSON object (got null)",
	} {
		_, err := d.Decode([]byte(in))
		if err == nil || err.Error() != want || !errors.Is(err, row.ErrNotJSONObject) {
			t.Errorf("Decode(%q): error %v, want ErrNotJSONObject %q", in, err, want)
		}
	}
}

func TestJSONDecodeMembers(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{
		{Name: "id", Kind: row.Int},
		{Name: "name", Kind: row.String},
		{Name: "ok", Kind: row.Bool},
	}}
	d := row.NewJSONDecoder(schema, row.JSONOptions{})
	for _, tc := range []struct {
		in   string
		want row.Row
	}{
		{`{"id":1,"name":"a","ok":true}`, row.Row{row.IntValue(1), row.StringValue("a"), row.BoolValue(true)}},
		// Any order.
		{`{"ok":false,"name":"b","id":2}`, row.Row{row.IntValue(2), row.StringValue("b"), row.BoolValue(false)}},
		// Missing members are null.
		{`{}`, row.Row{{}, {}, {}}},
		{`{"name":"c"}`, row.Row{{}, row.StringValue("c"), {}}},
		// Unknown members are skipped, whatever they hold.
		{`{"x":{"y":[1,{"z":"}"}],"w":null},"id":3,"v":[[[]]],"u":"\"}","t":-1.5e3,"s":true}`, row.Row{row.IntValue(3), {}, {}}},
		// The last of repeated members counts, as in encoding/json.
		{`{"id":1,"id":2}`, row.Row{row.IntValue(2), {}, {}}},
		{`{"id":1,"id":null}`, row.Row{{}, {}, {}}},
		// Names are exact: no case folding.
		{`{"ID":1,"Name":"x"}`, row.Row{{}, {}, {}}},
		// Escaped names match.
		{`{"\u0069d":4,"na\u006de":"d"}`, row.Row{row.IntValue(4), row.StringValue("d"), {}}},
		// Space anywhere JSON allows it.
		{" \t\r\n{ \"id\" :\n5 , \"ok\"\t:\rtrue }\n\r\t ", row.Row{row.IntValue(5), {}, row.BoolValue(true)}},
	} {
		got, err := d.Decode([]byte(tc.in))
		if err != nil {
			t.Errorf("Decode(%s): %v", tc.in, err)
			continue
		}
		if !rowsEqual(got, tc.want) {
			t.Errorf("Decode(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func rowsEqual(a, b row.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Strings decode as encoding/json decodes them, escapes included, when the
// text is valid Unicode; otherwise (encoding/json writes U+FFFD) they are
// refused, see TestHostileJSONInvalidUTF8.
func TestJSONDecodeStringEscapes(t *testing.T) {
	for _, tc := range []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{`"\" \\ \/ \b \f \n \r \t"`, "\" \\ / \b \f \n \r \t"},
		{`"\u0041\u00e9\u2603"`, "Aé☃"},
		{`"\u0000"`, "\x00"},
		{`"\uD834\uDD1E"`, "𝄞"},  // a surrogate pair
		{`"\ud834\udd1e"`, "𝄞"},  // lower-case hex
		{`"\uFFFD"`, "\uFFFD"},   // the replacement character itself
		{"\"\uFFFD\"", "\uFFFD"}, // raw
		{`"é☃𝄞"`, "é☃𝄞"},         // raw UTF-8 passes through
		{`"é\n☃"`, "é\n☃"},       // raw UTF-8 around an escape
		{"\"\x7f\"", "\x7f"},
		{`"` + strings.Repeat(`\n`, 100) + `"`, strings.Repeat("\n", 100)},
	} {
		got, err := decodeOne(row.String, tc.lit)
		if err != nil {
			t.Errorf("%s: %v", tc.lit, err)
			continue
		}
		if got.Str() != tc.want {
			t.Errorf("%s: %q, want %q", tc.lit, got.Str(), tc.want)
		}
		var oracle string
		if err := json.Unmarshal([]byte(tc.lit), &oracle); err != nil || oracle != tc.want {
			t.Errorf("%s: encoding/json reads %q (%v), the table says %q", tc.lit, oracle, err, tc.want)
		}
	}
}

// Rows written with Schema.AppendJSON read back equal: the encoder and the
// decoder agree on every kind. Floats that JSON cannot hold (NaN, ±Inf) are
// written as null and so read back null.
func TestJSONDecodeRoundTrip(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{
		{Name: "i", Kind: row.Int},
		{Name: "f", Kind: row.Float},
		{Name: "s", Kind: row.String},
		{Name: "b", Kind: row.Bool},
		{Name: "t", Kind: row.Time},
		{Name: "quote\"d", Kind: row.String},
	}}
	d := row.NewJSONDecoder(schema, row.JSONOptions{})
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 5000 {
		r := make(row.Row, len(schema.Fields))
		for i, f := range schema.Fields {
			if rng.IntN(8) == 0 {
				continue // null
			}
			switch f.Kind {
			case row.Int:
				r[i] = row.IntValue(int64(rng.Uint64()) >> rng.IntN(64))
			case row.Float:
				r[i] = row.FloatValue([]float64{rng.NormFloat64() * 1e6, math.Float64frombits(rng.Uint64()), 0, math.Copysign(0, -1), 0.1, math.MaxFloat64, 5e-324}[rng.IntN(7)])
			case row.String:
				r[i] = row.StringValue(randomText(rng))
			case row.Bool:
				r[i] = row.BoolValue(rng.IntN(2) == 0)
			case row.Time:
				r[i] = row.TimeValue(int64(rng.Uint64()))
			}
		}
		data := schema.AppendJSON(nil, r)
		got, err := d.Decode(data)
		if err != nil {
			t.Fatalf("row %d: Decode(%s): %v", n, data, err)
		}
		for i := range r {
			want := r[i]
			if want.Kind() == row.Float && (math.IsNaN(want.Float()) || math.IsInf(want.Float(), 0)) {
				want = row.Value{}
			}
			if got[i] != want && !(want.Kind() == row.Float && got[i].Kind() == row.Float && got[i].Float() == want.Float()) {
				t.Fatalf("row %d field %s: %s %v, want %s %v (JSON %s)", n, schema.Fields[i].Name, got[i].Kind(), got[i], want.Kind(), want, data)
			}
		}
	}
}

// randomText returns valid UTF-8 heavy in characters JSON escapes.
func randomText(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(20) {
		switch rng.IntN(6) {
		case 0:
			b.WriteByte(byte(rng.IntN(0x20)))
		case 1:
			b.WriteByte(`"\/`[rng.IntN(3)])
		case 2:
			b.WriteRune([]rune{'é', '☃', '𝄞', '\u2028', '\uFFFD'}[rng.IntN(5)])
		default:
			b.WriteByte(byte(0x20 + rng.IntN(0x5f)))
		}
	}
	return b.String()
}

// Time strings read exactly as time.Parse(time.RFC3339Nano) reads them: the
// decoder's own fast path must not change a verdict or an instant.
func TestJSONDecodeTimeMatchesTimeParse(t *testing.T) {
	inputs := []string{
		"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.1Z", "2026-01-02T03:04:05.123456789Z",
		"2026-01-02T03:04:05.1234567891234Z", "2026-01-02T03:04:05.Z", "2026-01-02T03:04:05,5Z",
		"2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05-00:00", "2026-01-02T03:04:05+23:59",
		"2026-01-02T03:04:05+24:00", "2026-01-02T03:04:05+05:60", "2026-01-02T03:04:05+0500",
		"2026-01-02t03:04:05z", "2026-01-02 03:04:05Z", "2026-01-02T3:04:05Z", "2026-1-02T03:04:05Z",
		"2026-01-02T24:00:00Z", "2026-01-02T23:60:00Z", "2026-01-02T23:59:60Z", "2024-02-29T00:00:00Z",
		"2023-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
		"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1677-09-21T00:12:43.145224192Z",
		"1677-09-21T00:12:43.145224191Z", "2262-04-11T23:47:16.854775807Z", "2262-04-11T23:47:16.854775808Z",
		"2262-04-12T00:47:16.854775807+01:00", "1677-09-21T00:12:44Z", "2262-04-11T23:47:15Z",
		"1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z", "1600-03-01T00:00:00Z",
		"2026-01-02T03:04:05", "2026-01-02", "", "2026-01-02T03:04:05Zjunk", "+2026-01-02T03:04:05Z",
		"2026-01-02T03:04:05.000000000+14:00", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		ns := int64(rng.Uint64())
		off := (rng.IntN(48) - 24) * 1800
		inputs = append(inputs, time.Unix(0, ns).In(time.FixedZone("", off)).Format(time.RFC3339Nano))
	}
	for _, in := range inputs {
		lit, _ := json.Marshal(in)
		got, err := decodeOne(row.Time, string(lit))
		tp, perr := time.Parse(time.RFC3339Nano, in)
		if perr == nil && (tp.Before(time.Unix(0, math.MinInt64)) || tp.After(time.Unix(0, math.MaxInt64))) {
			perr = errors.New("out of range")
		}
		switch {
		case perr != nil && err == nil:
			t.Errorf("%q: decoded %d; time.Parse: %v", in, got.Int(), perr)
		case perr == nil && err != nil:
			t.Errorf("%q: %v; time.Parse reads %v", in, err, tp)
		case perr == nil && got.Int() != tp.UnixNano():
			t.Errorf("%q: decoded %d, time.Parse reads %d", in, got.Int(), tp.UnixNano())
		}
	}
}

// Nesting is limited as in encoding/json: 10000 levels, the outer object
// included.
func TestJSONDecodeDepthLimit(t *testing.T) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "s", Kind: row.String}}}, row.JSONOptions{})
	nest := func(levels int) []byte {
		return []byte(`{"s":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`)
	}
	if _, err := d.Decode(nest(10000)); err != nil || !json.Valid(nest(10000)) {
		t.Errorf("10000 levels: %v (encoding/json valid: %v)", err, json.Valid(nest(10000)))
	}
	_, err := d.Decode(nest(10001))
	if want := "invalid JSON at byte 10004: exceeded max depth"; err == nil || err.Error() != want || json.Valid(nest(10001)) {
		t.Errorf("10001 levels: %v, want %s (encoding/json valid: %v)", err, want, json.Valid(nest(10001)))
	}
	// The same through a skipped member.
	_, err = d.Decode([]byte(`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`))
	if err == nil {
		t.Error("10001 levels in an unknown member: no error")
	}
}

// Decode allocates the Row and the text of String values, nothing else, with
// or without escapes, unknown members or times with zones.
func TestJSONDecodeAllocs(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{
		{Name: "id", Kind: row.Int},
		{Name: "price", Kind: row.Float},
		{Name: "ok", Kind: row.Bool},
		{Name: "ts", Kind: row.Time},
		{Name: "name", Kind: row.String},
		{Name: "note", Kind: row.String},
	}}
	d := row.NewJSONDecoder(schema, row.JSONOptions{})
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{`{"id":1,"price":2.5,"ok":true,"ts":"2026-01-02T03:04:05.123+01:00"}`, 1},
		{`{"id":1.0,"price":1e3,"ts":1767323045123.5,"extra":{"a":[1,2,"x"]}}`, 1},
		{`{"id":1,"name":"plain","note":"ünïcode"}`, 3},
		{`{"\u0069d":1,"name":"tab\there \u2603 \uD834\uDD1E","note":{"raw":true}}`, 3},
	} {
		got := testing.AllocsPerRun(100, func() {
			if _, err := d.Decode([]byte(tc.in)); err != nil {
				t.Fatal(err)
			}
		})
		if got != tc.want {
			t.Errorf("Decode(%s): %v allocations, want %v", tc.in, got, tc.want)
		}
	}
}

// One decoder serves many goroutines (run with -race).
func TestJSONDecoderConcurrent(t *testing.T) {
	d := row.NewJSONDecoder(&row.Schema{Fields: []row.Field{{Name: "n", Kind: row.Int}, {Name: "s", Kind: row.String}}}, row.JSONOptions{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 1000 {
				r, err := d.Decode(fmt.Appendf(nil, `{"n":%d,"s":"g%d"}`, n, g))
				if err != nil || r[0].Int() != int64(n) || r[1].Str() != fmt.Sprintf("g%d", g) {
					t.Errorf("goroutine %d record %d: %v %v", g, n, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestJSONEventTime(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{
		{Name: "ts", Kind: row.Time},
		{Name: "ms", Kind: row.Int},
		{Name: "f", Kind: row.Float},
	}}
	d := row.NewJSONDecoder(schema, row.JSONOptions{})
	r, err := d.Decode([]byte(`{"ts":"2026-01-02T03:04:05.5Z","ms":1767323045500,"f":1.5}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ms("2026-01-02T03:04:05.5Z")
	for fi := range 2 {
		if got, err := d.EventTime(r, fi); err != nil || got != want {
			t.Errorf("field %d: %d, %v; want %d", fi, got, err, want)
		}
	}
	for _, tc := range []struct {
		r    row.Row
		fi   int
		want string
	}{
		{r, 2, `event time field "f" is a float; want a time or an int of epoch milliseconds`},
		{row.Row{{}, {}, {}}, 0, `event time field "ts" is missing or null`},
		{row.Row{{}, row.IntValue(math.MaxInt64), {}}, 1, `event time field "ms": 9223372036854775807 ms is outside the years 1678 to 2262`},
		{r, 3, `event time: no field 3 in a row of 3`},
		{r, -1, `event time: no field -1 in a row of 3`},
	} {
		if _, err := d.EventTime(tc.r, tc.fi); err == nil || err.Error() != tc.want {
			t.Errorf("EventTime(%v, %d): %v, want %s", tc.r, tc.fi, err, tc.want)
		}
	}
}
