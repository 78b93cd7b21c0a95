package runtime_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ingest-engine/ingest/checkpoint"
	"github.com/ingest-engine/ingest/runtime"
)

// guaranteePlan is a plan of the sources and sinks given: a source is
// replayable or not, a sink declares a guarantee (and capabilities), and an
// operator between them declares nothing.
func guaranteePlan(sources map[string]bool, sinks map[string]runtime.Capabilities) *runtime.Plan {
	p := &runtime.Plan{Name: "g"}
	newSource := func() runtime.Source { return nil }
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for k := range sources {
			yield(k)
		}
	}) {
		g := runtime.ExactlyOnce
		if !sources[id] {
			g = runtime.NoGuarantee
		}
		caps := runtime.Capabilities{Replayable: sources[id]}
		p.Nodes = append(p.Nodes, &runtime.Node{ID: id, Type: "gen", NewSource: newSource, Guarantee: g, Capabilities: &caps})
	}
	p.Nodes = append(p.Nodes, &runtime.Node{ID: "op", Type: "window"})
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for k := range sinks {
			yield(k)
		}
	}) {
		caps := sinks[id]
		p.Nodes = append(p.Nodes, &runtime.Node{ID: id, Type: "kind-" + id, Guarantee: caps.SinkGuarantee(), Capabilities: &caps})
	}
	return p
}

// Each finding leaves the level the issue names; loss and repetition
// together leave none. Every weakening reason names its node.
func TestDelivery(t *testing.T) {
	txn := runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}
	atOnce := runtime.Capabilities{}
	upsert := runtime.Capabilities{Idempotent: true}
	for _, tc := range []struct {
		name    string
		sources map[string]bool
		sinks   map[string]runtime.Capabilities
		mode    checkpoint.Mode
		want    runtime.DeliveryLevel
		reasons []string // one substring per reason, in order
	}{
		{"replayable to transactional", map[string]bool{"in": true}, map[string]runtime.Capabilities{"out": txn},
			checkpoint.ExactlyOnce, runtime.DeliveryExactlyOnce, nil},
		{"writes at once", map[string]bool{"in": true}, map[string]runtime.Capabilities{"out": txn, "log": atOnce},
			checkpoint.ExactlyOnce, runtime.DeliveryAtLeastOnce, []string{"sink 'log' (kind-log) is not transactional"}},
		{"idempotent", map[string]bool{"in": true}, map[string]runtime.Capabilities{"up": upsert},
			checkpoint.ExactlyOnce, runtime.DeliveryAtLeastOnce, []string{"sink 'up' (kind-up) is idempotent but not transactional"}},
		{"not replayable", map[string]bool{"in": true, "x": false}, map[string]runtime.Capabilities{"out": txn},
			checkpoint.ExactlyOnce, runtime.DeliveryAtMostOnce, []string{"source 'x' (gen) is not replayable"}},
		{"both", map[string]bool{"x": false}, map[string]runtime.Capabilities{"log": atOnce},
			checkpoint.ExactlyOnce, runtime.DeliveryNone, []string{"source 'x'", "sink 'log'"}},
		{"mode", map[string]bool{"in": true}, map[string]runtime.Capabilities{"out": txn},
			checkpoint.AtLeastOnce, runtime.DeliveryAtLeastOnce, []string{"checkpoint mode is at-least-once"}},
		// Nothing is read again without a replayable source, so the mode
		// repeats nothing.
		{"mode without replay", map[string]bool{"x": false}, map[string]runtime.Capabilities{"out": txn},
			checkpoint.AtLeastOnce, runtime.DeliveryAtMostOnce, []string{"source 'x'"}},
	} {
		d := guaranteePlan(tc.sources, tc.sinks).Delivery(tc.mode)
		if d.Level != tc.want || len(d.Reasons) != len(tc.reasons) {
			t.Errorf("%s: %v with %d reasons %+v, want %v with %d", tc.name, d.Level, len(d.Reasons), d.Reasons, tc.want, len(tc.reasons))
			continue
		}
		for i, r := range d.Reasons {
			if !strings.Contains(r.Msg, tc.reasons[i]) || r.Caveat {
				t.Errorf("%s: reason %d is %+v, want one saying %q", tc.name, i, r, tc.reasons[i])
			}
		}
	}
}

