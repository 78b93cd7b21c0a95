package row

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ValueCodec encodes Values for keyed state: a kind byte, then a varint (Int,
// Time), 8 bytes (Float), a byte (Bool) or a uvarint length and bytes (String,
// Bytes). It implements state.Codec[Value].
type ValueCodec struct{}

// Name identifies the encoding in snapshots.
func (ValueCodec) Name() string { return "row.value.v1" }

// Append appends v's encoding.
func (ValueCodec) Append(dst []byte, v Value) []byte {
	dst = append(dst, byte(v.kind))
	switch v.kind {
	case Int, Time:
		dst = binary.AppendVarint(dst, int64(v.n))
	case Float:
		dst = binary.LittleEndian.AppendUint64(dst, v.n)
	case Bool:
		dst = append(dst, byte(v.n))
	case String, Bytes:
		dst = binary.AppendUvarint(dst, uint64(len(v.s)))
		dst = append(dst, v.s...)
	}
	return dst
}

var errTruncated = errors.New("row value: truncated input")

// Decode reads one Value and returns the bytes it used.
func (ValueCodec) Decode(src []byte) (Value, int, error) {
	if len(src) == 0 {
		return Value{}, 0, errTruncated
	}
	v := Value{kind: Kind(src[0])}
	p := src[1:]
	switch v.kind {
	case Null:
		return v, 1, nil
	case Int, Time:
		i, n := binary.Varint(p)
		if n <= 0 {
			return Value{}, 0, errTruncated
		}
		v.n = uint64(i)
		return v, 1 + n, nil
	case Float:
		if len(p) < 8 {
			return Value{}, 0, errTruncated
		}
		v.n = binary.LittleEndian.Uint64(p)
		return v, 9, nil
	case Bool:
		if len(p) < 1 {
			return Value{}, 0, errTruncated
		}
		v.n = uint64(p[0] & 1)
		return v, 2, nil
	case String, Bytes:
		l, n := binary.Uvarint(p)
		if n <= 0 || uint64(len(p)-n) < l {
			return Value{}, 0, errTruncated
		}
		v.s = string(p[n : n+int(l)])
		return v, 1 + n + int(l), nil
	}
	return Value{}, 0, fmt.Errorf("row value: unknown kind %d", src[0])
}

// RowCodec encodes Rows for keyed state: a uvarint count, then each Value.
// It implements state.Codec[Row].
type RowCodec struct{}

// Name identifies the encoding in snapshots.
func (RowCodec) Name() string { return "row.row.v1" }

// Append appends r's encoding.
func (RowCodec) Append(dst []byte, r Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r)))
	for _, v := range r {
		dst = ValueCodec{}.Append(dst, v)
	}
	return dst
}

// Decode reads one Row and returns the bytes it used.
func (RowCodec) Decode(src []byte) (Row, int, error) {
	l, n := binary.Uvarint(src)
	if n <= 0 || l > uint64(len(src)) {
		return nil, 0, errTruncated
	}
	r := make(Row, l)
	for i := range r {
		v, m, err := ValueCodec{}.Decode(src[n:])
		if err != nil {
			return nil, 0, err
		}
		r[i] = v
		n += m
	}
	return r, n, nil
}

// RowsCodec encodes a list of rows: a uvarint count, then each row
// (RowCodec). Its name is Label, which a state storing rows sets to say what
// they hold (their fields, the order they are kept in): a checkpoint of
// other rows is then refused at restore.
type RowsCodec struct{ Label string }

// Name returns the label.
func (c RowsCodec) Name() string { return c.Label }

// Append appends rows.
func (RowsCodec) Append(dst []byte, rows []Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rows)))
	for _, r := range rows {
		dst = RowCodec{}.Append(dst, r)
	}
	return dst
}

// Decode reads a list of rows and returns the bytes it used.
func (RowsCodec) Decode(src []byte) ([]Row, int, error) {
	n, used := binary.Uvarint(src)
	if used <= 0 || n > uint64(len(src)) {
		return nil, 0, errors.New("row list: bad row count")
	}
	rows := make([]Row, n)
	at := used
	for i := range rows {
		r, m, err := RowCodec{}.Decode(src[at:])
		if err != nil {
			return nil, 0, fmt.Errorf("row list: row %d: %w", i, err)
		}
		rows[i], at = r, at+m
	}
	return rows, at, nil
}
