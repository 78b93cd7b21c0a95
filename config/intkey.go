package config

import (
	"fmt"

	"github.com/ingest-engine/ingest/row"
)

// intKey is a key of kind Int as a state key (a groupjoin's, a window's):
// its value, or NULL. A map hashes and compares it without the string a
// row.Value holds; it hashes (HashKey) and encodes (intKeyCodec) as the
// row.Value it stands for.
type intKey struct {
	n    int64
	null bool
}

// intKeyOf is the intKey of v, an Int or NULL.
func intKeyOf(v row.Value) intKey {
	if v.Kind() == row.Null {
		return intKey{null: true}
	}
	return intKey{n: v.Int()}
}

// value is the row value k stands for.
func (k intKey) value() row.Value {
	if k.null {
		return row.Value{}
	}
	return row.IntValue(k.n)
}

// HashKey implements state.KeyHasher.
func (k intKey) HashKey() uint64 { return k.value().HashKey() }

// String shows k as its row value does, in errors.
func (k intKey) String() string { return k.value().String() }

// intKeyCodec encodes an intKey as row.ValueCodec encodes its value, under
// its name: state keyed by either restores into the other (a value that is
// not an integer or NULL is refused when decoded).
type intKeyCodec struct{}

func (intKeyCodec) Name() string { return row.ValueCodec{}.Name() }

func (intKeyCodec) Append(dst []byte, k intKey) []byte {
	return row.ValueCodec{}.Append(dst, k.value())
}

func (intKeyCodec) Decode(src []byte) (intKey, int, error) {
	v, n, err := row.ValueCodec{}.Decode(src)
	if err != nil {
		return intKey{}, 0, err
	}
	if v.Kind() != row.Int && v.Kind() != row.Null {
		return intKey{}, 0, fmt.Errorf("an integer key holds a %v value", v.Kind())
	}
	return intKeyOf(v), n, nil
}
