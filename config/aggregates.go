package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/expression"
	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the aggregate transform (a GROUP BY without a window)
// and keeps its output, a changelog, away from what would misread it.
//
// A changelog is a stream of rows keyed by some of its fields, each row an
// insert, update or delete of its key's row (field _op). Applying the rows
// of one key in order gives that key's current row, so:
//   - every consumer reads a changelog routed by its key, so all the rows of
//     one key reach one subtask in order;
//   - a map reads it only when it copies the key fields and _op unchanged;
//   - an aggregate reads it through Normalize, which turns each update into
//     the retraction of the row it replaces and the addition of the new one,
//     with aggregates that can take a row back (count, sum, avg);
//   - filter, window, join and top_n refuse it: they would treat an update
//     as a new record (a filter dropping an update leaves the old row
//     standing);
//   - a postgres sink applies it only as an upsert on exactly the key.

// aggregate builds `type: aggregate`: key (a field or a list), aggregates
// and an optional having, over the result's fields.
func (b *builder) aggregate(name string, m *mapping) {
	in, ok := b.refGroupable(m, "input")
	defer func() {
		if in.groupable != nil {
			b.buildJoin(m.str("input", ""), in) // not folded
		}
	}()
	// Over a changelog, each update retracts the row it replaces.
	retracting := ok && in.changelog != nil
	keyFields := m.strList("key")
	if slices.Contains(keyFields, aggregate.OpField) {
		b.e.add(m.get("key"), m.field("key"), "%s is the operation of a changelog's rows, not a field to group by", aggregate.OpField)
		ok = false
	}
	ok = ok && b.noOpField(m, in)
	if m.get("key") == nil {
		b.e.add(m.node, m.field("key"), "is required: the fields to group by, e.g. key: [customer]")
	}
	par := b.parallelism(m)
	specs, specsOK := b.aggregateSpecs(m, in, ok, append(slices.Clone(keyFields), aggregate.OpField))
	keys, keysOK := b.fieldIndexes(m, "key", in, ok, keyFields)
	having := m.get("having")
	// closes_at: a time field of the key at which each group is complete.
	closesAt := m.str("closes_at", "")
	closeKey := slices.Index(keyFields, closesAt)
	if closesAt != "" {
		switch f := -1; {
		case retracting:
			m.fail("closes_at", m.get("closes_at"), "input %s is a changelog, whose updates can reopen any group: groups that close read an append-only input", m.str("input", ""))
		case closeKey < 0:
			m.fail("closes_at", m.get("closes_at"), "%q is not in key: the close time is part of each group (key: [%s, %s])", closesAt, strings.Join(keyFields, ", "), closesAt)
		case !ok || !keysOK:
		default:
			if f = in.schema.Index(closesAt); in.schema.Fields[f].Kind != row.Time {
				m.fail("closes_at", m.get("closes_at"), "%s is a %v field: a group closes at a time (time fields of %s: %s)", closesAt, in.schema.Fields[f].Kind, m.str("input", ""), strings.Join(timeFields(in.schema), ", "))
			}
		}
		ok = ok && !m.bad["closes_at"]
	}
	if !ok || !specsOK || !keysOK {
		return
	}
	cfg := aggregate.Config{}
	if retracting {
		// A hidden count of the group's rows says when it is empty.
		rows := len(specs)
		specs = append(slices.Clone(specs), window.AggregateSpec{Name: "_rows", Func: "count"})
		retract, err := window.RowRetract(in.schema, specs)
		if err != nil {
			b.e.add(m.get("aggregates"), m.field("aggregates"), "input %s is a changelog, whose updates and deletes take rows back out of their groups: %v", m.str("input", ""), err)
			return
		}
		cfg.Retract, cfg.Op = retract, in.schema.Index(aggregate.OpField)
		cfg.Empty = func(acc window.RowAcc) bool { return window.Count(acc, rows) == 0 }
	}
	agg, aggFields, result, err := window.RowAggregates(in.schema, specs)
	if err != nil {
		b.e.add(m.get("aggregates"), m.field("aggregates"), "%v", err)
		return
	}
	if retracting {
		aggFields = aggFields[:len(aggFields)-1]
		all := result
		result = func(acc window.RowAcc, dst []row.Value) []row.Value {
			out := all(acc, dst)
			return out[:len(out)-1] // not the hidden count
		}
	}
	var schema row.Schema
	for _, k := range keys {
		schema.Fields = append(schema.Fields, in.schema.Fields[k])
	}
	schema.Fields = append(schema.Fields, aggFields...)
	cfg.Agg = agg
	if having != nil {
		c := b.expression(having, m.field("having"), &schema, row.Bool)
		if c == nil {
			return
		}
		cfg.Having = func() (func(row.Row, int64) (bool, error), error) {
			ev, err := expression.NewEvaluator(c.prog)
			if err != nil {
				return nil, fmt.Errorf("transform %s: %w", name, err)
			}
			return func(r row.Row, t int64) (bool, error) {
				ev.Bind(r, t)
				keep, err := ev.Bool(c.prog)
				if err != nil {
					return false, c.runError(err, &schema, r, t)
				}
				return keep, nil
			}, nil
		}
	}
	nk, width := len(keys), len(schema.Fields)+1 // and _op (not of closing groups: one less)
	cfg.Key = func(k row.Value) row.Row {
		r := make(row.Row, nk)
		decodeListKey(r, k)
		return r
	}
	cfg.Result = func(key row.Row, acc window.RowAcc) row.Row {
		return result(acc, append(make(row.Row, 0, width), key...))
	}
	describe := "aggregate by [" + strings.Join(keyFields, ", ") + "], each group once, when the watermark passes its " + closesAt
	if closeKey >= 0 && in.groupable != nil {
		if out, folded := groupJoin(name, in.groupable, keys, closeKey, cfg, par, describe); folded {
			// The parallelism each runs at: its own, or the pipeline's.
			jn, an := runtime.Node{Parallelism: int(b.par)}, runtime.Node{Parallelism: int(b.par)}
			in.groupable.par(&jn)
			par(&an)
			if jn.Parallelism != an.Parallelism {
				b.warnings = append(b.warnings, Warning{File: b.e.file, Line: m.line("input").Line, Field: m.field("input"),
					Msg: fmt.Sprintf("join %s runs inside this aggregate (its pairs are folded into groups, see closes_at), at the aggregate's parallelism: its own parallelism %d is not used", m.str("input", ""), jn.Parallelism)})
			}
			in.groupable = nil // not built: folded into out
			b.streams[name] = named{s: out, schema: &schema}
			return
		}
	}
	if in.groupable != nil {
		in = b.buildJoin(m.str("input", ""), in)
	}
	if closeKey >= 0 {
		ks := stream.KeyBy(in.s, listKey(keys))
		ks.KeyCodec = row.ValueCodec{}
		out := aggregate.Closing(ks, name, cfg, aggregate.CloseField{Index: keys[closeKey], Key: closeKey, Name: closesAt}, par,
			keyDesc("fields ["+strings.Join(keyFields, ", ")+"]"))
		out.Node().Type, out.Node().Describe = "aggregate", describe
		b.streams[name] = named{s: out, schema: &schema}
		return
	}
	schema.Fields = append(schema.Fields, row.Field{Name: aggregate.OpField, Kind: row.String})
	src := in.s
	if retracting {
		byKey := stream.KeyBy(in.s, listKey(changelogKeys(in)))
		byKey.KeyCodec = row.ValueCodec{} // the keys are stored
		src = aggregate.Normalize(byKey, name+"-normalize", cfg.Op, schemaSignature(in.schema), par,
			keyDesc("fields ["+strings.Join(in.changelog, ", ")+"]"))
		src.Node().Type, src.Node().Describe = "normalize", "changelog keyed by ["+strings.Join(in.changelog, ", ")+"] to additions and retractions"
	}
	ks := stream.KeyBy(src, listKey(keys))
	ks.KeyCodec = row.ValueCodec{}
	out := aggregate.Rows(ks, name, cfg, par, keyDesc("fields ["+strings.Join(keyFields, ", ")+"]"))
	out.Node().Type, out.Node().Describe = "aggregate", "aggregate by ["+strings.Join(keyFields, ", ")+"], updating"
	// A changelog's key is never nil: key: [] (one group) is a changelog too.
	b.streams[name] = named{s: out, schema: &schema, changelog: append([]string{}, keyFields...)}
}

