package state

import (
	"fmt"
	"testing"
)

// Every key group maps to exactly the subtask whose range contains it, and the
// ranges of one operator's subtasks tile [0, maxP) in order.
func TestKeyGroupRangesTileAndAgreeWithSubtaskForKeyGroup(t *testing.T) {
	maxPs := []int{1, 2, 3, 7, 10, 64, 127, DefaultMaxParallelism, 129, 1000, 4096}
	for _, maxP := range maxPs {
		for p := 1; p <= maxP && p <= 300; p++ {
			next := 0
			for s := range p {
				r := KeyGroupRangeFor(maxP, p, s)
				if r.Start != next {
					t.Fatalf("maxP=%d p=%d subtask %d: range %v does not start where the previous ended (%d)", maxP, p, s, r, next)
				}
				if r.Len() == 0 {
					t.Fatalf("maxP=%d p=%d subtask %d: empty range %v", maxP, p, s, r)
				}
				for kg := r.Start; kg < r.End; kg++ {
					if got := SubtaskForKeyGroup(maxP, p, kg); got != s {
						t.Fatalf("maxP=%d p=%d: key group %d is in subtask %d's range %v but SubtaskForKeyGroup says %d", maxP, p, kg, s, r, got)
					}
				}
				next = r.End
			}
			if next != maxP {
				t.Fatalf("maxP=%d p=%d: ranges end at %d", maxP, p, next)
			}
		}
	}
}

// Reference values from Flink's KeyGroupRangeAssignment (inclusive ends there,
// exclusive here).
func TestKeyGroupRangeForMatchesFlink(t *testing.T) {
	for _, c := range []struct {
		maxP, p, s int
		want       KeyGroupRange
	}{
		{128, 1, 0, KeyGroupRange{0, 128}},
		{128, 3, 0, KeyGroupRange{0, 43}},
		{128, 3, 1, KeyGroupRange{43, 86}},
		{128, 3, 2, KeyGroupRange{86, 128}},
		{10, 4, 0, KeyGroupRange{0, 3}},
		{10, 4, 1, KeyGroupRange{3, 5}},
		{10, 4, 2, KeyGroupRange{5, 8}},
		{10, 4, 3, KeyGroupRange{8, 10}},
	} {
		if got := KeyGroupRangeFor(c.maxP, c.p, c.s); got != c.want {
			t.Errorf("KeyGroupRangeFor(%d, %d, %d) = %v, want %v", c.maxP, c.p, c.s, got, c.want)
		}
	}
}

func TestKeyGroupRangeMethods(t *testing.T) {
	r := KeyGroupRange{Start: 3, End: 6}
	if r.Len() != 3 || !r.Contains(3) || !r.Contains(5) || r.Contains(6) || r.Contains(2) {
		t.Fatalf("range %v: Len %d, Contains wrong", r, r.Len())
	}
	if (KeyGroupRange{Start: 5, End: 2}).Len() != 0 {
		t.Fatal("inverted range must have length 0")
	}
	if r.String() != "[3,6)" {
		t.Fatalf("String() = %q", r.String())
	}
}

func TestKeyGroupRangeForPanicsOnInvalidPlan(t *testing.T) {
	for _, c := range [][3]int{{0, 1, 0}, {128, 0, 0}, {128, 129, 0}, {128, 2, 2}, {128, 2, -1}, {UpperBoundMaxParallelism + 1, 1, 0}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("KeyGroupRangeFor%v did not panic", c)
				}
			}()
			KeyGroupRangeFor(c[0], c[1], c[2])
		}()
	}
}

// Sequential integer keys spread evenly over key groups (the fmix64 step).
func TestKeyGroupForSpreadsKeys(t *testing.T) {
	const maxP, n = DefaultMaxParallelism, 128_000
	counts := make([]int, maxP)
	for i := range int64(n) {
		kg := KeyGroupFor(HashKey(i), maxP)
		if kg < 0 || kg >= maxP {
			t.Fatalf("key group %d out of range", kg)
		}
		counts[kg]++
	}
	for kg, c := range counts {
		if c < n/maxP*8/10 || c > n/maxP*12/10 {
			t.Errorf("key group %d holds %d of %d keys, want about %d", kg, c, n, n/maxP)
		}
	}
	for i := range 1000 {
		s := fmt.Sprintf("user-%d", i)
		if kg := KeyGroupFor(HashKey(s), 7); kg < 0 || kg >= 7 {
			t.Fatalf("key group %d out of range", kg)
		}
	}
}
