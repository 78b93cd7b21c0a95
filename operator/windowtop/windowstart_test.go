package windowtop

import (
	"math"
	"testing"
	"time"
)

// windowStart saturates at the earliest time for the times in the first,
// partial window of representable time (from 1677-09-21T00:12:43.145224192Z,
// math.MinInt64 ns, to the first multiple of size), as the window operator
// does (operator/window.floorDiv), instead of wrapping to 2262.
func TestWindowStartEarliestTimes(t *testing.T) {
	size := int64(time.Second)
	for _, tt := range []int64{math.MinInt64 + 1, math.MinInt64 + 100_000_000} {
		s := windowStart(tt, size)
		if s > tt || tt-s >= size && s != math.MinInt64 {
			t.Errorf("windowStart(%d, 1s) = %d (%s): after the time itself", tt, s, time.Unix(0, s).UTC())
		}
	}
}
