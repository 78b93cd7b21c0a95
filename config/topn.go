package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/topn"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the top_n transform: the first limit rows of each key in
// an order (SQL's ROW_NUMBER() OVER … with rank <= N), a changelog keyed by
// the key and the rank (by the key alone for limit 1 without a rank field).

// topN builds `type: top_n`: key, order_by ([field [asc|desc], …]), limit
// and rank (the output field of the rank; required when limit > 1).
func (b *builder) topN(name string, m *mapping) {
	in, ok := b.input(m)
	ok = ok && b.appendOnly(m, "input", "a top_n", in) && b.noOpField(m, in)
	keyFields := m.strList("key")
	if m.get("key") == nil {
		b.e.add(m.node, m.field("key"), "is required: the fields whose rows are ranked apart, e.g. key: [auction]")
	}
	limit := m.int("limit", 0)
	m.positive("limit", limit > 0)
	rank := m.str("rank", "")
	if limit > 1 && rank == "" && !m.bad["limit"] {
		b.e.add(m.node, m.field("rank"), "is required with limit %d: name the output field of the rank, by which the result's rows are updated", limit)
		ok = false
	}
	par := b.parallelism(m)
	orders := m.strList("order_by")
	if len(orders) == 0 {
		b.e.add(m.node, m.field("order_by"), "is required: the fields that rank rows, e.g. order_by: [price desc]")
		ok = false
	}
	keys, keysOK := b.fieldIndexes(m, "key", in, ok, keyFields)
	if !ok || !keysOK || m.bad["limit"] {
		return
	}
	by, ok := b.orderBy(m, in, orders)
	if !ok {
		return
	}
	if rank != "" && (in.schema.Index(rank) >= 0 || rank == aggregate.OpField) {
		b.e.add(m.get("rank"), m.field("rank"), "%q is a field of the input already; name the rank otherwise", rank)
		return
	}
	// The signature holds the input's fields: the kept rows are stored by
	// position, so a checkpoint of other fields is refused at restore.
	cfg := topn.Config{Limit: int(limit), Rank: rank != "", Signature: strings.Join(orders, ", ") + " of " + schemaSignature(in.schema), Before: func(a, c row.Row) bool { return by.compare(a, c) < 0 }}
	schema := &row.Schema{Fields: slices.Clone(in.schema.Fields)}
	changelog := append([]string{}, keyFields...)
	if rank != "" {
		schema.Fields = append(schema.Fields, row.Field{Name: rank, Kind: row.Int})
		changelog = append(changelog, rank)
	}
	schema.Fields = append(schema.Fields, row.Field{Name: aggregate.OpField, Kind: row.String})
	ks := stream.KeyBy(in.s, listKey(keys))
	ks.KeyCodec = row.ValueCodec{}
	out := topn.Rows(ks, name, cfg, par, keyDesc("fields ["+strings.Join(keyFields, ", ")+"]"))
	out.Node().Type = "top_n"
	out.Node().Describe = "top " + strconv.FormatInt(limit, 10) + " by [" + strings.Join(keyFields, ", ") + "] ordered by " + strings.Join(orders, ", ") + ", updating"
	b.streams[name] = named{s: out, schema: schema, changelog: changelog}
}

// orderBy is an order_by list: fields, each ascending or descending.
type orderBy []orderField

type orderField struct {
	field int
	desc  bool
}

// compare orders a and c as the list does, as SQL's ORDER BY (see
// compareValues).
func (by orderBy) compare(a, c row.Row) int {
	for _, o := range by {
		d := compareValues(a[o.field], c[o.field])
		if o.desc {
			d = -d
		}
		if d != 0 {
			return d
		}
	}
	return 0
}

// orderBy reads orders ([field [asc|desc], …], field order_by of m) over
// in's fields, reporting the first it cannot read.
func (b *builder) orderBy(m *mapping, in named, orders []string) (orderBy, bool) {
	var by orderBy
	for _, o := range orders {
		f := strings.Fields(o)
		dir := "asc"
		if len(f) == 2 {
			dir = strings.ToLower(f[1])
		}
		i := -1
		if len(f) > 0 {
			i = in.schema.Index(f[0])
		}
		if len(f) == 0 || len(f) > 2 || (dir != "asc" && dir != "desc") || i < 0 {
			b.e.add(m.get("order_by"), m.field("order_by"), "%q: want a field of input %s and asc or desc, e.g. price desc (fields: %s)", o, m.str("input", ""), strings.Join(in.schema.Names(), ", "))
			return nil, false
		}
		by = append(by, orderField{field: i, desc: dir == "desc"})
	}
	return by, true
}

// schemaSignature names a schema's fields and kinds in order, e.g.
// "(id int, name string)", for codec names of state that stores rows.
func schemaSignature(s *row.Schema) string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Name + " " + f.Kind.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// compareValues orders two values as SQL's ORDER BY does: numbers by value
// (an int and a float too), strings and bytes bytewise, times, false before
// true, and NULL after every value (NULLS LAST ascending, FIRST descending).
func compareValues(a, b row.Value) int {
	an, bn := a.Kind() == row.Null, b.Kind() == row.Null
	switch {
	case an || bn:
		return cmp.Compare(btoi(an), btoi(bn))
	case a.Kind() == row.Float || b.Kind() == row.Float:
		return cmp.Compare(asFloat(a), asFloat(b))
	case a.Kind() == row.String || a.Kind() == row.Bytes:
		return strings.Compare(a.Str(), b.Str())
	case a.Kind() == row.Bool:
		return cmp.Compare(btoi(a.Bool()), btoi(b.Bool()))
	}
	return cmp.Compare(a.Int(), b.Int())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// asFloat is a number as a float64.
func asFloat(v row.Value) float64 {
	if v.Kind() == row.Float {
		return v.Float()
	}
	return float64(v.Int())
}
