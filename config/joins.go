package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/operator/join"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the join transform: two inputs keyed by a field or an
// expression each, joined by interval, tumbling window or an unbounded inner
// join with an event-time ttl, into rows of selected fields of both sides.

// joinKinds are the values of a join's kind and the duration fields each
// takes.
var joinKinds = map[string][]string{
	"interval": {"lower", "upper"},
	"window":   {"size"},
	"inner":    {"ttl"},
}

// joinShape is every duration field some join kind takes, in the order they
// are checked.
var joinShape = []string{"lower", "upper", "size", "ttl"}

// joinSides name a join's inputs, in input order.
var joinSides = [2]string{"left", "right"}

// joinKey is one side's key.
type joinKey struct {
	// keyed is the side's stream keyed by its key, with the row codec and
	// key codec the join's state needs.
	keyed stream.KeyedStream[row.Row, row.Value]
	// rows is the side's stream before keying: its rows, with the key at
	// index.
	rows stream.Stream[row.Row]
	kind row.Kind
	// index is the key's position in the side's keyed rows: a field's, or
	// one past the input's fields for an expression key.
	index int
	// what names the key in messages: "field key" or "expression key % 10".
	what string
	// codec encodes the side's rows (with the key appended, for an
	// expression key) in the join's state.
	codec rowCodec
}

// rowCodec encodes rows in a join's state as row.RowCodec does, under a name
// that lists their fields and the side's key: the join's state names its
// record codecs, so a join restored after an input's fields or a key changed
// refuses the checkpoint (state.ErrStateMismatch) instead of reading old rows
// at the new fields' positions or finding them under keys of another field.
type rowCodec struct {
	row.RowCodec
	name string
}

// newRowCodec returns the codec of rows of fields keyed by key (joinKey.what).
func newRowCodec(fields []row.Field, key string) rowCodec {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.Name + " " + f.Kind.String()
	}
	return rowCodec{name: row.RowCodec{}.Name() + "(" + strings.Join(parts, ", ") + "; key: " + key + ")"}
}

// Name identifies the encoding and the rows' fields.
func (c rowCodec) Name() string { return c.name }

// joinField is one output field of a join: a field of either side or the
// key.
type joinField struct {
	name string
	// side is 0 (left) or 1 (right) with index the field's position in that
	// side's rows, or 2 for the key.
	side, index int
	kind        row.Kind
}

// joinFromKey is joinField.side of the key.
const joinFromKey = 2

func (b *builder) join(name string, m *mapping) {
	var in [2]named
	var ok [2]bool
	for i, side := range joinSides {
		in[i], ok[i] = b.ref(m, side)
		ok[i] = ok[i] && b.appendOnly(m, side, "a join", in[i])
	}
	kind := m.required("kind")
	// upper: left.<field> bounds each pair by the left row's own time.
	var upperField string
	if v, isScalar := m.scalar("upper"); isScalar && kind == "interval" && strings.HasPrefix(v.Value, "left.") {
		upperField = strings.TrimPrefix(v.Value, "left.")
	}
	d, shapeOK := b.joinShape(m, kind, upperField != "")
	// unique: left declares the left input unique by the key.
	unique := m.str("unique", "")
	switch {
	case unique == "" || unique == "left" && upperField != "":
	case unique == "left":
		m.fail("unique", m.get("unique"), "is taken only by an interval join bounded by a left field (upper: left.<field>), which keeps each left record until its bound")
		shapeOK = false
	default:
		m.fail("unique", m.get("unique"), "%q: want left (no two left records share a key)", unique)
		shapeOK = false
	}
	par := b.parallelism(m)
	keys, keysOK := b.joinOn(name, m, in, ok)
	var schema *row.Schema
	var sel []joinField
	if ok[0] && ok[1] {
		sel, schema = b.joinSelect(m, in, keys[0].kind)
	} else {
		m.has("select") // cannot be checked without both schemas
	}
	if !shapeOK || !keysOK || schema == nil {
		return
	}
	output := func(k row.Value, l, r row.Row) row.Row {
		return pairRow(make(row.Row, len(sel)), sel, k, l, r)
	}
	keyed := keyDesc("left " + keys[0].what + ", right " + keys[1].what)
	opts := []join.Option{join.LeftCodec[row.Row](keys[0].codec), join.RightCodec[row.Row](keys[1].codec),
		join.NodeOptions(par, keyed)}
	var out stream.Stream[row.Row]
	switch kind {
	case "interval":
		if upperField == "" {
			out = join.Interval(keys[0].keyed, keys[1].keyed, name, d["lower"], d["upper"], output, opts...)
			break
		}
		f := in[0].schema.Index(upperField)
		if f < 0 || in[0].schema.Fields[f].Kind != row.Time {
			b.e.add(m.get("upper"), m.field("upper"), "%q: want a duration or left.<a time field of input %s> (its time fields: %s)", "left."+upperField, m.str("left", ""), strings.Join(timeFields(in[0].schema), ", "))
			return
		}
		until := func(l row.Row) (int64, bool) {
			v := l[f]
			return v.Int(), v.Kind() == row.Time
		}
		if unique == "left" {
			opts = append(opts, join.UniqueLeft())
			if d["lower"] >= 0 && b.readByClosingAggregate(name) {
				// Its only reader may fold its pairs (groupjoin.go).
				b.streams[name] = named{schema: schema, groupable: &groupableJoin{
					keys: keys, lower: d["lower"], until: until, upperField: upperField, upperIndex: f,
					sel: sel, codecs: opts[:2], par: par, keyed: keyed,
					build: func() stream.Stream[row.Row] {
						return join.IntervalUntil(keys[0].keyed, keys[1].keyed, name, d["lower"], until, upperField, output, opts...)
					}}}
				return
			}
		}
		out = join.IntervalUntil(keys[0].keyed, keys[1].keyed, name, d["lower"], until, upperField, output, opts...)
	case "window":
		out = join.Window(keys[0].keyed, keys[1].keyed, name, d["size"], output, opts...)
	case "inner":
		out = join.Inner(keys[0].keyed, keys[1].keyed, name, d["ttl"], output, opts...)
	}
	b.streams[name] = named{s: out, schema: schema}
}

