package postgres

import (
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Descriptor: the sink stages rows per barrier and publishes each complete
// checkpoint's rows, from every subtask, in one transaction; in upsert mode
// writing a row again also leaves the table unchanged.
func (s *Sink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "postgres", Capabilities: runtime.Capabilities{Transactional: true, Idempotent: s.d.cfg.Mode == Upsert, CommitScope: runtime.ScopeDestination}}
}
