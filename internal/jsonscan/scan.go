package jsonscan

import (
	"encoding/binary"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the lexical half of the JSON decoder: it validates and skips
// JSON values in place, without allocating, and accepts exactly what
// encoding/json accepts (the fuzz test holds it to that), so a record is
// either valid for both or invalid for both.

// maxJSONDepth is encoding/json's nesting limit (the outer object counts), so
// the two accept the same documents.
const maxJSONDepth = 10000

// SyntaxError reports input that is not valid JSON. The record cannot be
// decoded whatever the schema: a source should treat it as a poison record.
type SyntaxError struct {
	// Offset is the position of the offending byte, counted from 0; at the end
	// of truncated input it is the input's length.
	Offset int
	// Msg says what was wrong there, in encoding/json's words.
	Msg string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// ErrNotObject marks valid-looking input whose top-level value is not an
// object (an array, a string, a number, a bool or null): rows are read from
// flat objects only.
var ErrNotObject = errors.New("not a JSON object")

func syntaxError(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

// Unexpected reports the byte at i (or the end of input) in context, which
// reads like encoding/json's "looking for beginning of value".
func Unexpected(data []byte, i int, context string) error {
	if i >= len(data) {
		return syntaxError(len(data), "unexpected end of input")
	}
	return syntaxError(i, "invalid character "+quoteChar(data[i])+" "+context)
}

// quoteChar formats c as encoding/json does in its messages.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

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

// plainByte marks the bytes a string literal holds as they are: printable
// ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Flags of a scanned string literal: what decoding it needs beyond a copy.
const (
	StrEscaped  = 1 << iota // has a backslash escape
	StrNonASCII             // has bytes ≥ 0x80, which may be invalid UTF-8
)

// ScanString validates the string literal whose opening quote is data[i] and
// returns the offset after its closing quote.
func ScanString(data []byte, i int) (end int, flags uint8, err error) {
	j := i + 1
	for {
		for j+8 <= len(data) && !hasSpecialByte(binary.LittleEndian.Uint64(data[j:])) {
			j += 8
		}
		for j < len(data) && plainByte[data[j]] {
			j++
		}
		if j >= len(data) {
			return 0, 0, Unexpected(data, j, "")
		}
		switch c := data[j]; {
		case c == '"':
			return j + 1, flags, nil
		case c == '\\':
			flags |= StrEscaped
			if j+1 >= len(data) {
				return 0, 0, Unexpected(data, j+1, "")
			}
			switch data[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				for k := j + 2; k < j+6; k++ {
					if k >= len(data) || unhex(data[k]) < 0 {
						return 0, 0, Unexpected(data, k, `in \u hexadecimal character escape`)
					}
				}
				j += 6
			default:
				return 0, 0, Unexpected(data, j+1, "in string escape code")
			}
		case c < 0x20:
			return 0, 0, Unexpected(data, j, "in string literal")
		default:
			flags |= StrNonASCII
			j++
		}
	}
}

// hasSpecialByte reports whether any of the 8 bytes in w is not a plainByte:
// a quote, a backslash, a control character or a byte ≥ 0x80. (A byte's test
// borrows only from a lower byte that is special itself, so the answer is
// exact.)
func hasSpecialByte(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	return ((q-ones)&^q|(b-ones)&^b|(w-ones*0x20)&^w|w)&highs != 0
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// getu4 reads the \uXXXX escape at s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		h := unhex(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | h
	}
	return r
}

// AppendUnquoted appends the text of body, the inside of a string literal
// ScanString accepted, exactly: escapes resolved, a surrogate pair joined,
// other bytes as they are, valid UTF-8 or not, and a lone surrogate escape
// as the three bytes of its code point (as WTF-8 writes it; no valid UTF-8
// holds them). Unlike encoding/json, which writes U+FFFD for each flaw, it
// keeps apart any two texts but those that differ only in how a lone
// surrogate is spelt (escaped, or its three bytes raw).
//
// fault is "" when the text is valid Unicode; else it says what the first
// flaw is: "invalid UTF-8 at byte N" (N counted in the text) or "lone
// surrogate \ud800" (the escape as written).
func AppendUnquoted(dst, body []byte) (_ []byte, fault string) {
	start := len(dst)
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			j, high := i+1, body[i]
			for j < len(body) && body[j] != '\\' {
				high |= body[j]
				j++
			}
			if run := body[i:j]; fault == "" && high >= utf8.RuneSelf && !utf8.Valid(run) {
				fault = InvalidUTF8(run, len(dst)-start)
			}
			dst = append(dst, body[i:j]...)
			i = j
			continue
		}
		switch e := body[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := getu4(body[i:])
			esc := body[i : i+6]
			i += 6
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, getu4(body[i:])); dec != unicode.ReplacementChar {
					dst = utf8.AppendRune(dst, dec)
					i += 6
					continue
				}
				if fault == "" {
					fault = "lone surrogate " + string(esc)
				}
				// utf8.AppendRune would write U+FFFD.
				dst = append(dst, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
				continue
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst, fault
}

// InvalidUTF8 describes the first invalid UTF-8 in b, which has some, whose
// first byte is at offset base of the text.
func InvalidUTF8(b []byte, base int) string {
	return "invalid UTF-8 at byte " + strconv.Itoa(base+FirstInvalidUTF8(b))
}

// Flags of a scanned number: the parts beyond an integer.
const (
	numFraction = 1 << iota // has a '.'
	numExponent             // has an 'e' or 'E'
)

func isDigit(data []byte, i int) bool { return i < len(data) && '0' <= data[i] && data[i] <= '9' }

// ScanNumber validates the number starting at data[i] ('-' or a digit) and
// returns the offset after it.
func ScanNumber(data []byte, i int) (end int, flags uint8, err error) {
	j := i
	if data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case isDigit(data, j):
		for j++; isDigit(data, j); j++ {
		}
	default:
		return 0, 0, Unexpected(data, j, "in numeric literal")
	}
	if j < len(data) && data[j] == '.' {
		flags |= numFraction
		if j++; !isDigit(data, j) {
			return 0, 0, Unexpected(data, j, "after decimal point in numeric literal")
		}
		for j++; isDigit(data, j); j++ {
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		flags |= numExponent
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if !isDigit(data, j) {
			return 0, 0, Unexpected(data, j, "in exponent of numeric literal")
		}
		for j++; isDigit(data, j); j++ {
		}
	}
	return j, flags, nil
}

// ScanLiteral checks that lit (true, false or null) starts at data[i].
func ScanLiteral(data []byte, i int, lit string) (int, error) {
	for k := 1; k < len(lit); k++ {
		if i+k >= len(data) || data[i+k] != lit[k] {
			return 0, Unexpected(data, i+k, "in literal "+lit+" (expecting "+quoteChar(lit[k])+")")
		}
	}
	return i + len(lit), nil
}

// SkipValue validates the value starting at data[i], which sits depth levels
// deep (the top-level object is level 1), and returns the offset after it.
func SkipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return 0, Unexpected(data, i, "")
	}
	switch c := data[i]; c {
	case '"':
		end, _, err := ScanString(data, i)
		return end, err
	case '{', '[':
		return SkipNested(data, i, depth+1)
	case 't':
		return ScanLiteral(data, i, "true")
	case 'f':
		return ScanLiteral(data, i, "false")
	case 'n':
		return ScanLiteral(data, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			end, _, err := ScanNumber(data, i)
			return end, err
		}
	}
	return 0, Unexpected(data, i, "looking for beginning of value")
}

