package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/storage"
)

// Reference-counted retention in the seeded simulation (sim_test.go). In
// half the seeds tasks take incremental snapshots: the state a task
// acknowledges checkpoint N with builds on the files of B, the recovery point
// when N was triggered (SubtaskState.Shared: B's own file and the files B
// built on), up to a chain of a few files, with now and then a full snapshot
// that references nothing. Now and then, in seeds with faults, an
// acknowledgement names a file of a checkpoint that is not in storage.
//
// A checkpoint's references name every earlier checkpoint whose files it
// reads (Shared is the whole chain, B's own file and everything B read), so
// references are followed one step only: a checkpoint held for its files is
// no recovery point and keeps nothing it references itself.
//
// Checked after every step (checkReferences, checkRetention):
//   - no retained checkpoint, pending checkpoint's protects or unrecorded
//     write references a discarded one: every reference of every retained
//     checkpoint (the newest Options.Retain, the recovery points), of every
//     metadata write in flight and of every failed metadata write the ledger
//     does not record yet is in storage;
//   - a pending checkpoint's possible bases (everything in storage at its
//     trigger) stay in storage while it is pending;
//   - storage holds exactly what the coordinator retains or holds, and each
//     held checkpoint is there for a reason (no leak): a retained checkpoint,
//     a pending one or an unrecorded write references it directly;
//   - an acknowledgement with a dangling reference fails its checkpoint.
//
// And at each Discard (sim_test.go): no retained checkpoint references it,
// and no checkpoint discarded later in the same step does (Discards come
// newest first, so a crash between two leaves nothing that a checkpoint
// about to be discarded reads missing).

// maxChain is the most files an incremental snapshot of the sim builds on.
const maxChain = 3

// shareState makes st, a task's state at barrier id, an incremental snapshot
// on top of the checkpoint that was the recovery point at id's trigger.
func (s *sim) shareState(st *SubtaskState, id int64) {
	if !s.incremental {
		return
	}
	st.State = &storage.Handle{Name: "state-" + st.Task.String(), Checkpoint: id, Size: 1}
	if b := s.base[id]; b != 0 && s.rng.IntN(5) > 0 {
		if bm := s.metaOf[b]; bm != nil {
			if bst, ok := bm.Task(st.Task); ok && bst.State != nil {
				shared := append([]storage.Handle{*bst.State}, bst.Shared...)
				slices.SortFunc(shared, func(x, y storage.Handle) int { return cmp.Compare(y.Checkpoint, x.Checkpoint) })
				// The oldest files' key groups were all rewritten since.
				st.Shared = shared[:min(len(shared), 1+s.rng.IntN(maxChain))]
			}
		}
	}
	if s.faults > 0 && s.rng.IntN(60) == 0 {
		// A backend that builds on a file it should not: of a checkpoint
		// that is gone, or never completed.
		gone := s.rng.Int64N(id) + 1
		st.Shared = append(st.Shared, storage.Handle{Name: "stale", Checkpoint: gone, Size: 1})
	}
}

// dangling returns the first file r's state builds on whose checkpoint is
// not in storage; ok is false when there is none.
func (s *sim) dangling(r simResponse) (h storage.Handle, ok bool) {
	for _, h := range r.state.Shared {
		if h.Checkpoint != r.id && s.store[h.Checkpoint] == nil {
			return h, true
		}
	}
	return storage.Handle{}, false
}

// checkDanglingAck checks the step of an acknowledgement the coordinator
// took (the first of its task, for a pending checkpoint) that names h, a
// file of a checkpoint that was not in storage before the step: the
// checkpoint failed, and the reason names the file and the checkpoint.
func (s *sim) checkDanglingAck(r simResponse, h storage.Handle, isDangling bool, acts []Action) {
	if !isDangling {
		return
	}
	for _, a := range find[Abort](acts) {
		if a.ID != r.id {
			continue
		}
		s.stats.DanglingFailed++
		want := fmt.Sprintf("file %q of checkpoint %d", h.Name, h.Checkpoint)
		if !strings.Contains(a.Reason.Error(), want) && !strings.Contains(a.Reason.Error(), "timed out") {
			s.failf("retention: Abort{%d} of an ack with a dangling reference says %q, want it to name %s", r.id, a.Reason, want)
		}
		return
	}
	if s.failJob {
		return // the job failed in this step (FailJob emits nothing further)
	}
	s.failf("retention: ack of %d by %v references %v of checkpoint %d, which is not in storage, and the checkpoint did not fail", r.id, r.state.Task, h.Name, h.Checkpoint)
}

