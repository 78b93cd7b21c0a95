package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// Codec is the explicit binary encoding of one type in snapshots. Codecs are
// called per entry while encoding and restoring state, so they must not
// reflect per value (JSONCodec is the documented exception).
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended
	// slice. A value the codec cannot encode is a programming error: Append
	// panics, and Snapshot.Encode reports the panic as an error naming the
	// operator, state and key group (the checkpoint fails, the job does not).
	Append(dst []byte, v T) []byte
	// Decode decodes one value from the front of src and returns it with the
	// number of bytes consumed (0 <= n <= len(src)). Truncated or malformed
	// input returns an error; Decode never panics. The value must not alias
	// src: the caller may reuse src afterwards. Decode may run on several
	// goroutines at once (registration decodes a large restored state's key
	// groups in parallel), so it must not write state shared between calls.
	Decode(src []byte) (v T, n int, err error)
	// Name identifies the encoding. It is stored in snapshots and compared
	// on restore, so a state whose codec changed is reported as an
	// ErrStateMismatch instead of being misread. Change the name whenever
	// the encoding changes.
	Name() string
}

// Int64Codec encodes an int64 as a zigzag varint (1 byte for -64..63, at most 10).
type Int64Codec struct{}

// Name returns "int64".
func (Int64Codec) Name() string { return "int64" }

// Append appends v as a zigzag varint.
func (Int64Codec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// Decode decodes a zigzag varint.
func (Int64Codec) Decode(src []byte) (int64, int, error) {
	v, n := binary.Varint(src)
	if n <= 0 {
		return 0, 0, varintError("int64", src, n)
	}
	return v, n, nil
}

// StringCodec encodes a string as its uvarint byte length followed by its bytes.
type StringCodec struct{}

// Name returns "string".
func (StringCodec) Name() string { return "string" }

// Append appends len(v) as a uvarint, then v.
func (StringCodec) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// Decode decodes a length-prefixed string (a copy, not an alias of src).
func (StringCodec) Decode(src []byte) (string, int, error) {
	b, n, err := decodeLengthPrefixed("string", src)
	return string(b), n, err
}

// BytesCodec encodes a byte slice as its uvarint length followed by its bytes.
// nil and empty slices encode alike and decode as nil.
type BytesCodec struct{}

// Name returns "bytes".
func (BytesCodec) Name() string { return "bytes" }

// Append appends len(v) as a uvarint, then v.
func (BytesCodec) Append(dst []byte, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// Decode decodes a length-prefixed byte slice into a fresh copy.
func (BytesCodec) Decode(src []byte) ([]byte, int, error) {
	b, n, err := decodeLengthPrefixed("bytes", src)
	if err != nil || len(b) == 0 {
		return nil, n, err
	}
	return append([]byte(nil), b...), n, nil
}

// Float64Codec encodes a float64 as its 8 IEEE 754 bits, little endian, so
// every value (NaN payloads, -0, infinities) round-trips exactly.
type Float64Codec struct{}

// Name returns "float64".
func (Float64Codec) Name() string { return "float64" }

// Append appends the 8 bytes of v.
func (Float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// Decode decodes 8 little-endian bytes.
func (Float64Codec) Decode(src []byte) (float64, int, error) {
	if len(src) < 8 {
		return 0, 0, truncated("float64", 8, len(src))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), 8, nil
}

// BoolCodec encodes a bool as one byte, 0 or 1; other bytes fail to decode.
type BoolCodec struct{}

// Name returns "bool".
func (BoolCodec) Name() string { return "bool" }

// Append appends 1 for true, 0 for false.
func (BoolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Decode decodes one byte that must be 0 or 1.
func (BoolCodec) Decode(src []byte) (bool, int, error) {
	if len(src) < 1 {
		return false, 0, truncated("bool", 1, 0)
	}
	switch src[0] {
	case 0:
		return false, 1, nil
	case 1:
		return true, 1, nil
	}
	return false, 0, fmt.Errorf("state: bool codec: invalid byte %#x (want 0 or 1)", src[0])
}

// JSONCodec returns a codec that stores T as length-prefixed encoding/json.
// It is the slow fallback for user types: reflection per value, and JSON's
// limits (unexported fields are dropped, NaN cannot be encoded: Append panics
// and the checkpoint fails with the marshal error). Write an explicit Codec
// for state on a hot path or that is large.
//
// Its name is "json:" followed by T's type name (for example
// "json:main.Order"), so restoring state written for a different Go type is
// reported as a mismatch; renaming or moving the type counts as a change.
func JSONCodec[T any]() Codec[T] {
	return jsonCodec[T]{name: "json:" + reflect.TypeFor[T]().String()}
}

type jsonCodec[T any] struct{ name string }

func (c jsonCodec[T]) Name() string { return c.name }

func (c jsonCodec[T]) Append(dst []byte, v T) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Errorf("state: %s codec: %w", c.name, err))
	}
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func (c jsonCodec[T]) Decode(src []byte) (T, int, error) {
	var v T
	b, n, err := decodeLengthPrefixed(c.name, src)
	if err != nil {
		return v, 0, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, 0, fmt.Errorf("state: %s codec: %w", c.name, err)
	}
	return v, n, nil
}

// decodeLengthPrefixed returns the bytes after a uvarint length (aliasing src)
// and the total number of bytes consumed.
func decodeLengthPrefixed(codec string, src []byte) ([]byte, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 {
		return nil, 0, varintError(codec, src, n)
	}
	if l > uint64(len(src)-n) {
		return nil, 0, truncated(codec, uint64(n)+l, len(src))
	}
	end := n + int(l)
	return src[n:end], end, nil
}

func truncated[N int | uint64](codec string, need N, have int) error {
	return fmt.Errorf("state: %s codec: truncated input: need %d bytes, have %d", codec, need, have)
}

// varintError explains a failed binary.Varint/Uvarint (n <= 0).
func varintError(codec string, src []byte, n int) error {
	if n == 0 {
		return fmt.Errorf("state: %s codec: truncated input: varint incomplete in %d bytes", codec, len(src))
	}
	return fmt.Errorf("state: %s codec: varint overflows 64 bits", codec)
}
