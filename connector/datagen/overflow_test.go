package datagen

import (
	"strings"
	"testing"
	"time"
)

// Event times are int64 Unix nanoseconds: a configuration whose records
// would pass the year 2262 must be refused, not wrap to 1677.
func TestEventTimeOverflowRejected(t *testing.T) {
	for _, c := range []Config{
		{Count: 1 << 40, EventInterval: time.Hour},
		{Count: 10, StartTime: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Count: 10, StartTime: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := Events(c); err == nil || !strings.Contains(err.Error(), "event time") {
			t.Errorf("Events(%+v) = %v; want an event time range error", c, err)
		}
	}
	if _, err := Events(Config{Count: 1000, EventInterval: time.Hour}); err != nil {
		t.Errorf("a representable configuration was refused: %v", err)
	}
}
