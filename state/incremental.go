package state

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// maxChainFiles bounds the files one subtask's state is read from at a
// restore: an incremental snapshot that would reference more earlier files
// rewrites the key groups of the oldest ones instead.
const maxChainFiles = 8

// minReferencedShare is the part of an earlier file's bytes that must still
// be referenced for a snapshot to keep using it: below it the file's live
// key groups are rewritten, so that retention can delete the file and
// storage does not keep mostly-dead files alive for a few key groups.
const minReferencedShare = 0.25

// chain describes the files a complete checkpoint's snapshot of this
// backend reads from: for each key group, the checkpoint whose file holds
// it. It is immutable once built.
type chain struct {
	// epoch is the copy-on-write epoch the snapshot was taken at: a key
	// group whose states report writtenSince(i, epoch) false is as the
	// chain holds it.
	epoch uint64
	// holder is, by key group - Start, the id of the checkpoint whose file
	// holds the key group, and bytes the length of its section there.
	holder []int64
	bytes  []int
	// fileBytes is each holder file's total section bytes.
	fileBytes map[int64]int
}

// Encoded is a snapshot encoded for a checkpoint (Snapshot.EncodeCheckpoint).
type Encoded struct {
	// Data is the file to store for the checkpoint.
	Data []byte
	// Incremental reports that Data holds only the key groups written since
	// the snapshot it builds on; the others are in the Shared files.
	Incremental bool
	// Shared are the ids of the earlier checkpoints whose files of this
	// subtask hold the key groups Data does not, increasing. A restore
	// needs Data and all of them; none may be deleted while this
	// checkpoint is kept.
	Shared []int64
	// Reused is how many bytes of the Shared files the snapshot takes:
	// len(Data) + Reused is about what a full snapshot would write.
	Reused int64
}

// checkpointPlan is what CheckpointSnapshot decided for a snapshot.
type checkpointPlan struct {
	id   int64
	base *chain // nil: a full snapshot
	// rewrite marks, by key group - Start, the key groups an incremental
	// snapshot writes; the others come from base.
	rewrite []bool
	// stale is set when the set of states changed after the plan
	// (resetChain): its result must never become a base, though its
	// encoding still needs the files of its own base.
	stale bool
	// mu guards result, which EncodeCheckpoint sets (on the writing
	// goroutine) and Complete adopts (on the task goroutine).
	mu     sync.Mutex
	result *chain
}

// CheckpointSnapshot is Snapshot for checkpoint id: besides freezing the
// state it plans an incremental snapshot. It builds on the snapshot of the
// last checkpoint this backend was told is complete (Complete): the key
// groups none of whose states was written since that snapshot are not
// written again but taken from the files that snapshot read from. The plan
// costs O(key groups × states), on the task goroutine; the entries are read
// only by EncodeCheckpoint.
//
// The first snapshot after NewBackend, or after a Restore that cannot be
// built on (a rescaling, files of format version 1), the first after a state
// was dropped, and one that would rewrite every key group are full; after
// any other Restore the first snapshot builds on the files restored from. A
// state registered since the base needs nothing of it: the key groups it
// has entries in were written since. A snapshot never
// references more than maxChainFiles-1 earlier files, nor a file of which
// less than minReferencedShare is still referenced: those key groups are
// rewritten.
//
// With selfContained the snapshot is full whatever the base: a final
// checkpoint's, so that the checkpoint a finished or stopped job leaves
// needs no earlier one (retention keeps only it).
//
// INVARIANT: a snapshot only references files of checkpoints that completed
// (their base was adopted by Complete) or that a Restore read, never those of an in-flight or
// failed checkpoint, so aborting a checkpoint (and deleting its files) never
// breaks a later one.
func (b *Backend) CheckpointSnapshot(id int64, selfContained bool) *Snapshot {
	s := b.Snapshot()
	p := &checkpointPlan{id: id}
	s.plan = p
	s.epoch = b.epoch - 1 // Snapshot started a new epoch
	if base := b.base; base != nil && !selfContained {
		// When every key group is rewritten, nothing is gained by
		// referencing the base: a full file is smaller (it writes no
		// section for an empty key group) and ends the chain.
		if rewrite := b.dirty(base); slices.Contains(rewrite, false) {
			p.base, p.rewrite = base, rewrite
		}
	}
	if b.pending == nil {
		b.pending = make(map[int64]*checkpointPlan)
	}
	b.pending[id] = p
	return s
}

