package config

import (
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/stdout"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// datagenSchema is the schema of datagen rows.
var datagenSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

func (b *builder) source(name string, k *yaml.Node, m *mapping) {
	b.id(name, k, m)
	errsBefore := len(b.e.list)
	switch typ := m.required("type"); typ {
	case "datagen":
		cfg := datagen.Config{
			Count:         m.int("count", 0),
			Rate:          m.float("rate", 0),
			Keys:          m.int("keys", 100),
			StartTime:     m.time("start_time", datagen.DefaultStartTime),
			EventInterval: m.duration("event_interval", time.Millisecond),
		}
		m.positive("count", cfg.Count > 0)
		m.positive("rate", cfg.Rate > 0)
		if cfg.Rate > datagen.MaxRate {
			b.e.add(m.get("rate"), m.field("rate"), "%g exceeds %g records per second; omit rate for as fast as possible", cfg.Rate, float64(datagen.MaxRate))
		}
		m.positive("keys", cfg.Keys > 0)
		m.positive("event_interval", cfg.EventInterval > 0)
		par := b.parallelism(m)
		src, err := datagen.New(cfg, func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
		})
		if err != nil {
			if len(b.e.list) == errsBefore { // not already reported field by field
				b.e.add(m.node, m.path, "%v", err)
			}
			break
		}
		b.streams[name] = named{s: stream.From[row.Row](b.p, name, src, par), schema: datagenSchema}
	default:
		m.unknownType("source", typ, "datagen")
	}
	b.failed(name)
	m.done()
}

func (b *builder) window(name string, m *mapping) {
	in, ok := b.input(m)
	keyField := m.required("key")
	size := m.duration("size", 0)
	if m.vals["size"] == nil {
		b.e.add(m.node, m.field("size"), "is required")
	}
	m.positive("size", size > 0)
	par := b.parallelism(m)
	aggs := m.sub("aggregates")
	if len(aggs.keys) == 0 {
		b.e.add(m.line("aggregates"), m.field("aggregates"), "name at least one aggregate, e.g. count: count()")
	}
	var specs []window.AggregateSpec
	valid := true
	for _, k := range aggs.keys {
		if k == "key" || k == "window_start" || k == "window_end" {
			b.e.add(aggs.line(k), aggs.field(k), "%q is a field of every window result; name the aggregate otherwise", k)
			valid = false
		}
		expr := aggs.str(k, "")
		spec, err := window.ParseAggregate(k, expr)
		if err == nil && ok {
			_, _, _, err = window.RowAggregates(in.schema, []window.AggregateSpec{spec})
		}
		if err != nil {
			b.e.add(aggs.get(k), aggs.field(k), "%v", err)
			valid = false
			continue
		}
		specs = append(specs, spec)
	}
	aggs.done()
	key := -1
	if ok && keyField != "" {
		if key = in.schema.Index(keyField); key < 0 {
			b.e.add(m.get("key"), m.field("key"), "input %s has no field %q (fields: %s)", m.str("input", ""), keyField, strings.Join(in.schema.Names(), ", "))
		}
	}
	if !ok || key < 0 || size <= 0 || !valid {
		return
	}
	agg, fields, result, err := window.RowAggregates(in.schema, specs)
	if err != nil {
		b.e.add(aggs.node, aggs.path, "%v", err)
		return
	}
	schema := &row.Schema{Fields: append([]row.Field{
		{Name: "key", Kind: in.schema.Fields[key].Kind},
		{Name: "window_start", Kind: row.Time},
		{Name: "window_end", Kind: row.Time},
	}, fields...)}
	width := len(schema.Fields)
	ks := stream.KeyBy(in.s, func(r row.Row) row.Value { return r[key] })
	ks.KeyCodec = row.ValueCodec{}
	out := window.Tumbling(ks, name, size, agg, func(k row.Value, w window.Window, acc window.RowAcc) row.Row {
		r := make(row.Row, 3, width)
		r[0], r[1], r[2] = k, row.TimeValue(w.Start), row.TimeValue(w.End)
		return result(acc, r)
	}, par)
	b.streams[name] = named{s: out, schema: schema}
}

func (b *builder) sink(name string, k *yaml.Node, m *mapping) {
	b.id(name, k, m)
	typ := m.required("type")
	in, ok := b.input(m)
	par := b.parallelism(m)
	switch typ {
	case "file":
		path := b.path(m.required("path"))
		b.claimPath(path, m)
		if format := m.str("format", "jsonl"); format != "jsonl" {
			b.e.add(m.get("format"), m.field("format"), "unknown format %q (known: jsonl)", format)
		}
		if ok && path != "" {
			schema := in.schema
			stream.To(in.s, name, file.New(path, func(dst []byte, r row.Row) ([]byte, error) { return schema.AppendJSON(dst, r), nil }), par)
		}
	case "stdout":
		if ok {
			stream.To(in.s, name, stdout.New(in.schema.AppendJSON), par)
		}
	default:
		m.unknownType("sink", typ, "file, stdout")
	}
	m.done()
}
