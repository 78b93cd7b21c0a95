package file

import "github.com/ingest-engine/ingest/runtime"

// Capabilities: the sink stages per barrier and publishes each complete
// checkpoint with one directory rename.
func (s *Sink[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}
}

// Capabilities: the source replays from a byte offset per file.
func (s *Source[T]) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Replayable: true}
}
