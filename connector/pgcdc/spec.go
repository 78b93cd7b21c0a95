package pgcdc

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: postgres_cdc`.
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "postgres_cdc",
	Summary: "Reads PostgreSQL tables' rows and then their changes, through logical replication (pgoutput): a snapshot read in " +
		"chunks of the primary key, then every committed transaction, whole. Records are the tables' columns plus `_op` " +
		"(`insert`, `update`, `delete`), `_table`, `_lsn` and `_commit_time` (the event time): a changelog keyed by the " +
		"primary key. The replay position is the slot's LSN, confirmed to the server only with complete checkpoints; " +
		"exactly-once. Needs `wal_level = logical`; see [PostgreSQL CDC](connectors/postgres-cdc.md).",
	Fields: []connector.Field{
		{Name: "dsn", Kind: connector.String, Required: true, Doc: "The database, as a URL or keyword/value pairs. Its user needs the REPLICATION attribute and SELECT on the tables."},
		{Name: "tables", Kind: connector.List, Doc: "The captured tables, `schema.table` or `table` (in public). Each needs a primary key."},
		{Name: "schemas", Kind: connector.List, Doc: "Captures every table of these schemas too."},
		{Name: "slot", Kind: connector.String, Required: true, Doc: "The logical replication slot, created when missing. One pipeline's source per slot."},
		{Name: "publication", Kind: connector.String, Required: true, Doc: "The publication the slot decodes, created for the tables when missing; an existing one must publish every table and every kind of change."},
		{Name: "fields", Kind: connector.Mapping, Doc: "The columns the records keep, in order, with their kinds (`{id: int, owner: string}`): each a column of the tables read as that kind, the primary key among them. Absent: every column."},
		{Name: "key", Kind: connector.List, Doc: "When given, must be the tables' primary key columns: a load fails if the key changed."},
		{Name: "snapshot_parallelism", Kind: connector.Int, Default: "4", Doc: "Tables the snapshot reads at once, each on a connection of its own that shares the snapshot; within a table the next chunk is read while the last is emitted. Up to snapshot_parallelism + 2 chunks are in memory at once."},
		{Name: "before_images", Kind: connector.Bool, Default: "false", Doc: "Adds `_before_<column>` after the columns: an update's values before it (also on the insert an update of the key becomes), NULL in other records. Needs `REPLICA IDENTITY FULL` on every table."},
		{Name: "chunk_rows", Kind: connector.Int, Default: "10000", Doc: "Rows the snapshot reads per chunk; a checkpoint can pass between two chunks."},
		connector.StopAtField("the server's WAL position"),
		connector.WatermarkField,
	},
	Example: "type: postgres_cdc\ndsn: postgres://postgres@127.0.0.1:5432/test\ntables: [public.accounts]\nslot: ingest_accounts\npublication: ingest_accounts\n",
}

func init() { connector.Register(SourceSpec) }
