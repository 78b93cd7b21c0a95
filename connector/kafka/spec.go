package kafka

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: kafka` as a source.
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "kafka",
	Summary: "Reads a topic's JSON records. Per-partition offsets are the replay position, kept in the checkpoint; " +
		"exactly-once.",
	Fields: append([]connector.Field{
		{Name: "brokers", Kind: connector.List, Required: true, Doc: "Seed brokers, `host:port`."},
		{Name: "topic", Kind: connector.String, Required: true, Doc: "The topic to read."},
		{Name: "group", Kind: connector.String, Doc: "A consumer group the offsets are committed to after each checkpoint, for monitoring only: the checkpoint is what recovery reads."},
		{Name: "start", Kind: connector.String, Default: "earliest", Values: []string{"earliest", "latest"}, Doc: "Where a fresh start reads a partition from: its log start, or what is produced after the source opened."},
		connector.StopAtField("each partition's end offset"),
		connector.WatermarkField,
	}, connector.RecordFields("the Kafka record's timestamp")...),
	Example: "type: kafka\nbrokers: [127.0.0.1:9092]\ntopic: events\nevent_time: {field: ts}\nfields: {key: int, value: float, ts: time}\n",
}

// SinkSpec is the YAML specification of `type: kafka` as a sink.
var SinkSpec = connector.Spec{
	Role: connector.RoleSink,
	Type: "kafka",
	Summary: "Writes records as JSON objects in one transaction per subtask and checkpoint, committed after the " +
		"checkpoint completes: exactly-once for read-committed consumers.",
	Fields: []connector.Field{
		{Name: "brokers", Kind: connector.List, Required: true, Doc: "Seed brokers, `host:port`."},
		{Name: "topic", Kind: connector.String, Required: true, Doc: "The topic to write."},
		{Name: "transactional_id_prefix", Kind: connector.String, Required: true, Doc: "Prefix of the sink's transactional ids; one sink of one pipeline owns it."},
		{Name: "transaction_timeout", Kind: connector.Duration, Default: "15m", Doc: "The timeout the broker enforces on each transaction; it must cover the time from a checkpoint to its commit."},
		{Name: "key", Kind: connector.List, Doc: "Fields whose JSON values, joined by `|`, make the record key. Absent: no key."},
	},
	Example: "type: kafka\ninput: events\nbrokers: [127.0.0.1:9092]\ntopic: totals\ntransactional_id_prefix: totals-sink\nkey: [key]\n",
}

func init() {
	connector.Register(SourceSpec)
	connector.Register(SinkSpec)
}
