//go:build !iceberg

package config

import (
	"github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/stream"
)

// icebergBuilt says this binary has the Iceberg sink.
const icebergBuilt = false

// buildIceberg refuses the sink: this binary was built without it.
func (b *builder) buildIceberg(name string, m *mapping, in named, cfg iceberg.SinkConfig, par stream.NodeOption) {
	b.e.add(m.get("type"), m.field("type"), "this ingest binary was built without the Iceberg sink, which adds some 300 modules to a build: "+
		"build one with it, go build -tags iceberg ./cmd/ingest (docs/connectors/iceberg.md)")
}