// storedIDs returns the ids of the checkpoints in storage, increasing.
func (s *sim) storedIDs() []int64 {
	ids := make([]int64, 0, len(s.store))
	for id := range s.store {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// refViolation ends every failure of a reference check.
const refViolation = "(no retained checkpoint, pending checkpoint's protects or unrecorded write references a discarded one)"

// recoveryPoints returns the newest Options.Retain checkpoints the
// coordinator retains: the ones a recovery may read. After a restart the
// coordinator also retains, until the next completion, older checkpoints
// that nothing references (Config.Retained); those were held before, for
// their files only, and may have lost what they referenced themselves.
func (s *sim) recoveryPoints() []int64 {
	r := s.coord.Retained()
	return r[max(0, len(r)-s.opts.Retain):]
}

// checkReferences checks that nothing still needed was discarded: the
// references of the retained checkpoints, of the metadata being written and
// of the failed writes not yet recorded, and the possible bases of pending
// checkpoints.
func (s *sim) checkReferences(pending []int64) {
	for _, id := range s.recoveryPoints() {
		for _, r := range s.refsOf[id] {
			if s.store[r] == nil {
				s.failf("retention: retained checkpoint %d references checkpoint %d, which was discarded %s", id, r, refViolation)
			}
		}
	}
	for _, m := range s.writes {
		for _, r := range s.refsOf[m.ID] {
			if s.store[r] == nil {
				s.failf("retention: the metadata of %d being written references checkpoint %d, which was discarded %s", m.ID, r, refViolation)
			}
		}
	}
	for _, id := range s.unrecorded {
		for _, r := range s.refsOf[id] {
			if s.store[r] == nil {
				s.failf("retention: the failed metadata write of %d, not yet recorded in the ledger, references checkpoint %d, which was discarded %s", id, r, refViolation)
			}
		}
	}
	for _, id := range pending {
		for _, b := range s.protect[id] {
			if s.store[b] == nil {
				s.failf("retention: pending checkpoint %d may build on checkpoint %d, kept at its trigger, which was discarded while it is pending %s", id, b, refViolation)
			}
		}
	}
}

// live returns the checkpoints that must stay in storage, computed from the
// sim's own records: the retained ones and what they reference, with pending
// the ones pending checkpoints may build on, and the references of failed
// writes not yet recorded. References are followed one step only: those of a
// checkpoint kept for its files keep nothing.
func (s *sim) live(pending []int64, withPending bool) map[int64]bool {
	live := map[int64]bool{}
	for _, id := range s.coord.Retained() {
		live[id] = true
		for _, r := range s.refsOf[id] {
			live[r] = true
		}
	}
	if withPending {
		for _, id := range pending {
			for _, b := range s.protect[id] {
				live[b] = true
			}
		}
	}
	for _, id := range s.unrecorded {
		for _, r := range s.refsOf[id] {
			live[r] = true
		}
	}
	return live
}

// checkRetention checks that storage holds exactly the retained and held
// checkpoints, that each held one is live, and counts what the step did.
func (s *sim) checkRetention(ev Event, acts []Action, latest int64, pending, prevHeld []int64) {
	c := s.coord
	retained, held := c.Retained(), c.Held()
	if latest != 0 && (len(retained) == 0 || retained[len(retained)-1] != latest) {
		s.failf("retention: Retained() = %v does not end with the recovery point %d", retained, latest)
	}
	kept := append(slices.Clone(retained), held...)
	slices.Sort(kept)
	if stored := s.storedIDs(); !slices.Equal(stored, kept) && s.mutant == "" {
		s.failf("retention: storage holds %v; the coordinator retains %v and holds %v", stored, retained, held)
	}
	var heldDiscards int
	for _, d := range find[Discard](acts) {
		if slices.Contains(prevHeld, d.ID) {
			heldDiscards++
		}
	}
	if _, ok := ev.(MetadataWritten); ok && heldDiscards > 0 && len(find[Discard](acts)) > 1 {
		s.stats.Cascades++
	}
	if len(held) == 0 {
		return
	}
	live, byRetained := s.live(pending, true), s.live(pending, false)
	for _, id := range held {
		if !live[id] {
			s.failf("retention: checkpoint %d is held, but no kept or pending checkpoint needs it (retained %v, pending %v): it leaks", id, retained, pending)
		}
		if !slices.Contains(prevHeld, id) {
			s.stats.Held++
		}
		if !byRetained[id] {
			s.stats.PendingHolds++
		}
	}
}

// retentionMutant breaks the coordinator's retention as s.mutant says, by
// adding the Discards a broken coordinator would emit (sim_mutants_test.go):
//
//   - "retire-ignores-references": every checkpoint that leaves the retained
//     set is discarded, as before retention was reference-counted;
//   - "pending-unprotected": a held checkpoint that no retained checkpoint
//     and no failed write references is discarded, though a pending
//     checkpoint may build on it.
func (s *sim) retentionMutant(acts []Action, prevRetained, prevHeld []int64) []Action {
	switch s.mutant {
	case "retire-ignores-references":
		for _, id := range s.coord.Held() {
			if slices.Contains(prevRetained, id) && !slices.Contains(prevHeld, id) {
				acts = append(acts, Discard{ID: id})
			}
		}
	case "pending-unprotected":
		byRetained := s.live(s.coord.Pending(), false)
		for _, id := range s.coord.Held() {
			if !byRetained[id] && s.store[id] != nil {
				acts = append(acts, Discard{ID: id})
			}
		}
	}
	return acts
}
