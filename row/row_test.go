package row_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/row"
)

func js(v row.Value) string { return string(v.AppendJSON(nil)) }

func TestValueJSONScalars(t *testing.T) {
	for _, tc := range []struct {
		v    row.Value
		want string
	}{
		{row.Value{}, "null"},
		{row.IntValue(0), "0"},
		{row.IntValue(-42), "-42"},
		{row.IntValue(math.MaxInt64), "9223372036854775807"},
		{row.IntValue(math.MinInt64), "-9223372036854775808"},
		{row.BoolValue(true), "true"},
		{row.BoolValue(false), "false"},
		{row.FloatValue(0.1), "0.1"},
		{row.FloatValue(-2.5), "-2.5"},
		{row.FloatValue(3), "3"},
		{row.FloatValue(math.NaN()), "null"},
		{row.FloatValue(math.Inf(1)), "null"},
		{row.FloatValue(math.Inf(-1)), "null"},
		{row.StringValue(""), `""`},
		{row.StringValue("plain"), `"plain"`},
	} {
		if got := js(tc.v); got != tc.want {
			t.Errorf("%s value: JSON %s, want %s", tc.v.Kind(), got, tc.want)
		}
	}
}

// Floats are valid JSON numbers that read back to the same float64.
func TestValueJSONFloatsRoundTrip(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.0 / 3, 1e21, 1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, -math.MaxFloat64, 5e-324, 1e100} {
		s := js(row.FloatValue(f))
		var back float64
		if err := json.Unmarshal([]byte(s), &back); err != nil {
			t.Errorf("float %v: JSON %q is invalid: %v", f, s, err)
			continue
		}
		if back != f {
			t.Errorf("float %v: JSON %q reads back as %v", f, s, back)
		}
	}
}

func TestValueJSONStringEscaping(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"line\nbreak", `"line\nbreak"`},
		{"cr\rtab\t", `"cr\rtab\t"`},
		{"\x00", `"\u0000"`},
		{"\x01\x1f", `"\u0001\u001f"`},
		{"\x08\x0c", `"\u0008\u000c"`},
		{"\x7f", "\"\x7f\""},
		{"é☃𝄞", `"é☃𝄞"`},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
		{"\xc3", `"\ufffd"`},                     // truncated 2-byte sequence
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // surrogate half, invalid in UTF-8
		{"</script>&", `"</script>&"`},
	} {
		got := js(row.StringValue(tc.in))
		if got != tc.want {
			t.Errorf("string %q: JSON %s, want %s", tc.in, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("string %q: JSON %s is not valid JSON", tc.in, got)
		}
	}
}

// Any string, valid UTF-8 or not, encodes to valid JSON that decodes to the
// string with invalid bytes replaced by U+FFFD, as encoding/json does.
func TestValueJSONStringRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "\x80", "\xff", "é", "\xe2\x98", "☃", "𝄞", "\u2028", "/", " "}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		got := js(row.StringValue(s))
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Fatalf("string %q: JSON %s is invalid: %v", s, got, err)
		}
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		if back != want {
			t.Fatalf("string %q: JSON %s decodes to %q, want %q", s, got, back, want)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("valid string %q does not round-trip: %q", s, back)
		}
	}
}

