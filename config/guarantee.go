package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/runtime"
)

// This file derives the pipeline's delivery guarantee: the plan's (see
// runtime.Plan.Delivery) with the caveats only the expressions tell, and
// the check of checkpoint.require against it.

// caveat is a reason the output may differ on replay without the delivery
// guarantee being weaker: a nondeterministic call in an expression.
type caveat struct {
	node, msg string
	// line is where the expression is, to list caveats in file order.
	line int
}

// nondeterministic records the nondeterministic call nd of the expression in
// field (transforms.<node>...) at line as a caveat of the guarantee, once per
// node and function.
func (b *builder) nondeterministic(field string, line int, nd expression.Nondeterminism) {
	parts := strings.SplitN(field, ".", 3)
	if len(parts) < 2 {
		return
	}
	node := parts[1]
	msg := fmt.Sprintf("expression in %s calls %s(): output may differ on replay", runtime.NodeName(node, ""), nd.Func)
	if nd.Func != "now" {
		msg = fmt.Sprintf("expression in %s calls %s(), whose order changes from run to run: output may differ on replay", runtime.NodeName(node, ""), nd.Func)
	}
	for _, c := range b.caveats {
		if c.node == node && c.msg == msg {
			return
		}
	}
	b.caveats = append(b.caveats, caveat{node: node, msg: msg, line: line})
}

// Delivery returns the pipeline's effective delivery guarantee and the
// reasons for it, caveats of nondeterministic expressions included: what
// `ingest validate` and `ingest run` print and checkpoint.require checks.
func (p *Pipeline) Delivery() runtime.Delivery {
	d := p.Stream.Delivery(p.Checkpoint.Mode)
	for _, c := range p.caveats {
		d = d.WithCaveat(c.node, c.msg)
	}
	return d
}

// requireDelivery reads checkpoint.require: the weakest delivery guarantee
// the pipeline may run with. Unset, it is runtime.DeliveryNone, which every
// pipeline satisfies.
func (b *builder) requireDelivery(m *mapping) runtime.DeliveryLevel {
	s := m.str("require", "")
	if s == "" {
		return runtime.DeliveryNone
	}
	l, err := runtime.ParseDeliveryLevel(s)
	if err != nil {
		b.e.add(m.get("require"), m.field("require"), "%v", err)
		return runtime.DeliveryNone
	}
	b.requireAt = m.get("require")
	return l
}

// checkRequire refuses a pipeline whose guarantee is weaker than
// checkpoint.require, naming the required level, the effective one and the
// reasons, at the line of checkpoint.require. A caveat does not refuse it.
func (p *Pipeline) checkRequire(at *yaml.Node) error {
	err := p.Delivery().Require(p.Require)
	if err == nil {
		return nil
	}
	line := 0
	if at != nil {
		line = at.Line
	}
	return &Error{File: p.File, Line: line, Field: "checkpoint.require", Msg: err.Error()}
}
