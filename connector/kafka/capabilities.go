package kafka

import (
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Descriptor: the source replays exactly from per-partition offsets stored
// in checkpoints, and its positions can be merged and split again by
// another parallelism (see Rescaling in the package documentation).
func (s *Source[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "kafka", Capabilities: runtime.Capabilities{Replayable: true}, RescalablePositions: true}
}

// Descriptor: one Kafka transaction per sink subtask and checkpoint, each
// committed after the checkpoint completes, and a recovery resumes and
// commits prepared transactions, so read-committed consumers see every
// record once. Kafka cannot commit several transactional ids atomically, so
// such a consumer may see one subtask's part of a checkpoint before
// another's.
func (s *Sink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "kafka", Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeSubtask}}
}