func TestValueJSONTime(t *testing.T) {
	// The encoding is UTC whatever the local zone.
	saved := time.Local
	time.Local = time.FixedZone("UTC+5:30", 5*3600+1800)
	defer func() { time.Local = saved }()

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ns   int64
		want string
	}{
		{0, `"1970-01-01T00:00:00Z"`},
		{base.UnixNano(), `"2026-01-01T00:00:00Z"`},
		{base.UnixNano() + 1, `"2026-01-01T00:00:00.000000001Z"`},
		{base.UnixNano() + int64(time.Second) - 1, `"2026-01-01T00:00:00.999999999Z"`},
		{-1, `"1969-12-31T23:59:59.999999999Z"`},
		{time.Date(2026, 7, 4, 13, 14, 15, 123456789, time.UTC).UnixNano(), `"2026-07-04T13:14:15.123456789Z"`},
	} {
		if got := js(row.TimeValue(tc.ns)); got != tc.want {
			t.Errorf("time %d: JSON %s, want %s", tc.ns, got, tc.want)
		}
	}
	// Every instant reads back exactly as RFC 3339.
	for _, ns := range []int64{base.UnixNano() + int64(500*time.Millisecond), base.UnixNano() + 1000, math.MaxInt64, math.MinInt64, -int64(time.Hour) * 24 * 365 * 100} {
		s := js(row.TimeValue(ns))
		var str string
		if err := json.Unmarshal([]byte(s), &str); err != nil {
			t.Fatalf("time %d: %s not a JSON string", ns, s)
		}
		tm, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			t.Fatalf("time %d: %q is not RFC 3339: %v", ns, str, err)
		}
		if tm.UnixNano() != ns || !strings.HasSuffix(str, "Z") {
			t.Errorf("time %d: %q reads back as %d (want UTC 'Z' and the same instant)", ns, str, tm.UnixNano())
		}
	}
}

func TestValueAccessors(t *testing.T) {
	if v := row.IntValue(-3); v.Kind() != row.Int || v.Int() != -3 || v.Float() != -3 {
		t.Errorf("IntValue(-3): kind %s, Int %d, Float %v", v.Kind(), v.Int(), v.Float())
	}
	if v := row.FloatValue(2.5); v.Kind() != row.Float || v.Float() != 2.5 {
		t.Errorf("FloatValue(2.5): %s %v", v.Kind(), v.Float())
	}
	if v := row.StringValue("s"); v.Kind() != row.String || v.Str() != "s" {
		t.Errorf("StringValue: %s %q", v.Kind(), v.Str())
	}
	if v := row.BoolValue(true); v.Kind() != row.Bool || !v.Bool() || row.BoolValue(false).Bool() {
		t.Error("BoolValue")
	}
	if v := row.TimeValue(-7); v.Kind() != row.Time || v.Int() != -7 {
		t.Errorf("TimeValue(-7): %s %d", v.Kind(), v.Int())
	}
	if (row.Value{}).Kind() != row.Null {
		t.Error("zero Value is not Null")
	}
	for k, name := range map[row.Kind]string{row.Null: "null", row.Int: "int", row.Float: "float", row.String: "string", row.Bool: "bool", row.Time: "time"} {
		if k.String() != name {
			t.Errorf("Kind %d String = %q, want %q", k, k.String(), name)
		}
	}
	if s := row.Kind(99).String(); !strings.Contains(s, "99") {
		t.Errorf("unknown kind String = %q", s)
	}
	// Values are comparable: equal contents are ==.
	if row.StringValue("ab") != row.StringValue(string([]byte{'a', 'b'})) || row.IntValue(1) == row.TimeValue(1) {
		t.Error("Value equality")
	}
	if got := row.StringValue("q\"").String(); got != `"q\""` {
		t.Errorf("String() = %s", got)
	}
}

func TestSchemaAppendJSON(t *testing.T) {
	s := &row.Schema{Fields: []row.Field{
		{Name: "zeta", Kind: row.Int},
		{Name: "alpha", Kind: row.String},
		{Name: "we\"ird\nname", Kind: row.Bool},
		{Name: "when", Kind: row.Time},
		{Name: "f", Kind: row.Float},
		{Name: "missing", Kind: row.Int},
	}}
	r := row.Row{row.IntValue(1), row.StringValue("x\ty"), row.BoolValue(true), row.TimeValue(0), row.FloatValue(0.5)}
	got := string(s.AppendJSON([]byte("prefix:"), r))
	want := `prefix:{"zeta":1,"alpha":"x\ty","we\"ird\nname":true,"when":"1970-01-01T00:00:00Z","f":0.5,"missing":null}`
	if got != want {
		t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
	}
	obj := []byte(strings.TrimPrefix(got, "prefix:"))
	if !json.Valid(obj) {
		t.Fatalf("%s is not valid JSON", obj)
	}
	// Keys appear in schema order.
	dec := json.NewDecoder(bytes.NewReader(obj))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(keys, "|") != strings.Join(s.Names(), "|") {
		t.Errorf("keys %q, want schema order %q", keys, s.Names())
	}

	if got := string((&row.Schema{}).AppendJSON(nil, nil)); got != "{}" {
		t.Errorf("empty schema: %s", got)
	}
	if s.Index("alpha") != 1 || s.Index("nope") != -1 {
		t.Error("Index")
	}
}