// validate and run print the level, then a line a reason led by the level
// it leaves; a caveat does not lower the level and is led by "but".
func TestDeliveryLines(t *testing.T) {
	p := guaranteePlan(map[string]bool{"in": true}, map[string]runtime.Capabilities{"out": {}})
	d := p.Delivery(checkpoint.ExactlyOnce).WithCaveat("enrich", "expression in 'enrich' calls now(): output may differ on replay")
	want := []string{
		"at-least-once",
		"at-least-once: sink 'out' (kind-out) is not transactional: output since the last checkpoint is written again after a recovery",
		"at-least-once, but expression in 'enrich' calls now(): output may differ on replay",
	}
	if got := d.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines:\n%q\nwant\n%q", got, want)
	}
	if d.Caveats() != 1 || d.Level != runtime.DeliveryAtLeastOnce {
		t.Errorf("caveats %d, level %v", d.Caveats(), d.Level)
	}

	clean := guaranteePlan(map[string]bool{"in": true}, map[string]runtime.Capabilities{"out": {Transactional: true}}).Delivery(checkpoint.ExactlyOnce)
	withCaveat := clean.WithCaveat("m", "expression in 'm' calls now(): output may differ on replay")
	if withCaveat.Level != runtime.DeliveryExactlyOnce || !slices.Equal(withCaveat.Lines()[1:], []string{"exactly-once, but expression in 'm' calls now(): output may differ on replay"}) {
		t.Errorf("a caveat changed the level or reads %q", withCaveat.Lines())
	}
	if len(clean.Reasons) != 0 {
		t.Errorf("WithCaveat changed the delivery it was called on: %+v", clean.Reasons)
	}
	if got := clean.Lines(); !slices.Equal(got, []string{"exactly-once"}) {
		t.Errorf("Lines of a clean pipeline = %q", got)
	}
}

// Require refuses a weaker level with a message naming the required and the
// effective level and every reason that falls short; a caveat is no reason
// to refuse.
func TestDeliveryRequire(t *testing.T) {
	none := guaranteePlan(map[string]bool{"x": false}, map[string]runtime.Capabilities{"log": {}}).Delivery(checkpoint.ExactlyOnce)
	cases := []struct {
		d        runtime.Delivery
		required runtime.DeliveryLevel
		refuse   []string // substrings of the error, none when nil
	}{
		{runtime.Delivery{}, runtime.DeliveryExactlyOnce, nil},
		{runtime.Delivery{}.WithCaveat("m", "calls now()"), runtime.DeliveryExactlyOnce, nil},
		{runtime.Delivery{Level: runtime.DeliveryAtLeastOnce}, runtime.DeliveryAtLeastOnce, nil},
		{runtime.Delivery{Level: runtime.DeliveryAtMostOnce}, runtime.DeliveryAtMostOnce, nil},
		{none, runtime.DeliveryExactlyOnce, []string{"exactly-once is required, but the pipeline is none: ", "source 'x' (gen) is not replayable", "; sink 'log' (kind-log) is not transactional"}},
		// Only the reasons that fall short of the requirement are named.
		{none, runtime.DeliveryAtLeastOnce, []string{"at-least-once is required, but the pipeline is none: source 'x' (gen) is not replayable: records in flight at a failure are lost"}},
		{none, runtime.DeliveryAtMostOnce, []string{"at-most-once is required, but the pipeline is none: sink 'log'"}},
	}
	for i, tc := range cases {
		err := tc.d.Require(tc.required)
		switch {
		case tc.refuse == nil && err != nil:
			t.Errorf("case %d: %v refused for %v: %v", i, tc.d.Level, tc.required, err)
		case tc.refuse != nil && err == nil:
			t.Errorf("case %d: %v accepted for %v", i, tc.d.Level, tc.required)
		case err != nil:
			for _, s := range tc.refuse {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("case %d: %q does not say %q", i, err, s)
				}
			}
			if tc.required == runtime.DeliveryAtLeastOnce && strings.Contains(err.Error(), "sink") {
				t.Errorf("case %d: %q names a reason that meets the requirement", i, err)
			}
		}
	}
	// The satisfaction order: exactly-once meets everything; at-least-once
	// and at-most-once do not meet each other; none meets nothing.
	all := []runtime.DeliveryLevel{runtime.DeliveryExactlyOnce, runtime.DeliveryAtLeastOnce, runtime.DeliveryAtMostOnce, runtime.DeliveryNone}
	want := map[[2]runtime.DeliveryLevel]bool{}
	for _, l := range all {
		want[[2]runtime.DeliveryLevel{runtime.DeliveryExactlyOnce, l}] = true
		want[[2]runtime.DeliveryLevel{l, l}] = true
		want[[2]runtime.DeliveryLevel{l, runtime.DeliveryNone}] = true
	}
	for _, l := range all {
		for _, r := range all {
			if got := l.Satisfies(r); got != want[[2]runtime.DeliveryLevel{l, r}] {
				t.Errorf("%v.Satisfies(%v) = %v", l, r, got)
			}
		}
	}
}

func TestParseDeliveryLevel(t *testing.T) {
	for _, l := range []runtime.DeliveryLevel{runtime.DeliveryExactlyOnce, runtime.DeliveryAtLeastOnce, runtime.DeliveryAtMostOnce} {
		if got, err := runtime.ParseDeliveryLevel(l.String()); err != nil || got != l {
			t.Errorf("ParseDeliveryLevel(%q) = %v, %v", l.String(), got, err)
		}
	}
	for _, s := range []string{"none", "exactly_once", ""} {
		if _, err := runtime.ParseDeliveryLevel(s); err == nil || !strings.Contains(err.Error(), "exactly-once, at-least-once, at-most-once") {
			t.Errorf("ParseDeliveryLevel(%q): %v", s, err)
		}
	}
}
