package nats_test

import (
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/connector/nats"
)

// "A restart must not lose accepted data, repeat already-visible output, or
// combine state from different points in the stream": nor may decoding
// combine distinct keys. JSON and JSONWithTime read invalid UTF-8 and lone
// surrogate escapes as U+FFFD (encoding/json), so "a\xff", "a\xfe" and
// "a\ud800" were the key "a\ufffd" (#12 item 7). Now such a payload is a
// decode error, which the source hands to its on_error policy.
func TestHostileJSONRefusesInvalidText(t *testing.T) {
	type event struct{ Key string }
	for name, dec := range map[string]func(nats.Message) (event, int64, error){
		"JSON": nats.JSON[event], "JSONWithTime": nats.JSONWithTime[event]("ts"),
	} {
		if v, _, err := dec(nats.Message{Data: []byte(`{"Key":"a\ufffd","ts":1}`)}); err != nil || v.Key != "a\ufffd" {
			t.Fatalf("%s: valid text: %v %v", name, v, err)
		}
		for _, in := range []string{"{\"Key\":\"a\xff\",\"ts\":1}", "{\"Key\":\"a\xfe\",\"ts\":1}", `{"Key":"a\ud800","ts":1}`} {
			v, _, err := dec(nats.Message{Data: []byte(in)})
			if err == nil || !strings.Contains(err.Error(), "encoding/json would read U+FFFD") {
				t.Errorf("%s %q: %+v, %v; want an error", name, in, v, err)
			}
		}
	}
}
