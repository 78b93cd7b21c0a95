// Package state is the keyed state of operators: in memory, partitioned by
// key group, with copy-on-write snapshots serialised per key group with
// checksums, so a checkpoint can be restored at another parallelism.
//
// # Key groups
//
// A key is hashed with a stable hash (HashKey, Hasher: the same in every
// process and run) and mapped to one of maxParallelism key groups
// (KeyGroupFor); each subtask of an operator owns a contiguous range of key
// groups (KeyGroupRangeFor, Flink's assignment), and the runtime's hash
// partitioner routes a record to the subtask owning its key group
// (SubtaskForKeyGroup). Max parallelism is fixed for the life of the state.
//
// # Lifecycle of a Backend (one per operator subtask)
//
//  1. NewBackend(operator, maxParallelism, range).
//  2. When recovering: Restore(snapshot files...) with the files of every old
//     subtask whose range overlaps this one, each with the earlier files its
//     incremental snapshot builds on; each key group comes from the newest
//     file that holds it. Entries stay encoded.
//  3. The operator's Open registers its states (NewValueState, NewMapState,
//     NewListState, NewTimers) with codecs; registration decodes that state's
//     restored entries (a large state's key groups in parallel, on up to
//     GOMAXPROCS goroutines) and fails with ErrStateMismatch if the kind or
//     codecs changed. Afterwards Unclaimed lists restored state nobody
//     registered.
//  4. Processing: Get/Update/... on the task goroutine. A key outside the
//     range is a routing bug, reported by Err.
//  5. At each checkpoint barrier: CheckpointSnapshot on the task goroutine
//     (cheap: no entry is copied; it plans which key groups changed since the
//     last complete checkpoint), then EncodeCheckpoint on another goroutine
//     while processing continues: a changed key group is written as a delta
//     (a NamespacedValueState's dropped namespaces, deleted keys and entries
//     written since; other states in full) or, every few checkpoints, in
//     full again. The bytes go to checkpoint storage, with the ids of the
//     earlier checkpoints whose files hold the unchanged key groups and the
//     sections the deltas apply over. Complete and Abort tell the backend how each checkpoint ended:
//     only a complete checkpoint's snapshot becomes the base of the next.
//     (Snapshot and Encode make a full snapshot outside checkpoints.)
//
// # Copy-on-write
//
// Each state keeps one table per key group, tagged with the epoch it was
// created in. Snapshot keeps references to the current tables and starts a
// new epoch. A write to a table (or to a MapState user map, a ListState list)
// from an older epoch first replaces it with a copy, so a table a Snapshot
// references is never written again and Encode can read it without locks.
// The cost moves from the barrier to the first write to each key group after
// it: at most one copy of the state per checkpoint, spread over processing.
//
// # Snapshot format
//
// A header (operator, max parallelism, key group range, checkpoint, whether
// the file is incremental), one section per key group it holds (a full file:
// every non-empty one; an incremental file: those that changed, empty ones
// included, in full or as deltas) with each state's entries and a CRC-32C,
// then an index of sections and a fixed-size footer. Format version 3;
// version 2 (no delta sections) and 1 (no checkpoint, always full) files are
// still read, but an older build cannot read a newer version. See the format comment
// in snapshot.go. Corruption is reported as ErrCorrupt naming the operator
// and key group.
package state
