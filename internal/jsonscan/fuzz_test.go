package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzMember feeds Member arbitrary payloads and keys; the seed corpus,
// testdata/fuzz/FuzzMember, holds real records (the JSON lines the examples
// wrote, NATS messages) with one of their keys. Whatever the input, it
// never panics, an error comes with nothing found, and a found value is
// non-empty and has no surrounding space. It is the scanner's fuzz test
// (the row decoder's, FuzzJSONDecode, checks decoding on top of it): Member
// accepts exactly the JSON objects encoding/json accepts, and on those it
// finds exactly the members encoding/json finds (the last of repeated
// keys), with the same raw value.
func FuzzMember(f *testing.F) {
	f.Add([]byte(`{"ts": 1, "a": [1, "]"], "b": {"c": "}"}}`), "ts")
	f.Add([]byte(`{"t\u0073": "x", "ts": 2}`), "ts")
	f.Add([]byte(`{"a": {"ts": 1}}`), "a")
	f.Add([]byte(`{"ts": 1, "ts": 2}`), "ts")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		raw, found, err := Member(data, key)
		if err != nil && (found || raw != nil) {
			t.Fatalf("Member(%q, %q) found %q with error %v", data, key, raw, err)
		}
		if found && (len(raw) == 0 || len(bytes.TrimSpace(raw)) != len(raw)) {
			t.Fatalf("Member(%q, %q) found %q", data, key, raw)
		}
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("Member(%q, %q) accepted invalid JSON", data, key)
			}
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil || members == nil {
			if err == nil {
				t.Fatalf("Member(%q, %q) scanned a JSON value that is not an object", data, key)
			}
			return
		}
		if !utf8.Valid(data) || !utf8.ValidString(key) {
			return // encoding/json replaces invalid UTF-8 in keys; Member compares bytes
		}
		want, ok := members[key]
		if err != nil || found != ok || !bytes.Equal(raw, want) {
			t.Fatalf("Member(%q, %q) = %q, %v, %v; encoding/json finds %q, %v", data, key, raw, found, err, want, ok)
		}
	})
}