func allKinds() []row.Value {
	return []row.Value{
		{},
		row.IntValue(0), row.IntValue(1), row.IntValue(-1), row.IntValue(math.MaxInt64), row.IntValue(math.MinInt64), row.IntValue(300),
		row.FloatValue(0), row.FloatValue(-1.5), row.FloatValue(math.Inf(1)), row.FloatValue(math.MaxFloat64), row.FloatValue(math.Copysign(0, -1)),
		row.StringValue(""), row.StringValue("x"), row.StringValue(strings.Repeat("long ", 60)), row.StringValue("\xff\x00binary"),
		row.BoolValue(true), row.BoolValue(false),
		row.TimeValue(0), row.TimeValue(-1), row.TimeValue(time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC).UnixNano()), row.TimeValue(math.MinInt64),
	}
}

func TestValueCodecRoundTrip(t *testing.T) {
	c := row.ValueCodec{}
	if c.Name() == "" {
		t.Fatal("no codec name")
	}
	for _, v := range allKinds() {
		enc := c.Append(nil, v)
		got, n, err := c.Decode(append(bytes.Clone(enc), 0x05, 0x06))
		if err != nil {
			t.Fatalf("%v: Decode: %v", v, err)
		}
		if n != len(enc) {
			t.Fatalf("%v: Decode used %d bytes, want %d", v, n, len(enc))
		}
		if got != v {
			t.Fatalf("%s %v: round trip gives %s %v", v.Kind(), v, got.Kind(), got)
		}
		for k := range len(enc) {
			if _, _, err := c.Decode(enc[:k]); err == nil {
				t.Fatalf("%s %v: Decode of %d of %d bytes: no error", v.Kind(), v, k, len(enc))
			}
		}
	}
	// NaN keeps its bits.
	nan := row.FloatValue(math.NaN())
	got, _, err := c.Decode(c.Append(nil, nan))
	if err != nil || !math.IsNaN(got.Float()) || got != nan {
		t.Fatalf("NaN round trip: %v, %v", got, err)
	}
	// The decoded string does not alias the input.
	buf := c.Append(nil, row.StringValue("abc"))
	v, _, _ := c.Decode(buf)
	buf[len(buf)-1] = 'X'
	if v.Str() != "abc" {
		t.Fatalf("decoded string aliases its input: %q", v.Str())
	}
}

