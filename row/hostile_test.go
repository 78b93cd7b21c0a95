package row_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/row"
)

// Hostile inputs of the record model. Each test names the sentence of
// checkpointing.txt it defends and the item of issue #12.

// "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream": nor may decoding
// combine distinct keys. A string field took invalid UTF-8 and lone
// surrogate escapes as U+FFFD (as encoding/json does), so `a\xff`, `a\xfe`,
// `a\ud800` and `a\ufffd` were one key (#12 item 7). Now a string field
// refuses them with a *JSONTypeError (bad input under the source's
// on_error), and a bytes field keeps each exactly.
func TestHostileJSONInvalidUTF8(t *testing.T) {
	schema := &row.Schema{Fields: []row.Field{{Name: "s", Kind: row.String}, {Name: "b", Kind: row.Bytes}}}
	d := row.NewJSONDecoder(schema, row.JSONOptions{})
	for _, tc := range []struct {
		in string
		// reason is what the error of field s says; "" for valid text.
		reason string
		// bytes is what field b holds for the same literal.
		bytes string
	}{
		{`"a\ufffd"`, "", "a\ufffd"},
		{"\"a\ufffd\"", "", "a\ufffd"},
		{`"\ud834\udd1e"`, "", "𝄞"},
		{`"é☃ \u00e9\n"`, "", "é☃ é\n"},
		{"\"a\xff\"", "invalid UTF-8", "a\xff"},
		{"\"a\xfe\"", "invalid UTF-8", "a\xfe"},
		{"\"\xc3\"", "invalid UTF-8", "\xc3"},
		{"\"\xed\xa0\x80\"", "invalid UTF-8", "\xed\xa0\x80"}, // a surrogate encoded in UTF-8
		{"\"\xf4\x90\x80\x80\"", "invalid UTF-8", "\xf4\x90\x80\x80"},
		{"\"an ordinary long string, then \xff\"", "invalid UTF-8", "an ordinary long string, then \xff"},
		{"\"x\\n\xff\"", "invalid UTF-8", "x\n\xff"},
		// Lone surrogates are encoded as WTF-8 does (the three bytes of the
		// code point), which no valid text and no other escape gives.
		{`"a\ud800"`, `lone surrogate \ud800`, "a\xed\xa0\x80"},
		{`"a\udfff"`, `lone surrogate \udfff`, "a\xed\xbf\xbf"},
		{`"\ud800\u0041"`, `lone surrogate \ud800`, "\xed\xa0\x80A"},
		{`"\udc00\ud800"`, `lone surrogate \udc00`, "\xed\xb0\x80\xed\xa0\x80"},
		{`"\uD834\uDD1E\uD834"`, `lone surrogate \uD834`, "𝄞\xed\xa0\xb4"},
	} {
		r, err := d.Decode([]byte(`{"s":` + tc.in + `}`))
		var te *row.JSONTypeError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.reason == "" && r[0] != row.StringValue(tc.bytes):
			t.Errorf("%s: %v, want %q", tc.in, r[0], tc.bytes)
		case tc.reason != "" && (!errors.As(err, &te) || te.Field != "s" || te.Want != row.String || !strings.Contains(te.Reason, tc.reason)):
			t.Errorf("%s: %v (%#v), want a type error of field s with %q", tc.in, err, te, tc.reason)
		}
		r, err = d.Decode([]byte(`{"b":` + tc.in + `}`))
		if err != nil || r[1] != row.BytesValue(tc.bytes) {
			t.Errorf("bytes %s: %v %v, want %q", tc.in, r, err, tc.bytes)
		}
	}

	// The error shows the bytes as they are, escaped.
	_, err := d.Decode([]byte("{\"s\":\"a\xff\"}"))
	if want := `field "s": want string, got string "a\xff" (invalid UTF-8 at byte 1; a bytes field keeps it)`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}

	// Nested values are their raw text: invalid UTF-8 there too.
	if _, err := d.Decode([]byte("{\"s\":[\"\xff\"]}")); !errors.As(err, new(*row.JSONTypeError)) || !strings.Contains(err.Error(), "invalid UTF-8") {
		t.Errorf("nested invalid UTF-8 in a string field: %v, want a type error", err)
	}
	if r, err := d.Decode([]byte("{\"b\":[\"\xff\",\"\\ud800\"]}")); err != nil || r[1] != row.BytesValue("[\"\xff\",\"\\ud800\"]") {
		t.Errorf("nested bytes: %v %v", r, err)
	}
	// Members the schema does not name are not decoded: no error.
	if _, err := d.Decode([]byte("{\"x\":\"\xff\\ud800\"}")); err != nil {
		t.Errorf("an unknown member with invalid UTF-8: %v", err)
	}
}

