package config

import (
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/operator/aggregate"
	"github.com/ingest-engine/ingest/stream"
)

// This file reads `type: iceberg` in every build. The sink itself is built
// only with the build tag iceberg (iceberg_sink.go); without it
// (iceberg_missing.go) a pipeline that uses it is refused, saying how to get
// a binary that has it.

func init() { sinkTypes["iceberg"] = (*builder).icebergSink }

// icebergSink builds `type: iceberg` (catalog, table, create_table,
// partition_by, keep_metadata, target_file_size, commit_interval).
func (b *builder) icebergSink(name string, m *mapping, in named, ok bool, par stream.NodeOption) {
	cm := m.sub("catalog")
	cfg := iceberg.SinkConfig{
		Catalog: iceberg.CatalogConfig{
			Type:      cm.str("type", "sql"),
			URI:       cm.required("uri"),
			Warehouse: cm.str("warehouse", ""),
			Name:      cm.str("name", "ingest"),
		},
		CreateTable:    m.boolean("create_table", false),
		KeepMetadata:   m.boolean("keep_metadata", false),
		TargetFileSize: m.size("target_file_size", 512<<20),
		CommitInterval: m.duration("commit_interval", 0),
		Pipeline:       b.p.Name(),
	}
	if cm.get("properties") != nil {
		pm := cm.sub("properties")
		cfg.Catalog.Properties = map[string]string{}
		for _, k := range pm.keys {
			cfg.Catalog.Properties[k] = pm.str(k, "")
		}
		pm.done()
	}
	cm.done()
	if !m.has("catalog") {
		m.fail("catalog", m.node, "required field missing")
		ok = false
	}
	switch cfg.Catalog.Type {
	case "sql":
		// sqlite:<path>: a relative path is the pipeline file's.
		if path, ok := strings.CutPrefix(cfg.Catalog.URI, iceberg.SQLitePrefix); ok && path != "" {
			cfg.Catalog.URI = iceberg.SQLitePrefix + b.path(path)
		}
		if cfg.Catalog.Warehouse == "" {
			cm.fail("warehouse", cm.node, "a sql catalog needs a warehouse: the directory new tables are written to")
			ok = false
		} else if cfg.Catalog.Warehouse != "" && !strings.Contains(cfg.Catalog.Warehouse, "://") {
			cfg.Catalog.Warehouse = b.path(cfg.Catalog.Warehouse)
		}
	case "rest":
	default:
		cm.fail("type", cm.get("type"), "unknown catalog type %q (known: sql, rest)", cfg.Catalog.Type)
		ok = false
	}
	if t := m.required("table"); t != "" {
		ns, tbl, err := iceberg.ParseTable(t)
		if err != nil {
			m.fail("table", m.get("table"), "%v", err)
			ok = false
		}
		cfg.Namespace, cfg.Table = ns, tbl
	}
	m.positive("target_file_size", cfg.TargetFileSize > 0)
	m.nonNegative("commit_interval", cfg.CommitInterval >= 0)
	parts := joinSplitCalls(m.strList("partition_by"))
	if !ok || cfg.Table == "" || cfg.Catalog.URI == "" {
		return
	}
	cfg.Schema = in.schema
	for _, p := range parts {
		pp, err := iceberg.ParsePartition(p, in.schema)
		if err != nil {
			m.fail("partition_by", m.get("partition_by"), "%v", err)
			return
		}
		cfg.PartitionBy = append(cfg.PartitionBy, pp)
	}
	if in.changelog != nil {
		cfg.Key, cfg.Op = in.changelog, aggregate.OpField
		for _, p := range cfg.PartitionBy {
			if !slices.Contains(cfg.Key, p.Column) {
				m.fail("partition_by", m.get("partition_by"), "partition %s: %s is a changelog keyed by [%s], and a delete carries only the key: partition by key fields only",
					p, m.str("input", ""), strings.Join(cfg.Key, ", "))
				return
			}
		}
	} else if cfg.KeepMetadata {
		b.e.add(m.get("keep_metadata"), m.field("keep_metadata"), "%s is not a changelog: every field of its records is written already", m.str("input", ""))
		return
	}
	b.buildIceberg(name, m, in, cfg, par)
}

// joinSplitCalls joins the items a YAML flow sequence split inside
// parentheses: [bucket(8, id)] reads as "bucket(8" and "id)".
func joinSplitCalls(items []string) []string {
	var out []string
	open := false
	for _, it := range items {
		if open {
			out[len(out)-1] += ", " + strings.TrimSpace(it)
		} else {
			out = append(out, it)
		}
		open = strings.Count(out[len(out)-1], "(") > strings.Count(out[len(out)-1], ")")
	}
	return out
}
