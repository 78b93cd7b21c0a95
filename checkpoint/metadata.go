package checkpoint

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ingest-engine/ingest/storage"
)

// MetadataVersion is the format version written into every metadata file.
// A reader refuses versions it does not know.
const MetadataVersion = 1

// TaskID names one subtask of a pipeline: the node's stable id and the
// subtask index. It is the unit that acknowledges checkpoints.
type TaskID struct {
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
}

// String formats the task as operator[subtask].
func (t TaskID) String() string { return fmt.Sprintf("%s[%d]", t.Operator, t.Subtask) }

// Compare orders tasks by operator, then subtask.
func (t TaskID) Compare(u TaskID) int {
	if c := cmp.Compare(t.Operator, u.Operator); c != 0 {
		return c
	}
	return cmp.Compare(t.Subtask, u.Subtask)
}

// Committable is one piece of sink output staged by a sink subtask: enough for
// the sink's committer to publish it or abandon it (for files, a staged file
// name). PreparedAt is the checkpoint at whose barrier it was staged.
//
// INVARIANT: a sink subtask reports a committable in every acknowledgement
// from PreparedAt on until it has been told that a checkpoint >= PreparedAt
// completed; the coordinator then includes it in exactly one complete
// checkpoint's commits (see Coordinator.buildMetadata).
type Committable struct {
	PreparedAt int64  `json:"prepared_at"`
	Data       []byte `json:"data"`
}

// SubtaskState is what a subtask acknowledges checkpoint N with: a handle to
// its written state, small inline state, and for sinks the committables it
// staged. Everything a recovery needs from this subtask is here.
type SubtaskState struct {
	Task TaskID `json:"task"`
	// State is the subtask's keyed/operator state file, nil when it has none.
	State *storage.Handle `json:"state,omitempty"`
	// Shared are the files of earlier checkpoints that State builds on: an
	// incremental snapshot writes only the key groups that changed and takes
	// every other key group from the newest of these files that holds it. A
	// restore reads them all with State.
	//
	// INVARIANT: a checkpoint whose subtask lists a file of checkpoint M in
	// Shared keeps M's files from deletion while the checkpoint is kept
	// (Metadata.References; retention is reference-counted).
	Shared []storage.Handle `json:"shared,omitempty"`
	// StateReused is how many bytes of the Shared files of earlier
	// checkpoints the snapshot uses, and StateWritten the bytes of the
	// Shared files of this checkpoint (an LSM store's new data files, which
	// its State file, a manifest, names): State.Size + StateWritten +
	// StateReused is what a full snapshot would have written.
	StateReused  int64 `json:"state_reused,omitempty"`
	StateWritten int64 `json:"state_written,omitempty"`
	// Inline is small operator state kept in the metadata itself (a source's
	// replay position).
	Inline []byte `json:"inline,omitempty"`
	// Watermark is the subtask's current event-time watermark at the barrier.
	Watermark int64 `json:"watermark"`
	// Committables are the sink output staged and not yet known committed.
	Committables []Committable `json:"committables,omitempty"`
	// Alignment is the time from the first to the last barrier of this checkpoint
	// at this subtask.
	Alignment time.Duration `json:"alignment_ns"`
	// SyncDuration is the time the synchronous snapshot held the task.
	SyncDuration time.Duration `json:"sync_ns"`
	// AsyncDuration is the time spent encoding and writing the state off the task goroutine.
	AsyncDuration time.Duration `json:"async_ns"`
	// States is the schema of each state in State, sorted by name: what a
	// restore compares with the states the operator registers, before any
	// subtask processes a record (the stable processing contract). It is
	// empty when the subtask has no keyed state, and in checkpoints written
	// before schemas were recorded.
	States []StateSchema `json:"states,omitempty"`
}

// StateSchema describes one keyed state of an operator: its name, kind
// ("value", "map", "list", "timers") and codec names, key codec first. The
// codec names carry the operator's parameters that decide how entries are
// encoded and what they mean (a window's size and aggregate), so the schema
// is the state's version: a restore accepts a state only under an equal one.
type StateSchema struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Codecs []string `json:"codecs"`
}

// String formats the schema as `"name" (kind state, codecs [...])`.
func (s StateSchema) String() string {
	return fmt.Sprintf("%q (%s state, codecs %q)", s.Name, s.Kind, s.Codecs)
}

// Equal reports whether s and o describe the same state under the same
// encoding.
func (s StateSchema) Equal(o StateSchema) bool {
	return s.Name == o.Name && s.Kind == o.Kind && slices.Equal(s.Codecs, o.Codecs)
}

// Commit is the output of one sink to publish when a checkpoint completes.
// Checkpoint names the publication (a file sink names its directory after it);
// a checkpoint's metadata may carry commits of earlier complete checkpoints
// whose publication was not yet confirmed, so a recovery publishes them too.
type Commit struct {
	Checkpoint   int64    `json:"checkpoint"`
	Sink         string   `json:"sink"`
	Committables [][]byte `json:"committables"`
}

