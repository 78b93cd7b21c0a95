package file

import (
	"github.com/ingest-engine/ingest/connector"
	"github.com/ingest-engine/ingest/runtime"
)

// Descriptor: the sink stages per barrier and publishes each complete
// checkpoint with one directory rename.
func (s *Sink[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "file", Capabilities: runtime.Capabilities{Transactional: true, CommitScope: runtime.ScopeDestination}}
}

// Descriptor: the source replays from the byte offsets in a checkpoint, as
// long as files are only appended to or rotated by renaming (see the package
// documentation; a file replaced under its path stops it by default).
// Positions can be merged and split again: restored at another parallelism,
// each subtask takes the files it owns now (by the hash of their inode
// number) from every old subtask's position.
func (s *Source[T]) Descriptor() connector.Descriptor {
	return connector.Descriptor{Type: "file", Capabilities: runtime.Capabilities{Replayable: true}, RescalablePositions: true}
}
