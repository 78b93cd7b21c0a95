package nexmark

import "math"

// java.util.Random's linear congruential generator (Knuth, TAOCP vol. 2,
// 3.2.1): seed' = (seed * 0x5DEECE66D + 0xB) mod 2^48.
const (
	randomMultiplier = 0x5DEECE66D
	randomAddend     = 0xB
	randomMask       = 1<<48 - 1
)

// Random is a bit-exact port of java.util.Random: the same seed gives the
// same sequence of values as Java for every method here. Beam's Nexmark
// generator seeds a fresh java.util.Random with each event id, so the port
// must match Java draw for draw.
//
// The zero Random is a generator seeded with 0x5DEECE66D scrambled away,
// i.e. the state of new Random(0x5DEECE66D); use NewRandom. A Random is a
// small value: copy it to fork a sequence. It is not safe for concurrent use.
type Random struct {
	// seed is the 48-bit state.
	// INVARIANT: seed < 2^48.
	seed uint64
}

// NewRandom returns the generator that new java.util.Random(seed) creates.
func NewRandom(seed int64) Random {
	return Random{seed: (uint64(seed) ^ randomMultiplier) & randomMask}
}

// SetSeed resets the generator as java.util.Random.setSeed(seed) does.
func (r *Random) SetSeed(seed int64) { r.seed = (uint64(seed) ^ randomMultiplier) & randomMask }

// Next advances the state and returns its top bits bits (1..32) as
// java.util.Random.next(bits) does: for bits = 32 the result may be negative.
func (r *Random) Next(bits uint) int32 {
	r.seed = (r.seed*randomMultiplier + randomAddend) & randomMask
	return int32(r.seed >> (48 - bits))
}

// NextInt returns java.util.Random.nextInt(): 32 uniformly random bits.
func (r *Random) NextInt() int32 { return r.Next(32) }

// NextIntN returns java.util.Random.nextInt(bound): a value in [0, bound).
// A power-of-two bound takes the top bits of one draw; any other bound
// rejects draws from the incomplete last interval (the loop Java uses), so it
// may consume more than one draw. Java throws for bound <= 0; NextIntN
// returns 0 without drawing instead.
func (r *Random) NextIntN(bound int32) int32 {
	if bound <= 0 {
		return 0
	}
	v := r.Next(31)
	m := bound - 1
	if bound&m == 0 {
		return int32((int64(bound) * int64(v)) >> 31)
	}
	// Java: for (int u = r; u - (r = u % bound) + m < 0; u = next(31));
	// The sum overflows int32 exactly when u lies in the last, incomplete
	// multiple of bound; Go's int32 arithmetic wraps as Java's does. The
	// first try is here so that NextIntN inlines (and a constant bound
	// divides by multiplication); retries are rare.
	if w := v % bound; v-w+m >= 0 {
		return w
	}
	return r.nextIntNRetry(bound)
}

// nextIntNRetry continues NextIntN's rejection loop with fresh draws.
func (r *Random) nextIntNRetry(bound int32) int32 {
	m := bound - 1
	for {
		u := r.Next(31)
		if w := u % bound; u-w+m >= 0 {
			return w
		}
	}
}

// NextLong returns java.util.Random.nextLong(): two 32-bit draws, the second
// added sign-extended (so not every int64 is reachable, as in Java).
func (r *Random) NextLong() int64 {
	hi := int64(r.Next(32))
	lo := int64(r.Next(32))
	return hi<<32 + lo
}

// NextDouble returns java.util.Random.nextDouble(): 53 random bits (26 + 27
// from two draws) scaled into [0, 1).
func (r *Random) NextDouble() float64 {
	hi := int64(r.Next(26))
	lo := int64(r.Next(27))
	return float64(hi<<27+lo) * (1.0 / (1 << 53))
}

// javaRound is Java's Math.round(double): floor(x + 1/2) computed exactly
// (no rounding error in the addition), 0 for NaN, saturating at the int64
// range. It is a transcription of the JDK 17 bit-level implementation.
func javaRound(x float64) int64 {
	const (
		significandWidth = 53
		expBias          = 1023
		expBitMask       = 0x7FF0000000000000
		signifBitMask    = 0x000FFFFFFFFFFFFF
	)
	bits := int64(math.Float64bits(x))
	biasedExp := (bits & expBitMask) >> (significandWidth - 1)
	shift := (significandWidth - 2 + expBias) - biasedExp
	if shift&-64 == 0 { // 0 <= shift < 64: 2^-64 <= ulp(x) < 1
		r := (bits & signifBitMask) | (signifBitMask + 1)
		if bits < 0 {
			r = -r
		}
		return ((r >> shift) + 1) >> 1
	}
	// |x| < 2^-11, or x is an integer, an infinity or NaN: Java's (long) x.
	switch {
	case math.IsNaN(x):
		return 0
	case x >= math.MaxInt64:
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	return int64(x)
}
