package iceberg

import "github.com/ingest-engine/ingest/connector"

// SinkSpec is the YAML specification of `type: iceberg`.
var SinkSpec = connector.Spec{
	Role: connector.RoleSink,
	Type: "iceberg",
	Summary: "Writes Parquet data files of an Apache Iceberg table and publishes each complete checkpoint's files in one catalog transaction, " +
		"whose snapshot summary records the checkpoint; a changelog is applied by its key with equality deletes: readers see all of a checkpoint's rows or none; exactly-once. " +
		"Built with `go build -tags iceberg ./cmd/ingest` (docs/connectors/iceberg.md).",
	Fields: []connector.Field{
		{Name: "catalog", Kind: connector.Mapping, Required: true, Doc: "Where the table's metadata is kept.", Fields: []connector.Field{
			{Name: "type", Kind: connector.String, Default: "sql", Values: []string{"sql", "rest"}, Doc: "`sql`: a catalog in a PostgreSQL database or a SQLite file (the tables iceberg_tables and iceberg_namespace_properties, created when missing); `rest`: an Iceberg REST catalog."},
			{Name: "uri", Kind: connector.String, Required: true, Doc: "`sql`: the PostgreSQL database's connection string (postgres://…), or `sqlite:` and the path of a SQLite file (created when missing; relative to the pipeline file); `rest`: the catalog's URL."},
			{Name: "warehouse", Kind: connector.String, Doc: "Where new tables are written: a directory (or file:// URL), or an `s3://bucket/path` URL. Required for `sql`; for `rest`, the catalog's warehouse name or location, passed as it is."},
			{Name: "name", Kind: connector.String, Default: "ingest", Doc: "The catalog's name, as other engines that share the catalog know it."},
			{Name: "properties", Kind: connector.Mapping, Doc: "More catalog properties, as strings: for an `s3://` warehouse, Iceberg's FileIO properties `s3.endpoint`, `s3.region`, `s3.path-style-access`, `s3.access-key-id` and `s3.secret-access-key` (without keys, the environment's AWS credentials); for `rest`, `credential` (OAuth client id:secret), `token`, `scope` and `prefix`."},
		}},
		{Name: "table", Kind: connector.String, Required: true, Doc: "The table, `namespace.table`."},
		{Name: "create_table", Kind: connector.Bool, Default: "false", Doc: "Create the table (and its namespace) from the input's fields when it does not exist: a format version 2 table whose identifier fields are a changelog's key."},
		{Name: "partition_by", Kind: connector.List, Doc: "The partition spec of a table it creates: each item a column, or `year(c)`, `month(c)`, `day(c)`, `hour(c)` of a time column, `bucket(N, c)` or `truncate(W, c)`. A changelog's table may be partitioned by its key's columns only."},
		{Name: "keep_metadata", Kind: connector.Bool, Default: "false", Doc: "For a changelog input: write its `_` fields (such as a CDC record's `_table`, `_lsn` and `_commit_time`) as columns too, but the operation `_op`, which the sink applies."},
		{Name: "target_file_size", Kind: connector.Size, Default: "512MiB", Doc: "A data file is closed when it reaches about this size, and at every barrier."},
		{Name: "commit_interval", Kind: connector.Duration, Default: "0s", Doc: "At most one commit per interval: checkpoints that complete sooner after the last commit hand their files on to the next one, so short checkpoint intervals do not make a snapshot each. 0 commits every checkpoint. A stopped job's held-back files are published when it runs again."},
	},
	Example: "type: iceberg\ninput: events\ncatalog:\n  type: sql\n  uri: postgres://postgres@127.0.0.1:5432/test\n  warehouse: /var/lib/ingest/warehouse\ntable: analytics.events\ncreate_table: true\npartition_by: [bucket(8, key)]\ncommit_interval: 1m\n",
}

func init() { connector.Register(SinkSpec) }
