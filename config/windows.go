package config

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/runtime"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the window transform: its kinds (tumbling, sliding,
// session), aggregates, allowed lateness and late-record side output.

// windowKinds are the values of a window's kind, and the duration fields
// each one takes.
var windowKinds = map[string][]string{
	"tumbling": {"size"},
	"sliding":  {"size", "slide"},
	"session":  {"gap"},
}

// windowShape is the fields a window's kind reads: size, slide, gap.
var windowShape = []string{"size", "slide", "gap"}

// lateDrop is the value of late_records that drops late records, the
// default.
const lateDrop = "drop"

// windowResultFields are the fields every window result starts with; an
// aggregate must be named otherwise.
var windowResultFields = []string{"key", "window_start", "window_end"}

func (b *builder) window(name string, m *mapping) {
	in, ok := b.input(m)
	ok = ok && b.appendOnly(m, "input", "a window", in)
	// key is a field, or a list of fields (none: one group per window).
	var keyFields []string
	keyList := m.get("key") != nil && m.get("key").Kind == yaml.SequenceNode
	if keyList {
		keyFields = m.strList("key")
	} else if f := m.required("key"); f != "" {
		keyFields = []string{f}
	}
	kind := m.str("kind", "tumbling")
	// time: event (the default) or processing (tumbling windows of the
	// wall clock, SQL's PROCTIME()).
	clock := m.str("time", "event")
	switch {
	case clock != "event" && clock != "processing":
		m.fail("time", m.get("time"), "unknown time %q (known: event, processing)", clock)
	case clock == "processing" && kind != "tumbling":
		m.fail("time", m.get("time"), "processing-time windows are tumbling; a %s window is of event time", kind)
	case clock == "processing" && (m.has("allowed_lateness") || m.has("late_records")):
		m.fail("time", m.get("time"), "a processing-time window has no late records: remove allowed_lateness and late_records")
	}
	fields, known := windowKinds[kind]
	if !known {
		m.fail("kind", m.get("kind"), "unknown window kind %q (known: session, sliding, tumbling)", kind)
	}
	// The durations that make the window's shape: each kind requires its
	// own and rejects the others'.
	d := map[string]time.Duration{}
	shapeOK := known
	for _, f := range windowShape {
		switch {
		case !known:
			m.has(f) // unknown kind: nothing to check the field against
		case slices.Contains(fields, f):
			d[f] = m.requiredDuration(f)
			m.positive(f, d[f] > 0)
			shapeOK = shapeOK && d[f] > 0
		case m.has(f):
			m.fail(f, m.get(f), "a %s window takes no %s (%s is for %s windows)", kind, f, f, kindsWith(f))
			shapeOK = false
		}
	}
	if kind == "sliding" && d["slide"] > d["size"] && d["size"] > 0 {
		b.warnings = append(b.warnings, Warning{File: b.e.file, Line: m.get("slide").Line, Field: m.field("slide"),
			Msg: fmt.Sprintf("slide %v is longer than size %v: the windows leave gaps, and records in a gap belong to no window and are ignored", d["slide"], d["size"])})
	}
	lateness := m.duration("allowed_lateness", 0)
	m.nonNegative("allowed_lateness", lateness >= 0)
	late := m.str("late_records", lateDrop)
	if late != lateDrop {
		if !runtime.NodeIDPattern.MatchString(late) {
			m.fail("late_records", m.get("late_records"), "%q is neither drop nor a side output name (letters, digits, '_' and '-'; consumers then read input: %s.<name>)", late, name)
			late = lateDrop
		} else {
			b.declareSide(name, late, m.get("late_records"), m.field("late_records"))
		}
	}
	par := b.parallelism(m)
	specs, valid := b.aggregateSpecs(m, in, ok, windowResultFields)
	var keys []int
	keysOK := keyList || len(keyFields) == 1
	if ok {
		for _, f := range keyFields {
			k := in.schema.Index(f)
			switch {
			case k < 0:
				b.e.add(m.get("key"), m.field("key"), "input %s has no field %q (fields: %s)", m.str("input", ""), f, strings.Join(in.schema.Names(), ", "))
				keysOK = false
			case slices.Contains(keys, k):
				b.e.add(m.get("key"), m.field("key"), "field %q is listed twice", f)
				keysOK = false
			case keyList && slices.Contains(append(windowResultFields[1:], aggregateNames(specs)...), f):
				b.e.add(m.get("key"), m.field("key"), "key field %q would share its name with a field of the window result", f)
				keysOK = false
			}
			keys = append(keys, k)
		}
	}
	if !ok || !keysOK || !shapeOK || !valid || m.bad["allowed_lateness"] || m.bad["time"] {
		return
	}
	agg, aggFields, result, err := window.RowAggregates(in.schema, specs)
	if err != nil {
		b.e.add(m.get("aggregates"), m.field("aggregates"), "%v", err)
		return
	}
	if kind == "session" && agg.Merge == nil {
		// Merging sessions merges their accumulators.
		b.e.add(m.get("aggregates"), m.field("aggregates"), "a session window needs aggregates that merge")
		return
	}
	// The result starts with the key: one field named key (key: field), or
	// the key fields under their names (key: [fields]).
	var schema row.Schema
	for _, k := range keys {
		f := in.schema.Fields[k]
		if !keyList {
			f.Name = "key"
		}
		schema.Fields = append(schema.Fields, f)
	}
	nk := len(keys)
	schema.Fields = append(append(schema.Fields, row.Field{Name: "window_start", Kind: row.Time}, row.Field{Name: "window_end", Kind: row.Time}), aggFields...)
	width := len(schema.Fields)
	// The key description goes into checkpoints: restoring the window's state
	// under another key field is refused (runtime.Node.KeyDesc).
	var desc string
	if nk == 1 {
		desc = "field " + in.schema.Fields[keys[0]].Name
	} else {
		desc = "fields [" + strings.Join(keyFields, ", ") + "]"
	}
	opts := []stream.NodeOption{par, keyDesc(desc)}
	if lateness > 0 {
		opts = append(opts, window.AllowedLateness(lateness))
	}
	if late != lateDrop {
		opts = append(opts, window.LateRecordsTo(late))
	}
	w := windowSpec{name: name, kind: kind, processing: clock == "processing", d: d, agg: agg, opts: opts}
	var out stream.Stream[row.Row]
	key := -1 // the key field of a window keyed by one
	if nk == 1 {
		key = keys[0]
	}
	switch {
	case nk == 1 && in.schema.Fields[key].Kind == row.Int:
		// An integer key as its value and a NULL flag, which a map hashes
		// and compares without the string a row.Value holds; stored and
		// hashed as the row.Value (intKeyCodec), so checkpoints of either
		// restore into the other.
		ks := stream.KeyBy(in.s, func(r row.Row) intKey { return intKeyOf(r[key]) })
		ks.KeyCodec = intKeyCodec{}
		out = buildWindow(ks, w, func(k intKey, win window.Window, acc window.RowAcc) row.Row {
			r := make(row.Row, 3, width)
			r[0], r[1], r[2] = k.value(), row.TimeValue(win.Start), row.TimeValue(win.End)
			return result(acc, r)
		})
	case nk == 1:
		// One key field is its own key (key: field, or key: [field]), with
		// -0 and +0 as one group as in a list. It is not encoded as a list:
		// that costs a string per record.
		ks := stream.KeyBy(in.s, func(r row.Row) row.Value {
			if v := r[key]; v.Kind() != row.Float || v.Float() != 0 {
				return v
			}
			return row.FloatValue(0)
		})
		ks.KeyCodec = row.ValueCodec{}
		out = buildWindow(ks, w, func(k row.Value, win window.Window, acc window.RowAcc) row.Row {
			r := make(row.Row, 3, width)
			r[0], r[1], r[2] = k, row.TimeValue(win.Start), row.TimeValue(win.End)
			return result(acc, r)
		})
	default:
		ks := stream.KeyBy(in.s, listKey(keys))
		ks.KeyCodec = row.ValueCodec{}
		out = buildWindow(ks, w, func(k row.Value, win window.Window, acc window.RowAcc) row.Row {
			r := make(row.Row, nk+2, width)
			decodeListKey(r, k)
			r[nk], r[nk+1] = row.TimeValue(win.Start), row.TimeValue(win.End)
			return result(acc, r)
		})
	}
	if w.processing {
		b.caveats = append(b.caveats, caveat{node: name, line: m.line("time").Line,
			msg: fmt.Sprintf("window %s is of processing time: which window a record falls in depends on when it was processed, so output may differ on replay", name)})
	}
	b.streams[name] = named{s: out, schema: &schema}
	if late != lateDrop {
		// Late records are the window's input records, unchanged.
		b.streams[name+"."+late] = named{s: stream.SideOutput[row.Row](out, late), schema: in.schema}
	}
}

