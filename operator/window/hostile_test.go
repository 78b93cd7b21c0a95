package window_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ingest-engine/ingest/runtime"
)

// TestHostileSessionNotFiredBeforeTouchingRecordCan: a session [s, e) is
// merged with a record at exactly e (sessions that touch merge), and such a
// record is on time while the watermark is below e: with a watermark of
// maxSeen - maxDelay - 1ns it is exactly maxDelay behind. So the session may
// fire only once the watermark reaches e, not e-1; firing at e-1 split one
// session into two results (or, with an allowed lateness, emitted the
// session and then the merged one again). Its result then carries event
// time e, after every watermark forwarded before it, so it is on time
// downstream too.
//
// Defends "records before the cut are reflected in the saved state" at its
// root: output must be a function of the accepted records, not of the order
// they arrived in within the allowed delay — #12 item 14.
func TestHostileSessionNotFiredBeforeTouchingRecordCan(t *testing.T) {
	const maxDelay = 10
	wm := func(maxSeen int64) int64 { return maxSeen - maxDelay - 1 }
	for _, lateness := range []int64{0, 100} {
		t.Run(fmt.Sprintf("lateness=%d", lateness), func(t *testing.T) {
			h := open[ev, res](t, spec{kind: "session", gap: 30, lateness: lateness}.newOp(t), fullRange(), nil)
			var got []runtime.Record[res]
			h.process(t, rec("k", 1, 0), rec("k", 2, 40)) // [0,30) and [40,70)
			got = append(got, h.watermark(t, wm(40))...)  // 29: [0,30)'s last instant
			h.process(t, rec("k", 4, 30))                 // exactly maxDelay behind 40: touches [0,30), overlaps [40,70)
			got = append(got, h.watermark(t, wm(80))...)  // 69: [0,70)'s last instant
			h.process(t, rec("k", 8, 70))                 // exactly maxDelay behind 80: touches [0,70)
			if len(got) != 0 {
				t.Fatalf("fired %v while an on-time record could still touch the session", outs(got))
			}
			got = append(got, h.watermark(t, wm(100))...) // 89: [0,100) is open until 100
			if len(got) != 0 {
				t.Fatalf("fired %v before the watermark reached the session's end", outs(got))
			}
			fired := h.watermark(t, 100)
			for _, r := range fired {
				if r.Time <= wm(100) {
					t.Errorf("result %v carries event time %d, at or behind the watermark %d forwarded before it: late downstream", r.Value, r.Time, wm(100))
				}
			}
			got = append(got, fired...)
			got = append(got, h.watermark(t, runtime.MaxWatermark)...)
			want := []out{{Key: "k", Start: 0, End: 100, N: 4, Sum: 15, Time: 100}}
			if g := outs(got); !slices.Equal(g, want) {
				t.Fatalf("results %v, want the one session %v", g, want)
			}
		})
	}
}
