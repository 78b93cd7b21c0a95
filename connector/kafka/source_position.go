package kafka

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ingest-engine/ingest/stream"
)

// srcPositionVersion is the format version of a source subtask's position.
const srcPositionVersion = 1

// srcPosition is a source subtask's replay position, stored as its inline
// state in every checkpoint: for each partition it reads, the offset of the
// next record to emit. Every entry names its partition, so the positions of
// all subtasks of a checkpoint can be merged and split again by a different
// parallelism (see srcRestore).
//
// INVARIANT: a record of partition p with offset < Next was emitted before
// the barrier of the checkpoint holding this position, and none with offset
// >= Next was.
type srcPosition struct {
	Version     int    `json:"v"`
	Topic       string `json:"topic"`
	Subtask     int    `json:"subtask"`
	Parallelism int    `json:"parallelism"`
	// Bounded is set when the source stops at end offsets: then every
	// partition has End, and a partition without an entry is not read.
	Bounded    bool                   `json:"bounded,omitempty"`
	Partitions []srcPartitionPosition `json:"partitions"`
	// Bad counts the subtask's bad records skipped or dead-lettered before
	// the position (nil: none), so the counts resume with it.
	Bad *stream.BadRecordTally `json:"bad,omitempty"`
}

// srcPartitionPosition is the position of one partition.
type srcPartitionPosition struct {
	Partition int32 `json:"p"`
	// Next is the offset of the next record to emit.
	Next int64 `json:"next"`
	// End is the exclusive end offset of a bounded source, fixed at its
	// first start.
	End *int64 `json:"end,omitempty"`
	// MaxTime is the newest event time emitted from the partition, so the
	// partition's watermark resumes where it was.
	MaxTime *int64 `json:"max_time,omitempty"`
}

// srcResume is what a subtask resumes from: the positions of the partitions
// it owns, taken from a restored checkpoint.
type srcResume struct {
	// restored is set when there was a position to restore.
	restored bool
	// bounded is the restored positions' Bounded.
	bounded bool
	parts   map[int32]srcPartitionPosition
	// bad is the restored bad-record tally (summed over the positions).
	bad stream.BadRecordTally
}

// srcOwns reports whether partition p belongs to subtask s of parallelism n.
// The assignment depends on nothing but these numbers, so every subtask
// computes it alone and it is the same after a restart.
func srcOwns(p int32, s, n int) bool { return int(p)%n == s }

// srcRestore selects the positions of subtask's partitions from inlines.
//
// With union false, inlines is the subtask's own restored position (what
// runtime.Context.Restored holds today): it must have been written by the
// same subtask at the same parallelism, since the partitions that subtask no
// longer owns would otherwise be lost.
//
// With union true, inlines are the positions of every subtask of the node in
// the restored checkpoint, at whatever parallelism it had
// (runtime.Context.RestoredUnion): the subtask takes exactly the partitions
// it owns now, and subtask 0 takes the bad-record counts, so their sum over
// the subtasks stays what it was.
func srcRestore(inlines [][]byte, topic string, subtask, parallelism int, union bool) (srcResume, error) {
	res := srcResume{parts: map[int32]srcPartitionPosition{}}
	first := true
	for _, raw := range inlines {
		if len(raw) == 0 {
			continue
		}
		var pos srcPosition
		if err := json.Unmarshal(raw, &pos); err != nil {
			return res, fmt.Errorf("restoring position %q: %w", raw, err)
		}
		if pos.Version != srcPositionVersion {
			return res, fmt.Errorf("restored position has format version %d; this build reads version %d", pos.Version, srcPositionVersion)
		}
		if pos.Topic != topic {
			return res, fmt.Errorf("the checkpoint's position is for topic %q but the source reads topic %q: a source cannot resume from another topic's offsets (start from an empty checkpoint directory, or give the source a new node id)", pos.Topic, topic)
		}
		if !union && (pos.Parallelism != parallelism || pos.Subtask != subtask) {
			return res, fmt.Errorf("the checkpoint's position was written by subtask %d of %d, this is subtask %d of %d: a subtask restored at an unchanged parallelism must get its own position (at a changed one, every subtask gets all of them)", pos.Subtask, pos.Parallelism, subtask, parallelism)
		}
		if first {
			res.restored, res.bounded, first = true, pos.Bounded, false
		} else if pos.Bounded != res.bounded {
			return res, fmt.Errorf("the checkpoint's positions disagree on whether the source is bounded (subtask %d of %d)", pos.Subtask, pos.Parallelism)
		}
		if pos.Bad != nil && (!union || subtask == 0) {
			res.bad.Skipped += pos.Bad.Skipped
			res.bad.DeadLettered += pos.Bad.DeadLettered
		}
		for _, pp := range pos.Partitions {
			if pp.Partition < 0 || pp.Next < 0 || (pp.End != nil && *pp.End < 0) {
				return res, fmt.Errorf("restored position of partition %d is invalid (next %d)", pp.Partition, pp.Next)
			}
			if pos.Bounded && pp.End == nil {
				return res, fmt.Errorf("restored position of partition %d of a bounded source has no end offset", pp.Partition)
			}
			if !srcOwns(pp.Partition, subtask, parallelism) {
				if !union {
					return res, fmt.Errorf("restored position holds partition %d, which does not belong to subtask %d of %d", pp.Partition, subtask, parallelism)
				}
				continue
			}
			if _, dup := res.parts[pp.Partition]; dup {
				return res, fmt.Errorf("the checkpoint holds partition %d in the positions of two subtasks", pp.Partition)
			}
			res.parts[pp.Partition] = pp
		}
	}
	return res, nil
}

// encode serialises the position with partitions in order.
func (p *srcPosition) encode() ([]byte, error) {
	slices.SortFunc(p.Partitions, func(a, b srcPartitionPosition) int { return cmp.Compare(a.Partition, b.Partition) })
	return json.Marshal(p)
}
