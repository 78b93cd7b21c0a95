package file_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/connector/file"
)

// "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream": nor may decoding
// combine distinct keys. DecodeJSON read invalid UTF-8 and lone surrogate
// escapes as U+FFFD (encoding/json), so "a\xff", "a\xfe" and "a\ud800" were
// the key "a\ufffd" (#12 item 7). Now such a line is a decode error, which
// the source hands to its on_error policy.
func TestHostileDecodeJSONRefusesInvalidText(t *testing.T) {
	type event struct{ Key string }
	dec, err := file.DecodeJSON[event]("", "")
	if err != nil {
		t.Fatal(err)
	}
	if v, _, err := dec(file.Line{JSON: []byte(`{"Key":"a\ufffd"}`)}); err != nil || v.Key != "a\ufffd" {
		t.Fatalf("valid text: %v %v", v, err)
	}
	for _, in := range []string{"{\"Key\":\"a\xff\"}", "{\"Key\":\"a\xfe\"}", `{"Key":"a\ud800"}`} {
		v, _, err := dec(file.Line{JSON: []byte(in)})
		if err == nil || !strings.Contains(err.Error(), "encoding/json would read U+FFFD") {
			t.Errorf("%q: %+v, %v; want an error", in, v, err)
		}
	}
}
