package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ingest-engine/ingest/storage"
)

// Reference-counted retention in the seeded simulation (sim_test.go), file
// by file. In half the seeds tasks take incremental snapshots, the way an LSM
// backend does: the state a task acknowledges checkpoint N with is one to
// three files of N (SubtaskState.State and Shared handles of N) and builds on
// files of B, the recovery point when N was triggered: some of B's own files
// and of the files B built on, each dropped now and then (a compaction
// rewrote its keys), from at most a few checkpoints back, and now and then a
// full snapshot that references nothing. Now and then, in seeds with faults,
// an acknowledgement names a file that is not in storage: trimmed away, of a
// checkpoint that is gone, or never written.
//
// A checkpoint's references name every earlier file it reads (Shared is the
// whole chain), so references are followed one step only: a checkpoint held
// for its files is no recovery point and keeps nothing it references itself.
// Storage is modelled file by file (sim.files): Trim deletes the metadata and
// the files it does not keep, Discard everything. A restart first applies the
// recovery's retention pass, storage.Retain itself, to the model (simStorage).
//
// Checked after every step (checkReferences, checkRetention, checkFiles):
//   - no file referenced by a retained checkpoint, by a metadata write in
//     flight or by a failed metadata write the ledger does not record yet is
//     deleted, and every file in storage when a pending checkpoint was
//     triggered stays while it is pending;
//   - storage holds exactly the checkpoints the coordinator retains or
//     holds; a retained one is whole; a held one is whole (with its
//     metadata) only while a pending checkpoint may build on all of it, and
//     otherwise trimmed to exactly the files the coordinator says, each of
//     which something still needs (bounded: no file leaks);
//   - an acknowledgement with a dangling reference fails its checkpoint.
//
// And at each Discard and Trim (sim_test.go, applyTrim): no retained
// checkpoint references a file it deletes, nor does a checkpoint that still
// has its metadata and was retained before the step (a checkpoint's Trim or
// Discard comes before those of the checkpoints it references, so a crash
// between two never leaves a complete checkpoint with a file missing); a Trim
// keeps only files still there.

// maxChain is the most checkpoints an incremental snapshot of the sim builds
// on.
const maxChain = 3

// shareState makes st, a task's state at barrier id, an incremental snapshot
// on top of the checkpoint that was the recovery point at id's trigger.
func (s *sim) shareState(st *SubtaskState, id int64) {
	if !s.incremental {
		return
	}
	// One to three new files, as an LSM flush writes.
	for k := range 1 + s.rng.IntN(3) {
		h := storage.Handle{Name: fmt.Sprintf("state-%s-%d-%d", st.Task.Operator, st.Task.Subtask, k), Checkpoint: id, Size: 1}
		if k == 0 {
			st.State = &h
		} else {
			st.Shared = append(st.Shared, h)
		}
	}
	if b := s.base[id]; b != 0 && s.rng.IntN(5) > 0 {
		if bm := s.metaOf[b]; bm != nil {
			if bst, ok := bm.Task(st.Task); ok && bst.State != nil {
				files := append([]storage.Handle{*bst.State}, bst.Shared...)
				// The oldest files' keys were all rewritten since, and some
				// files of the newer ones were compacted away.
				ids := make([]int64, 0, len(files))
				for _, h := range files {
					ids = append(ids, h.Checkpoint)
				}
				slices.Sort(ids)
				ids = slices.Compact(ids)
				oldest := ids[max(0, len(ids)-1-s.rng.IntN(maxChain))]
				for _, h := range files {
					if h.Checkpoint >= oldest && s.rng.IntN(4) > 0 {
						st.Shared = append(st.Shared, h)
					}
				}
			}
		}
	}
	if s.faults > 0 && s.rng.IntN(60) == 0 {
		// A backend that builds on a file it should not: one of an earlier
		// checkpoint that may be gone since (trimmed away, discarded), or of
		// one that never completed. (Not a name its checkpoint never had:
		// a checkpoint kept whole is taken to hold any file named, the
		// coordinator does not know its files.)
		gone := s.rng.Int64N(id) + 1
		name := fmt.Sprintf("state-%s-%d-0", st.Task.Operator, st.Task.Subtask)
		if w := s.written[gone]; len(w) > 0 {
			name = w[s.rng.IntN(len(w))]
		}
		st.Shared = append(st.Shared, storage.Handle{Name: name, Checkpoint: gone, Size: 1})
	}
}

