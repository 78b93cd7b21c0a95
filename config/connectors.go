package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/connector/datagen"
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/stdout"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
	"github.com/ingest-engine/ingest/watermark"
)

// This file builds the connectors: sources and sinks.

// datagenSchema is the schema of datagen rows.
var datagenSchema = &row.Schema{Fields: []row.Field{{Name: "id", Kind: row.Int}, {Name: "key", Kind: row.Int}, {Name: "value", Kind: row.Int}}}

// sourceType builds one type of source from its fields in m (type, name and
// parallelism aside, which the caller reads): it reports every problem on
// b and returns the source's stream, or ok false.
type sourceType func(b *builder, name string, m *mapping, par stream.NodeOption) (s named, ok bool)

// sinkType builds one type of sink from its fields in m over its input in
// (ok false when the input could not be built), reporting every problem on b.
type sinkType func(b *builder, name string, m *mapping, in named, ok bool, par stream.NodeOption)

// sourceTypes and sinkTypes build the connector types by their YAML name:
// one per spec registered in package connector (TestEveryConnectorHasABuilder).
// A source whose records carry event times reads its watermark options with
// builder.watermarkStrategy.
var (
	sourceTypes = map[string]sourceType{
		"datagen": (*builder).datagen,
	}
	sinkTypes = map[string]sinkType{
		"file":      (*builder).fileSink,
		"stdout":    (*builder).stdoutSink,
		"blackhole": (*builder).blackholeSink,
	}
)

// connectorSpec returns the registered spec of the node's type, or reports
// an unknown type (ok false).
func (b *builder) connectorSpec(role connector.Role, m *mapping, typ string, hasBuilder bool) (connector.Spec, bool) {
	spec, known := connector.Lookup(role, typ)
	switch {
	case known && hasBuilder:
		return spec, true
	case known:
		b.e.add(m.get("type"), m.field("type"), "internal error, please report it: the %s type %q has a spec but no builder", role, typ)
	default:
		m.unknownType(string(role), typ, strings.Join(connector.Types(role), ", "))
	}
	for _, k := range m.keys {
		m.read[k] = true
	}
	return connector.Spec{}, false
}

func (b *builder) source(name string, k *yaml.Node, m *mapping) {
	b.id(name, k, m)
	typ := m.required("type")
	build := sourceTypes[typ]
	if spec, ok := b.connectorSpec(connector.RoleSource, m, typ, build != nil); ok {
		m.decl = declare(spec, "type", "parallelism")
		if s, ok := build(b, name, m, b.parallelism(m)); ok {
			b.streams[name] = s
		}
	}
	b.failed(name)
	m.done()
}

// watermarkStrategy reads a source's watermark options from its
// `watermark: {max_delay, idle_timeout}` block (see package watermark). Every
// source type that tracks event times reads them here, so they mean the same
// on each.
func (b *builder) watermarkStrategy(m *mapping) watermark.Strategy {
	w := m.sub("watermark")
	s := watermark.Strategy{
		MaxDelay:    w.duration("max_delay", 0),
		IdleTimeout: w.duration("idle_timeout", 0),
	}
	w.nonNegative("max_delay", s.MaxDelay >= 0)
	w.nonNegative("idle_timeout", s.IdleTimeout >= 0)
	w.done()
	return s
}

// describeWatermark renders a non-default strategy for the plan, "" for the
// default.
func describeWatermark(s watermark.Strategy) string {
	var parts []string
	if s.MaxDelay > 0 {
		parts = append(parts, fmt.Sprintf("max delay %v", s.MaxDelay))
	}
	if s.IdleTimeout > 0 {
		parts = append(parts, fmt.Sprintf("idle after %v", s.IdleTimeout))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", watermark " + strings.Join(parts, ", ")
}

func (b *builder) datagen(name string, m *mapping, par stream.NodeOption) (named, bool) {
	errsBefore := len(b.e.list)
	cfg := datagen.Config{
		Count:         m.int("count", 0),
		Rate:          m.float("rate", 0),
		Keys:          m.int("keys", 100),
		StartTime:     datagen.DefaultStartTime,
		EventInterval: m.duration("event_interval", time.Millisecond),
		Watermark:     b.watermarkStrategy(m),
	}
	m.checkDefault("start_time", datagen.DefaultStartTime.Format(time.RFC3339Nano))
	if v, ok := m.scalar("start_time"); ok {
		t, err := time.Parse(time.RFC3339Nano, v.Value)
		switch {
		case v.Value == "now":
			cfg.StartTime, cfg.StartNow = time.Time{}, true
		case err != nil:
			m.fail("start_time", v, "%q is not an RFC 3339 time (2026-01-01T00:00:00Z) or now", v.Value)
		default:
			cfg.StartTime = t
		}
	}
	m.positive("count", cfg.Count > 0)
	m.positive("rate", cfg.Rate > 0)
	if cfg.Rate > datagen.MaxRate {
		b.e.add(m.get("rate"), m.field("rate"), "%g exceeds %g records per second; omit rate for as fast as possible", cfg.Rate, float64(datagen.MaxRate))
	}
	m.positive("keys", cfg.Keys > 0)
	m.positive("event_interval", cfg.EventInterval > 0)
	src, err := datagen.New(cfg, func(id, key, value int64) row.Row {
		return row.Row{row.IntValue(id), row.IntValue(key), row.IntValue(value)}
	})
	if err != nil {
		if len(b.e.list) == errsBefore { // not already reported field by field
			b.e.add(m.node, m.path, "%v", err)
		}
		return named{}, false
	}
	s := stream.From(b.p, name, src, par)
	s.Node().Describe += describeWatermark(cfg.Watermark)
	return named{s: s, schema: datagenSchema}, true
}

func (b *builder) sink(name string, k *yaml.Node, m *mapping) {
	b.id(name, k, m)
	typ := m.required("type")
	build := sinkTypes[typ]
	if spec, ok := b.connectorSpec(connector.RoleSink, m, typ, build != nil); ok {
		m.decl = declare(spec, "type", "parallelism", "input")
		in, ok := b.input(m)
		if ok {
			in.s = routed(in)
		}
		build(b, name, m, in, ok, b.parallelism(m))
	} else {
		b.input(m) // resolve the reference, so its node does not read as unused
	}
	m.done()
}

// fileSink builds `type: file`: JSON Lines, or Parquet (parquetSink).
func (b *builder) fileSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	path := b.path(m.required("path"))
	b.claimPath(path, m)
	if path != "" {
		b.fileSinks = append(b.fileSinks, fileSinkDir{sink: name, dir: path, at: m.get("path"), field: m.field("path")})
	}
	switch format := m.str("format", "jsonl"); format {
	case "jsonl":
		b.onlyParquet(m)
		if ok && path != "" {
			schema := in.schema
			stream.To(in.s, name, file.New(path, func(dst []byte, r row.Row) ([]byte, error) { return schema.AppendJSON(dst, r), nil }), par)
		}
	case "parquet":
		b.parquetSink(name, m, path, in, ok, par)
	default:
		b.e.add(m.get("format"), m.field("format"), "unknown format %q (known: jsonl, parquet)", format)
		m.has("compression")
		m.has("row_group_rows")
	}
}

// blackholeSink builds `type: blackhole`.
func (b *builder) blackholeSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	if ok {
		stream.To(in.s, name, stream.Discard[row.Row](), par)
	}
}

// stdoutSink builds `type: stdout`.
func (b *builder) stdoutSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	if ok {
		stream.To(in.s, name, stdout.New(in.schema.AppendJSON), par)
	}
	b.writesStdout = true
}
