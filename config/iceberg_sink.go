//go:build iceberg

package config

import (
	"github.com/ingest-engine/ingest/connector/iceberg"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// icebergBuilt says this binary has the Iceberg sink.
const icebergBuilt = true

// buildIceberg adds the Iceberg sink.
func (b *builder) buildIceberg(name string, m *mapping, in named, cfg iceberg.SinkConfig, par stream.NodeOption) {
	sink, err := iceberg.NewSink(name, cfg)
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return
	}
	stream.To(in.s, name, stream.Sink[row.Row](sink), par)
}
