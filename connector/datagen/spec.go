package datagen

import "github.com/ingest-engine/ingest/connector"

// SourceSpec is the YAML specification of `type: datagen`.
var SourceSpec = connector.Spec{
	Role: connector.RoleSource,
	Type: "datagen",
	Summary: "Generates records `{\"id\": i, \"key\": i % keys, \"value\": i % 1000}` for *i* = 0, 1, 2, … with event time " +
		"`start_time + i * event_interval`. Subtask *s* of *P* emits the *i* with `i % P == s`, in order; its replay " +
		"position is its next *i*, so it is exactly-once, and it rescales.",
	Fields: []connector.Field{
		{Name: "count", Kind: connector.Int, Doc: "Total records over all subtasks. Absent: unbounded."},
		{Name: "rate", Kind: connector.Float, Doc: "Records per second over all subtasks. Absent: as fast as possible."},
		{Name: "keys", Kind: connector.Int, Default: "100", Doc: "Distinct keys."},
		{Name: "start_time", Kind: connector.Time, Default: "2026-01-01T00:00:00Z", Doc: "Event time of record 0, RFC 3339; `now`: the wall clock at the pipeline's first start, kept in its checkpoints."},
		{Name: "event_interval", Kind: connector.Duration, Default: "1ms", Doc: "Event time between consecutive records."},
		connector.WatermarkField,
	},
	Example: "type: datagen\ncount: 1000000\nrate: 100000\nwatermark: {max_delay: 1s}\n",
}

func init() { connector.Register(SourceSpec) }
