package stdout

import "github.com/ingest-engine/ingest/connector"

// SinkSpec is the YAML specification of `type: stdout`.
var SinkSpec = connector.Spec{
	Role: connector.RoleSink,
	Type: "stdout",
	Summary: "Prints each record as a JSON line at once. After a recovery it prints again what it printed after the last " +
		"complete checkpoint: at-least-once.",
	Example: "type: stdout\ninput: events\n",
}

func init() { connector.Register(SinkSpec) }
