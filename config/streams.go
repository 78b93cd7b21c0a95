package config

import (
	"strings"

	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/connector/kafka"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the Kafka source and sink and the file source.

func init() {
	sourceTypes["kafka"] = (*builder).kafkaSource
	sourceTypes["file"] = (*builder).fileSource
	sinkTypes["kafka"] = (*builder).kafkaSink
}

// kafkaSource builds `type: kafka` (brokers, topic, group, start, stop_at,
// watermark, event_time, fields). Without event_time the Kafka record
// timestamp is the event time.
func (b *builder) kafkaSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	cfg := kafka.SourceConfig{
		Brokers:   m.strList("brokers"),
		Topic:     m.required("topic"),
		Group:     m.str("group", ""),
		Start:     kafka.StartPosition(m.str("start", string(kafka.StartEarliest))),
		Watermark: b.watermarkStrategy(m),
	}
	if len(cfg.Brokers) == 0 {
		b.e.add(m.node, m.field("brokers"), "is required (a list of host:port)")
	}
	latest, ok := m.stopAtLatest()
	if !ok || cfg.Topic == "" || len(cfg.Brokers) == 0 {
		return named{}, false
	}
	if latest {
		cfg.StopAt = kafka.StopAtLatest
	}
	return buildJSONSource(b, name, m, par, cfg.Watermark, false, jsonSource[kafka.Message]{
		payload: func(msg kafka.Message) ([]byte, int64) { return msg.Value, msg.Timestamp.UnixNano() },
		raw: func(d func(kafka.Message) ([]byte, int64, error)) (stream.Source[[]byte], error) {
			src, err := kafka.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
		rows: func(d func(kafka.Message) (row.Row, int64, error)) (stream.Source[row.Row], error) {
			src, err := kafka.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
	})
}

// fileSource builds `type: file` (path glob relative to the pipeline file,
// format, stop_at, on_replace, watermark, event_time, fields): JSON Lines
// by default, or CSV with a header line (see csvFileSource).
func (b *builder) fileSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	cfg := file.SourceConfig{
		Path:      b.path(m.required("path")),
		Format:    file.FormatJSONLines,
		Watermark: b.watermarkStrategy(m),
	}
	format := m.str("format", "jsonl")
	if format != "jsonl" && format != "csv" {
		b.e.add(m.get("format"), m.field("format"), "unknown format %q (known: csv, jsonl)", format)
		for _, k := range m.keys {
			m.has(k) // the other fields cannot be checked against an unknown format
		}
		return named{}, false
	}
	switch v := m.str("on_replace", string(file.ReplaceFail)); file.ReplacePolicy(v) {
	case file.ReplaceFail, file.ReplaceReread:
		cfg.OnReplace = file.ReplacePolicy(v)
	default:
		m.fail("on_replace", m.get("on_replace"), "unknown value %q (known: fail, reread)", v)
	}
	if cfg.Path != "" {
		b.fileGlobs = append(b.fileGlobs, fileGlob{source: name, glob: cfg.Path})
	}
	latest, ok := m.stopAtLatest()
	if !ok || cfg.Path == "" {
		return named{}, false
	}
	if latest {
		cfg.StopAt = file.StopAtLatest
	}
	if format == "csv" {
		return b.csvFileSource(name, m, par, cfg)
	}
	return buildJSONSource(b, name, m, par, cfg.Watermark, true, jsonSource[file.Line]{
		payload: func(l file.Line) ([]byte, int64) { return l.JSON, 0 },
		raw: func(d func(file.Line) ([]byte, int64, error)) (stream.Source[[]byte], error) {
			src, err := file.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
		rows: func(d func(file.Line) (row.Row, int64, error)) (stream.Source[row.Row], error) {
			src, err := file.NewSource(cfg, d)
			if err != nil {
				return nil, err
			}
			return src, nil
		},
	})
}

// kafkaSink builds `type: kafka` (brokers, topic, transactional_id_prefix,
// transaction_timeout, key): records are JSON objects of the row's fields,
// keyed by the key fields' JSON values joined by '|' when key is given (a
// changelog's key by default).
func (b *builder) kafkaSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	cfg := kafka.SinkConfig{
		Brokers:               m.strList("brokers"),
		Topic:                 m.required("topic"),
		TransactionalIDPrefix: m.required("transactional_id_prefix"),
		TransactionTimeout:    m.duration("transaction_timeout", kafka.DefaultTransactionTimeout),
	}
	keys := m.strList("key")
	if ok && in.changelog != nil {
		// Kafka keeps order per partition, which the record key picks: a
		// changelog's rows are keyed by its key, so a key's rows stay in
		// order for a consumer.
		if len(keys) == 0 {
			keys = in.changelog
		} else if !sameSet(keys, in.changelog) {
			b.e.add(m.get("key"), m.field("key"), "key [%s] is not the key of the changelog %s, [%s]: a key's updates would spread over partitions and reach consumers out of order",
				strings.Join(keys, ", "), m.str("input", ""), strings.Join(in.changelog, ", "))
			return
		}
	}
	if len(cfg.Brokers) == 0 {
		b.e.add(m.node, m.field("brokers"), "is required (a list of host:port)")
	}
	if !ok || cfg.Topic == "" || cfg.TransactionalIDPrefix == "" || len(cfg.Brokers) == 0 {
		return
	}
	schema := in.schema
	var keyIdx []int
	for _, k := range keys {
		i := schema.Index(k)
		if i < 0 {
			b.e.add(m.get("key"), m.field("key"), "no field %q in the input (fields: %s)", k, strings.Join(schema.Names(), ", "))
			return
		}
		keyIdx = append(keyIdx, i)
	}
	// A changelog of one group (key: []) has one record key, so its rows
	// stay in one partition, in order.
	oneGroup := ok && in.changelog != nil && len(keyIdx) == 0
	sink, err := kafka.NewSink(cfg, func(r row.Row) ([]byte, []byte, error) {
		var key []byte
		if oneGroup {
			key = []byte("[]")
		}
		for j, i := range keyIdx {
			if j > 0 {
				key = append(key, '|')
			}
			key = r[i].AppendJSON(key)
		}
		return key, schema.AppendJSON(nil, r), nil
	})
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return
	}
	stream.To(in.s, name, stream.Sink[row.Row](sink), par)
}
