package jsonscan

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream": nor may decoding
// combine distinct records. encoding/json reads invalid UTF-8 and lone
// surrogate escapes as U+FFFD, so the Go API's JSON decoders of the Kafka,
// NATS and file sources made "a\xff", "a\xfe", "a\ud800" and "a\ufffd" one
// key (#12 item 7). CheckText finds exactly the texts encoding/json alters.
func TestHostileCheckText(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"k":"a\ufffd"}`, ""},
		{"{\"k\":\"a\ufffd\"}", ""},
		{`{"k":"\ud834\udd1e","l":"\uD834\uDD1E"}`, ""},
		{`{"k":"\\ud800","l":"\\\ud834\udd1e"}`, ""}, // an escaped backslash, then text
		{`{"k":"é☃","n":[1,2,{"x":null}]}`, ""},
		{"{\"k\":\"a\xff\"}", "invalid UTF-8 at byte 7"},
		{"{\"k\xfe\":1}", "invalid UTF-8 at byte 3"},
		{"{\"k\":\"\xed\xa0\x80\"}", "invalid UTF-8 at byte 6"},
		{`{"k":"a\ud800"}`, `lone surrogate \ud800 at byte 7`},
		{`{"k":"\udfff\ud800"}`, `lone surrogate \udfff at byte 6`},
		{`{"k":"\uD834\u0041"}`, `lone surrogate \uD834 at byte 6`},
		{`{"k":"x","\\":"\ud834"}`, `lone surrogate \ud834 at byte 15`},
	} {
		err := CheckText([]byte(tc.in))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("CheckText(%q) = %v, want %q", tc.in, err, tc.err)
		}
		checkTextOracle(t, []byte(tc.in))
	}
}

// FuzzCheckText holds CheckText to encoding/json on valid JSON (see
// checkTextOracle).
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{`{"k":"a\ufffd"}`, "{\"k\":\"a\xff\"}", `{"k":"a\ud800"}`, `["\ud834\udd1e","\\ud800"]`, `"\uDFFF"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Valid(data) {
			checkTextOracle(t, data)
		} else {
			_ = CheckText(data) // no panic
		}
	})
}

// checkTextOracle checks CheckText on data, valid JSON: it passes exactly
// when encoding/json replaced nothing by U+FFFD, that is when the strings
// encoding/json reads (keys included, repeats too) hold as many U+FFFD as
// the text writes, raw or escaped.
func checkTextOracle(t *testing.T, data []byte) {
	t.Helper()
	written := strings.Count(string(data), "\ufffd")
	for i := 0; i < len(data); i++ {
		if data[i] == '\\' {
			if data[i+1] == 'u' && hex4(data[i+2:i+6]) == 0xfffd {
				written++
			}
			i++
		}
	}
	decoded := 0
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // valid JSON may hold numbers no float64 holds (1e400)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%q: valid JSON, but %v", data, err)
		}
		if s, ok := tok.(string); ok {
			decoded += strings.Count(s, "\ufffd")
		}
	}
	if err := CheckText(data); (err == nil) != (decoded == written) {
		t.Fatalf("CheckText(%q) = %v, but encoding/json reads %d U+FFFD where the text writes %d", data, err, decoded, written)
	}
}
