package config

import (
	"time"

	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/stdout"
	"github.com/ingest-engine/ingest/operator/window"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// datagenSchema is the schema of datagen rows.
var datagenSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

func (b *builder) source(name string, m *mapping) {
	b.id(name, m)
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
		m.positive("keys", cfg.Keys > 0)
		m.positive("event_interval", cfg.EventInterval > 0)
		par := b.parallelism(m)
		src, err := datagen.New(cfg, func(id, key, value int64) row.Row {
			return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
		})
		if err != nil {
			b.e.add(m.node, m.path, "%v", err)
			break
		}
		b.streams[name] = named{s: stream.From[row.Row](b.p, name, src, par), schema: datagenSchema}
	case "":
	default:
		b.e.add(m.get("type"), m.field("type"), "unknown source type %q (known: datagen)", typ)
	}
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
	for _, k := range aggs.keys {
		expr := aggs.str(k, "")
		spec, err := window.ParseAggregate(k, expr)
		if err != nil {
			b.e.add(aggs.get(k), aggs.field(k), "%v", err)
			continue
		}
		specs = append(specs, spec)
	}
	aggs.done()
	if !ok || keyField == "" || size <= 0 {
		return
	}
	key := in.schema.Index(keyField)
	if key < 0 {
		b.e.add(m.get("key"), m.field("key"), "input %s has no field %q", m.str("input", ""), keyField)
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

func (b *builder) sink(name string, m *mapping) {
	b.id(name, m)
	typ := m.required("type")
	in, ok := b.input(m)
	par := b.parallelism(m)
	switch typ {
	case "file":
		path := b.path(m.required("path"))
		if format := m.str("format", "jsonl"); format != "jsonl" {
			b.e.add(m.get("format"), m.field("format"), "unknown format %q (known: jsonl)", format)
		}
		if ok && path != "" {
			stream.To(in.s, name, file.New(path, in.schema.AppendJSON), par)
		}
	case "stdout":
		if ok {
			stream.To(in.s, name, stdout.New(in.schema.AppendJSON), par)
		}
	case "":
	default:
		b.e.add(m.get("type"), m.field("type"), "unknown sink type %q (known: file, stdout)", typ)
	}
	m.done()
}