// dirty returns, by key group - Start, the key groups a snapshot on base
// must write: those written since base, and those held by files the
// snapshot should stop referencing (see CheckpointSnapshot).
func (b *Backend) dirty(base *chain) []bool {
	n := b.kgRange.Len()
	rewrite := make([]bool, n)
	for i := range n {
		for _, st := range b.states {
			if st.writtenSince(i, base.epoch) {
				rewrite[i] = true
				break
			}
		}
	}
	// The bytes each earlier file would still supply.
	live := map[int64]int{}
	for i := range n {
		if !rewrite[i] {
			live[base.holder[i]] += base.bytes[i]
		}
	}
	retire := map[int64]bool{}
	for id, used := range live {
		// A file that would supply only empty key groups is not worth
		// keeping either.
		if used == 0 || float64(used) < minReferencedShare*float64(base.fileBytes[id]) {
			retire[id] = true
		}
	}
	ids := slices.Sorted(maps.Keys(live))
	for _, id := range ids {
		if len(live)-len(retire) < maxChainFiles {
			break
		}
		retire[id] = true // the oldest first (again, if retired already)
	}
	for i := range n {
		if !rewrite[i] && retire[base.holder[i]] {
			rewrite[i] = true
		}
	}
	return rewrite
}

// EncodeCheckpoint encodes a snapshot taken by CheckpointSnapshot: the key
// groups its plan writes, marked with the checkpoint's id, and which earlier
// checkpoints' files hold the rest. Like Encode it runs off the task
// goroutine; it may be called more than once (the last result is what
// Complete adopts). Errors are as for Encode.
func (s *Snapshot) EncodeCheckpoint() (*Encoded, error) {
	p := s.plan
	if p == nil {
		return nil, fmt.Errorf("state: operator %q: EncodeCheckpoint of a snapshot not taken by CheckpointSnapshot", s.operator)
	}
	data, lens, err := s.encode(p.id, p.rewrite)
	if err != nil {
		return nil, err
	}
	n := s.kgRange.Len()
	next := &chain{epoch: s.epoch, holder: make([]int64, n), bytes: lens, fileBytes: map[int64]int{}}
	enc := &Encoded{Data: data, Incremental: p.base != nil}
	for i := range n {
		if p.base == nil || p.rewrite[i] {
			next.holder[i] = p.id
			next.fileBytes[p.id] += lens[i]
			continue
		}
		h := p.base.holder[i]
		next.holder[i], next.bytes[i] = h, p.base.bytes[i]
		next.fileBytes[h] = p.base.fileBytes[h]
		enc.Reused += int64(p.base.bytes[i])
	}
	if _, ok := next.fileBytes[p.id]; !ok {
		next.fileBytes[p.id] = 0
	}
	for id := range next.fileBytes {
		if id != p.id {
			enc.Shared = append(enc.Shared, id)
		}
	}
	slices.Sort(enc.Shared)
	p.mu.Lock()
	p.result = next
	p.mu.Unlock()
	return enc, nil
}

// Complete tells the backend that checkpoint id is complete: its snapshot,
// if it was encoded, becomes the base of later incremental snapshots.
// Without one (the backend took no snapshot for id, or its encoding failed)
// the next snapshot is full, since the old base may no longer be kept.
// Snapshots planned for id or earlier are forgotten. It runs on the task
// goroutine.
func (b *Backend) Complete(id int64) {
	p := b.pending[id]
	for pid := range b.pending {
		if pid <= id {
			delete(b.pending, pid)
		}
	}
	if id <= b.completed {
		return // an old notification: a newer base is adopted
	}
	b.completed = id
	b.base = nil
	if p != nil && !p.stale {
		p.mu.Lock()
		b.base = p.result
		p.mu.Unlock()
	}
}

// Abort tells the backend that checkpoint id failed: its snapshot never
// becomes a base (its files may be deleted).
func (b *Backend) Abort(id int64) { delete(b.pending, id) }

// resetChain makes the next checkpoint snapshot full and keeps every
// snapshot planned before from becoming a base: the set of states changed
// (DropState, DropUnclaimed), which a key group's section in an earlier file
// still holds.
func (b *Backend) resetChain() {
	b.base = nil
	for _, p := range b.pending {
		p.stale = true // still pending: ChainFiles keeps what it reads
	}
}

// ChainFiles returns the ids of the checkpoints whose files a snapshot may
// still reference, increasing: the files of the base, which the next
// snapshot builds on, and those of the bases of snapshots planned for
// checkpoints not yet complete (with concurrent checkpoints, a newer base
// can be adopted before an older plan is encoded). The runtime keeps their
// handles.
func (b *Backend) ChainFiles() []int64 {
	ids := map[int64]bool{}
	for _, c := range append([]*chain{b.base}, b.pendingBases()...) {
		if c != nil {
			for id := range c.fileBytes {
				ids[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// pendingBases returns the bases of the pending plans.
func (b *Backend) pendingBases() []*chain {
	var out []*chain
	for _, p := range b.pending {
		if p.base != nil {
			out = append(out, p.base)
		}
	}
	return out
}
