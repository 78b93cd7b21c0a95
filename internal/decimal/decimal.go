// Package decimal reads decimal numbers exactly: digit by digit, never
// through a float64, so that a value is either the number written or an
// error. The JSON decoder reads integers with it and package eventtime
// reads epoch milliseconds.
package decimal

import "math"

// Status says whether Int's result is the number.
type Status uint8

const (
	// OK: the result is the number.
	OK Status = iota
	// Fraction: the number is not an integer.
	Fraction
	// Range: the number is outside int64.
	Range
)

// Int returns the value of the number lexeme lex times 10^scale exactly,
// when that is an integer in int64 range. It reads the decimal digits,
// never a float64, so 9007199254740993.0 stays exact. lex must be a JSON
// number (Valid); scale may be negative.
func Int(lex []byte, scale int) (int64, Status) {
	neg := lex[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	var (
		mant   uint64 // the significant digits up to the last nonzero one
		digits int    // how many digits mant holds, from the first nonzero one
		zeros  int    // zeros after the last nonzero digit, not in mant
		exp    = scale
		frac   bool
	)
	for ; i < len(lex); i++ {
		c := lex[i]
		if c == '.' {
			frac = true
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if frac {
			exp--
		}
		if c == '0' {
			if digits > 0 {
				zeros++
			}
			continue
		}
		if digits+zeros < 19 {
			for range zeros {
				mant *= 10
			}
			mant = mant*10 + uint64(c-'0')
		}
		digits += zeros + 1
		zeros = 0
	}
	if i < len(lex) { // the exponent
		i++
		eneg := lex[i] == '-'
		if lex[i] == '+' || eneg {
			i++
		}
		e := 0
		for ; i < len(lex); i++ {
			if e < 1e8 { // beyond that only the sign matters
				e = e*10 + int(lex[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if digits == 0 {
		return 0, OK
	}
	exp += zeros
	if exp < 0 {
		return 0, Fraction
	}
	if digits+exp > 19 { // at least 10^19 > 2^63
		return 0, Range
	}
	for range exp { // digits+exp ≤ 19: no uint64 overflow
		mant *= 10
	}
	if neg {
		if mant > 1<<63 {
			return 0, Range
		}
		return int64(-mant), OK
	}
	if mant > math.MaxInt64 {
		return 0, Range
	}
	return int64(mant), OK
}

// Valid reports whether lex is a JSON number:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func Valid(lex []byte) bool {
	i := 0
	if i < len(lex) && lex[i] == '-' {
		i++
	}
	switch {
	case i < len(lex) && lex[i] == '0':
		i++
	case i < len(lex) && lex[i] >= '1' && lex[i] <= '9':
		i = digitsFrom(lex, i)
	default:
		return false
	}
	if i < len(lex) && lex[i] == '.' {
		j := digitsFrom(lex, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(lex) && (lex[i] == 'e' || lex[i] == 'E') {
		i++
		if i < len(lex) && (lex[i] == '+' || lex[i] == '-') {
			i++
		}
		j := digitsFrom(lex, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(lex)
}

// digitsFrom returns the index of the first non-digit of b at or after i.
func digitsFrom(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
