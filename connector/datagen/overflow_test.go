package datagen

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/runtime"
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

// A start before 1970 (negative Unix nanoseconds) is as representable as any
// other: it is accepted, bounded or not, and its records carry their times.
// (MaxInt64 - start overflowed for it, which refused the bounded case as
// "after 2262" and failed every read of the unbounded one.)
func TestStartBefore1970(t *testing.T) {
	start := time.Date(1960, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, count := range []int64{10, 0} {
		src, err := Events(Config{Count: count, StartTime: start, EventInterval: time.Second})
		if err != nil {
			t.Fatalf("Events(start 1960, count %d) = %v, want it accepted", count, err)
		}
		var got []int64
		out := outputFunc(func(b []int64) { got = append(got, b...) })
		st := src.NewSubtask()
		if err := st.Open(&runtime.Context{Parallelism: 1}, runtime.EmitTo[Event](out)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Read(); err != nil {
			t.Fatalf("Read with start 1960, count %d: %v", count, err)
		}
		if len(got) == 0 || got[0] != start.UnixNano() || got[1] != start.Add(time.Second).UnixNano() {
			t.Fatalf("count %d: event times %v…, want %d, %d, …", count, got[:min(len(got), 2)], start.UnixNano(), start.Add(time.Second).UnixNano())
		}
	}
	if got, want := maxRecordID(math.MinInt64, 1), int64(math.MaxInt64); got != want {
		t.Errorf("maxRecordID(MinInt64, 1) = %d, want %d (capped)", got, want)
	}
}

// outputFunc is a runtime.Output that hands each batch's event times to f.
type outputFunc func([]int64)

func (f outputFunc) Emit(r runtime.Records) error {
	b, ok := r.(runtime.Batch[Event])
	if !ok {
		return fmt.Errorf("unexpected batch %T", r)
	}
	times := make([]int64, len(b))
	for i, rec := range b {
		times[i] = rec.Time
	}
	f(times)
	return nil
}
