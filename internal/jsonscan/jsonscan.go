// Package jsonscan finds one top-level member of a JSON object without
// decoding the object: what sources need to read an event-time field of a
// record whose value they otherwise pass on as bytes.
package jsonscan

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Member returns the raw value of the top-level key in the JSON object data without
// decoding it: it scans the object once, skipping values. Of duplicate keys
// the last wins, as with encoding/json. It reports found false when the
// object has no such key. It checks the object's structure, not the inside
// of the values it skips.
func Member(data []byte, key string) (raw []byte, found bool, err error) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false, errors.New("not a JSON object")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false, errors.New("malformed JSON object: expected a key")
		}
		end, escaped, err := skipString(data, i)
		if err != nil {
			return nil, false, err
		}
		match := false
		if escaped {
			var k string
			if err := json.Unmarshal(data[i:end], &k); err != nil {
				return nil, false, fmt.Errorf("malformed JSON key: %w", err)
			}
			match = k == key
		} else {
			match = string(data[i+1:end-1]) == key
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false, errors.New("malformed JSON object: expected ':'")
		}
		i = skipSpace(data, i+1)
		vend, err := skipValue(data, i)
		if err != nil {
			return nil, false, err
		}
		if match {
			raw, found = data[i:vend], true
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return nil, false, errors.New("malformed JSON object: unexpected end")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return raw, found, nil
		default:
			return nil, false, errors.New("malformed JSON object: expected ',' or '}'")
		}
	}
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at data[i]
// ('"') and whether it holds escapes.
func skipString(data []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, nil
		}
	}
	return 0, false, errors.New("malformed JSON: unterminated string")
}

// skipValue returns the index after the JSON value starting at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errors.New("malformed JSON: missing value")
	}
	switch data[i] {
	case '"':
		end, _, err := skipString(data, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("malformed JSON: unterminated object or array")
	}
	// A number or a literal runs to the next delimiter; it is made of
	// letters, digits, '+', '-' and '.' only (its exact syntax is left to
	// the decoder of the value).
	j := i
	for j < len(data) {
		switch c := data[j]; {
		case c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if j == i {
				return 0, errors.New("malformed JSON: missing value")
			}
			return j, nil
		case !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
			return 0, fmt.Errorf("malformed JSON: unexpected character %q in a value", c)
		}
		j++
	}
	return j, nil
}
