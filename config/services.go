package config

import (
	"context"
	"strings"
	"time"

	"github.com/ingest-engine/ingest/connector/nats"
	"github.com/ingest-engine/ingest/connector/pgcdc"
	"github.com/ingest-engine/ingest/connector/postgres"
	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the connectors of external services: the NATS JetStream
// source, the PostgreSQL change-data-capture source and the PostgreSQL sink.

func init() {
	sourceTypes["nats"] = (*builder).natsSource
	sourceTypes["postgres_cdc"] = (*builder).postgresCDCSource
	sinkTypes["postgres"] = (*builder).postgresSink
}

// natsSource builds `type: nats` (url, stream, subject, start, stop_at,
// on_gap, watermark, event_time, fields). Without event_time the JetStream
// store time is the event time.
func (b *builder) natsSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	cfg := nats.SourceConfig{
		URL:       m.str("url", "nats://127.0.0.1:4222"),
		Stream:    m.required("stream"),
		Subject:   m.str("subject", ""),
		Watermark: b.watermarkStrategy(m),
	}
	if s := m.str("start", "first"); s != "" {
		start, err := nats.ParseStart(s)
		if err != nil {
			b.e.add(m.get("start"), m.field("start"), "%v", err)
			return named{}, false
		}
		cfg.Start = start
	}
	if v := m.str("on_gap", string(nats.OnGapFail)); v != "" {
		g, err := nats.ParseOnGap(v)
		if err != nil {
			m.fail("on_gap", m.get("on_gap"), "unknown value %q (known: fail, skip)", v)
			return named{}, false
		}
		cfg.OnGap = g
	}
	latest, ok := m.stopAtLatest()
	if !ok || cfg.Stream == "" {
		return named{}, false
	}
	if latest {
		cfg.StopAt = nats.StopAtLatest
	}
	return buildJSONSource(b, name, m, par, cfg.Watermark, false, jsonSource[nats.Message]{
		payload: func(msg nats.Message) ([]byte, int64) { return msg.Data, msg.Timestamp.UnixNano() },
		raw: func(d func(nats.Message) ([]byte, int64, error)) (stream.Source[[]byte], error) {
			src, err := nats.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
		rows: func(d func(nats.Message) (row.Row, int64, error)) (stream.Source[row.Row], error) {
			src, err := nats.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
		add: func(src stream.Source[row.Row]) stream.Stream[row.Row] {
			return stream.From(b.p, name, src.(*nats.Source[row.Row]), par)
		},
	})
}

// postgresCDCSource builds `type: postgres_cdc` (dsn, tables, schemas,
// slot, publication, chunk_rows, stop_at, watermark). Loading connects to
// the database: the records' fields are the tables' columns. The stream is
// a changelog keyed by the primary key.
func (b *builder) postgresCDCSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	cfg := pgcdc.Config{
		DSN:         m.required("dsn"),
		Tables:      m.strList("tables"),
		Schemas:     m.strList("schemas"),
		Slot:        m.required("slot"),
		Publication: m.required("publication"),
		ChunkRows:   int(m.int("chunk_rows", 10000)),
		Watermark:   b.watermarkStrategy(m),
	}
	cfg.BeforeImages = m.boolean("before_images", false)
	cfg.SnapshotParallelism = int(m.int("snapshot_parallelism", 4))
	m.positive("snapshot_parallelism", cfg.SnapshotParallelism > 0)
	m.positive("chunk_rows", cfg.ChunkRows > 0)
	cfg.Key = m.strList("key")
	if m.get("fields") != nil {
		declared := b.declaredFields(m.sub("fields"))
		if declared == nil {
			return named{}, false
		}
		cfg.Fields = declared.Fields
	}
	latest, ok := m.stopAtLatest()
	if !ok || cfg.DSN == "" || cfg.Slot == "" || cfg.Publication == "" || cfg.ChunkRows <= 0 || cfg.SnapshotParallelism <= 0 {
		return named{}, false
	}
	cfg.StopAtLatest = latest
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := pgcdc.NewSource(ctx, cfg)
	if err != nil {
		b.e.add(m.node, m.path, "%v", err) // the source's errors redact the DSN's password
		return named{}, false
	}
	return named{s: stream.From(b.p, name, src, par), schema: src.Schema(), changelog: src.Key()}, true
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
	keep := m.boolean("keep_metadata", false)
	if !ok || cfg.DSN == "" || cfg.Table == "" {
		return
	}
	if keep && in.changelog == nil {
		b.e.add(m.get("keep_metadata"), m.field("keep_metadata"), "%s is not a changelog: every field of its records is written already", m.str("input", ""))
		return
	}
	var sink *postgres.Sink[row.Row]
	if in.changelog == nil {
		sink, err = postgres.NewRowSink(cfg, in.schema, nil)
	} else {
		// A changelog is applied by its key: an upsert on another key, or
		// appends, would keep rows its updates and deletes replaced.
		key := strings.Join(in.changelog, ", ")
		switch {
		case cfg.Mode != postgres.Upsert:
			b.e.add(m.get("input"), m.field("input"), "%s is a changelog keyed by [%s]: write it with mode: upsert and key: [%s], which applies its updates and deletes (mode %v would keep every version of a row)",
				m.str("input", ""), key, key, cfg.Mode)
			return
		case !sameSet(cfg.Key, in.changelog):
			b.e.add(m.get("key"), m.field("key"), "key [%s] is not the key of the changelog %s, [%s]: upserting on other columns would merge or split its rows",
				strings.Join(cfg.Key, ", "), m.str("input", ""), key)
			return
		}
		sink, err = postgres.NewRowChangelogSink(cfg, in.schema, aggregate.OpField, keep)
	}
	if err != nil {
		b.e.add(m.node, m.path, "%v", err) // the sink's errors redact the DSN's password
		return
	}
	stream.To(in.s, name, stream.Sink[row.Row](sink), par)
}