// ownFiles returns the names of the state files of checkpoint m itself: its
// tasks' State files and the Shared files of m, sorted.
func ownFiles(m *Metadata) []string {
	var names []string
	for _, t := range m.Tasks {
		if t.State != nil && t.State.Checkpoint == m.ID {
			names = append(names, t.State.Name)
		}
		for _, h := range t.Shared {
			if h.Checkpoint == m.ID {
				names = append(names, h.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// dangling returns the first file r's state builds on that is not in
// storage; ok is false when there is none.
func (s *sim) dangling(r simResponse) (h storage.Handle, ok bool) {
	for _, h := range r.state.Shared {
		if h.Checkpoint != r.id && !s.files[h.Checkpoint][h.Name] {
			return h, true
		}
	}
	return storage.Handle{}, false
}

// checkDanglingAck checks the step of an acknowledgement the coordinator
// took (the first of its task, for a pending checkpoint) that names h, a
// file that was not in storage before the step: the checkpoint failed, and
// the reason names the file and the checkpoint.
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

// storedIDs returns the ids of the checkpoints in storage, increasing: those
// with metadata and the trimmed ones.
func (s *sim) storedIDs() []int64 {
	ids := slices.Collect(maps.Keys(s.files))
	for id := range s.store {
		if s.files[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// snapshotFiles returns a copy of the files in storage, by checkpoint.
func (s *sim) snapshotFiles() map[int64]map[string]bool {
	out := make(map[int64]map[string]bool, len(s.files))
	for id, f := range s.files {
		out[id] = maps.Clone(f)
	}
	return out
}

// refViolation ends every failure of a reference check.
const refViolation = "(no retained checkpoint, pending checkpoint's protects or unrecorded write references a deleted file)"

// recoveryPoints returns the newest Options.Retain checkpoints the
// coordinator retains: the ones a recovery may read. (The recovery's
// retention pass leaves no older complete checkpoint, so these are all the
// retained ones; a coordinator given older ones by Config would retain them
// until the next completion, as scripts show.)
func (s *sim) recoveryPoints() []int64 {
	r := s.coord.Retained()
	return r[max(0, len(r)-s.opts.Retain):]
}

// checkReferences checks that no file still needed was deleted: the
// references of the retained checkpoints, of the metadata being written and
// of the failed writes not yet recorded, and the files pending checkpoints
// may build on.
func (s *sim) checkReferences(pending []int64) {
	missing := func(refs []storage.FileRef) (storage.FileRef, bool) {
		for _, r := range refs {
			if !s.files[r.Checkpoint][r.Name] {
				return r, true
			}
		}
		return storage.FileRef{}, false
	}
	for _, id := range s.recoveryPoints() {
		if s.store[id] == nil {
			s.failf("retention: retained checkpoint %d has no metadata in storage", id)
		}
		if r, ok := missing(s.refsOf[id]); ok {
			s.failf("retention: retained checkpoint %d references file %v, which was deleted %s", id, r, refViolation)
		}
	}
	for _, m := range s.writes {
		if r, ok := missing(s.refsOf[m.ID]); ok {
			s.failf("retention: the metadata of %d being written references file %v, which was deleted %s", m.ID, r, refViolation)
		}
	}
	for _, id := range s.unrecorded {
		if r, ok := missing(s.refsOf[id]); ok {
			s.failf("retention: the failed metadata write of %d, not yet recorded in the ledger, references file %v, which was deleted %s", id, r, refViolation)
		}
	}
	for _, id := range pending {
		for c, names := range s.protect[id] {
			if s.files[c] == nil {
				s.failf("retention: pending checkpoint %d may build on checkpoint %d, in storage at its trigger, which was discarded while it is pending %s", id, c, refViolation)
			}
			for n := range names {
				if !s.files[c][n] {
					s.failf("retention: pending checkpoint %d may build on file %d/%s, in storage at its trigger, which was deleted while it is pending %s", id, c, n, refViolation)
				}
			}
		}
		for c := range s.wholeAtTrigger[id] {
			if s.store[c] == nil {
				s.failf("retention: pending checkpoint %d may build on any file of checkpoint %d, whole at its trigger, which was trimmed or discarded while it is pending %s", id, c, refViolation)
			}
		}
	}
}

// needs is what must stay in storage, computed from the sim's own records:
// the files the retained checkpoints and the failed writes not yet recorded
// reference, and every file in storage at a pending checkpoint's trigger.
// References are followed one step only: those of a checkpoint kept for its
// files keep nothing.
type needs struct {
	s       *sim
	pending []int64
	// refs are the files the retained checkpoints and the unrecorded writes
	// reference, ids their checkpoints.
	refs map[storage.FileRef]bool
	ids  map[int64]bool
}

// needed returns what must stay in storage while pending are pending.
func (s *sim) needed(pending []int64) *needs {
	n := &needs{s: s, pending: pending, refs: map[storage.FileRef]bool{}, ids: map[int64]bool{}}
	add := func(rs []storage.FileRef) {
		for _, r := range rs {
			n.refs[r] = true
			n.ids[r.Checkpoint] = true
		}
	}
	for _, id := range s.coord.Retained() {
		add(s.refsOf[id])
	}
	for _, id := range s.unrecorded {
		add(s.refsOf[id])
	}
	return n
}

// byRetained reports whether a retained checkpoint or an unrecorded write
// references a file of checkpoint id.
func (n *needs) byRetained(id int64) bool { return n.ids[id] }

// checkpoint reports whether anything of checkpoint id must stay.
func (n *needs) checkpoint(id int64) bool {
	if n.ids[id] {
		return true
	}
	for _, p := range n.pending {
		if _, ok := n.s.protect[p][id]; ok {
			return true
		}
	}
	return false
}

// file reports whether file name of checkpoint id must stay.
func (n *needs) file(id int64, name string) bool {
	if n.refs[storage.FileRef{Checkpoint: id, Name: name}] {
		return true
	}
	for _, p := range n.pending {
		if n.s.protect[p][id][name] {
			return true
		}
	}
	return false
}

// protectedWhole reports whether a pending checkpoint may build on every
// file checkpoint id had at its trigger, metadata included: id was retained
// or held whole then.
func (s *sim) protectedWhole(id int64, pending []int64) bool {
	for _, p := range pending {
		if _, ok := s.protect[p][id]; ok && s.wholeAtTrigger[p][id] {
			return true
		}
	}
	return false
}

// checkRetention checks that storage holds exactly the retained and held
// checkpoints, that each held one is live, and counts what the step did.
func (s *sim) checkRetention(ev Event, acts []Action, latest int64, pending, prevRetained, prevHeld []int64) {
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
	cuts := map[int64]int{}
	for _, d := range find[Discard](acts) {
		if slices.Contains(prevHeld, d.ID) {
			heldDiscards++
		}
		cuts[d.ID]++
	}
	for _, t := range find[Trim](acts) {
		cuts[t.ID]++
	}
	for id, n := range cuts {
		// (A failed checkpoint may get two Discards in a step: its own, and
		// that of a late acknowledgement.)
		if n > 1 && s.mutant == "" && (slices.Contains(prevHeld, id) || slices.Contains(prevRetained, id)) {
			s.failf("retention: %d Trims and Discards of checkpoint %d in one step: %s (collect runs once per step)", n, id, fmtActions(acts))
		}
	}
	if _, ok := ev.(MetadataWritten); ok && heldDiscards+len(find[Trim](acts)) > 1 && len(find[Discard](acts)) > 0 {
		s.stats.Cascades++
	}
	if len(held) == 0 {
		return
	}
	need := s.needed(pending)
	for _, id := range held {
		if !need.checkpoint(id) {
			s.failf("retention: checkpoint %d is held, but no kept or pending checkpoint needs a file of it (retained %v, pending %v): it leaks", id, retained, pending)
		}
		if !slices.Contains(prevHeld, id) {
			s.stats.Held++
		}
		if !need.byRetained(id) {
			s.stats.PendingHolds++
		}
	}
}

// checkFiles checks the files of every checkpoint in storage against what
// the coordinator says it keeps: a retained checkpoint whole; a held one
// whole only while a pending checkpoint may build on all of it, otherwise
// without metadata and with exactly the files Trimmed names, every one of
// them needed (bounded: a trimmed checkpoint holds only referenced files).
func (s *sim) checkFiles(pending []int64) {
	if s.mutant != "" {
		return // a mutant's storage differs from what the coordinator says on purpose
	}
	c := s.coord
	for _, id := range c.Retained() {
		if s.store[id] == nil || len(s.files[id]) != len(s.written[id]) {
			s.failf("retention: retained checkpoint %d is not whole in storage: metadata %v, files %v of %v", id, s.store[id] != nil, slices.Sorted(maps.Keys(s.files[id])), s.written[id])
		}
	}
	held := c.Held()
	if len(held) == 0 {
		return
	}
	need := s.needed(pending)
	for _, id := range held {
		names, trimmed := c.Trimmed(id)
		stored := slices.Sorted(maps.Keys(s.files[id]))
		if !trimmed {
			if !s.protectedWhole(id, pending) {
				s.failf("retention: held checkpoint %d is whole (with its metadata), but no pending checkpoint may build on all of it: it should be trimmed (pending %v)", id, pending)
			}
			if s.store[id] == nil || !slices.Equal(stored, s.written[id]) {
				s.failf("retention: held checkpoint %d is whole for the coordinator, storage holds metadata %v, files %v of %v", id, s.store[id] != nil, stored, s.written[id])
			}
			continue
		}
		if s.store[id] != nil {
			s.failf("retention: held checkpoint %d was trimmed, but its metadata is in storage: it could be taken for a recovery point", id)
		}
		if !slices.Equal(stored, names) {
			s.failf("retention: held checkpoint %d is trimmed to %v for the coordinator, storage holds %v", id, names, stored)
		}
		for _, n := range names {
			if !need.file(id, n) {
				s.failf("retention: held checkpoint %d keeps file %s, which nothing references and no pending checkpoint may build on: it leaks", id, n)
			}
		}
	}
}

// applyTrim checks a Trim of the step and carries it out.
func (s *sim) applyTrim(x Trim, latest int64, pending, prevRetained, prevHeld []int64) {
	if x.ID == latest || slices.Contains(pending, x.ID) || slices.Contains(s.coord.Retained(), x.ID) {
		s.failf("Trim{%d} of the recovery point, a pending or a retained checkpoint (retained %v, pending %v)", x.ID, s.coord.Retained(), pending)
	}
	if len(x.Keep) == 0 || !slices.IsSorted(x.Keep) {
		s.failf("%s: Keep must be sorted and not empty (else Discard)", fmtAction(x))
	}
	if i := slices.Index(s.completeOrder, x.ID); i >= 0 {
		// Options.Retain: only complete checkpoints beyond the newest Retain
		// stop being recovery points.
		if i >= len(s.completeOrder)-s.opts.Retain {
			s.failf("Trim{%d} of a retained checkpoint (complete %v, retain %d)", x.ID, s.completeOrder, s.opts.Retain)
		}
		s.completeOrder = slices.Delete(s.completeOrder, i, i+1)
		s.stats.Retired++
	}
	if s.mutant == "" {
		for _, n := range x.Keep {
			if !s.files[x.ID][n] {
				s.failf("%s keeps %s, which is not in storage (a Trim never brings back what an earlier one left out)", fmtAction(x), n)
			}
		}
	}
	if slices.Contains(prevHeld, x.ID) && s.store[x.ID] == nil {
		s.stats.Shrinks++
	}
	s.stats.Trims++
	delete(s.store, x.ID)
	gone := map[string]bool{}
	for n := range s.files[x.ID] {
		if !slices.Contains(x.Keep, n) {
			gone[n] = true
			delete(s.files[x.ID], n)
		}
	}
	s.checkDeleted(fmtAction(x), x.ID, gone, prevRetained)
}

// checkDeleted checks the Discard or Trim what of checkpoint id, which just
// deleted the files gone of it (nil: every file): carried out one by one, as
// the caller must, it must not leave a recovery point that references one of
// them, nor a checkpoint retained before the step that still has its
// metadata (a checkpoint's Discard or Trim comes before those of the
// checkpoints it references: one about to be trimmed or discarded must not be
// complete without its files at a crash in between). A held checkpoint may
// stay without what it references itself: it is kept for its own files only.
func (s *sim) checkDeleted(what string, id int64, gone map[string]bool, prevRetained []int64) {
	recovery := s.recoveryPoints()
	for _, o := range s.storedIDs() {
		if s.store[o] == nil {
			continue // trimmed: nothing is restored from it
		}
		for _, r := range s.refsOf[o] {
			if r.Checkpoint != id || (gone != nil && !gone[r.Name]) {
				continue
			}
			switch {
			case slices.Contains(recovery, o):
				s.failf("retention: %s deletes file %v, which retained checkpoint %d references %s", what, r, o, refViolation)
			case slices.Contains(prevRetained, o):
				s.failf("retention: %s deletes file %v before the Trim or Discard of checkpoint %d, retained before the step, which references it: a crash in between leaves %d complete without it", what, r, o, o)
			}
		}
	}
}

// retainAtRecovery applies the recovery's retention pass to the sim's
// storage, as the runtime does before it builds the coordinator
// (cleanStorage, storage.Retain with the metadata's SharedFiles), and returns
// what the coordinator's Config says then: the complete checkpoints up to
// restored, the trimmed ones, and what each complete one references.
func (s *sim) retainAtRecovery(restored int64) (retained, held []int64, refs map[int64][]storage.FileRef) {
	if restored != 0 {
		// The metadata Retain reads is the checkpoint's id (see simStorage):
		// the sim's metadata went through Encode and DecodeMetadata already.
		_, err := storage.Retain(context.Background(), simStorage{s}, s.opts.Retain, restored, func(b []byte) ([]storage.FileRef, error) {
			var id int64
			if _, err := fmt.Sscanf(string(b), "sim metadata %d", &id); err != nil || s.store[id] == nil {
				return nil, fmt.Errorf("bad sim metadata %q", b)
			}
			return s.store[id].SharedFiles(), nil
		})
		if err != nil {
			s.failf("retention at recovery: %v", err)
		}
	}
	refs = map[int64][]storage.FileRef{}
	for _, id := range s.storedIDs() {
		m := s.store[id]
		switch {
		case m == nil:
			held = append(held, id)
		case id <= restored:
			retained = append(retained, id)
			refs[id] = m.SharedFiles()
		}
	}
	if len(held) > 0 {
		s.stats.RestartsWithTrimmed++
	}
	return retained, held, refs
}

// simStorage is the sim's storage as a storage.Storage, for storage.Retain:
// it lists, reads metadata, trims and discards; nothing else is modelled.
type simStorage struct{ s *sim }

var errNotModelled = errors.New("not modelled by the sim")

func (st simStorage) WriteFile(context.Context, int64, string, []byte) (storage.Handle, error) {
	return storage.Handle{}, errNotModelled
}
func (st simStorage) StatFile(context.Context, storage.Handle) error { return errNotModelled }
func (st simStorage) ReadFile(context.Context, storage.Handle) ([]byte, error) {
	return nil, errNotModelled
}
func (st simStorage) WriteMetadata(context.Context, int64, []byte) error { return errNotModelled }
func (st simStorage) WriteLedger(context.Context, []byte) error          { return errNotModelled }
func (st simStorage) ReadLedger(context.Context) ([]byte, error)         { return nil, errNotModelled }
func (st simStorage) Location() string                                   { return "sim" }

func (st simStorage) ReadMetadata(_ context.Context, id int64) ([]byte, error) {
	if st.s.store[id] == nil {
		return nil, fmt.Errorf("metadata of %d: %w", id, storage.ErrNotFound)
	}
	return fmt.Appendf(nil, "sim metadata %d", id), nil
}

func (st simStorage) List(context.Context) ([]storage.Entry, error) {
	var out []storage.Entry
	for _, id := range st.s.storedIDs() {
		out = append(out, storage.Entry{ID: id, Complete: st.s.store[id] != nil})
	}
	return out, nil
}

func (st simStorage) Discard(_ context.Context, id int64) error {
	delete(st.s.store, id)
	delete(st.s.files, id)
	return nil
}

func (st simStorage) Trim(ctx context.Context, id int64, keep []string) error {
	if len(keep) == 0 {
		return st.Discard(ctx, id)
	}
	delete(st.s.store, id)
	for n := range st.s.files[id] {
		if !slices.Contains(keep, n) {
			delete(st.s.files[id], n)
		}
	}
	return nil
}

// retentionMutant breaks the coordinator's retention as s.mutant says, by
// changing or adding the Discards and Trims a broken coordinator would emit
// (sim_mutants_test.go):
//
//   - "retire-ignores-references": every checkpoint that leaves the retained
//     set is discarded, as before retention was reference-counted;
//   - "pending-unprotected": a held checkpoint that no retained checkpoint
//     and no failed write references is discarded, though a pending
//     checkpoint may build on it;
//   - "trim-too-much": every Trim keeps one file fewer than it should (a
//     Discard when it should keep one).
func (s *sim) retentionMutant(acts []Action, prevRetained, prevHeld []int64) []Action {
	switch s.mutant {
	case "retire-ignores-references":
		for _, id := range s.coord.Held() {
			if slices.Contains(prevRetained, id) && !slices.Contains(prevHeld, id) {
				acts = append(acts, Discard{ID: id})
			}
		}
	case "pending-unprotected":
		need := s.needed(s.coord.Pending())
		for _, id := range s.coord.Held() {
			if !need.byRetained(id) && s.files[id] != nil {
				acts = append(acts, Discard{ID: id})
			}
		}
	case "trim-too-much":
		for i, a := range acts {
			if t, ok := a.(Trim); ok {
				if len(t.Keep) == 1 {
					acts[i] = Discard{ID: t.ID}
				} else {
					acts[i] = Trim{ID: t.ID, Keep: t.Keep[:len(t.Keep)-1]}
				}
			}
		}
	}
	return acts
}
