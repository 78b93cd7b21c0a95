package stream

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// This file holds the hostile cases of the sources' bad-record policy.

// An event time more than max_future ahead of the wall clock is a bad
// record: one dated 2200 must never reach a source's watermark, where it
// would make every later record late. The bound is exact (now + max_future
// is accepted, one nanosecond more is not), follows the clock as it moves
// on (read again before a record is refused) and when it is set back (read
// again at every Flush), and is the default (1 h) without a policy;
// NoMaxFuture disables it.
//
// Defends "A restart must not lose accepted data": an outlier must not
// turn the rest of the input into late records (#12 item 4a).
func TestHostileFutureEventTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := &runtime.Context{Task: checkpoint.TaskID{Operator: "src"}, Parallelism: 1, Clock: func() time.Time { return now }}
	open := func(p BadRecordPolicy) *BadRecords {
		t.Helper()
		b, err := BadRecordSetup{Policy: p}.Open(ctx, BadRecordTally{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	at := func(d time.Duration) int64 { return now.Add(d).UnixNano() }

	b := open(BadRecordPolicy{})
	for _, ok := range []int64{at(-100 * 365 * 24 * time.Hour), at(0), at(time.Hour), math.MinInt64} {
		if err := b.CheckEventTime(ok); err != nil {
			t.Errorf("CheckEventTime(%v): %v, want nil", time.Unix(0, ok).UTC(), err)
		}
	}
	y2200 := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, bad := range []int64{at(time.Hour) + 1, y2200, math.MaxInt64} {
		err := b.CheckEventTime(bad)
		if !errors.Is(err, ErrFutureEventTime) || !strings.Contains(err.Error(), "max_future 1h0m0s ahead of the wall clock (2026-03-01T12:00:00Z)") ||
			!strings.Contains(err.Error(), time.Unix(0, bad).UTC().Format(time.RFC3339Nano)) {
			t.Errorf("CheckEventTime(%v): %v, want ErrFutureEventTime naming the time, max_future and the clock", time.Unix(0, bad).UTC(), err)
		}
	}
	if err := b.CheckEventTime(y2200); err == nil || !strings.Contains(err.Error(), "2200-01-01T00:00:00Z") {
		t.Errorf("2200: %v", err)
	}

	// The clock moves on: a time that was too far ahead is accepted.
	edge := at(time.Hour) + 1
	now = now.Add(time.Minute)
	if err := b.CheckEventTime(edge); err != nil {
		t.Errorf("a minute later, CheckEventTime(now-1m+1h+1ns): %v", err)
	}
	// The clock is set back: the next Flush follows it.
	now = now.Add(-2 * time.Hour)
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckEventTime(edge); !errors.Is(err, ErrFutureEventTime) {
		t.Errorf("after the clock went back 2 h: CheckEventTime: %v, want ErrFutureEventTime", err)
	}

	if err := open(BadRecordPolicy{MaxFuture: 5 * time.Minute}).CheckEventTime(at(6 * time.Minute)); err == nil || !strings.Contains(err.Error(), "max_future 5m0s") {
		t.Errorf("max_future 5m, 6 min ahead: %v", err)
	}
	if err := open(BadRecordPolicy{MaxFuture: NoMaxFuture}).CheckEventTime(math.MaxInt64); err != nil {
		t.Errorf("NoMaxFuture: %v", err)
	}
	var none *BadRecords
	if err := none.CheckEventTime(time.Now().Add(2 * time.Hour).UnixNano()); !errors.Is(err, ErrFutureEventTime) {
		t.Errorf("nil handler, 2 h ahead: %v, want ErrFutureEventTime", err)
	}
	if err := none.CheckEventTime(time.Now().UnixNano()); err != nil {
		t.Errorf("nil handler, now: %v", err)
	}
}

// A far-future record goes through the policy like any other bad record:
// skip counts it, dead_letter keeps it; the plan says when the bound is
// not the default.
func TestHostileFutureEventTimePolicy(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := subtaskCtx(0, nil, nil)
	ctx.Clock = func() time.Time { return now }
	b, err := BadRecordSetup{Policy: BadRecordPolicy{OnError: OnErrorSkip}}.Open(ctx, BadRecordTally{})
	if err != nil {
		t.Fatal(err)
	}
	cause := b.CheckEventTime(now.Add(2 * time.Hour).UnixNano())
	if err := b.Reject(BadRecord{Partition: "p", Offset: 7, Err: cause}, cause); err != nil || b.Tally() != (BadRecordTally{Skipped: 1}) {
		t.Fatalf("skip: %v, tally %+v", err, b.Tally())
	}

	for f, want := range map[time.Duration]string{NoMaxFuture: ", max_future off", 10 * time.Minute: ", max_future 10m0s", 0: "", DefaultMaxFuture: ""} {
		p := New("p")
		var got []BadRecordSetup
		s := From[int](p, "src", policySource{supports: true, got: &got}, Parallelism(1))
		OnBadRecords(s, BadRecordPolicy{MaxFuture: f})
		d := s.Node().Describe
		if want == "" && strings.Contains(d, "max_future") || want != "" && !strings.HasSuffix(d, want) {
			t.Errorf("max_future %v: describe %q, want suffix %q", f, d, want)
		}
	}
}