func TestValueCodecRejectsGarbage(t *testing.T) {
	c := row.ValueCodec{}
	for _, b := range [][]byte{
		{99},                               // unknown kind
		{7, 0},                             // kind 7 is not a kind
		{byte(row.String), 0x05, 'a', 'b'}, // length beyond input
		{byte(row.String), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},    // huge length
		{byte(row.Int), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // overlong varint
	} {
		if _, _, err := c.Decode(b); err == nil {
			t.Errorf("Decode(%x): no error", b)
		}
	}
}

func TestRowCodecRoundTrip(t *testing.T) {
	c := row.RowCodec{}
	if c.Name() == "" || c.Name() == (row.ValueCodec{}).Name() {
		t.Fatalf("row codec name %q", c.Name())
	}
	rows := []row.Row{{}, {row.IntValue(1)}, allKinds(), {{}, {}, {}}}
	for _, r := range rows {
		enc := c.Append([]byte{0xAA}, r)[1:]
		got, n, err := c.Decode(append(bytes.Clone(enc), 0x01))
		if err != nil {
			t.Fatalf("%v: Decode: %v", r, err)
		}
		if n != len(enc) {
			t.Fatalf("%v: Decode used %d bytes, want %d", r, n, len(enc))
		}
		if len(got) != len(r) {
			t.Fatalf("%v: round trip gives %v", r, got)
		}
		for i := range r {
			if got[i] != r[i] {
				t.Fatalf("value %d: %v, want %v", i, got[i], r[i])
			}
		}
		for k := range len(enc) {
			if _, _, err := c.Decode(enc[:k]); err == nil {
				t.Fatalf("row of %d values: Decode of %d of %d bytes: no error", len(r), k, len(enc))
			}
		}
	}
	// A count larger than the input cannot be satisfied.
	if _, _, err := c.Decode(binary.AppendUvarint(nil, 1<<40)); err == nil {
		t.Fatal("huge row count: no error")
	}
}

// fnv1a is FNV-1a 64 over b.
func fnv1a(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// HashKey is stable: it must give the same result in every process forever
// (key groups of saved state depend on it). Pin it against an independent
// computation: FNV-1a over the kind byte and a string's bytes; other kinds
// mix their 64 bits into the kind's FNV-1a state with a golden-ratio multiply.
func TestHashKeyStable(t *testing.T) {
	for _, s := range []string{"", "a", "key-17", "ünï"} {
		want := fnv1a(append([]byte{byte(row.String)}, s...))
		if got := row.StringValue(s).HashKey(); got != want {
			t.Errorf("HashKey(%q) = %#x, want %#x", s, got, want)
		}
	}
	for _, v := range []row.Value{row.IntValue(0), row.IntValue(42), row.IntValue(-1), row.TimeValue(1), row.BoolValue(true), row.FloatValue(1.5), {}} {
		var bits uint64
		switch v.Kind() {
		case row.Float:
			bits = math.Float64bits(v.Float())
		case row.Bool:
			if v.Bool() {
				bits = 1
			}
		case row.Int, row.Time:
			bits = uint64(v.Int())
		}
		want := (fnv1a([]byte{byte(v.Kind())}) ^ bits) * 0x9E3779B97F4A7C15
		if got := v.HashKey(); got != want {
			t.Errorf("HashKey(%s %v) = %#x, want %#x", v.Kind(), v, got, want)
		}
	}
}

func TestHashKeyEqualValuesEqualHashes(t *testing.T) {
	for _, v := range allKinds() {
		var c row.Value
		if v.Kind() == row.String {
			c = row.StringValue(string([]byte(v.Str())))
		} else {
			c, _, _ = row.ValueCodec{}.Decode(row.ValueCodec{}.Append(nil, v))
		}
		if v != c || v.HashKey() != c.HashKey() {
			t.Errorf("%s %v: equal values hash %#x and %#x", v.Kind(), v, v.HashKey(), c.HashKey())
		}
	}
}

// The same payload in different kinds hashes differently.
func TestHashKeyDiffersAcrossKinds(t *testing.T) {
	groups := [][]row.Value{
		{{}, row.IntValue(0), row.FloatValue(0), row.StringValue(""), row.BoolValue(false), row.TimeValue(0)},
		{row.IntValue(1), row.TimeValue(1), row.BoolValue(true), row.FloatValue(math.Float64frombits(1)), row.StringValue("\x01")},
		{row.IntValue(49), row.StringValue("1"), row.TimeValue(49)},
	}
	for _, g := range groups {
		seen := map[uint64]row.Value{}
		for _, v := range g {
			h := v.HashKey()
			if prev, dup := seen[h]; dup {
				t.Errorf("%s %v and %s %v hash alike (%#x)", prev.Kind(), prev, v.Kind(), v, h)
			}
			seen[h] = v
		}
	}
	if row.IntValue(1).HashKey() == row.IntValue(2).HashKey() || row.StringValue("a").HashKey() == row.StringValue("b").HashKey() {
		t.Error("different values of one kind hash alike")
	}
}