// aggregateSpecs reads the aggregates of m (name: count(), total:
// sum(price)); an aggregate may not be named like one of reserved.
func (b *builder) aggregateSpecs(m *mapping, in named, inOK bool, reserved []string) ([]window.AggregateSpec, bool) {
	aggs := m.sub("aggregates")
	defer aggs.done()
	if len(aggs.keys) == 0 {
		b.e.add(m.line("aggregates"), m.field("aggregates"), "name at least one aggregate, e.g. count: count()")
		return nil, false
	}
	var specs []window.AggregateSpec
	valid := true
	for _, k := range aggs.keys {
		if slices.Contains(reserved, k) {
			b.e.add(aggs.line(k), aggs.field(k), "%q is a field of the result already; name the aggregate otherwise", k)
			valid = false
		}
		spec, err := window.ParseAggregate(k, aggs.str(k, ""))
		if err == nil && inOK {
			_, _, _, err = window.RowAggregates(in.schema, []window.AggregateSpec{spec})
		}
		if err != nil {
			b.e.add(aggs.get(k), aggs.field(k), "%v", err)
			valid = false
			continue
		}
		specs = append(specs, spec)
	}
	return specs, valid
}

// fieldIndexes returns the positions of fields (listed in field key of m)
// in in's schema, reporting fields it lacks and fields listed twice.
func (b *builder) fieldIndexes(m *mapping, key string, in named, inOK bool, fields []string) ([]int, bool) {
	if !inOK {
		return nil, false
	}
	var idx []int
	ok := true
	for _, f := range fields {
		k := in.schema.Index(f)
		switch {
		case k < 0:
			b.e.add(m.get(key), m.field(key), "input %s has no field %q (fields: %s)", m.str("input", ""), f, strings.Join(in.schema.Names(), ", "))
			ok = false
		case slices.Contains(idx, k):
			b.e.add(m.get(key), m.field(key), "field %q is listed twice", f)
			ok = false
		}
		idx = append(idx, k)
	}
	return idx, ok
}

