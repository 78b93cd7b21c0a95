package checkpoint

import (
	"fmt"
	"slices"
)

// Failure and recovery in the committer simulation (sim_commit_test.go): a
// process crash, a failed attempt's shutdown, and runtime/recovery.go's
// recovery, each step of which may crash or fail in turn.

// crash kills the process: nothing queued runs any more.
func (s *commitSim) crash() {
	s.stats.Crashes++
	if slices.ContainsFunc(s.storeEv, writtenOK) {
		s.stats.CrashWrittenUnreported++
	}
	if len(s.commitQ) > 0 {
		s.stats.CrashCommitQueued++
	}
	if s.cur != nil && s.cur.effect {
		s.stats.CrashMidCommit++
	}
	for _, k := range s.sinks {
		if !k.kind.wide() {
			for c, n := range k.visible {
				if n != 0 && n != len(k.own[c]) {
					s.stats.PartialVisible++
					break
				}
			}
		}
	}
	if s.log.on() {
		s.logf("crash")
	}
	if newest := s.newestComplete(); newest != 0 && s.fault(40) {
		// An operator deletes the newest checkpoint while the job is down
		// (`ingest checkpoints delete <newest> --force`), or it is lost.
		s.stats.Deleted++
		s.deleted = true
		delete(s.store, newest)
		if s.log.on() {
			s.logf("operator deletes checkpoint %d", newest)
		}
	}
	s.recover("crash")
}

// shutdown is a failed attempt's end (attempt.drive, attempt.shutdown): the
// coordinator hears TaskFailed (its actions are not carried out), then the
// store and commit workers run what is queued, concurrently, their results
// unheard. A crash may cut the shutdown short.
func (s *commitSim) shutdown() {
	s.stats.AttemptFailures++
	s.coord.Step(s.now, TaskFailed{Task: s.taskIDs[0], Err: errBoom})
	if s.log.on() {
		s.logf("attempt failed: shutting down")
	}
	for len(s.storeQ) > 0 || s.cur != nil || len(s.commitQ) > 0 {
		if s.fault(5) {
			s.stats.CrashInShutdown++
			s.crash()
			return
		}
		if len(s.storeQ) > 0 && (s.rng.IntN(2) == 0 || (s.cur == nil && len(s.commitQ) == 0)) {
			s.storeOp()
		} else {
			s.commitWork()
		}
	}
	s.recover("restart")
}

// recover is Job.Run's loop around recovery: a try that fails (an injected
// failure) restarts in the same process, a crash in a new one; both start
// over from what storage and the destinations hold.
func (s *commitSim) recover(why string) {
	for try := 0; !s.tryRecover(why); try++ {
		if try > 200 {
			s.failf("liveness: recovery did not succeed in 200 tries")
		}
		s.stats.Restarts++
	}
}

// steps runs f until it reports fin; before each step the process may crash
// (counted in crashes) and each step may fail. It reports whether f finished.
func (s *commitSim) steps(crashes *int, f func() (bool, error)) bool {
	for {
		if s.fault(6) {
			*crashes++
			s.stats.Crashes++
			if s.log.on() {
				s.logf("crash during recovery")
			}
			return false
		}
		fin, err := f()
		if err != nil {
			s.stats.RecoveryFailures++
			if s.log.on() {
				s.logf("recovery failed")
			}
			return false
		}
		if fin {
			return true
		}
	}
}

