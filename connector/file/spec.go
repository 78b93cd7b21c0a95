package file

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: file` as a source.
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "file",
	Summary: "Reads JSON Lines or CSV files matching a glob. A byte offset per file is the replay position, and a file is " +
		"known by its inode and first bytes: a rotation by rename is followed, a file replaced or rewritten under its path " +
		"stops the job unless `on_replace: reread`. See [File source](#file-source).",
	Fields: append([]connector.Field{
		{Name: "path", Kind: connector.String, Required: true, Doc: "A glob, relative to the pipeline file."},
		{Name: "format", Kind: connector.String, Default: "jsonl", Values: []string{"jsonl", "csv"}, Doc: "`jsonl`: one JSON object per line; `csv`: RFC 4180 with a header line naming the columns."},
		{Name: "on_replace", Kind: connector.String, Default: "fail", Values: []string{"fail", "reread"}, Doc: "What a file replaced, truncated or rewritten under a path the source reads does: stop the source, or be read from its start."},
		connector.StopAtField("the files' sizes"),
		connector.WatermarkField,
	}, connector.RecordFields("")...),
	Example: "type: file\nformat: csv\npath: input/trades*.csv\nstop_at: latest\nevent_time: {field: ts}\nfields: {ts: time, symbol: string, price: float, qty: int}\n",
}

// SinkSpec is the YAML specification of `type: file` as a sink.
var SinkSpec = connector.Spec{
	Role: connector.RoleSink,
	Type: "file",
	Summary: "Writes JSON Lines or Parquet files, staged per subtask and published per checkpoint by one directory rename " +
		"to `<path>/ckpt-<N>-<job>/`, after the checkpoint completes: exactly-once. See [File sink](#file-sink).",
	Fields: []connector.Field{
		{Name: "path", Kind: connector.String, Required: true, Doc: "The sink's directory, relative to the pipeline file; one sink of one pipeline owns it."},
		{Name: "format", Kind: connector.String, Default: "jsonl", Values: []string{"jsonl", "parquet"}, Doc: "`jsonl`: one JSON object per line; `parquet`: one nullable column per input field."},
		{Name: "compression", Kind: connector.String, Default: "snappy", Values: []string{"snappy", "zstd", "gzip", "none"}, Doc: "Parquet only: the pages' codec."},
		{Name: "row_group_rows", Kind: connector.Int, Doc: "Parquet only: rows per row group. Absent: the writer's default."},
	},
	Example: "type: file\ninput: events\npath: data/out\nformat: parquet\ncompression: zstd\n",
}

func init() {
	connector.Register(SourceSpec)
	connector.Register(SinkSpec)
}
