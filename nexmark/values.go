package nexmark

import (
	"encoding/binary"
	"math"
)

// This file ports Beam's StringsGenerator, PriceGenerator and LongGenerator.
// Every function draws from the Random in exactly Beam's order.

// minStringLength is StringsGenerator.MIN_STRING_LENGTH.
const minStringLength = 3

// appendNextString appends StringsGenerator.nextString(random, maxLength):
// 3 to maxLength-1 characters, each a space (1 in 13) or a lower-case
// letter, with leading and trailing spaces trimmed (String.trim).
func appendNextString(b []byte, r *Random, maxLength int32) []byte {
	n := minStringLength + r.NextIntN(maxLength-minStringLength)
	start := len(b)
	for ; n > 0; n-- {
		if r.NextIntN(13) == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, byte('a'+r.NextIntN(26)))
		}
	}
	s := b[start:]
	i, j := 0, len(s)
	for i < j && s[i] == ' ' {
		i++
	}
	for j > i && s[j-1] == ' ' {
		j--
	}
	if i > 0 {
		copy(s, s[i:j])
	}
	return b[:start+j-i]
}

// fillExactString fills b as StringsGenerator.nextExactString(random,
// len(b)) does: six characters from each nextInt(), 'a' + rnd % 26 with
// Java's truncating remainder and division, so a negative draw gives the
// characters 'H'..'`' (0x48..0x60, backslash included).
//
// It is the generator's hottest loop: most of an event's bytes come from
// it. The six characters of a draw are the base-26 digits of |rnd|, least
// significant first, each added to 'a' when rnd >= 0 and subtracted when
// rnd < 0 (truncating division keeps the sign). It looks them up two at a
// time in letterPairs and writes a draw's six with one 8-byte store while
// there is room (the next draw overwrites the two extra bytes).
func fillExactString(b []byte, r *Random) {
	seed := r.seed // in a register, not through r
	for len(b) > 0 {
		seed = (seed*randomMultiplier + randomAddend) & randomMask
		rnd := int32(seed >> 16) // nextInt()
		sign := rnd >> 31        // 0 or -1: the sign is a coin flip, so no branch
		u := uint32((rnd ^ sign) - sign)
		off := uint32(sign) & 1024
		q2, q4 := u/(26*26), u/(26*26*26*26)
		v := uint64(letterPairs[(off+u-q2*(26*26))&2047]) |
			uint64(letterPairs[(off+q2-q4*(26*26))&2047])<<16 |
			uint64(letterPairs[(off+q4%(26*26))&2047])<<32 // six digits; the rest is dropped
		switch {
		case len(b) >= 8:
			binary.LittleEndian.PutUint64(b, v)
			b = b[6:]
		case len(b) >= 6:
			binary.LittleEndian.PutUint32(b, uint32(v))
			binary.LittleEndian.PutUint16(b[4:], uint16(v>>32))
			b = b[6:]
		default:
			for i := range b {
				b[i] = byte(v >> (8 * i))
			}
			b = b[:0]
		}
	}
	r.seed = seed
}

// letterPairs[v] (v < 676) holds 'a' plus the two base-26 digits of v, the
// least significant in the low byte; letterPairs[1024+v] holds 'a' minus
// them, for negative draws.
var letterPairs = func() (t [2048]uint16) {
	for v := range 26 * 26 {
		lo, hi := uint16(v%26), uint16(v/26)
		t[v] = ('a' + lo) | ('a'+hi)<<8
		t[1024+v] = ('a' - lo) | ('a'-hi)<<8
	}
	return t
}()

// nextExtraLen draws the length of StringsGenerator.nextExtra(random,
// currentSize, desiredAverageSize): about desiredAverageSize-currentSize,
// uniformly within ±20%, or 0 (with no draw) when the event is already
// larger. The characters are drawn afterwards with fillExactString.
func nextExtraLen(r *Random, currentSize, desiredAverageSize int32) int32 {
	if currentSize > desiredAverageSize {
		return 0
	}
	desired := desiredAverageSize - currentSize
	delta := int32(javaRound(float64(desired) * 0.2))
	minSize := desired - delta
	if delta == 0 {
		return minSize
	}
	return minSize + r.NextIntN(2*delta)
}

// nextPrice is PriceGenerator.nextPrice: a log-uniform price in cents from
// 100 to 100,000,000, Math.round(Math.pow(10, nextDouble()*6) * 100).
func nextPrice(r *Random) int64 {
	return priceCents(r.NextDouble() * 6.0)
}

// priceTolerance bounds the relative error of the fast path of priceCents,
// with a wide margin: math.Exp is within a few ulps (about 1e-16) on every
// platform, and rounding x*ln(10) adds at most 6*ln(10)*2^-53 (2e-15).
const priceTolerance = 1e-11

// priceCents returns Java's Math.round(Math.pow(10, x) * 100) for x in
// [0, 6).
//
// Java specifies Math.pow within 1 ulp of the exact value. Go's math.Pow
// differs from Java's in the last bits of about half of all results, yet
// rounds to the same cents (see the README of the golden files; 1e9 more
// draws agreed while this was written), because a difference matters only
// within an ulp of a half cent. math.Pow is also slow (about 60 ns, a third
// of a bid). So priceCents takes exp(x*ln(10))*100, about 5x faster, and
// rounds it whenever it is further than priceTolerance (relative) from a
// half cent: the exact value, and Java's result, then round to the same
// whole number. Within the tolerance (about 1 in 10,000 prices) it falls
// back to math.Pow.
func priceCents(x float64) int64 {
	y := math.Exp(x*math.Ln10) * 100.0
	if f := y - math.Floor(y); math.Abs(f-0.5) > y*priceTolerance {
		return javaRound(y)
	}
	return javaRound(math.Pow(10.0, x) * 100.0)
}

// nextLong is LongGenerator.nextLong: a value in [0, n) for n >= 1, from
// nextInt(n) when n < 2^31-1, else (with Beam's own warning of a skewed
// distribution) |nextLong() % n|.
func nextLong(r *Random, n int64) int64 {
	if n < math.MaxInt32 {
		return int64(r.NextIntN(int32(n)))
	}
	v := r.NextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}
