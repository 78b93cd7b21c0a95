package config

import (
	"bytes"
	"math"
	"testing"

	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/state"
)

// An intKey hashes and encodes exactly as the row.Value it stands for, under
// row.ValueCodec's name, so state keyed by either restores into the other:
// same key groups, same bytes. A stored value that is not an integer or
// NULL is refused, not read as some integer.
func TestIntKeyIsItsRowValue(t *testing.T) {
	for _, v := range []row.Value{row.IntValue(0), row.IntValue(-1), row.IntValue(42), row.IntValue(math.MinInt64), row.IntValue(math.MaxInt64), {}} {
		k := intKeyOf(v)
		if got := k.value(); got != v {
			t.Fatalf("intKeyOf(%v).value() = %v", v, got)
		}
		if k.HashKey() != v.HashKey() || state.HashKey(k) != state.HashKey(v) {
			t.Fatalf("%v: intKey hash %d, row.Value hash %d", v, state.HashKey(k), state.HashKey(v))
		}
		enc := intKeyCodec{}.Append(nil, k)
		if want := (row.ValueCodec{}).Append(nil, v); !bytes.Equal(enc, want) {
			t.Fatalf("%v: intKeyCodec writes %x, row.ValueCodec %x", v, enc, want)
		}
		back, n, err := intKeyCodec{}.Decode(append(enc, 0xff))
		if err != nil || n != len(enc) || back != k {
			t.Fatalf("%v: decoded %v, %d bytes, %v; want %v, %d bytes", v, back, n, err, k, len(enc))
		}
	}
	if intKeyOf(row.Value{}) == intKeyOf(row.IntValue(0)) {
		t.Fatal("NULL and 0 are one key")
	}
	if (intKeyCodec{}).Name() != (row.ValueCodec{}).Name() {
		t.Fatalf("codec name %q, want row.ValueCodec's %q", intKeyCodec{}.Name(), row.ValueCodec{}.Name())
	}
	for _, v := range []row.Value{row.StringValue("7"), row.FloatValue(7), row.BoolValue(true)} {
		if k, _, err := (intKeyCodec{}).Decode((row.ValueCodec{}).Append(nil, v)); err == nil {
			t.Fatalf("a stored %v decoded as %v, want an error", v, k)
		}
	}
}
