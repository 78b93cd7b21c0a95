package nats

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: nats`.
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "nats",
	Summary: "Reads a JetStream stream's JSON messages with one subtask. The stream sequence is the replay position; " +
		"exactly-once. A message removed before it was read stops the job, naming the range, unless `on_gap: skip`; see " +
		"[NATS source](#nats-source-removed-messages-on_gap).",
	Fields: append([]connector.Field{
		{Name: "url", Kind: connector.String, Default: "nats://127.0.0.1:4222", Doc: "The server."},
		{Name: "stream", Kind: connector.String, Required: true, Doc: "The JetStream stream."},
		{Name: "subject", Kind: connector.String, Doc: "A subject filter. Absent: every subject of the stream."},
		{Name: "start", Kind: connector.String, Default: "first", Doc: "Where a fresh start reads from: `first`, `new`, a stream sequence, or an RFC 3339 time."},
		{Name: "on_gap", Kind: connector.String, Default: "fail", Values: []string{"fail", "skip"}, Doc: "What messages removed before they were read do: stop the job, or be counted and skipped."},
		connector.StopAtField("the stream's last sequence"),
		connector.WatermarkField,
	}, connector.RecordFields("the message's JetStream store time")...),
	Example: "type: nats\nurl: nats://127.0.0.1:4222\nstream: EVENTS\nsubject: events.>\nfields: {key: int, value: float}\n",
}

func init() { connector.Register(SourceSpec) }