// joinShape reads the durations a join of kind takes (lower and upper, size
// or ttl) and rejects the other kinds'; ok is false when one is missing or
// invalid, which it reports. It warns of an inner join that keeps its state
// forever.
func (b *builder) joinShape(m *mapping, kind string, upperField bool) (d map[string]time.Duration, ok bool) {
	fields, known := joinKinds[kind]
	if kind != "" && !known {
		m.fail("kind", m.get("kind"), "unknown join kind %q (known: inner, interval, window)", kind)
	}
	d = map[string]time.Duration{}
	ok = known
	for _, f := range joinShape {
		switch {
		case !known:
			m.has(f) // unknown kind: nothing to check the field against
		case f == "upper" && upperField:
			m.has(f) // a left field, which join checks
		case slices.Contains(fields, f):
			if f == "ttl" {
				d[f] = m.duration(f, 0) // 0, the default, keeps records forever
				m.nonNegative(f, d[f] >= 0)
			} else {
				d[f] = m.requiredDuration(f)
			}
			if f == "size" {
				m.positive(f, d[f] > 0)
			}
			ok = ok && !m.bad[f] && (m.vals[f] != nil || f == "ttl")
		case m.has(f):
			a := "a"
			if kind == "interval" || kind == "inner" {
				a = "an"
			}
			m.fail(f, m.get(f), "%s %s join takes no %s (%s is for %s joins)", a, kind, f, f, joinKindsWith(f))
			ok = false
		}
	}
	switch {
	case kind == "interval" && ok && d["lower"] > d["upper"] && !upperField:
		m.fail("lower", m.get("lower"), "%v is after upper %v: a right record joins a left one when right time - left time is in [lower, upper]", d["lower"], d["upper"])
		ok = false
	case kind == "interval" && ok && d["lower"] == math.MinInt64:
		// The right side's view of the interval is [-upper, -lower].
		m.fail("lower", m.get("lower"), "%v is out of range", d["lower"])
		ok = false
	case kind == "inner" && ok && d["ttl"] == 0:
		at, field := m.get("kind"), m.field("kind")
		if v := m.get("ttl"); v != nil {
			at, field = v, m.field("ttl")
		}
		b.warnings = append(b.warnings, Warning{File: b.e.file, Line: at.Line, Field: field,
			Msg: "an inner join with ttl 0 keeps every record of both inputs in state forever: its state grows without bound " +
				"unless the inputs are bounded; set ttl to join only records less than ttl apart in event time and let older ones go"})
	}
	return d, ok
}

