package postgres

import "github.com/ingest-engine/ingest/connector"

// SinkSpec is the YAML specification of `type: postgres`.
var SinkSpec = connector.Spec{
	Role: connector.RoleSink,
	Type: "postgres",
	Summary: "Publishes each checkpoint's rows in one transaction that also records the checkpoint, after it completes: " +
		"readers see all of them or none; exactly-once.",
	Fields: []connector.Field{
		{Name: "dsn", Kind: connector.String, Required: true, Doc: "The connection string; its password is masked in every message."},
		{Name: "table", Kind: connector.String, Required: true, Doc: "The target table, optionally `schema.table`."},
		{Name: "mode", Kind: connector.String, Default: "append", Values: []string{"append", "upsert"}, Doc: "`append` inserts every row; `upsert` inserts or updates by `key`."},
		{Name: "key", Kind: connector.List, Doc: "The key columns of `upsert`."},
		{Name: "create_table", Kind: connector.Bool, Default: "false", Doc: "Create the table from the input's fields when it does not exist."},
		{Name: "keep_metadata", Kind: connector.Bool, Default: "false", Doc: "For a changelog input: write its `_` fields (such as a CDC record's `_table`, `_lsn` and `_commit_time`) as columns too, but the operation `_op`, which the sink applies. Without it they are not written."},
	},
	Example: "type: postgres\ninput: events\ndsn: postgres://postgres@127.0.0.1:5432/test\ntable: totals\nmode: upsert\nkey: [key]\ncreate_table: true\n",
}

func init() { connector.Register(SinkSpec) }