// tryRecover is runtime/recovery.go's recover followed by build: it
// reports false when a crash or failure stopped it.
func (s *commitSim) tryRecover(why string) bool {
	ids := s.storedIDs()
	latest := s.newestComplete()
	m := s.store[latest]
	for _, id := range ids {
		if id > latest && s.store[id] != nil && s.ledger.IsFailed(id) {
			s.stats.SkippedFailed++ // a failed checkpoint whose metadata is stored
			break
		}
	}
	if s.log.on() {
		s.logf("%s: recovering from %d", why, latest)
	}
	// The fallback guard (runtime/fallback.go): restoring latest replays
	// every record after its cut, so if a sink already published output of
	// a newer checkpoint (one deleted, or lost), it would publish it again.
	if s.mutant != "no-fallback-guard" {
		for _, k := range s.sinks {
			if last := s.lastCommitted(k); last > latest {
				if !s.deleted {
					s.failf("recovery refused (sink %s published %d, past recovery point %d) although no checkpoint was deleted", k.name, last, latest)
				}
				s.stats.Refused++
				s.refused = true
				if s.log.on() {
					s.logf("recovery refused: sink %s published %d, past %d", k.name, last, latest)
				}
				return true
			}
		}
	}
	if s.deleted {
		s.stats.SafeFallbacks++
		s.deleted = false
		// Output that only a deleted checkpoint held is no longer any
		// complete checkpoint's: abandoning it is right, the replay from
		// latest stages it again.
		for _, k := range s.sinks {
			for _, it := range k.items {
				if it.assigned > latest && s.store[it.assigned] == nil && it.where != itemVisible {
					it.assigned = 0
				}
			}
		}
	}
	if m != nil {
		if s.ghosts[m.ID] && !s.adopted[m.ID] {
			s.stats.RestoredAmbiguous++
		}
		s.adopt(m)
	}
	// publishRecoveryPoint: re-commit the recovery point's commits, in
	// order, then let every sink abandon what else it staged.
	if s.mutant == "abandon-first" {
		for _, k := range s.sinks {
			if !s.steps(&s.stats.CrashMidAbandon, func() (bool, error) { return s.abandonStep(k) }) {
				return false
			}
		}
	}
	if m != nil && s.mutant != "skip-recommit" {
		published := s.stats.Published
		p := &csPublish{commits: m.Commits, started: true}
		if !s.steps(&s.stats.CrashMidRecoveryCommit, func() (bool, error) { return s.publishStep(p) }) {
			return false
		}
		if s.stats.Published > published {
			s.stats.Recommits++
		}
	}
	for _, k := range s.sinks {
		if !s.steps(&s.stats.CrashMidAbandon, func() (bool, error) { return s.abandonStep(k) }) {
			return false
		}
	}
	// cleanStorage: the next id is above every stored id; incomplete
	// checkpoints newer than the recovery point are deleted, then
	// storage.Retain(Retain, latest) deletes everything older than the
	// newest complete one but the newest Retain complete ones.
	nextID := latest + 1
	for _, id := range ids {
		nextID = max(nextID, id+1)
	}
	if s.mutant != "ignore-ledger" {
		nextID = max(nextID, s.ledger.Reserved+1)
	}
	discard := func(id int64) bool {
		return s.steps(&s.stats.CrashMidCleanup, func() (bool, error) {
			delete(s.store, id)
			return true, nil
		})
	}
	for _, id := range ids {
		if (id > latest && s.store[id] == nil || s.ledger.IsFailed(id)) && !discard(id) {
			return false
		}
	}
	// The failed checkpoints are gone: the ledger forgets them.
	if kept := slices.DeleteFunc(slices.Clone(s.ledger.Failed), func(id int64) bool { _, ok := s.store[id]; return !ok }); len(kept) < len(s.ledger.Failed) {
		if !s.steps(&s.stats.CrashMidCleanup, func() (bool, error) {
			if s.fault(20) {
				return false, errBoom
			}
			s.ledger.Failed = kept
			return true, nil
		}) {
			return false
		}
	}
	var retained []int64
	if latest != 0 {
		ids = s.storedIDs()
		kept := map[int64]bool{}
		for i := len(ids) - 1; i >= 0 && len(kept) < s.opts.Retain; i-- {
			if s.store[ids[i]] != nil {
				kept[ids[i]] = true
			}
		}
		for _, id := range ids {
			if id < latest && !kept[id] && !discard(id) {
				return false
			}
		}
		for _, id := range s.storedIDs() {
			if s.store[id] != nil && id <= latest {
				retained = append(retained, id)
			}
		}
	}
	// The destinations now hold exactly the records before the recovery
	// point's cut: the new attempt replays from there.
	s.checkCoverage(m, fmt.Sprintf("after recovering from %d", latest))
	s.attemptN++
	s.stats.Attempts++
	tasks := slices.Clone(s.taskIDs)
	s.rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	c, err := New(Config{Options: s.opts, Pipeline: "sim", JobID: "sim-job", Tasks: tasks,
		Restored: latest, Retained: retained, NextID: nextID, Reserved: s.ledger.Reserved})
	if err != nil {
		s.failf("New after %s: %v", why, err)
	}
	s.coord = c
	for _, t := range s.tasks {
		t.inbox, t.pending, t.pos = nil, nil, 0
		if m != nil {
			st, _ := m.Task(t.id)
			t.pos = decodePos(st.Inline)
		}
		t.staged = t.pos
	}
	s.acks, s.storeQ, s.storeEv, s.commitQ, s.cur, s.commitEv, s.results = nil, nil, nil, nil, nil, nil, nil
	s.down, s.finalAsked = false, false
	if s.log.on() {
		s.logf("attempt %d: restored %d, retained %v, next id %d", s.attemptN, latest, retained, nextID)
	}
	return true
}

// storedIDs returns the ids of every checkpoint directory, increasing.
func (s *commitSim) storedIDs() []int64 {
	ids := make([]int64, 0, len(s.store))
	for id := range s.store {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// newestComplete is what the recovery chooses: the newest checkpoint with
// metadata that the ledger does not record as failed, 0 if none.
func (s *commitSim) newestComplete() int64 {
	var n int64
	for id, m := range s.store {
		if m != nil && id > n && !s.ledger.IsFailed(id) {
			n = id
		}
	}
	return n
}

// lastCommitted is what the sink's runtime.CommitTracker reports: the
// newest checkpoint any of its output is visible under, 0 if none.
func (s *commitSim) lastCommitted(k *csSink) int64 {
	var last int64
	for _, it := range k.items {
		if it.where == itemVisible {
			last = max(last, it.ckpt)
		}
	}
	return last
}

// checkCoverage checks that the visible output of every sink subtask is
// exactly its records before its cut in m (none when m is nil), each once
// (invariants 3, 5 and 6; checkpointing.txt: "A restart must not lose
// accepted data, repeat already-visible output").
func (s *commitSim) checkCoverage(m *Metadata, when string) {
	for _, t := range s.tasks {
		if t.sink == nil {
			continue
		}
		var cut, id int64
		if m != nil {
			st, _ := m.Task(t.id)
			cut, id = decodePos(st.Inline), m.ID
		}
		for o := int64(0); o < cut; o++ {
			if o >= int64(len(t.vis)) || t.vis[o] == nil {
				s.failf("nothing committed is lost: record %d of %v, before checkpoint %d's cut %d, is not visible %s", o, t.id, id, cut, when)
			}
		}
		for o := cut; o < int64(len(t.vis)); o++ {
			if t.vis[o] != nil {
				s.failf("record %d of %v, after checkpoint %d's cut %d, is visible %s (in %s)", o, t.id, id, cut, when, t.vis[o].name)
			}
		}
	}
}
