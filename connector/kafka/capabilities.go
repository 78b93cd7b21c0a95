package kafka

import "github.com/ingest-engine/ingest/runtime"

// Capabilities: the source replays from per-partition offsets stored in
// checkpoints.
func (s *Source[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Replayable: true}
}

// Capabilities: one Kafka transaction per sink subtask and checkpoint, each
// committed after the checkpoint completes. Kafka cannot commit several
// transactional ids atomically, so a read-committed consumer may see one
// subtask's part of a checkpoint before another's.
func (s *Sink[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeSubtask}
}
