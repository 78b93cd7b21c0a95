package runtime

import (
	"fmt"
	"strings"

	"github.com/ingest-engine/ingest/checkpoint"
)

// This file derives a pipeline's effective delivery guarantee from its plan:
// the one function that `ingest validate`, `ingest run` and
// `checkpoint.require` all use, so what is printed is what is enforced.

// DeliveryLevel is a pipeline's effective delivery guarantee: what a failure
// and the recovery after it can do to the effect of each input record on the
// output. Unlike Guarantee, which a connector declares on its own, it tells
// loss from duplication.
type DeliveryLevel uint8

const (
	// DeliveryExactlyOnce: after any failure the output is as if every
	// record were processed once.
	DeliveryExactlyOnce DeliveryLevel = iota
	// DeliveryAtLeastOnce: nothing is lost, but output may repeat after a
	// recovery.
	DeliveryAtLeastOnce
	// DeliveryAtMostOnce: nothing repeats, but records in flight at a
	// failure may be lost.
	DeliveryAtMostOnce
	// DeliveryNone: records may be lost and output may repeat.
	DeliveryNone
)

// String names the level as YAML and messages write it.
func (l DeliveryLevel) String() string {
	switch l {
	case DeliveryExactlyOnce:
		return "exactly-once"
	case DeliveryAtLeastOnce:
		return "at-least-once"
	case DeliveryAtMostOnce:
		return "at-most-once"
	}
	return "none"
}

// ParseDeliveryLevel parses a level that can be required: "exactly-once",
// "at-least-once" or "at-most-once".
func ParseDeliveryLevel(s string) (DeliveryLevel, error) {
	for _, l := range []DeliveryLevel{DeliveryExactlyOnce, DeliveryAtLeastOnce, DeliveryAtMostOnce} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown delivery guarantee %q (known: exactly-once, at-least-once, at-most-once)", s)
}

// mayLose reports whether records may be lost at this level.
func (l DeliveryLevel) mayLose() bool { return l == DeliveryAtMostOnce || l == DeliveryNone }

// mayDuplicate reports whether output may repeat at this level.
func (l DeliveryLevel) mayDuplicate() bool { return l == DeliveryAtLeastOnce || l == DeliveryNone }

// levelOf is the level of a pipeline that may lose records, repeat output,
// both or neither.
func levelOf(lose, duplicate bool) DeliveryLevel {
	switch {
	case lose && duplicate:
		return DeliveryNone
	case lose:
		return DeliveryAtMostOnce
	case duplicate:
		return DeliveryAtLeastOnce
	}
	return DeliveryExactlyOnce
}

// Satisfies reports whether a pipeline at level l meets required: it loses
// nothing unless required allows loss and repeats nothing unless required
// allows repeats. At-least-once and at-most-once do not satisfy each other.
func (l DeliveryLevel) Satisfies(required DeliveryLevel) bool {
	return (!l.mayLose() || required.mayLose()) && (!l.mayDuplicate() || required.mayDuplicate())
}

// DeliveryReason is one finding behind a pipeline's delivery guarantee.
type DeliveryReason struct {
	// Node is the node the finding concerns; "" for a pipeline-wide finding
	// such as the checkpoint mode.
	Node string
	// Level is the guarantee the finding alone leaves the pipeline. For a
	// caveat it is DeliveryExactlyOnce: a caveat does not weaken the level.
	Level DeliveryLevel
	// Caveat marks a finding that leaves the level as it is but qualifies
	// it: the output may differ on replay (an expression calling now()).
	Caveat bool
	// Msg says what was found, naming the node as NodeName does:
	// "sink 'out' (stdout) is not transactional: ...".
	Msg string
}

// Delivery is a pipeline's effective delivery guarantee and the reasons for
// it.
type Delivery struct {
	// Level is the weakest level any reason leaves.
	Level DeliveryLevel
	// Reasons are the findings that weaken the level, in plan order, then
	// the caveats in the order they were added.
	Reasons []DeliveryReason
}

// NodeName names a node in reasons and messages: 'out' (stdout), or 'out'
// when the node's type is unknown.
func NodeName(id, typ string) string {
	if typ == "" {
		return fmt.Sprintf("'%s'", id)
	}
	return fmt.Sprintf("'%s' (%s)", id, typ)
}