// joinOn reads the keys of join name's inputs in (inOK[i]: input i resolved)
// from on: {left: <key>, right: <key>}, or on: <key> for the same key on
// both sides. ok is false unless both keys are valid and of one type; it
// reports why.
func (b *builder) joinOn(name string, m *mapping, in [2]named, inOK [2]bool) (keys [2]joinKey, ok bool) {
	var at [2]*yaml.Node
	var field [2]string
	ok = true
	switch v := m.get("on"); {
	case v == nil:
		b.e.add(m.node, m.field("on"), "is required, e.g. on: {left: key, right: key}")
		ok = false
	case v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || strings.TrimSpace(v.Value) == ""):
		b.e.add(v, m.field("on"), "must be a field or an expression of both inputs, or {left: <key>, right: <key>}")
		ok = false
	case v.Kind == yaml.ScalarNode:
		at = [2]*yaml.Node{v, v}
		field = [2]string{m.field("on"), m.field("on")}
	default:
		on := m.sub("on")
		for i, side := range joinSides {
			at[i], field[i] = on.get(side), on.field(side)
			if at[i] == nil && on.node.Kind == yaml.MappingNode {
				b.e.add(on.node, field[i], "is required: a field or an expression of the %s input", side)
			}
			ok = ok && at[i] != nil
		}
		on.done()
	}
	for i, side := range joinSides {
		if at[i] == nil {
			continue
		}
		var kok bool
		keys[i], kok = b.joinKey(name, side, at[i], field[i], in[i], inOK[i])
		ok = ok && kok
	}
	if ok && keys[0].kind != keys[1].kind {
		b.e.add(at[1], field[1], "the keys must have the same type, but the left key (%s) is %s and the right key (%s) is %s; convert one, e.g. with int() or string()",
			keys[0].what, keys[0].kind, keys[1].what, keys[1].kind)
		ok = false
	}
	return keys, ok
}

