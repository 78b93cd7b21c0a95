package postgres

import "github.com/ingest-engine/ingest/runtime"

// Capabilities: the sink stages rows per barrier and publishes each complete
// checkpoint's rows, from every subtask, in one transaction; in upsert mode
// writing a row again also leaves the table unchanged.
func (s *Sink[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Transactional: true, Idempotent: s.d.cfg.Mode == Upsert, CommitScope: runtime.ScopeDestination}
}