// windowSpec is what a window transform builds, but for its key.
type windowSpec struct {
	name, kind string
	processing bool // a processing-time tumbling window
	d          map[string]time.Duration
	agg        window.Aggregate[row.Row, window.RowAcc]
	// opts are the node's options: parallelism, key description,
	// lateness and late records.
	opts []stream.NodeOption
}

// buildWindow builds window w over ks, keyed by K; output makes a result
// row from a key, a window and its accumulator.
func buildWindow[K comparable](ks stream.KeyedStream[row.Row, K], w windowSpec, output func(K, window.Window, window.RowAcc) row.Row) stream.Stream[row.Row] {
	switch {
	case w.processing:
		return window.ProcessingTimeTumbling(ks, w.name, w.d["size"], w.agg, output, w.opts[:2]...)
	case w.kind == "tumbling":
		return window.Tumbling(ks, w.name, w.d["size"], w.agg, output, w.opts...)
	case w.kind == "sliding":
		return window.Sliding(ks, w.name, w.d["size"], w.d["slide"], w.agg, output, w.opts...)
	default:
		return window.Session(ks, w.name, w.d["gap"], w.agg, output, w.opts...)
	}
}

// listKey returns the key of a row grouped by the fields at keys: their
// values encoded as one row (NULLs group together, as SQL's GROUP BY has
// them; -0 and +0 are one group).
func listKey(keys []int) func(row.Row) row.Value {
	return func(r row.Row) row.Value {
		// row.RowCodec's encoding of the key fields, written without
		// making the row: a count, then each value.
		var buf [64]byte
		k := binary.AppendUvarint(buf[:0], uint64(len(keys)))
		for _, f := range keys {
			v := r[f]
			if v.Kind() == row.Float && v.Float() == 0 {
				v = row.FloatValue(0)
			}
			k = row.ValueCodec{}.Append(k, v)
		}
		return row.BytesValue(string(k))
	}
}

// decodeListKey writes the values of a listKey key into r's first fields.
// The key was encoded by listKey; state that would not decode fails its
// checksum before it reaches here.
func decodeListKey(r row.Row, k row.Value) {
	if vals, _, err := (row.RowCodec{}).Decode([]byte(k.Str())); err == nil {
		copy(r, vals)
	}
}

// aggregateNames are the output names of specs.
func aggregateNames(specs []window.AggregateSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// keyDesc sets a keyed node's key description (runtime.Node.KeyDesc).
func keyDesc(desc string) stream.NodeOption {
	return func(n *runtime.Node) { n.KeyDesc = desc }
}

// kindsWith lists the window kinds that take field f, e.g. "tumbling and
// sliding".
func kindsWith(f string) string {
	var kinds []string
	for _, k := range []string{"tumbling", "sliding", "session"} {
		if slices.Contains(windowKinds[k], f) {
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, " and ")
}
