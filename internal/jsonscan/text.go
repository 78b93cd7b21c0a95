package jsonscan

import (
	"bytes"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckText reports the first flaw of the JSON text data that encoding/json
// hides by writing U+FFFD in its place: invalid UTF-8 anywhere, or a \u
// escape of a lone surrogate. Decoding such a record would make distinct
// values one ("a\xff", "a\xfe", "a\ud800" and "a\ufffd" all read "a\ufffd"),
// so the decoders of records into Go values refuse it. It judges nothing
// else (the decoder reports syntax errors); it allocates only its error.
func CheckText(data []byte) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("invalid UTF-8 at byte %d (encoding/json would read U+FFFD)", FirstInvalidUTF8(data))
	}
	// A backslash is an escape: valid JSON has none outside strings.
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j
		if i+6 > len(data) || data[i+1] != 'u' {
			i += 2 // \\, \", \n…: the escaped byte is never the start of another escape
			continue
		}
		r := hex4(data[i+2 : i+6])
		if !utf16.IsSurrogate(r) {
			i += 6
			continue
		}
		if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' && utf16.DecodeRune(r, hex4(data[i+8:i+12])) != utf8.RuneError {
			i += 12 // a pair
			continue
		}
		return fmt.Errorf("lone surrogate %s at byte %d (encoding/json would read U+FFFD)", data[i:i+6], i)
	}
	return nil
}

// hex4 reads four hexadecimal digits, or returns -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// FirstInvalidUTF8 returns the offset of the first byte of data that does not
// start a valid UTF-8 sequence, or len(data) if every byte does.
func FirstInvalidUTF8(data []byte) int {
	i := 0
	for i < len(data) {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}