// SkipNested validates the object or array starting at data[i] whose
// contents sit depth levels deep.
func SkipNested(data []byte, i, depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, syntaxError(i, "exceeded max depth")
	}
	if data[i] == '[' {
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := SkipValue(data, i, depth)
			if err != nil {
				return 0, err
			}
			i = skipSpace(data, end)
			if i < len(data) && data[i] == ']' {
				return i + 1, nil
			}
			if i >= len(data) || data[i] != ',' {
				return 0, Unexpected(data, i, "after array element")
			}
			i = skipSpace(data, i+1)
		}
	}
	i, done, err := OpenMembers(data, i)
	for err == nil && !done {
		var val int
		if _, _, val, err = MemberKey(data, i); err != nil {
			break
		}
		if i, err = SkipValue(data, val, depth); err != nil {
			break
		}
		i, done, err = NextMember(data, i)
	}
	return i, err
}

// An object is walked with OpenMembers, then MemberKey and NextMember for each
// member; the caller scans or skips each value between them.

// OpenMembers reads the '{' at data[i] and returns the offset of the first
// key, or done with the offset after an empty object's '}'.
func OpenMembers(data []byte, i int) (next int, done bool, err error) {
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true, nil
	}
	return i, false, nil
}

// MemberKey reads the key at data[i] and the colon after it, and returns the
// key's body (the inside of its literal), the key's string flags and the
// offset of the value.
func MemberKey(data []byte, i int) (key []byte, flags uint8, val int, err error) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, 0, Unexpected(data, i, "looking for beginning of object key string")
	}
	end, flags, err := ScanString(data, i)
	if err != nil {
		return nil, 0, 0, err
	}
	j := skipSpace(data, end)
	if j >= len(data) || data[j] != ':' {
		return nil, 0, 0, Unexpected(data, j, "after object key")
	}
	return data[i+1 : end-1], flags, skipSpace(data, j+1), nil
}

