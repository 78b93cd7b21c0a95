// Package eventtime reads event times into Unix nanoseconds, the engine's
// event-time unit, in one way for every source: an RFC 3339 string as
// time.Parse(time.RFC3339Nano) reads it, or a number of milliseconds since
// the Unix epoch read exactly (decimal digits, never a float64), with at
// most nanosecond precision. Instants outside what int64 nanoseconds hold
// (the years 1678 to 2262) are errors wrapping ErrRange; a number finer than
// a nanosecond is an error, never rounded or truncated.
package eventtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ingest-engine/ingest/internal/decimal"
)

// ErrRange is wrapped by the error for an instant outside the years 1678 to
// 2262, which int64 nanoseconds cannot hold.
var ErrRange = errors.New("outside the years 1678 to 2262")

// The instants Unix nanoseconds in an int64 hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// RFC3339 reads s as time.Parse(time.RFC3339Nano) does
// ("2026-01-02T15:04:05.123+01:00"; digits of a fraction past nanoseconds are
// dropped, as time does). It does not allocate unless it fails.
func RFC3339(s []byte) (int64, error) {
	if ns, ok := parseRFC3339(s); ok {
		return ns, nil
	}
	// time.Parse also takes what its own fast path (mirrored by
	// parseRFC3339) does not, such as a one-digit hour; keep its verdict.
	// A copy: s itself must not escape (callers parse from stack buffers).
	str := string(s)
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		return 0, fmt.Errorf("%q is not RFC 3339: %w", str, err)
	}
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("%q is %w", str, ErrRange)
	}
	return t.UnixNano(), nil
}

// EpochMillis reads s, a decimal number of milliseconds since the Unix
// epoch as a text field holds it: an optional sign, digits, and optionally
// a point and more digits ("1767225600000", "-1.5", "1767225600000.123456").
// Digits past the sixth after the point must be zeros.
func EpochMillis(s []byte) (int64, error) {
	sign := 0
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		sign = 1
	}
	whole, frac, hasFrac := bytes.Cut(s[sign:], []byte("."))
	if !allDigits(whole) || (hasFrac && !allDigits(frac)) {
		return 0, fmt.Errorf("%q is not epoch milliseconds", string(s))
	}
	if s[0] == '+' {
		s = s[1:] // decimal.Int reads a minus sign, not a plus
	}
	return millis(s)
}

// JSON reads a JSON value: a string is RFC 3339 (escapes resolved), a number
// is epoch milliseconds in JSON's grammar, exponents included ("1.5e3");
// JSON white space around the value is ignored. null and other values are errors.
func JSON(raw []byte) (int64, error) {
	raw = bytes.Trim(raw, " \t\r\n") // JSON's white space
	switch {
	case len(raw) == 0:
		return 0, errors.New("empty time value")
	case bytes.Equal(raw, []byte("null")):
		return 0, errors.New("is null")
	case raw[0] == '"':
		var s []byte
		if len(raw) >= 2 && raw[len(raw)-1] == '"' {
			s = raw[1 : len(raw)-1]
		}
		if s == nil || bytes.IndexByte(s, '\\') >= 0 {
			var str string
			if err := json.Unmarshal(raw, &str); err != nil {
				return 0, fmt.Errorf("time %s: %w", string(raw), err)
			}
			s = []byte(str)
		}
		return RFC3339(s)
	case decimal.Valid(raw):
		return millis(raw)
	}
	return 0, fmt.Errorf("time %s is neither an RFC 3339 string nor epoch milliseconds", string(raw))
}

// millis converts lex, a decimal number (decimal.Int's input), from
// milliseconds to nanoseconds.
func millis(lex []byte) (int64, error) {
	ns, st := decimal.Int(lex, 6)
	switch st {
	case decimal.Fraction:
		return 0, fmt.Errorf("%s ms has more fractional digits than nanoseconds hold", string(lex))
	case decimal.Range:
		return 0, fmt.Errorf("%s ms is %w", string(lex), ErrRange)
	}
	return ns, nil
}

// allDigits reports whether b is one or more decimal digits.
func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isDigit(b []byte, i int) bool { return i < len(b) && '0' <= b[i] && b[i] <= '9' }

// parseRFC3339 is time.Parse's fast path for time.RFC3339Nano without the
// time.Location: it reads 2006-01-02T15:04:05[.fraction](Z|±07:00) exactly as
// time does (a fraction past nanoseconds is truncated) and returns Unix
// nanoseconds. ok is false for anything else, including instants out of
// int64 range, which time.Parse then judges.
func parseRFC3339(s []byte) (ns int64, ok bool) {
	if len(s) < len("2006-01-02T15:04:05") {
		return 0, false
	}
	year, ok1 := digits(s[0:4], 0, 9999)
	month, ok2 := digits(s[5:7], 1, 12)
	day, ok3 := digits(s[8:10], 1, daysIn(month, year))
	hour, ok4 := digits(s[11:13], 0, 23)
	minute, ok5 := digits(s[14:16], 0, 59)
	sec, ok6 := digits(s[17:19], 0, 59)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	s = s[19:]
	nsec := 0
	if len(s) >= 2 && s[0] == '.' && isDigit(s, 1) {
		n := 1
		for ; n < len(s) && isDigit(s, n); n++ {
			if n <= 9 {
				nsec = nsec*10 + int(s[n]-'0')
			}
		}
		for range 10 - min(n, 10) {
			nsec *= 10
		}
		s = s[n:]
	}
	offset := 0
	if len(s) != 1 || s[0] != 'Z' {
		if len(s) != len("-07:00") {
			return 0, false
		}
		hh, ok1 := digits(s[1:3], 0, 23)
		mm, ok2 := digits(s[4:6], 0, 59)
		if !ok1 || !ok2 || (s[0] != '-' && s[0] != '+') || s[3] != ':' {
			return 0, false
		}
		offset = (hh*60 + mm) * 60
		if s[0] == '-' {
			offset = -offset
		}
	}
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	// int64 nanoseconds end in 1677 and 2262; leave the edge seconds to time.
	const lo, hi = math.MinInt64/1_000_000_000 + 1, math.MaxInt64/1_000_000_000 - 1
	if unix < lo || unix > hi {
		return 0, false
	}
	return unix*1e9 + int64(nsec), true
}

// digits reads b, all decimal digits, as a number from lo to hi.
func digits(b []byte, lo, hi int) (int, bool) {
	x := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + int(c-'0')
	}
	return x, lo <= x && x <= hi
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch counts days from 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil).
func daysSinceEpoch(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