// Metadata is the content of the single file whose durable, atomic write makes
// a checkpoint complete. It holds everything a recovery restores, all from this
// one checkpoint: source positions, operator state handles, watermarks and the
// sink commits to (re-)publish.
type Metadata struct {
	Version     int            `json:"version"`
	Pipeline    string         `json:"pipeline"`
	JobID       string         `json:"job_id"`
	ID          int64          `json:"id"`
	Final       bool           `json:"final,omitempty"`
	TriggeredAt time.Time      `json:"triggered_at"`
	CompletedAt time.Time      `json:"completed_at"`
	Tasks       []SubtaskState `json:"tasks"`
	Commits     []Commit       `json:"commits,omitempty"`
	// Topology is the shape of the pipeline that wrote the checkpoint, so a
	// restore can tell what changed before it uses any state. It is nil in
	// checkpoints written before it was recorded; a restore then skips the
	// checks that need it.
	Topology *Topology `json:"topology,omitempty"`
}

// Topology is what a restore compares with the pipeline it restores into:
// the nodes that may own state and what decides how their keyed state is
// partitioned. The schema of each keyed state (its name, kind and codec
// names, which carry the operator's parameters) is recorded per subtask
// (SubtaskState.States) and in the state files themselves.
type Topology struct {
	// MaxParallelism is the number of key groups keyed state is split into.
	// Keyed state cannot be redistributed over another number.
	MaxParallelism int `json:"max_parallelism"`
	// Nodes are the pipeline's nodes, sorted by id.
	Nodes []NodeTopology `json:"nodes"`
}

// NodeTopology describes one node of a Topology.
type NodeTopology struct {
	// ID is the node's stable id: the key of its state.
	ID string `json:"id"`
	// Type is the connector or operator type ("window", "file"), for messages.
	Type string `json:"type,omitempty"`
	// Parallelism is the node's number of subtasks.
	Parallelism int `json:"parallelism"`
	// Key describes what a keyed node's state is keyed by (the key field or
	// expression of the pipeline's spec); empty when the node is not keyed or
	// its builder did not describe its key.
	Key string `json:"key,omitempty"`
}

// Node returns the node with id, if the topology has it.
func (t *Topology) Node(id string) (NodeTopology, bool) {
	i, ok := slices.BinarySearchFunc(t.Nodes, id, func(n NodeTopology, id string) int { return cmp.Compare(n.ID, id) })
	if !ok {
		return NodeTopology{}, false
	}
	return t.Nodes[i], true
}

// Task returns the state acknowledged by task t, if present.
func (m *Metadata) Task(t TaskID) (SubtaskState, bool) {
	i, ok := slices.BinarySearchFunc(m.Tasks, t, func(s SubtaskState, t TaskID) int { return s.Task.Compare(t) })
	if !ok {
		return SubtaskState{}, false
	}
	return m.Tasks[i], true
}

// OperatorStates returns the state schemas the checkpoint records for
// operator, over all its subtasks, sorted by name. A name recorded with
// different schemas by different subtasks appears once per schema.
func (m *Metadata) OperatorStates(operator string) []StateSchema {
	var out []StateSchema
	for _, t := range m.Tasks {
		if t.Task.Operator != operator {
			continue
		}
		for _, s := range t.States {
			if !slices.ContainsFunc(out, s.Equal) {
				out = append(out, s)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b StateSchema) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Size is the size of the checkpoint's state as a full snapshot would hold
// it: the state files, the parts of earlier files they reuse, inline state.
func (m *Metadata) Size() int64 {
	var n int64
	for _, t := range m.Tasks {
		if t.State != nil {
			n += t.State.Size
		}
		n += t.StateWritten + t.StateReused + int64(len(t.Inline))
	}
	return n
}

// References returns, increasing and without repeats, the ids of the earlier
// checkpoints whose files this checkpoint's state builds on (SubtaskState.Shared):
// the checkpoints of SharedFiles. While this checkpoint is kept, none of those
// may be deleted whole; retention keeps only the files SharedFiles names.
func (m *Metadata) References() []int64 {
	var ids []int64
	for _, t := range m.Tasks {
		for _, h := range t.Shared {
			if h.Checkpoint != m.ID {
				ids = append(ids, h.Checkpoint)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// SharedFiles returns, ordered by checkpoint then name and without repeats,
// the files of earlier checkpoints this checkpoint's state builds on
// (SubtaskState.Shared of every subtask). While this checkpoint is kept, none
// of them may be deleted; nothing else of those checkpoints is kept for it
// (retention is reference-counted per file: a checkpoint kept only for its
// files is trimmed to them, see Trim).
func (m *Metadata) SharedFiles() []storage.FileRef {
	var refs []storage.FileRef
	for _, t := range m.Tasks {
		for _, h := range t.Shared {
			if h.Checkpoint != m.ID {
				refs = append(refs, h.Ref())
			}
		}
	}
	slices.SortFunc(refs, storage.FileRef.Compare)
	return slices.Compact(refs)
}

// Encode serialises the metadata as JSON. The storage layer adds the checksum.
func (m *Metadata) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding metadata of checkpoint %d: %w", m.ID, err)
	}
	return b, nil
}

// DecodeMetadata parses metadata written by Encode and checks its version.
func DecodeMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding checkpoint metadata: %w", err)
	}
	if m.Version != MetadataVersion {
		return nil, fmt.Errorf("checkpoint metadata %d has format version %d; this build reads version %d", m.ID, m.Version, MetadataVersion)
	}
	slices.SortFunc(m.Tasks, func(a, b SubtaskState) int { return a.Task.Compare(b.Task) })
	if m.Topology != nil {
		slices.SortFunc(m.Topology.Nodes, func(a, b NodeTopology) int { return cmp.Compare(a.ID, b.ID) })
	}
	return &m, nil
}
