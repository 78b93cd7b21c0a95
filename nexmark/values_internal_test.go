package nexmark

import (
	"math"
	"strings"
	"testing"
)

// TestJavaRound checks javaRound against Java 17's Math.round on values
// where floor(x+0.5) in floating point would be wrong, and at the int64
// limits (values printed by a throwaway Java program).
func TestJavaRound(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int64
	}{
		{0.5, 1}, {-0.5, 0}, {1.5, 2}, {-1.5, -1}, {2.5, 3},
		{0.49999999999999994, 0}, {-0.49999999999999994, 0},
		{4503599627370497.0, 4503599627370497}, {-4503599627370497.0, -4503599627370497},
		{1e19, math.MaxInt64}, {-1e19, math.MinInt64}, {math.NaN(), 0},
		{9.223372036854775807e18, math.MaxInt64}, {123456.49999999999, 123456},
		{-2.5000000000000004, -3}, {1e-300, 0}, {math.Copysign(0, -1), 0},
		{math.Inf(1), math.MaxInt64}, {math.Inf(-1), math.MinInt64},
	} {
		if got := javaRound(c.x); got != c.want {
			t.Errorf("javaRound(%v) = %d, want %d (Java's Math.round)", c.x, got, c.want)
		}
	}
}

// TestPriceCentsNearHalfCents checks the fast path of priceCents against
// math.Pow where it matters: exponents whose price lies within a hair of a
// half cent, which must take the math.Pow fallback, and random exponents.
func TestPriceCentsNearHalfCents(t *testing.T) {
	check := func(x float64) {
		t.Helper()
		if got, want := priceCents(x), javaRound(math.Pow(10.0, x)*100.0); got != want {
			t.Fatalf("priceCents(%v) = %d, math.Pow gives %d", x, got, want)
		}
	}
	for k := 100.0; k < 1e8; k = k*1.37 + 1 {
		x := math.Log10((math.Floor(k) + 0.5) / 100)
		for _, y := range []float64{x, math.Nextafter(x, 0), math.Nextafter(x, 6)} {
			check(y)
		}
	}
	r := NewRandom(7)
	for range 1_000_000 {
		check(r.NextDouble() * 6.0)
	}
}

// fillReference is StringsGenerator.nextExactString transcribed literally.
func fillReference(b []byte, r *Random) {
	var rnd int32
	n := 0
	for i := range b {
		if n == 0 {
			rnd = r.NextInt()
			n = 6
		}
		b[i] = byte('a' + rnd%26)
		rnd /= 26
		n--
	}
}

// TestFillExactString checks the table-driven fillExactString against the
// literal transcription, for every length up to 200 and both signs.
func TestFillExactString(t *testing.T) {
	for n := range 200 {
		got, want := make([]byte, n), make([]byte, n)
		r1, r2 := NewRandom(int64(n)*7919), NewRandom(int64(n)*7919)
		for k := range 50 {
			fillExactString(got, &r1)
			fillReference(want, &r2)
			if string(got) != string(want) {
				t.Fatalf("length %d, string %d: got %q, want %q", n, k, got, want)
			}
		}
		if r1 != r2 {
			t.Fatalf("length %d: the generators drew differently", n)
		}
	}
	// A draw of MinInt32 (state 2^47 after the step), whose magnitude does
	// not fit in an int32.
	start := Random{seed: prevState(1 << 47)}
	if probe := start; probe.NextInt() != math.MinInt32 {
		t.Fatal("prevState(2^47) does not draw MinInt32")
	}
	got, want := make([]byte, 6), make([]byte, 6)
	r1, r2 := start, start
	fillExactString(got, &r1)
	fillReference(want, &r2)
	if string(got) != string(want) {
		t.Errorf("MinInt32 draw: got %q, want %q", got, want)
	}
}

// prevState returns the state whose successor is s: the LCG multiplier is
// odd, so it is invertible mod 2^48.
func prevState(s uint64) uint64 {
	inv := uint64(1) // inverse of randomMultiplier mod 2^64 by Newton's iteration
	for range 6 {
		inv *= 2 - randomMultiplier*inv
	}
	return ((s - randomAddend) * inv) & randomMask
}

// TestAppendNextStringTrims checks that nextString's leading and trailing
// spaces are trimmed as Java's String.trim does, keeping inner spaces.
func TestAppendNextStringTrims(t *testing.T) {
	sawInner, sawEmpty := false, false
	for seed := range int64(100_000) {
		r := NewRandom(seed)
		s := string(appendNextString([]byte("x"), &r, 7))[1:]
		if strings.TrimSpace(s) != s {
			t.Fatalf("seed %d: %q is not trimmed", seed, s)
		}
		if len(s) > 6 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz ") != "" {
			t.Fatalf("seed %d: %q is not at most 6 letters and spaces", seed, s)
		}
		sawInner = sawInner || strings.Contains(s, " ")
		sawEmpty = sawEmpty || s == ""
	}
	if !sawInner || !sawEmpty {
		t.Errorf("inner space seen %v, empty string seen %v; want both", sawInner, sawEmpty)
	}
}
