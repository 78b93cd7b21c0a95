// Package jsonscan is the one JSON scanner of the engine: it validates and
// skips JSON values in place, without allocating, and accepts exactly what
// encoding/json accepts (scan.go). On it stand the decoder of rows (package
// row), Member, which finds one top-level member of an object without
// decoding it (what sources need to read an event-time field of a record
// whose value they otherwise pass on as bytes), and CheckText.
package jsonscan

// Member returns the raw value of the top-level key in the JSON object data
// without decoding it: it scans the object once, checking every byte as
// encoding/json would (the decoder of rows uses the same scanner) and
// skipping values. Of duplicate keys the last wins, as with encoding/json.
// It reports found false when the object has no such key; invalid JSON is a
// *SyntaxError, and a JSON value that is not an object wraps ErrNotObject.
func Member(data []byte, key string) (raw []byte, found bool, err error) {
	i, done, err := OpenObject(data)
	if err != nil {
		return nil, false, err
	}
	var buf [64]byte
	for !done {
		k, flags, val, err := MemberKey(data, i)
		if err != nil {
			return nil, false, err
		}
		end, err := SkipValue(data, val, 1)
		if err != nil {
			return nil, false, err
		}
		if string(UnquoteKey(buf[:0], k, flags)) == key {
			raw, found = data[val:end], true
		}
		if i, done, err = NextMember(data, end); err != nil {
			return nil, false, err
		}
	}
	if err := CloseObject(data, i); err != nil {
		return nil, false, err
	}
	return raw, found, nil
}