// The bytes kind and member names keep what decoding kept apart (#12 item
// 7): a Bytes value is never equal to the String of the same text, hashes
// apart, survives the state codec, and is written to JSON as base64; a
// member whose name is invalid UTF-8 fills no field named with U+FFFD.
func TestHostileBytesKindAndNames(t *testing.T) {
	s, b := row.StringValue("a\ufffd"), row.BytesValue("a\ufffd")
	if s == b || s.HashKey() == b.HashKey() {
		t.Errorf("string %v and bytes %v of the same text are one key", s, b)
	}
	if row.BytesValue("a\xff") == row.BytesValue("a\xfe") {
		t.Error("two byte strings are equal")
	}
	if got := string(row.BytesValue("a\xff").AppendJSON(nil)); got != `"Yf8="` {
		t.Errorf("bytes as JSON: %s, want base64", got)
	}
	if b.Kind() != row.Bytes || b.Kind().String() != "bytes" || b.Str() != "a\ufffd" {
		t.Errorf("bytes value %v: kind %v, content %q", b, b.Kind(), b.Str())
	}
	enc := row.RowCodec{}.Append(nil, row.Row{b, row.BytesValue("\xff\x00"), s})
	got, n, err := row.RowCodec{}.Decode(enc)
	if err != nil || n != len(enc) || len(got) != 3 || got[0] != b || got[1] != row.BytesValue("\xff\x00") || got[2] != s {
		t.Errorf("codec round trip: %v %d %v", got, n, err)
	}

	schema := &row.Schema{Fields: []row.Field{{Name: "k\ufffd", Kind: row.Int}}}
	r, err := row.NewJSONDecoder(schema, row.JSONOptions{}).Decode([]byte("{\"k\xff\":1,\"k\\udfff\":2}"))
	if err != nil || r[0] != (row.Value{}) {
		t.Errorf("members named k\\xff and k\\udfff: %v %v, want field k\\ufffd null", r, err)
	}
	r, err = row.NewJSONDecoder(schema, row.JSONOptions{}).Decode([]byte("{\"k\\ufffd\":3}"))
	if err != nil || r[0] != row.IntValue(3) {
		t.Errorf("member k\\ufffd: %v %v, want 3", r, err)
	}
}

// Inference does not guess past invalid UTF-8 (#12 item 7): a string value
// or a member name that is not valid text fails with an error that says so,
// and for a value names the bytes kind.
func TestHostileInferInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\"k\":\"a\xff\"}", "invalid UTF-8"},
		{`{"k":"a\ud800"}`, `lone surrogate \ud800`},
		{"{\"k\xff\":1}", "invalid UTF-8"},
		{`{"k\udfff":1}`, `lone surrogate \udfff`},
	} {
		_, err := row.InferSchema([]byte(tc.in))
		hint := "bytes"
		if !strings.HasPrefix(tc.in, `{"k":`) {
			hint = "name"
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), hint) {
			t.Errorf("InferSchema(%q): %v, want an error with %q and %q", tc.in, err, tc.want, hint)
		}
	}
}
