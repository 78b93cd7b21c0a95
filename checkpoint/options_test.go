package checkpoint

import (
	"strings"
	"testing"
	"time"
)

// DESIGN §3 Settings: "interval, timeout, min pause between checkpoints, max
// concurrent checkpoints (default 1), tolerable consecutive failures, retained
// checkpoints, mode". Each Options field documents "The default value is …".
func TestOptions_DocumentedDefaults(t *testing.T) {
	want := Options{
		Interval:          10 * time.Second,
		Timeout:           10 * time.Minute,
		MinPause:          0,
		MaxConcurrent:     1,
		TolerableFailures: 3,
		Retain:            1,
		StagingMaxAge:     10 * time.Minute,
		Mode:              ExactlyOnce,
	}
	if got := DefaultOptions(); got != want {
		t.Fatalf("DefaultOptions() = %+v, want %+v", got, want)
	}
	if err := want.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

// Options.Validate: "rejects options that cannot work, with a sentence
// naming the field".
func TestOptions_ValidateRejectsWithFieldName(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Options)
	}{
		{"interval", func(o *Options) { o.Interval = -time.Second }},
		{"timeout", func(o *Options) { o.Timeout = 0 }},
		{"min_pause", func(o *Options) { o.MinPause = -1 }},
		{"max_concurrent", func(o *Options) { o.MaxConcurrent = 0 }},
		{"tolerable_failures", func(o *Options) { o.TolerableFailures = -1 }},
		{"retain", func(o *Options) { o.Retain = 0 }},
		{"mode", func(o *Options) { o.Mode = Mode(7) }},
	} {
		o := DefaultOptions()
		tc.edit(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Validate() = %v, want an error naming %s", tc.field, err, tc.field)
		}
	}
	o := DefaultOptions()
	o.Interval = 0 // disables periodic checkpoints: valid
	if err := o.Validate(); err != nil {
		t.Errorf("interval 0 rejected: %v", err)
	}
}

// Mode is "written in pipeline files": String and ParseMode round-trip.
func TestMode_ParseRoundTrip(t *testing.T) {
	for _, m := range []Mode{ExactlyOnce, AtLeastOnce} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := ParseMode("exactly_once"); err == nil {
		t.Error(`ParseMode("exactly_once") succeeded`)
	}
}
