package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/over"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the over transform: aggregates over a frame of rows
// (SQL's agg(x) OVER (PARTITION BY … ORDER BY … ROWS BETWEEN n PRECEDING
// AND CURRENT ROW)) of a changelog, itself a changelog keyed as its input.

// over builds `type: over`: partition_by, order_by ([field [asc|desc], …]),
// preceding (n) and aggregates, over a changelog whose key holds every
// partition_by field.
func (b *builder) over(name string, m *mapping) {
	in, ok := b.input(m)
	if ok && in.changelog == nil {
		b.e.add(m.get("input"), m.field("input"), "%s is not a changelog: over computes frames of an updating result (a GROUP BY without a window, a top_n), whose rows its key identifies", m.str("input", ""))
		ok = false
	}
	parts := m.strList("partition_by")
	if m.get("partition_by") == nil {
		b.e.add(m.node, m.field("partition_by"), "is required: the fields whose rows are framed apart, e.g. partition_by: [seller]")
	}
	orders := m.strList("order_by")
	if len(orders) == 0 {
		b.e.add(m.node, m.field("order_by"), "is required: the fields that order a partition's rows, e.g. order_by: [date_time asc]")
		ok = false
	}
	preceding := m.int("preceding", -1)
	if v := m.get("preceding"); v == nil {
		b.e.add(m.node, m.field("preceding"), "is required: the rows before a row that its frame holds (ROWS BETWEEN n PRECEDING AND CURRENT ROW), e.g. preceding: 10")
		ok = false
	} else if !m.bad["preceding"] && (preceding < 0 || preceding > over.MaxPreceding) {
		b.e.add(v, m.field("preceding"), "%d: want 0 to %d (a change computes up to 4n+2 frames of n+1 rows)", preceding, over.MaxPreceding)
		ok = false
	}
	par := b.parallelism(m)
	var reserved []string
	if ok {
		reserved = append(in.schema.Names(), aggregate.OpField)
	}
	specs, specsOK := b.aggregateSpecs(m, in, ok, reserved)
	partIdx, partOK := b.fieldIndexes(m, "partition_by", in, ok, parts)
	if !ok || !specsOK || !partOK || m.bad["preceding"] {
		return
	}
	for _, p := range parts {
		if p == aggregate.OpField || !slices.Contains(in.changelog, p) {
			b.e.add(m.get("partition_by"), m.field("partition_by"), "%s is not a key field of changelog %s (its key: [%s]): a key whose partition changes would have its deletion and its insertion framed by different subtasks, which a sink could apply in either order",
				p, m.str("input", ""), strings.Join(in.changelog, ", "))
			return
		}
	}
	by, ok := b.orderBy(m, in, orders)
	if !ok {
		return
	}
	op := in.schema.Index(aggregate.OpField)
	if slices.ContainsFunc(by, func(o orderField) bool { return o.field == op }) || slices.ContainsFunc(specs, func(s window.AggregateSpec) bool { return s.Field == aggregate.OpField }) {
		b.e.add(m.node, m.path, "%s is the operation of the changelog's rows, not a field to order or aggregate", aggregate.OpField)
		return
	}
	// The rows of a partition are ordered by order_by, then by key.
	for _, k := range changelogKeys(in) {
		by = append(by, orderField{field: k})
	}
	agg, aggFields, result, err := window.RowAggregates(in.schema, specs)
	if err != nil {
		b.e.add(m.get("aggregates"), m.field("aggregates"), "%v", err)
		return
	}
	schema := &row.Schema{}
	for i, f := range in.schema.Fields {
		if i != op {
			schema.Fields = append(schema.Fields, f)
		}
	}
	schema.Fields = append(append(schema.Fields, aggFields...), row.Field{Name: aggregate.OpField, Kind: row.String})
	frame := "rows between " + strconv.FormatInt(preceding, 10) + " preceding and current row"
	cfg := over.Config{
		Preceding: int(preceding),
		Compare:   by.compare,
		Key:       changelogKeys(in),
		Op:        op,
		Agg:       agg,
		Result:    result,
		Signature: strings.Join(orders, ", ") + ", " + frame + ", " + strings.Join(specNames(specs), ", ") + " of " + schemaSignature(in.schema),
	}
	ks := stream.KeyBy(in.s, listKey(partIdx))
	ks.KeyCodec = row.ValueCodec{}
	out := over.Rows(ks, name, cfg, par, keyDesc("fields ["+strings.Join(parts, ", ")+"]"))
	out.Node().Type = "over"
	out.Node().Describe = strings.Join(specNames(specs), ", ") + " over [" + strings.Join(parts, ", ") + "] ordered by " + strings.Join(orders, ", ") + ", " + frame + ", updating"
	b.streams[name] = named{s: out, schema: schema, changelog: slices.Clone(in.changelog)}
}

// specNames are specs as written: name: func(field).
func specNames(specs []window.AggregateSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name + ": " + s.Func + "(" + s.Field + ")"
	}
	return out
}
