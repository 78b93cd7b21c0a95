package nats

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/ingest-engine/ingest/eventtime"
	"github.com/ingest-engine/ingest/runtime"
)

// FuzzDecodePosition feeds decodePosition, which reads the source's replay
// position back from a checkpoint, arbitrary bytes, for a source reading
// the whole stream and one reading a subject of it. The seed corpus,
// testdata/fuzz/FuzzDecodePosition, holds positions of a real run (one of
// each). It never panics; garbage is an error, and a position of another
// stream or subject wraps runtime.ErrIncompatible (the job stops instead of
// restarting into the same refusal); an accepted position belongs to the
// source, starts at a sequence >= 1, is at most one past its end (if it
// has one), and encodes to bytes that decode to the same position.
func FuzzDecodePosition(f *testing.F) {
	maxTime := int64(1767323074000000000)
	for _, p := range []position{
		{Stream: "FUZZSEED", Next: 1},
		{Stream: "FUZZSEED", Subject: "fuzzseed.a", Next: 31, End: 30, HasEnd: true, MaxTime: &maxTime},
		{Stream: "FUZZSEED", Next: 7, Horizon: 400, Holes: 3, Gaps: &GapTally{Ranges: 2, Sequences: 12}},
	} {
		b, err := p.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfgs := []*SourceConfig{{Stream: "FUZZSEED"}, {Stream: "FUZZSEED", Subject: "fuzzseed.a"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw position
		parsed := json.Unmarshal(data, &raw) == nil
		for _, cfg := range cfgs {
			p, err := decodePosition(data, cfg)
			if err != nil {
				if parsed && (raw.Stream != cfg.Stream || raw.Subject != cfg.Subject) && !errors.Is(err, runtime.ErrIncompatible) {
					t.Fatalf("the position of stream %q subject %q, restored for stream %q subject %q: %v does not wrap runtime.ErrIncompatible",
						raw.Stream, raw.Subject, cfg.Stream, cfg.Subject, err)
				}
				continue
			}
			if !parsed || p.Stream != cfg.Stream || p.Subject != cfg.Subject || p.Next < 1 ||
				(p.HasEnd && p.Next-1 > p.End) || (!p.HasEnd && p.End != 0) ||
				(p.Horizon != 0 && (p.Horizon < p.Next || p.HasEnd && p.Horizon > p.End)) ||
				(p.Holes != 0 && (p.Horizon == 0 || p.Holes > p.Horizon-p.Next+1)) ||
				(p.Gaps != nil && (p.Gaps.Ranges < 0 || p.Gaps.Sequences < p.Gaps.Ranges)) {
				t.Fatalf("%q accepted for stream %q subject %q as %+v", data, cfg.Stream, cfg.Subject, p)
			}
			b, err := p.encode()
			if err != nil {
				t.Fatalf("a decoded position does not encode: %v", err)
			}
			p2, err := decodePosition(b, cfg)
			if err != nil || !reflect.DeepEqual(p, p2) {
				t.Fatalf("position %q decodes to %+v, which encodes to %s and decodes to %+v, %v", data, p, b, p2, err)
			}
		}
	})
}

// FuzzFieldTime feeds FieldTime, the event time of a JSON message, arbitrary
// payloads and field names; the seed corpus, testdata/fuzz/FuzzFieldTime,
// holds real records and their fields. It never panics, and agrees with
// encoding/json: it succeeds exactly on a JSON object whose member field
// (the last one, if repeated) eventtime.JSON accepts, with its value
// (eventtime's FuzzJSON checks that value against time.Parse and exact
// arithmetic).
func FuzzFieldTime(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, field string) {
		ts, err := FieldTime(data, field)
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil || members == nil {
			if err == nil {
				t.Fatalf("FieldTime(%q, %q) = %d from a payload that is not a JSON object", data, field, ts)
			}
			return
		}
		if !utf8.Valid(data) || !utf8.ValidString(field) {
			return // encoding/json replaces invalid UTF-8 in keys; FieldTime compares bytes
		}
		raw, ok := members[field]
		if !ok {
			if err == nil {
				t.Fatalf("FieldTime(%q, %q) = %d, but the object has no such member", data, field, ts)
			}
			return
		}
		want, werr := eventtime.JSON(raw)
		if (err == nil) != (werr == nil) || ts != want {
			t.Fatalf("FieldTime(%q, %q) = %d, %v; eventtime.JSON(%s) = %d, %v", data, field, ts, err, raw, want, werr)
		}
	})
}

// A position past its end, or with an end but no has_end, or a horizon
// outside next … end, or more holes than fit below it, is refused: the
// reader never writes one, so it is damaged.
func TestDecodePositionChecksEnd(t *testing.T) {
	cfg := &SourceConfig{Stream: "S"}
	for _, tc := range []struct {
		inline string
		ok     bool
	}{
		{`{"stream":"S","next":31,"end":30,"has_end":true}`, true},
		{`{"stream":"S","next":1,"has_end":true}`, true}, // the stream was empty at the first start
		{`{"stream":"S","next":32,"end":30,"has_end":true}`, false},
		{`{"stream":"S","next":5,"end":30}`, false},
		{`{"stream":"S","next":5,"horizon":9,"holes":5}`, true},
		{`{"stream":"S","next":5,"horizon":9,"holes":6}`, false},
		{`{"stream":"S","next":5,"holes":1}`, false},
		{`{"stream":"S","next":5,"horizon":4}`, false},
		{`{"stream":"S","next":5,"end":30,"has_end":true,"horizon":31}`, false},
		{`{"stream":"S","next":5,"gaps":{"ranges":2,"sequences":1}}`, false},
	} {
		_, err := decodePosition([]byte(tc.inline), cfg)
		if (err == nil) != tc.ok {
			t.Errorf("decodePosition(%s) = %v, want ok=%v", tc.inline, err, tc.ok)
		}
	}
}