// NextMember reads what follows a member's value ending at data[i]: a ','
// (it returns the next key's offset) or the object's '}' (done, with the
// offset after it).
func NextMember(data []byte, i int) (next int, done bool, err error) {
	i = skipSpace(data, i)
	if i < len(data) {
		switch data[i] {
		case ',':
			return skipSpace(data, i+1), false, nil
		case '}':
			return i + 1, true, nil
		}
	}
	return 0, false, Unexpected(data, i, "after object key:value pair")
}

// OpenObject checks that data holds an object and opens it (see OpenMembers).
func OpenObject(data []byte) (next int, done bool, err error) {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == '{' {
		return OpenMembers(data, i)
	}
	var got string
	switch {
	case i >= len(data):
		return 0, false, Unexpected(data, i, "")
	case data[i] == '[':
		got = "array"
	case data[i] == '"':
		got = "string"
	case data[i] == '-' || isDigit(data, i):
		got = "number"
	case data[i] == 't' || data[i] == 'f':
		got = "bool"
	case data[i] == 'n':
		got = "null"
	default:
		return 0, false, Unexpected(data, i, "looking for beginning of value")
	}
	return 0, false, &notObjectError{got}
}

type notObjectError struct{ got string }

func (e *notObjectError) Error() string { return "not a JSON object (got " + e.got + ")" }

func (e *notObjectError) Is(target error) bool { return target == ErrNotObject }

// CloseObject checks that only space follows the object ending at data[i].
func CloseObject(data []byte, i int) error {
	if i = skipSpace(data, i); i < len(data) {
		return Unexpected(data, i, "after top-level value")
	}
	return nil
}

// UnquoteKey returns a key's name exactly (see AppendUnquoted), in buf's
// space when it fits, so matching a plain key against a schema allocates
// nothing. A name that is not valid UTF-8 keeps its bytes, so it matches no
// field but one of exactly that name (never one named with U+FFFD).
func UnquoteKey(buf, key []byte, flags uint8) []byte {
	if flags&StrEscaped == 0 {
		return key
	}
	name, _ := AppendUnquoted(buf, key)
	return name
}