// joinKindsWith lists the join kinds that take field f.
func joinKindsWith(f string) string {
	var kinds []string
	for _, k := range []string{"interval", "window", "inner"} {
		if slices.Contains(joinKinds[k], f) {
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, " and ")
}

// joinKey reads the key of one side of join from YAML value v of field: the
// name of a field of in, or an expression over in's fields, which a map node
// (<join>-<side>-key) before the join computes and appends to each row.
func (b *builder) joinKey(join, side string, v *yaml.Node, field string, in named, ok bool) (joinKey, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || strings.TrimSpace(v.Value) == "" {
		b.e.add(v, field, "must be a field or an expression of the %s input", side)
		return joinKey{}, false
	}
	if !ok {
		return joinKey{}, false
	}
	kc, ok := b.keyColumn(join+"-"+side+"-key", side+" key of join "+join, v, field, in)
	if !ok {
		return joinKey{}, false
	}
	k := joinKey{kind: kc.kind, what: kc.what, index: kc.index}
	fields := in.schema.Fields
	if kc.index == len(fields) {
		fields = append(slices.Clone(fields), row.Field{Name: "key", Kind: kc.kind})
	}
	k.codec = newRowCodec(fields, k.what)
	index := kc.index
	k.rows = kc.s
	k.keyed = stream.KeyBy(kc.s, func(r row.Row) row.Value { return r[index] })
	k.keyed.KeyCodec = row.ValueCodec{}
	return k, true
}

// keyColumn is a key read from each row of an input: its rows, the key's
// position in them, its kind and its name in messages.
type keyColumn struct {
	s     stream.Stream[row.Row]
	index int
	kind  row.Kind
	what  string
}

// keyColumn reads a key from YAML value v of field: the name of a field of
// in, or an expression over in's fields, which a map node named id (doing
// what describe says) computes and appends to each row, beside its input.
func (b *builder) keyColumn(id, describe string, v *yaml.Node, field string, in named) (keyColumn, bool) {
	if index := in.schema.Index(strings.TrimSpace(v.Value)); index >= 0 {
		f := in.schema.Fields[index]
		return keyColumn{s: in.s, index: index, kind: f.Kind, what: "field " + f.Name}, true
	}
	c := b.expression(v, field, in.schema, row.Null)
	if c == nil {
		return keyColumn{}, false
	}
	k := keyColumn{kind: c.prog.Kind(), what: "expression " + oneLine(c.prog.Source()), index: len(in.schema.Fields)}
	if k.kind == row.Null {
		b.e.add(v, field, "the key's type is only known when it runs; convert it with int(), float() or string()")
		return keyColumn{}, false
	}
	if prev, taken := b.ids[id]; taken {
		b.e.add(v, field, "a key expression runs in a node named %s, which the name at line %d takes", id, prev.Line)
		return keyColumn{}, false
	}
	b.ids[id] = v
	index, width := k.index, k.index+1
	n := &runtime.Node{ID: id, Type: "map", Describe: describe + ": " + k.what,
		NewOperator: func() runtime.Operator {
			return &mapOp{fields: []*compiled{c}, pos: []int{index}, copyFrom: []int{-1}, keep: true, in: in.schema, width: width}
		}}
	// The key node runs beside its input (chained to it when it can be).
	k.s = stream.Add[row.Row, row.Row](in.s, n, stream.Parallelism(in.s.Node().Parallelism))
	return k, true
}

// joinSelect reads the output fields of a join of inputs in whose key is of
// kind key. select is a list of references (left.<field>, right.<field>,
// left.*, right.*, key), each output field named like the field it reads,
// or a mapping of output names to references; without select the output is
// left.* then right.*. Two fields of one name are an error. The schema is nil
// when select is invalid (and reported).
func (b *builder) joinSelect(m *mapping, in [2]named, key row.Kind) ([]joinField, *row.Schema) {
	v := m.get("select")
	field := m.field("select")
	var sel []joinField
	valid := true
	// at[name] is where the output field name was made, for collisions.
	at := map[string]string{}
	add := func(f joinField, ref string, n *yaml.Node, f2 string) {
		if prev, dup := at[f.name]; dup {
			prefix, _, _ := strings.Cut(ref, ".")
			if prefix == ref {
				prefix = "join"
			}
			b.e.add(n, f2, "%s and %s both make an output field %q; name them with the mapping form, e.g. select: {%s: %s, %s_%s: %s}",
				prev, ref, f.name, f.name, prev, prefix, f.name, ref)
			valid = false
			return
		}
		at[f.name] = ref
		sel = append(sel, f)
	}
	switch {
	case v == nil:
		var both []string
		for i := range joinSides {
			for j, f := range in[i].schema.Fields {
				if i == 1 && in[0].schema.Index(f.Name) >= 0 {
					both = append(both, f.Name)
					continue
				}
				sel = append(sel, joinField{name: f.Name, side: i, index: j, kind: f.Kind})
			}
		}
		if len(both) > 0 {
			b.e.add(m.node, field, "is required here: without it the output has every field of both inputs, but both have fields named %s; e.g. select: [left.*, right.%s] or select: {%s: left.%s, right_%s: right.%s}",
				strings.Join(both, ", "), both[0], both[0], both[0], both[0], both[0])
			valid = false
		}
	case v.Kind == yaml.SequenceNode:
		if len(v.Content) == 0 {
			b.e.add(v, field, "name at least one field, e.g. [left.*, right.price]")
			valid = false
		}
		for i, item := range v.Content {
			f2 := fmt.Sprintf("%s[%d]", field, i)
			if item.Kind != yaml.ScalarNode {
				b.e.add(item, f2, "must be left.<field>, right.<field>, left.*, right.* or key")
				valid = false
				continue
			}
			ref := strings.TrimSpace(item.Value)
			if side, all := strings.CutSuffix(ref, ".*"); all && (side == "left" || side == "right") {
				i := slices.Index(joinSides[:], side)
				for j, f := range in[i].schema.Fields {
					add(joinField{name: f.Name, side: i, index: j, kind: f.Kind}, side+"."+f.Name, item, f2)
				}
				continue
			}
			f, ok := b.joinRef(ref, in, key, item, f2)
			if !ok {
				valid = false
				continue
			}
			add(f, ref, item, f2)
		}
	case v.Kind == yaml.MappingNode:
		s := newMapping(b.e, field, v)
		if len(s.keys) == 0 {
			b.e.add(v, field, "name at least one field, e.g. price: right.price")
			valid = false
		}
		for _, name := range s.keys {
			ref := s.str(name, "")
			if s.bad[name] {
				valid = false
				continue
			}
			f, ok := b.joinRef(strings.TrimSpace(ref), in, key, s.get(name), s.field(name))
			if !ok {
				valid = false
				continue
			}
			f.name = name
			sel = append(sel, f)
		}
		s.done()
	default:
		b.e.add(v, field, "must be a list of fields (select: [left.name, right.price]) or a mapping of output names to fields (select: {name: left.name})")
		valid = false
	}
	if !valid {
		return nil, nil
	}
	schema := &row.Schema{Fields: make([]row.Field, len(sel))}
	for i, f := range sel {
		schema.Fields[i] = row.Field{Name: f.name, Kind: f.kind}
	}
	return sel, schema
}

// joinRef resolves one reference of a join's select: left.<field>,
// right.<field> or key. It reports a bad one at n, as field.
func (b *builder) joinRef(ref string, in [2]named, key row.Kind, n *yaml.Node, field string) (joinField, bool) {
	if ref == "key" {
		return joinField{name: "key", side: joinFromKey, kind: key}, true
	}
	side, name, dotted := strings.Cut(ref, ".")
	i := slices.Index(joinSides[:], side)
	if !dotted || i < 0 || name == "" {
		b.e.add(n, field, "%q is not left.<field>, right.<field> or key", ref)
		return joinField{}, false
	}
	j := in[i].schema.Index(name)
	if j < 0 {
		b.e.add(n, field, "the %s input has no field %q (fields: %s)", side, name, strings.Join(in[i].schema.Names(), ", "))
		return joinField{}, false
	}
	return joinField{name: name, side: i, index: j, kind: in[i].schema.Fields[j].Kind}, true
}

// timeFields names the time fields of s.
func timeFields(s *row.Schema) []string {
	var out []string
	for _, f := range s.Fields {
		if f.Kind == row.Time {
			out = append(out, f.Name)
		}
	}
	return out
}
