package config

import (
	"github.com/ingest-engine/ingest/nexmark"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the Nexmark table source.

func init() {
	sourceTypes["nexmark"] = (*builder).nexmarkSource
}

// nexmarkSource builds `type: nexmark` (table, columns, events, rate,
// events_per_second, max_delay).
func (b *builder) nexmarkSource(name string, m *mapping, par stream.NodeOption) (named, bool) {
	table := nexmark.Table(m.required("table"))
	cfg := nexmark.SourceConfig{
		Generator: nexmark.DefaultConfig(),
		Events:    m.int("events", 0),
		Rate:      m.float("rate", 0),
		MaxDelay:  m.duration("max_delay", 0),
	}
	cfg.Generator.EventsPerSecond = m.int("events_per_second", 0)
	columns := m.strList("columns")
	m.positive("events", cfg.Events > 0)
	m.positive("rate", cfg.Rate > 0)
	m.positive("events_per_second", cfg.Generator.EventsPerSecond > 0)
	m.nonNegative("max_delay", cfg.MaxDelay >= 0)
	if table == "" {
		return named{}, false
	}
	if nexmark.TableColumns(table) == nil {
		m.fail("table", m.get("table"), "unknown table %q (known: person, auction, bid)", table)
		return named{}, false
	}
	src, err := nexmark.NewTableSource(cfg, table, columns)
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return named{}, false
	}
	return named{s: stream.From(b.p, name, src, par), schema: src.Schema()}, true
}
