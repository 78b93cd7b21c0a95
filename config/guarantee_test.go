package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/config"
	"github.com/ingest-engine/ingest/runtime"
)

// guaranteeYAML is a pipeline with the checkpoint block, transforms and
// sinks given; its source is datagen (replayable).
func guaranteeYAML(checkpoint, transforms, sinks string) string {
	src := "pipeline: p\n"
	if checkpoint != "" {
		src += "checkpoint:\n" + checkpoint
	}
	src += "sources:\n  events:\n    type: datagen\n    count: 10\n"
	if transforms != "" {
		src += "transforms:\n" + transforms
	}
	return src + "sinks:\n" + sinks
}

const (
	fileSink   = "  out:\n    type: file\n    input: events\n    path: out\n"
	stdoutSink = "  log:\n    type: stdout\n    input: events\n"
	nowMap     = "  stamped:\n    type: map\n    input: events\n    select:\n      id: id\n      ts: now()\n      again: now()\n"
	stampedOut = "  out:\n    type: file\n    input: stamped\n    path: out\n"
)

// The guarantee's level and one line a reason, naming the node and its
// type, as validate and run print them.
func TestDelivery(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{"datagen to file", guaranteeYAML("", "", fileSink), []string{"exactly-once"}},
		{"stdout sink", guaranteeYAML("", "", stdoutSink), []string{"at-least-once",
			"at-least-once: sink 'log' (stdout) is not transactional: output since the last checkpoint is written again after a recovery"}},
		{"file and stdout sinks", guaranteeYAML("", "", fileSink+stdoutSink), []string{"at-least-once",
			"at-least-once: sink 'log' (stdout) is not transactional: output since the last checkpoint is written again after a recovery"}},
		{"at-least-once mode", guaranteeYAML("  mode: at-least-once\n", "", fileSink), []string{"at-least-once",
			"at-least-once: checkpoint mode is at-least-once: barriers are not aligned, so after a recovery state may count records twice"}},
		// Two calls of now() in one transform make one caveat; it does not
		// lower the level.
		{"now()", guaranteeYAML("", nowMap, stampedOut), []string{"exactly-once",
			"exactly-once, but expression in 'stamped' calls now(): output may differ on replay"}},
		{"now() and stdout", guaranteeYAML("", nowMap, strings.ReplaceAll(stdoutSink, "events", "stamped")), []string{"at-least-once",
			"at-least-once: sink 'log' (stdout) is not transactional: output since the last checkpoint is written again after a recovery",
			"at-least-once, but expression in 'stamped' calls now(): output may differ on replay"}},
	} {
		p, _ := load(t, tc.yaml)
		if got := p.Delivery().Lines(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Delivery lines\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}

// A map-order-dependent call is a caveat of its own kind.
func TestDeliveryCaveatKeys(t *testing.T) {
	p, _ := load(t, guaranteeYAML("", "  m:\n    type: map\n    input: events\n    select:\n      k: 'join(keys({\"a\": 1, \"b\": 2}), \",\")'\n",
		strings.ReplaceAll(fileSink, "events", "m")))
	d := p.Delivery()
	if d.Level != runtime.DeliveryExactlyOnce || d.Caveats() != 1 || !strings.Contains(d.Lines()[1], "expression in 'm' calls keys(), whose order changes") {
		t.Errorf("keys(): %q", d.Lines())
	}
}

// checkpoint.require refuses a weaker guarantee at load, naming the
// required level, the effective one and the reasons; a caveat is no reason
// to refuse, and a stronger guarantee than required is accepted.
func TestCheckpointRequire(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		refuse     string // "" to accept
	}{
		{"exactly-once met", guaranteeYAML("  require: exactly-once\n", "", fileSink), ""},
		{"caveat only", guaranteeYAML("  require: exactly-once\n", nowMap, stampedOut), ""},
		{"at-least-once met by exactly-once", guaranteeYAML("  require: at-least-once\n", "", fileSink), ""},
		{"at-least-once met", guaranteeYAML("  require: at-least-once\n", "", stdoutSink), ""},
		{"stdout", guaranteeYAML("  require: exactly-once\n", "", fileSink+stdoutSink),
			"p.yaml:3: checkpoint.require: exactly-once is required, but the pipeline is at-least-once: " +
				"sink 'log' (stdout) is not transactional: output since the last checkpoint is written again after a recovery"},
		{"mode", guaranteeYAML("  mode: at-least-once\n  require: exactly-once\n", "", fileSink),
			"p.yaml:4: checkpoint.require: exactly-once is required, but the pipeline is at-least-once: checkpoint mode is at-least-once"},
		{"at-most-once", guaranteeYAML("  require: at-most-once\n", "", stdoutSink),
			"p.yaml:3: checkpoint.require: at-most-once is required, but the pipeline is at-least-once: sink 'log' (stdout)"},
		{"unknown", guaranteeYAML("  require: exactly_once\n", "", fileSink),
			`p.yaml:3: checkpoint.require: unknown delivery guarantee "exactly_once" (known: exactly-once, at-least-once, at-most-once)`},
	} {
		p, err := config.Parse("p.yaml", []byte(tc.yaml))
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refuse == "" && p.Require == runtime.DeliveryNone:
			t.Errorf("%s: Require not set", tc.name)
		case tc.refuse != "" && err == nil:
			t.Errorf("%s: accepted, want %q", tc.name, tc.refuse)
		case tc.refuse != "" && !strings.HasPrefix(err.Error(), tc.refuse):
			t.Errorf("%s: error\n%v\nwant it to start with\n%s", tc.name, err, tc.refuse)
		case tc.refuse != "":
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Field != "checkpoint.require" {
				t.Errorf("%s: %v is not a *config.Error of checkpoint.require", tc.name, err)
			}
		}
	}
	p, _ := load(t, guaranteeYAML("", "", stdoutSink))
	if p.Require != runtime.DeliveryNone {
		t.Errorf("without require, Require = %v, want none (anything goes)", p.Require)
	}
}
