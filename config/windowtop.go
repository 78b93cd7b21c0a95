package config

import (
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/operator/windowtop"
	"github.com/ingest-engine/ingest/row"
)

// This file builds the window_top transform: per tumbling window of event
// time, the rows at the window's highest (or lowest) value of a field, ties
// included, emitted when the window closes (operator/windowtop).

// windowTop builds `type: window_top`: size, order_by (one field, asc or
// desc) and through_end.
func (b *builder) windowTop(name string, m *mapping) {
	in, ok := b.input(m)
	ok = ok && b.appendOnly(m, "input", "a window_top", in)
	size := m.requiredDuration("size")
	m.positive("size", size > 0)
	throughEnd := m.boolean("through_end", false)
	par := b.parallelism(m)
	orders := m.strList("order_by")
	if len(orders) != 1 {
		b.e.add(m.node, m.field("order_by"), "is required, one field: the field whose highest (desc) or lowest (asc) value in each window selects the rows, e.g. order_by: [price desc]")
		ok = false
	}
	if !ok || m.bad["size"] || size <= 0 {
		return
	}
	f := strings.Fields(orders[0])
	dir := "asc"
	if len(f) == 2 {
		dir = strings.ToLower(f[1])
	}
	field := -1
	if len(f) > 0 {
		field = in.schema.Index(f[0])
	}
	if len(f) == 0 || len(f) > 2 || (dir != "asc" && dir != "desc") || field < 0 {
		b.e.add(m.get("order_by"), m.field("order_by"), "%q: want a field of input %s and asc or desc, e.g. price desc (fields: %s)", orders[0], m.str("input", ""), strings.Join(in.schema.Names(), ", "))
		return
	}
	for _, bound := range []string{"window_start", "window_end"} {
		if in.schema.Index(bound) >= 0 {
			b.e.add(m.get("input"), m.field("input"), "input %s has a field %s, which window_top adds to each row: rename the field (a map)", m.str("input", ""), bound)
			return
		}
	}
	cfg := windowtop.Config{
		Size: int64(size), Field: field, Compare: compareValues, Lowest: dir == "asc", ThroughEnd: throughEnd,
		Signature: orders[0] + " of " + schemaSignature(in.schema),
	}
	schema := &row.Schema{Fields: append(slices.Clone(in.schema.Fields), row.Field{Name: "window_start", Kind: row.Time}, row.Field{Name: "window_end", Kind: row.Time})}
	out := windowtop.Rows(in.s, name, cfg, par)
	out.Node().Type = "window_top"
	best := map[bool]string{true: "lowest", false: "highest"}[cfg.Lowest]
	out.Node().Describe = "rows at the " + best + " " + f[0] + " of each " + size.String() + " tumbling window, ties included"
	if throughEnd {
		out.Node().Describe += ", rows at a window's end instant included"
	}
	b.streams[name] = named{s: out, schema: schema}
}
