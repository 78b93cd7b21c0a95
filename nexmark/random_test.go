package nexmark_test

import (
	"math"
	"testing"

	"github.com/ingest-engine/ingest/nexmark"
)

// The expected values below were printed by java.util.Random on OpenJDK
// 17.0.15 (a throwaway program, not kept).

func TestRandomNextInt(t *testing.T) {
	r := nexmark.NewRandom(42)
	for i, want := range []int32{-1170105035, 234785527, -1360544799} {
		if got := r.NextInt(); got != want {
			t.Errorf("new Random(42): nextInt() #%d = %d, want %d", i, got, want)
		}
	}
}

func TestRandomNextIntN(t *testing.T) {
	r := nexmark.NewRandom(42)
	for i, want := range []int32{0, 3, 8, 4, 0, 5, 5, 8, 9, 3} {
		if got := r.NextIntN(10); got != want {
			t.Errorf("new Random(42): nextInt(10) #%d = %d, want %d", i, got, want)
		}
	}
	// Power-of-two bound, then a bound just above 2^30, which rejects about
	// half of all draws.
	r = nexmark.NewRandom(-1)
	for _, c := range []struct{ bound, want int32 }{{16, 4}, {16, 7}, {1<<30 + 1, 26349579}, {1<<30 + 1, 894294477}} {
		if got := r.NextIntN(c.bound); got != c.want {
			t.Errorf("new Random(-1): nextInt(%d) = %d, want %d", c.bound, got, c.want)
		}
	}
	r = nexmark.NewRandom(math.MinInt64)
	for _, c := range []struct{ bound, want int32 }{{1000000007, 569741353}, {math.MaxInt32, 1785505948}, {1, 0}} {
		if got := r.NextIntN(c.bound); got != c.want {
			t.Errorf("new Random(Long.MIN_VALUE): nextInt(%d) = %d, want %d", c.bound, got, c.want)
		}
	}
	// Java throws; the port returns 0 and does not draw.
	r = nexmark.NewRandom(42)
	if got := r.NextIntN(0); got != 0 {
		t.Errorf("NextIntN(0) = %d, want 0", got)
	}
	if got := r.NextIntN(-5); got != 0 {
		t.Errorf("NextIntN(-5) = %d, want 0", got)
	}
	if got := r.NextInt(); got != -1170105035 {
		t.Errorf("NextIntN(<= 0) drew: the next nextInt() is %d, want %d", got, -1170105035)
	}
}

func TestRandomNextLongAndDouble(t *testing.T) {
	r := nexmark.NewRandom(42)
	for i, want := range []int64{-5025562857975149833, -5843495416241995736} {
		if got := r.NextLong(); got != want {
			t.Errorf("new Random(42): nextLong() #%d = %d, want %d", i, got, want)
		}
	}
	r = nexmark.NewRandom(42)
	for i, want := range []float64{0.7275636800328681, 0.6832234717598454} {
		if got := r.NextDouble(); got != want {
			t.Errorf("new Random(42): nextDouble() #%d = %v, want %v", i, got, want)
		}
	}
	r = nexmark.NewRandom(0)
	if got := r.NextInt(); got != -1155484576 {
		t.Errorf("new Random(0): nextInt() = %d, want -1155484576", got)
	}
	if got := r.NextLong(); got != -3109364765729502342 {
		t.Errorf("new Random(0) after nextInt(): nextLong() = %d, want -3109364765729502342", got)
	}
	if got := r.NextDouble(); got != 0.6063452159973596 {
		t.Errorf("new Random(0) after nextInt(), nextLong(): nextDouble() = %v, want 0.6063452159973596", got)
	}
	r.SetSeed(42)
	if got := r.NextInt(); got != -1170105035 {
		t.Errorf("setSeed(42): nextInt() = %d, want -1170105035", got)
	}
}

// TestRandomChecksum folds 2,000 seeds x 50 rounds of nextInt(bound) over
// bounds that take every path (1, powers of two, small odd bounds, bounds
// above 2^30 that reject often, Integer.MAX_VALUE), nextInt(), nextLong()
// and nextDouble() into an FNV-style hash, as the Java program did.
func TestRandomChecksum(t *testing.T) {
	bounds := []int32{1, 2, 3, 4, 5, 7, 10, 13, 26, 100, 1000, 1024, 10000, 65536, 1<<30 + 1, 1<<30 + 12345, math.MaxInt32, 1 << 30, 1500000001}
	const golden = 0x9E3779B97F4A7C15
	h := int64(1469598103934665603)
	const prime = 1099511628211
	for seed := int64(-1000); seed < 1000; seed++ {
		r := nexmark.NewRandom(int64(uint64(seed) * golden))
		for range 50 {
			for _, b := range bounds {
				h = (h ^ int64(r.NextIntN(b))) * prime
			}
			h = (h ^ int64(r.NextInt())) * prime
			h = (h ^ r.NextLong()) * prime
			h = (h ^ int64(math.Float64bits(r.NextDouble()))) * prime
		}
	}
	if want := int64(-8717017600759733586); h != want {
		t.Errorf("checksum = %d, want %d (Java)", h, want)
	}
}
