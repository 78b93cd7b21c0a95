package nexmark

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends e as one JSON object, without a trailing newline, in
// the format of the golden files: keys in Beam's field order after "type"
// and "event_id", integers as JSON integers, times as epoch milliseconds.
//
//	{"type":"bid","event_id":N,"auction":..,"bidder":..,"price":..,"date_time":..,"extra":".."}
//
// The zero Event appends null. It allocates only when dst must grow.
func AppendJSON(dst []byte, e Event) []byte {
	switch e.Type {
	case PersonEvent:
		p := e.Person
		dst = append(dst, `{"type":"person","event_id":`...)
		dst = strconv.AppendInt(dst, e.EventID, 10)
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendInt(dst, p.ID, 10)
		dst = append(dst, `,"name":`...)
		dst = AppendJSONString(dst, p.Name)
		dst = append(dst, `,"email_address":`...)
		dst = AppendJSONString(dst, p.EmailAddress)
		dst = append(dst, `,"credit_card":`...)
		dst = AppendJSONString(dst, p.CreditCard)
		dst = append(dst, `,"city":`...)
		dst = AppendJSONString(dst, p.City)
		dst = append(dst, `,"state":`...)
		dst = AppendJSONString(dst, p.State)
		dst = append(dst, `,"date_time":`...)
		dst = strconv.AppendInt(dst, p.DateTime, 10)
		dst = append(dst, `,"extra":`...)
		dst = AppendJSONString(dst, p.Extra)
	case AuctionEvent:
		a := e.Auction
		dst = append(dst, `{"type":"auction","event_id":`...)
		dst = strconv.AppendInt(dst, e.EventID, 10)
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendInt(dst, a.ID, 10)
		dst = append(dst, `,"item_name":`...)
		dst = AppendJSONString(dst, a.ItemName)
		dst = append(dst, `,"description":`...)
		dst = AppendJSONString(dst, a.Description)
		dst = append(dst, `,"initial_bid":`...)
		dst = strconv.AppendInt(dst, a.InitialBid, 10)
		dst = append(dst, `,"reserve":`...)
		dst = strconv.AppendInt(dst, a.Reserve, 10)
		dst = append(dst, `,"date_time":`...)
		dst = strconv.AppendInt(dst, a.DateTime, 10)
		dst = append(dst, `,"expires":`...)
		dst = strconv.AppendInt(dst, a.Expires, 10)
		dst = append(dst, `,"seller":`...)
		dst = strconv.AppendInt(dst, a.Seller, 10)
		dst = append(dst, `,"category":`...)
		dst = strconv.AppendInt(dst, a.Category, 10)
		dst = append(dst, `,"extra":`...)
		dst = AppendJSONString(dst, a.Extra)
	case BidEvent:
		b := &e.Bid
		dst = append(dst, `{"type":"bid","event_id":`...)
		dst = strconv.AppendInt(dst, e.EventID, 10)
		dst = append(dst, `,"auction":`...)
		dst = strconv.AppendInt(dst, b.Auction, 10)
		dst = append(dst, `,"bidder":`...)
		dst = strconv.AppendInt(dst, b.Bidder, 10)
		dst = append(dst, `,"price":`...)
		dst = strconv.AppendInt(dst, b.Price, 10)
		dst = append(dst, `,"date_time":`...)
		dst = strconv.AppendInt(dst, b.DateTime, 10)
		dst = append(dst, `,"extra":`...)
		dst = AppendJSONString(dst, b.Extra)
	default:
		return append(dst, "null"...)
	}
	return append(dst, '}')
}

// jsonSafe[c] is true for the ASCII bytes a JSON string holds unescaped.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// load64 returns s[i:i+8] as a little-endian word (the compiler merges the
// loads into one).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// needsEscape8 reports whether any byte of w is a control character, '"',
// '\' or non-ASCII: the bytes AppendJSONString does not copy as they are.
// The tests are the exact "has a byte less than n / equal to zero" bit
// tricks (Hacker's Delight 6-1); a false positive would only take the slow
// path.
func needsEscape8(w uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - lsb) &^ v & msb }
	control := (w - 0x20*lsb) &^ w & msb
	return (control|hasZero(w^('"'*lsb))|hasZero(w^('\\'*lsb))|w)&msb != 0
}

// AppendJSONString appends s as a quoted JSON string (RFC 8259): '"' and '\'
// escaped with a backslash, control characters as \n, \r, \t, \b, \f or
// \u00XX, and bytes that are not valid UTF-8 replaced by U+FFFD (as
// encoding/json does). Everything else is copied verbatim. Nexmark's strings
// are printable ASCII, where only '\' needs escaping.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending verbatim output
	for i := 0; i < len(s); {
		// Skip eight plain bytes at a time.
		if i+8 <= len(s) && !needsEscape8(load64(s, i)) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
