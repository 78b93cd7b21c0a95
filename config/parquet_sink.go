package config

import (
	"github.com/ingest-engine/ingest/connector/file"
	"github.com/ingest-engine/ingest/row"
	"github.com/ingest-engine/ingest/stream"
)

// This file builds the file sink's Parquet format.

// parquetOnly are the file sink fields that only format: parquet takes.
var parquetOnly = []string{"compression", "row_group_rows"}

// parquetSink builds `type: file` with `format: parquet` (compression,
// row_group_rows): one nullable column per field of the input, in its
// order, in files staged and committed as the JSON Lines sink's are.
func (b *builder) parquetSink(name string, m *mapping, path string, in named, ok bool, par stream.NodeOption) {
	var opts []file.ParquetOption
	if v := m.str("compression", file.Snappy.String()); v != "" {
		c, err := file.ParseCompression(v)
		if err != nil {
			m.fail("compression", m.get("compression"), "%v", err)
			ok = false
		}
		opts = append(opts, file.WithCompression(c))
	}
	if m.has("row_group_rows") {
		n := m.int("row_group_rows", 0)
		m.positive("row_group_rows", n > 0)
		if n <= 0 {
			ok = false
		}
		opts = append(opts, file.RowGroupRows(n))
	}
	if !ok || path == "" {
		return
	}
	sink, err := file.ParquetRows(path, in.schema.Fields, opts...)
	if err != nil {
		b.e.add(m.node, m.path, "%v", err)
		return
	}
	stream.To[row.Row](in.s, name, sink, par)
}

// onlyParquet reports the Parquet fields given to a sink of another format.
func (b *builder) onlyParquet(m *mapping) {
	for _, k := range parquetOnly {
		if m.has(k) {
			b.e.add(m.line(k), m.field(k), "applies to format: parquet only (this sink writes jsonl)")
		}
	}
}