// Delivery derives the effective delivery guarantee of the plan under
// checkpoint mode from its nodes' declared guarantees and capabilities:
//
//   - a source that cannot replay loses the records in flight at a failure
//     (at-most-once): after the recovery it does not send them again;
//   - a sink that is not transactional (stdout; an idempotent sink too,
//     since its rewrites are equal only for deterministic output) writes
//     the output produced since the last checkpoint again (at-least-once);
//   - the at-least-once checkpoint mode does not align barriers, so a
//     snapshot may hold records that replayable sources send again
//     (at-least-once); with no replayable source nothing is sent again.
//
// Loss and repetition together leave no guarantee (none). Caveats, which
// only the builder of the nodes knows (expressions), are added with
// WithCaveat.
func (p *Plan) Delivery(mode checkpoint.Mode) Delivery {
	var d Delivery
	lose, duplicate, replayable := false, false, false
	add := func(n *Node, l DeliveryLevel, msg string) {
		d.Reasons = append(d.Reasons, DeliveryReason{Node: n.ID, Level: l, Msg: msg})
		lose = lose || l.mayLose()
		duplicate = duplicate || l.mayDuplicate()
	}
	for _, n := range p.Nodes {
		name := NodeName(n.ID, n.Type)
		switch {
		case n.NewSource != nil && n.Guarantee == ExactlyOnce:
			replayable = true
		case n.NewSource != nil:
			add(n, DeliveryAtMostOnce, fmt.Sprintf("source %s is not replayable: records in flight at a failure are lost", name))
		case n.Guarantee == AtLeastOnce && n.Capabilities != nil && n.Capabilities.Idempotent:
			add(n, DeliveryAtLeastOnce, fmt.Sprintf("sink %s is idempotent but not transactional: output since the last checkpoint "+
				"is written again after a recovery, the same only if keys and values are deterministic", name))
		case n.Guarantee == AtLeastOnce:
			add(n, DeliveryAtLeastOnce, fmt.Sprintf("sink %s is not transactional: output since the last checkpoint is written again after a recovery", name))
		case n.Guarantee != ExactlyOnce:
			add(n, DeliveryNone, fmt.Sprintf("sink %s offers no delivery guarantee", name))
		}
	}
	if mode == checkpoint.AtLeastOnce && replayable {
		d.Reasons = append(d.Reasons, DeliveryReason{Level: DeliveryAtLeastOnce,
			Msg: "checkpoint mode is at-least-once: barriers are not aligned, so after a recovery state may count records twice"})
		duplicate = true
	}
	d.Level = levelOf(lose, duplicate)
	return d
}

// WithCaveat returns d with a caveat on node added: msg says why output may
// differ on replay ("expression in 'enrich' calls now(): output may differ
// on replay"). The level stays as it is.
func (d Delivery) WithCaveat(node, msg string) Delivery {
	d.Reasons = append(d.Reasons[:len(d.Reasons):len(d.Reasons)], DeliveryReason{Node: node, Caveat: true, Msg: msg})
	return d
}

// Caveats returns how many of d's reasons are caveats.
func (d Delivery) Caveats() int {
	n := 0
	for _, r := range d.Reasons {
		if r.Caveat {
			n++
		}
	}
	return n
}

// Lines renders d as `ingest validate` and `ingest run` print it: the level,
// then one line a reason, each led by the level it leaves
// ("at-least-once: sink 'out' (stdout) is not transactional: ...") or, for a
// caveat, by the effective level and "but"
// ("exactly-once, but expression in 'enrich' calls now(): ...").
func (d Delivery) Lines() []string {
	lines := []string{d.Level.String()}
	for _, r := range d.Reasons {
		if r.Caveat {
			lines = append(lines, d.Level.String()+", but "+r.Msg)
		} else {
			lines = append(lines, r.Level.String()+": "+r.Msg)
		}
	}
	return lines
}

// Require returns nil when d satisfies required, else an error that states
// the required level, the effective one and the reasons that weaken it.
func (d Delivery) Require(required DeliveryLevel) error {
	if d.Level.Satisfies(required) {
		return nil
	}
	var why []string
	for _, r := range d.Reasons {
		if !r.Caveat && !r.Level.Satisfies(required) {
			why = append(why, r.Msg)
		}
	}
	return fmt.Errorf("%s is required, but the pipeline is %s: %s", required, d.Level, strings.Join(why, "; "))
}
