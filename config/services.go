package config

import (
	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the connectors of external services: the NATS JetStream
// source and the PostgreSQL sink.

func init() {
	sourceTypes["nats"] = (*builder).natsSource
}

// natsSource builds `type: nats` (url, stream, subject, start, stop_at,
// watermark, event_time, fields). Without event_time the JetStream store
// time is the event time.
func (b *builder) natsSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	cfg := nats.SourceConfig{
		URL:       m.str("url", "nats://127.0.0.1:4222"),
		Stream:    m.required("stream"),
		Subject:   m.str("subject", ""),
		Watermark: b.watermarkStrategy(m),
	}
	if s := m.str("start", ""); s != "" {
		start, err := nats.ParseStart(s)
		if err != nil {
			b.e.add(m.get("start"), m.field("start"), "%v", err)
			return named{}, false
		}
		cfg.Start = start
	}
	switch s := m.str("stop_at", ""); s {
	case "":
	case "latest":
		cfg.StopAt = nats.StopAtLatest
	default:
		b.e.add(m.get("stop_at"), m.field("stop_at"), "unknown value %q (known: latest)", s)
		return named{}, false
	}
	if cfg.Stream == "" {
		return named{}, false
	}
	sample := func() ([]byte, error) {
		raw, err := nats.NewSource(cfg, func(msg nats.Message) ([]byte, int64, error) { return msg.Data, msg.Timestamp.UnixNano(), nil })
		if err != nil {
			return nil, err
		}
		return sampleSource[[]byte](raw, sampleTimeout)
	}
	schema, ti, ok := b.jsonSchema(m, sample)
	if !ok {
		return named{}, false
	}
	decode := rowDecoder(schema, ti)
	src, err := nats.NewSource(cfg, func(msg nats.Message) (row.Row, int64, error) {
		return decode(msg.Data, msg.Timestamp.UnixNano())
	})
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return named{}, false
	}
	s := nats.From[row.Row](b.p, name, src, par)
	s.Node().Describe += describeWatermark(cfg.Watermark)
	return named{s: s, schema: schema}, true
}

// postgresSink builds `type: postgres` (dsn, table, mode, key,
// create_table): rows are published per checkpoint in one transaction.
func (b *builder) postgresSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	cfg := postgres.SinkConfig{
		DSN:         m.required("dsn"),
		Table:       m.required("table"),
		Key:         m.strList("key"),
		CreateTable: m.boolean("create_table", false),
		Pipeline:    b.p.Name(),
	}
	mode, err := postgres.ParseMode(m.str("mode", "append"))
	if err != nil {
		b.e.add(m.get("mode"), m.field("mode"), "%v", err)
		return
	}
	cfg.Mode = mode
	if !ok || cfg.DSN == "" || cfg.Table == "" {
		return
	}
	sink, err := postgres.NewRowSink(cfg, in.schema, nil)
	if err != nil {
		b.e.add(m.node, m.path, "%v", err) // the sink's errors redact the DSN's password
		return
	}
	stream.To(in.s, name, stream.Sink[row.Row](sink), par)
}
