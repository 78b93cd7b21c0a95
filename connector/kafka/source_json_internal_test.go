package kafka

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// srcJSONField finds a top-level key like encoding/json does, skipping
// values of every kind, including strings holding braces, quotes and
// escapes.
func TestSrcJSONField(t *testing.T) {
	doc := []byte(` { "a" : [1, {"ts": 2}, "]}"], "b\"q": {"x": "}{"}, "n": null, "t" :true,` +
		`"s": "va\"l\\ue", "e\u0074": 7, "f": -1.5e3, "ts" : 1772323200123 } `)
	for key, want := range map[string]string{
		"a": `[1, {"ts": 2}, "]}"]`, `b"q`: `{"x": "}{"}`, "n": "null", "t": "true",
		"s": `"va\"l\\ue"`, "et": "7", "f": "-1.5e3", "ts": "1772323200123",
	} {
		raw, found, err := srcJSONField(doc, key)
		if err != nil || !found || string(raw) != want {
			t.Errorf("key %q: %q %v %v, want %q", key, raw, found, err, want)
		}
	}
	if _, found, err := srcJSONField(doc, "missing"); found || err != nil {
		t.Errorf("missing key: found %v, %v", found, err)
	}
	if _, found, err := srcJSONField([]byte(`{}`), "a"); found || err != nil {
		t.Errorf("empty object: found %v, %v", found, err)
	}
	for _, bad := range []string{``, `[]`, `"a"`, `{"a"`, `{"a":}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":{"b":1}`} {
		if _, _, err := srcJSONField([]byte(bad), "b"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzSrcJSONField checks the scanner against encoding/json on valid objects.
func FuzzSrcJSONField(f *testing.F) {
	f.Add([]byte(`{"ts": 1, "a": [1, "]"], "b": {"c": "}"}}`), "ts")
	f.Add([]byte(`{"t\u0073": "x", "ts": 2}`), "ts")
	f.Add([]byte(`{"a": {"ts": 1}}`), "a")
	f.Add([]byte(`{"ts": 1, "ts": 2}`), "ts")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		var m map[string]json.RawMessage
		// encoding/json replaces invalid UTF-8 in keys; the scanner
		// compares bytes.
		if !utf8.Valid(data) || !utf8.ValidString(key) || json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		raw, found, err := srcJSONField(data, key)
		want, ok := m[key]
		if err != nil {
			t.Fatalf("valid object %q: %v", data, err)
		}
		if found != ok || (ok && !bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(want))) {
			t.Fatalf("object %q key %q: scanner %q %v, encoding/json %q %v", data, key, raw, found, want, ok)
		}
	})
}