// appendOnly reports whether in, read by field of m, is not a changelog;
// what names the transform reading it ("a filter"), for the error when it is.
func (b *builder) appendOnly(m *mapping, field, what string, in named) bool {
	if in.changelog == nil {
		return true
	}
	b.e.add(m.get(field), m.field(field), "%s is a changelog (rows inserted, updated and deleted by [%s], in field %s): %s would take its updates for new records. "+
		"Only a map that keeps the key fields and %s, and sinks, read a changelog", m.str(field, ""), strings.Join(in.changelog, ", "), aggregate.OpField, what, aggregate.OpField)
	return false
}

// noOpField reports whether in, which is not a changelog, has no field
// named _op, the field a changelog's operation is in: a result holding two
// would have a sink read the input's instead of the operation.
func (b *builder) noOpField(m *mapping, in named) bool {
	if in.changelog != nil || in.schema.Index(aggregate.OpField) < 0 {
		return true
	}
	b.e.add(m.get("input"), m.field("input"), "input %s has a field %s, the name of the operation in a changelog's rows, which this transform makes: rename the field (a map)", m.str("input", ""), aggregate.OpField)
	return false
}

// routed returns in's stream as a consumer must read it: a changelog routed
// by its key, so all the rows of a key reach one subtask, in order.
func routed(in named) stream.Stream[row.Row] {
	if in.changelog == nil {
		return in.s
	}
	return stream.KeyBy(in.s, listKey(changelogKeys(in))).Stream
}

// changelogKeys returns the positions of changelog in's key fields.
func changelogKeys(in named) []int {
	keys := make([]int, len(in.changelog))
	for i, f := range in.changelog {
		keys[i] = in.schema.Index(f)
	}
	return keys
}

// mapChangelog returns the key fields of a map's output over changelog in:
// the names the map copies in's key fields to. ok is false, and the error
// reported, when the map drops or computes a key field or _op.
func (b *builder) mapChangelog(m *mapping, in named, out *row.Schema, copyFrom, pos []int, keep bool) (keys []string, ok bool) {
	copied := func(field string) string {
		src := in.schema.Index(field)
		for i, from := range copyFrom {
			if from == src {
				return out.Fields[pos[i]].Name
			}
		}
		if keep && !slices.Contains(pos, out.Index(field)) {
			return field // kept from the input, not replaced
		}
		return ""
	}
	keys = []string{} // key: [] is a changelog too
	for _, k := range in.changelog {
		name := copied(k)
		if name == "" {
			b.e.add(m.get("select"), m.field("select"), "the input is a changelog keyed by [%s]: select key field %s unchanged (%s: %s)", strings.Join(in.changelog, ", "), k, k, k)
			return nil, false
		}
		keys = append(keys, name)
	}
	if copied(aggregate.OpField) != aggregate.OpField {
		b.e.add(m.get("select"), m.field("select"), "the input is a changelog: select %s unchanged (%s: %s), or its deletes read as rows", aggregate.OpField, aggregate.OpField, aggregate.OpField)
		return nil, false
	}
	return keys, true
}

// sameSet reports whether a and b hold the same names, each once, in any
// order.
func sameSet(a, b []string) bool {
	x, y := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(x, y) && len(slices.Compact(x)) == len(y)
}
