package state

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

// roundTrip encodes every value after a prefix, decodes it back, and then
// checks that every strict prefix of the encoding fails to decode cleanly.
func roundTrip[T any](t *testing.T, c Codec[T], vals ...T) {
	t.Helper()
	for _, v := range vals {
		prefix := []byte{0xAA, 0xBB}
		enc := c.Append(prefix, v)
		if !bytes.Equal(enc[:2], prefix) {
			t.Fatalf("%s: Append overwrote dst", c.Name())
		}
		enc = enc[2:]
		// Trailing bytes must not be consumed.
		got, n, err := c.Decode(append(bytes.Clone(enc), 0xFF, 0xFF))
		if err != nil {
			t.Fatalf("%s: Decode(Append(%v)): %v", c.Name(), v, err)
		}
		if n != len(enc) {
			t.Fatalf("%s: Decode(Append(%v)) consumed %d bytes, encoding has %d", c.Name(), v, n, len(enc))
		}
		if !reflect.DeepEqual(got, v) && !(isNaN(got) && isNaN(v)) {
			t.Fatalf("%s: round trip of %#v gave %#v", c.Name(), v, got)
		}
		for cut := range len(enc) {
			if _, _, err := c.Decode(enc[:cut]); err == nil {
				t.Fatalf("%s: Decode of %d of %d bytes of %v succeeded, want a truncation error", c.Name(), cut, len(enc), v)
			}
		}
	}
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && f != f
}

type order struct {
	ID    int64             `json:"id"`
	Items []string          `json:"items"`
	Attrs map[string]string `json:"attrs"`
}

func TestCodecsRoundTrip(t *testing.T) {
	roundTrip[int64](t, Int64Codec{}, 0, 1, -1, 63, -64, 64, math.MaxInt64, math.MinInt64)
	roundTrip(t, StringCodec{}, "", "a", "hello, 世界", strings.Repeat("x", 300))
	roundTrip(t, Float64Codec{}, 0, math.Copysign(0, -1), 1.5, math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat64)
	roundTrip(t, BoolCodec{}, true, false)
	roundTrip(t, BytesCodec{}, nil, []byte{1}, bytes.Repeat([]byte{7}, 200))
	roundTrip(t, JSONCodec[order](), order{}, order{ID: 7, Items: []string{"a", "b"}, Attrs: map[string]string{"k": "v"}})
}

func TestFloat64CodecKeepsSignOfZero(t *testing.T) {
	v, _, _ := Float64Codec{}.Decode(Float64Codec{}.Append(nil, math.Copysign(0, -1)))
	if !math.Signbit(v) {
		t.Fatal("-0 decoded as +0")
	}
}

func TestBytesCodecDecodeCopies(t *testing.T) {
	enc := BytesCodec{}.Append(nil, []byte("abc"))
	v, _, _ := BytesCodec{}.Decode(enc)
	enc[1] = 'X'
	if string(v) != "abc" {
		t.Fatalf("decoded bytes alias the input: %q", v)
	}
}

func TestCodecsRejectMalformedInput(t *testing.T) {
	if _, _, err := (BoolCodec{}).Decode([]byte{2}); err == nil {
		t.Error("BoolCodec accepted byte 2")
	}
	overflow := bytes.Repeat([]byte{0xFF}, 11)
	if _, _, err := (Int64Codec{}).Decode(overflow); err == nil {
		t.Error("Int64Codec accepted an overflowing varint")
	}
	if _, _, err := (StringCodec{}).Decode(overflow); err == nil {
		t.Error("StringCodec accepted an overflowing length")
	}
	huge := Int64Codec{}.Append(nil, 0)
	huge = append([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}, huge...) // length 2^63-1
	if _, _, err := (BytesCodec{}).Decode(huge); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("BytesCodec with a huge length: %v, want a truncation error", err)
	}
	if _, _, err := JSONCodec[order]().Decode(StringCodec{}.Append(nil, "{not json")); err == nil {
		t.Error("JSONCodec accepted invalid JSON")
	}
}

func TestCodecNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Int64Codec{}.Name(), "int64"},
		{StringCodec{}.Name(), "string"},
		{Float64Codec{}.Name(), "float64"},
		{BoolCodec{}.Name(), "bool"},
		{BytesCodec{}.Name(), "bytes"},
		{JSONCodec[order]().Name(), "json:state.order"},
	} {
		if c.got != c.want {
			t.Errorf("codec name %q, want %q", c.got, c.want)
		}
	}
}

// JSONCodec cannot encode NaN: Append panics with the marshal error (and
// Snapshot.Encode turns that into an error; see TestEncodeReportsCodecPanic).
func TestJSONCodecAppendPanicsOnUnencodable(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		} else if err, ok := r.(error); !ok || !strings.Contains(err.Error(), "json:float64") {
			t.Fatalf("panic value %v does not name the codec", r)
		}
	}()
	JSONCodec[float64]().Append(nil, math.NaN())
}
