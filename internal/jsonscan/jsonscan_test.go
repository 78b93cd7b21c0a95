package jsonscan

import "testing"

// Member finds a top-level key like encoding/json does, skipping
// values of every kind, including strings holding braces, quotes and
// escapes.
func TestMember(t *testing.T) {
	doc := []byte(` { "a" : [1, {"ts": 2}, "]}"], "b\"q": {"x": "}{"}, "n": null, "t" :true,` +
		`"s": "va\"l\\ue", "e\u0074": 7, "f": -1.5e3, "ts" : 1772323200123 } `)
	for key, want := range map[string]string{
		"a": `[1, {"ts": 2}, "]}"]`, `b"q`: `{"x": "}{"}`, "n": "null", "t": "true",
		"s": `"va\"l\\ue"`, "et": "7", "f": "-1.5e3", "ts": "1772323200123",
	} {
		raw, found, err := Member(doc, key)
		if err != nil || !found || string(raw) != want {
			t.Errorf("key %q: %q %v %v, want %q", key, raw, found, err, want)
		}
	}
	if _, found, err := Member(doc, "missing"); found || err != nil {
		t.Errorf("missing key: found %v, %v", found, err)
	}
	if _, found, err := Member([]byte(`{}`), "a"); found || err != nil {
		t.Errorf("empty object: found %v, %v", found, err)
	}
	// The last four: bytes after the object, or a bad value skipped on the
	// way to "b", which the scanner checks as encoding/json would.
	for _, bad := range []string{``, `[]`, `"a"`, `{"a"`, `{"a":}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":{"b":1}`,
		`{"b":1} x`, `{"a":[1,],"b":2}`, `{"a":tru,"b":2}`, `{"a":01,"b":2}`} {
		if _, _, err := Member([]byte(bad), "b"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
