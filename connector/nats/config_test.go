package nats_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

func TestConfigDefaults(t *testing.T) {
	src, err := nats.NewSource(nats.SourceConfig{Stream: "ORDERS"}, nats.JSON[event])
	if err != nil {
		t.Fatal(err)
	}
	c := src.Config()
	if c.URL != "nats://127.0.0.1:4222" || c.BatchSize != 1000 || c.PollInterval != 5*time.Millisecond ||
		c.RequestTimeout != 5*time.Second || c.MaxRetries != 10 || c.RetryBackoff != 100*time.Millisecond ||
		c.MaxReconnects != 60 || c.ReconnectWait != time.Second || c.StopAt != nats.StopNever || c.Start.Policy != nats.StartFirst {
		t.Errorf("defaults: %+v", c)
	}
	if src.Descriptor().Capabilities.SourceGuarantee() != runtime.ExactlyOnce || src.Descriptor().Type != "nats" {
		t.Errorf("Guarantee %v, Type %q; want exactly-once, nats", src.Descriptor().Capabilities.SourceGuarantee(), src.Descriptor().Type)
	}
	if d := src.Describe(); !strings.Contains(d, "ORDERS") || !strings.Contains(d, "from first") {
		t.Errorf("Describe = %q", d)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  nats.SourceConfig
		want string
	}{
		{nats.SourceConfig{}, "stream is required"},
		{nats.SourceConfig{Stream: "a.b"}, "must not contain"},
		{nats.SourceConfig{Stream: "S", Subject: "a..b"}, "not a valid subject"},
		{nats.SourceConfig{Stream: "S", StopAt: "soon"}, "stop_at"},
		{nats.SourceConfig{Stream: "S", Start: nats.Start{Policy: nats.StartSequence}}, "sequence 0"},
		{nats.SourceConfig{Stream: "S", Start: nats.Start{Policy: nats.StartTime}}, "start time"},
		{nats.SourceConfig{Stream: "S", BatchSize: -1}, "batch_size"},
		{nats.SourceConfig{Stream: "S", PollInterval: -time.Second}, "poll_interval"},
		{nats.SourceConfig{Stream: "S", MaxReconnects: -1}, "max_reconnects"},
		{nats.SourceConfig{Stream: "S", Watermark: watermark.Strategy{MaxDelay: -1}}, "max_delay"},
	} {
		_, err := nats.NewSource(tc.cfg, nats.JSON[event])
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "nats source: ") {
			t.Errorf("NewSource(%+v): %v, want an error about %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := nats.NewSource[event](nats.SourceConfig{Stream: "S"}, nil); err == nil {
		t.Error("NewSource with a nil decode function: no error")
	}
}

func TestParseStart(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	for in, want := range map[string]nats.Start{
		"":                              {},
		"first":                         {},
		"new":                           {Policy: nats.StartNew},
		"42":                            {Policy: nats.StartSequence, Sequence: 42},
		"2026-05-06T07:08:09.00000001Z": {Policy: nats.StartTime, Time: at},
	} {
		got, err := nats.ParseStart(in)
		if err != nil || got.Policy != want.Policy || got.Sequence != want.Sequence || !got.Time.Equal(want.Time) {
			t.Errorf("ParseStart(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := nats.ParseStart(got.String()); err != nil || back.Policy != got.Policy || back.Sequence != got.Sequence || !back.Time.Equal(got.Time) {
			t.Errorf("ParseStart(%q).String() = %q does not parse back: %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"0", "-3", "last", "2026-05-06"} {
		if _, err := nats.ParseStart(in); err == nil {
			t.Errorf("ParseStart(%q): no error", in)
		}
	}
}

// From adds the source with parallelism 1 whatever the pipeline's default,
// and reports an explicit other parallelism when the pipeline is planned.
func TestFromParallelism(t *testing.T) {
	src, err := nats.NewSource(nats.SourceConfig{Stream: "S"}, nats.JSON[event])
	if err != nil {
		t.Fatal(err)
	}
	p := stream.New("p", stream.DefaultParallelism(4))
	s := stream.From(p, "events", src)
	stream.To(s, "out", stream.Discard[event]())
	if n := s.Node().Parallelism; n != 1 {
		t.Errorf("source parallelism %d under default 4, want 1", n)
	}
	if _, err := p.Plan(); err != nil {
		t.Errorf("Plan: %v", err)
	}

	p = stream.New("p")
	stream.To(stream.From(p, "events", src, stream.Parallelism(3)), "out", stream.Discard[event]())
	if _, err := p.Plan(); err == nil || !strings.Contains(err.Error(), "parallelism 3") || !strings.Contains(err.Error(), "one ordered sequence") {
		t.Errorf("Plan with parallelism 3: %v", err)
	}
}
