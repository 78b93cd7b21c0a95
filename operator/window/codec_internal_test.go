package window

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/state"
)

// The pane and session codecs round-trip every value, extreme times
// included (their deltas wrap around), reject every truncation, and refuse
// sets that break their ordering invariants.
func TestStateCodecsRoundTrip(t *testing.T) {
	const lo, hi = math.MinInt64, math.MaxInt64
	pc := paneSetCodec[int64]{acc: state.Int64Codec{}, size: 10 * time.Second, slide: 2 * time.Second, pane: 2 * time.Second}
	for _, set := range []*paneSet[int64]{
		{panes: []pane[int64]{{start: 0, acc: 1}}, next: 0, timer: 9},
		{panes: []pane[int64]{{start: lo, acc: -5}, {start: -1, acc: 0}, {start: hi, acc: hi}}, next: hi, timer: lo},
		{panes: []pane[int64]{{start: 1_767_225_600_000_000_000, acc: 3}, {start: 1_767_225_602_000_000_000, acc: 4}}, next: 1_767_225_592_000_000_000, timer: 1_767_225_601_999_999_999},
	} {
		enc := pc.Append(nil, set)
		dec, n, err := pc.Decode(append(enc, 0xff))
		if err != nil || n != len(enc) || !reflect.DeepEqual(dec.panes, set.panes) || dec.next != set.next || dec.timer != set.timer || dec.epoch != 0 {
			t.Fatalf("panes %+v: decoded %+v (%v, %d of %d bytes)", set, dec, err, n, len(enc))
		}
		for k := range len(enc) {
			if _, _, err := pc.Decode(enc[:k]); err == nil {
				t.Fatalf("panes: decoding %d of %d bytes did not fail", k, len(enc))
			}
		}
	}
	bad := pc.Append(nil, &paneSet[int64]{panes: []pane[int64]{{start: 5}, {start: 5}}})
	if _, _, err := pc.Decode(bad); err == nil {
		t.Error("panes out of order decoded")
	}

	sc := sessionsCodec[int64]{acc: state.Int64Codec{}, gap: time.Second}
	for _, set := range []*sessionSet[int64]{
		{s: []session[int64]{{start: 0, end: 10, timer: 9, acc: 1}}},
		{s: []session[int64]{{start: lo, end: lo + 5, timer: hi, fired: true, acc: 2}, {start: 0, end: hi, timer: hi - 1, acc: 3}}},
	} {
		enc := sc.Append(nil, set)
		dec, n, err := sc.Decode(append(enc, 0xff))
		if err != nil || n != len(enc) || !reflect.DeepEqual(dec.s, set.s) || dec.epoch != 0 {
			t.Fatalf("sessions %+v: decoded %+v (%v, %d of %d bytes)", set, dec, err, n, len(enc))
		}
		for k := range len(enc) {
			if _, _, err := sc.Decode(enc[:k]); err == nil {
				t.Fatalf("sessions: decoding %d of %d bytes did not fail", k, len(enc))
			}
		}
	}
	for _, s := range [][]session[int64]{
		{{start: 0, end: 10}, {start: 10, end: 20}}, // touching: they would have merged
		{{start: 10, end: 5}},                       // inverted
	} {
		if _, _, err := sc.Decode(sc.Append(nil, &sessionSet[int64]{s: s})); err == nil {
			t.Errorf("sessions %+v decoded", s)
		}
	}
	if _, _, err := sc.Decode([]byte{0}); err == nil {
		t.Error("an empty session set decoded")
	}
}
