package nats_test

import (
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/ingest-engine/ingest/connector/nats"
)

func TestFieldTime(t *testing.T) {
	want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, in := range []string{
		`{"ts":"2026-01-01T00:00:00Z"}`,
		` { "a" : 1 , "ts" : "2026-01-01T00:00:00Z" } `,
		`{"nested":{"ts":"1999-01-01T00:00:00Z"},"list":[{"ts":1},"]}",[]],"s":"\"ts\":1,}","ts":1767225600000}`,
		`{"t\u0073":"2026-01-01T00:00:00Z"}`,
		`{"x":null,"y":true,"z":-1.5e3,"ts":"2026-01-01T00:00:00Z","ts2":3}`,
	} {
		got, err := nats.FieldTime([]byte(in), "ts")
		if err != nil || got != want {
			t.Errorf("FieldTime(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		`{"a":1}`:             `field "ts" is missing`,
		`{"nested":{"ts":1}}`: `field "ts" is missing`,
		`[1,2]`:               "not a JSON object",
		`{"ts":`:              "not valid JSON",
		`{"ts":"noon"}`:       `field "ts"`,
	} {
		if _, err := nats.FieldTime([]byte(in), "ts"); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("FieldTime(%s): %v, want an error containing %q", in, err, msg)
		}
	}
}

func TestDecodeHelpers(t *testing.T) {
	stored := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	m := nats.Message{Stream: "S", Subject: "s.a", Sequence: 3, Timestamp: stored, Header: natsgo.Header{"k": {"v"}},
		Data: []byte(`{"id":1,"key":2,"value":3,"ts":"2026-01-01T00:00:00.001Z"}`)}
	if got := nats.Timestamp(m); got != stored.UnixNano() {
		t.Errorf("Timestamp = %d, want %d", got, stored.UnixNano())
	}
	v, ts, err := nats.JSON[event](m)
	if err != nil || v.ID != 1 || v.Key != 2 || v.Value != 3 || ts != stored.UnixNano() {
		t.Errorf("JSON = %+v, %d, %v; want the value with the store time", v, ts, err)
	}
	v, ts, err = nats.JSONWithTime[event]("ts")(m)
	if err != nil || v.ID != 1 || ts != eventTime(1) {
		t.Errorf("JSONWithTime = %+v, %d, %v; want the value at %d", v, ts, err, eventTime(1))
	}
	for _, data := range []string{`{"id":"x","ts":"2026-01-01T00:00:00Z"}`, `{"id":1}`, `not json`} {
		m.Data = []byte(data)
		if _, _, err := nats.JSONWithTime[event]("ts")(m); err == nil {
			t.Errorf("JSONWithTime(%s): no error", data)
		}
	}
}

// BenchmarkFieldTime is the per-message cost of the JSON time field.
func BenchmarkFieldTime(b *testing.B) {
	data := []byte(`{"id":123456,"key":56,"value":456,"tags":["a","b"],"ts":"2026-01-01T00:02:03.456Z"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nats.FieldTime(data, "ts"); err != nil {
			b.Fatal(err)
		}
	}
}
