package checkpoint

import "slices"

// Model sinks for the committer simulation (sim_commit_test.go): their
// destinations, the committers that publish to them, and the consumers that
// read them. A destination is durable: it survives every crash. Each
// committer is stateless, as runtime.Committer asks: one call works only
// from the Commit it is given and what the destination holds, one small step
// at a time, so that a crash or a failure can stop it between any two steps.
//
// The three kinds follow the connectors:
//   - csFiles (connector/file): a committable is a staged file; Commit moves
//     them one by one into a commit directory named after the checkpoint,
//     skipping files already moved, then publishes the directory with one
//     rename; a published directory means the commit was done. Abandon
//     deletes the staging area one file at a time.
//   - csTxn (connector/postgres): a committable is a batch of staged rows;
//     Commit is one transaction that moves them and records the checkpoint,
//     and does nothing when the record exists. Abandon is one transaction.
//   - csParts (connector/kafka): a committable is a sink subtask's open
//     transaction; Commit commits them one by one, each visible at once,
//     recognising committed ones. Abandon aborts open ones one by one. The
//     commit scope is per partition: a checkpoint's output may be partly
//     visible until its Commit returns.

type csKind uint8

const (
	csFiles csKind = iota
	csTxn
	csParts
)

func (k csKind) String() string {
	return [...]string{"files", "txn", "parts"}[k]
}

// wide reports whether the sink promises destination-wide atomic visibility:
// a checkpoint's output of all its subtasks becomes visible at once.
func (k csKind) wide() bool { return k != csParts }

// Where a staged item is.
const (
	itemStaged  = iota // staged, not visible
	itemMoved          // csFiles: moved into checkpoint ckpt's commit directory, not visible
	itemVisible        // published under checkpoint ckpt
	itemGone           // abandoned
)

// csItem is one committable: staged output of records [from, to) of a sink
// subtask, staged at the barrier of checkpoint at.
type csItem struct {
	name     string
	task     *csTask
	at       int64
	from, to int64
	where    uint8
	ckpt     int64
	// assigned is the complete checkpoint whose own commits hold the item,
	// 0 until one does.
	assigned int64
}

// csSink is one transactional sink and its destination.
type csSink struct {
	name  string
	kind  csKind
	items map[string]*csItem
	// staging holds the items that are or were staged and not yet
	// published or abandoned, in staging order (compacted lazily).
	staging []*csItem
	// done: csFiles, the published commit directories; csTxn, the recorded
	// checkpoints.
	done map[int64]bool
	// own[C] are the committables of this sink in complete checkpoint C's
	// own commit (from its metadata); visible[C] counts those visible.
	own     map[int64][]string
	visible map[int64]int
}

func newSink(name string, kind csKind) *csSink {
	return &csSink{name: name, kind: kind, items: map[string]*csItem{}, done: map[int64]bool{},
		own: map[int64][]string{}, visible: map[int64]int{}}
}

// stage records a new committable of task t covering records [from, to).
func (k *csSink) stage(name string, t *csTask, at, from, to int64) {
	it := &csItem{name: name, task: t, at: at, from: from, to: to}
	k.items[name] = it
	k.staging = append(k.staging, it)
}

// commitStep carries out one step of committer k's Commit(cm). st is the
// call's progress (0 at its start); it returns the next step, or fin when
// the call returned nil. An injected failure returns errBoom, before the
// step took effect or, ambiguously, after (then counted).
func (s *commitSim) commitStep(k *csSink, cm Commit, st int) (next int, fin bool, err error) {
	if st == 0 {
		s.checkCommit(k, cm)
	}
	switch k.kind {
	case csFiles:
		return s.filesStep(k, cm, st)
	case csTxn:
		return 0, true, s.txnCommit(k, cm)
	default:
		return s.partsStep(k, cm, st)
	}
}

// filesStep: step 0 recognises a published commit directory; steps 1..n
// move file n-1 into the commit directory unless a crashed call moved it;
// step n+1 publishes the directory with one rename.
func (s *commitSim) filesStep(k *csSink, cm Commit, st int) (next int, fin bool, err error) {
	n := len(cm.Committables)
	switch {
	case st == 0:
		if (k.done[cm.Checkpoint] && s.mutant != "not-idempotent") || n == 0 {
			return 0, true, nil // already committed
		}
		return 1, false, nil
	case st <= n:
		it := s.item(k, cm, st-1)
		switch {
		case it.where == itemMoved && it.ckpt == cm.Checkpoint:
			// Moved before a crash.
		case it.where == itemStaged:
			if s.fault(4) {
				return st, false, errBoom
			}
			it.where, it.ckpt = itemMoved, cm.Checkpoint
			s.effect = true
			if s.fault(2) {
				s.stats.AmbiguousFailures++
				return st, false, errBoom
			}
		default:
			s.lost(k, cm, it)
		}
		return st + 1, false, nil
	}
	// The rename: the directory must hold exactly the commit's files, or
	// the checkpoint's output would be published partly or mixed with
	// another's.
	if s.fault(4) {
		return st, false, errBoom
	}
	moved := 0
	for _, it := range k.staging {
		if it.where == itemMoved && it.ckpt == cm.Checkpoint {
			moved++
		}
	}
	if moved != n {
		s.failf("atomic visibility: commit directory of checkpoint %d of sink %s holds %d files, its commit %d", cm.Checkpoint, k.name, moved, n)
	}
	for i := range n {
		s.publish(k, s.item(k, cm, i), cm.Checkpoint)
	}
	k.done[cm.Checkpoint] = true
	s.effect = true
	s.readAll(k, cm.Checkpoint)
	if s.fault(2) {
		s.stats.AmbiguousFailures++
		return st, false, errBoom
	}
	return 0, true, nil
}

// txnCommit is the whole call, one transaction: nothing when the
// checkpoint is recorded, else every staged row moves and the checkpoint is
// recorded.
func (s *commitSim) txnCommit(k *csSink, cm Commit) error {
	n := len(cm.Committables)
	if (k.done[cm.Checkpoint] && s.mutant != "not-idempotent") || n == 0 {
		return nil
	}
	if s.fault(4) {
		return errBoom
	}
	for i := range n {
		if it := s.item(k, cm, i); it.where != itemStaged {
			s.lost(k, cm, it)
		}
	}
	for i := range n {
		s.publish(k, s.item(k, cm, i), cm.Checkpoint)
	}
	k.done[cm.Checkpoint] = true
	s.effect = true
	s.readAll(k, cm.Checkpoint)
	if s.fault(2) {
		s.stats.AmbiguousFailures++
		return errBoom
	}
	return nil
}

// partsStep: step i (1..n) commits transaction i-1 unless it is committed;
// each is visible at once.
func (s *commitSim) partsStep(k *csSink, cm Commit, st int) (next int, fin bool, err error) {
	n := len(cm.Committables)
	if st == 0 {
		return 1, n == 0, nil
	}
	it := s.item(k, cm, st-1)
	switch {
	case it.where == itemVisible && s.mutant == "not-idempotent":
		s.publish(k, it, cm.Checkpoint)
	case it.where == itemVisible:
		if it.ckpt != cm.Checkpoint {
			s.failf("exactly-once: %s, committed under checkpoint %d, is in the commit of %d", it.name, it.ckpt, cm.Checkpoint)
		}
	case it.where == itemStaged:
		if s.fault(4) {
			return st, false, errBoom
		}
		s.publish(k, it, cm.Checkpoint)
		s.effect = true
		if s.fault(2) {
			s.stats.AmbiguousFailures++
			return st, false, errBoom
		}
	default:
		s.lost(k, cm, it)
	}
	if st < n {
		return st + 1, false, nil
	}
	// Commit returns nil only once every transaction of the checkpoint is
	// committed.
	if got := k.visible[cm.Checkpoint]; got != n {
		s.failf("sink %s: Commit of checkpoint %d returned with %d of its %d transactions committed", k.name, cm.Checkpoint, got, n)
	}
	return 0, true, nil
}

// item returns the staged item committable i of cm names.
func (s *commitSim) item(k *csSink, cm Commit, i int) *csItem {
	it := k.items[string(cm.Committables[i])]
	if it == nil {
		s.failf("commit of checkpoint %d of sink %s names %q, which the sink never staged", cm.Checkpoint, k.name, cm.Committables[i])
	}
	return it
}

// lost fails the run: a committer cannot find output a complete checkpoint
// holds (the connectors fail with ErrStagedOutputLost; the job cannot go on).
func (s *commitSim) lost(k *csSink, cm Commit, it *csItem) {
	s.failf("nothing committed is lost: committing checkpoint %d of sink %s, %s is gone (where %d, checkpoint %d)", cm.Checkpoint, k.name, it.name, it.where, it.ckpt)
}

// checkCommit checks a Commit handed to a committer: it is the commit of a
// complete checkpoint, exactly as that checkpoint's metadata holds it. A
// committer recognises a done commit by its checkpoint alone, so two
// different commits of one checkpoint would lose or mix output.
func (s *commitSim) checkCommit(k *csSink, cm Commit) {
	if s.ever[cm.Checkpoint] == nil {
		s.failf("visible only after complete: sink %s asked to commit checkpoint %d, whose metadata was never durable", k.name, cm.Checkpoint)
	}
	own := k.own[cm.Checkpoint]
	if len(own) != len(cm.Committables) {
		s.failf("commit of checkpoint %d of sink %s has %d committables, the checkpoint's metadata %d", cm.Checkpoint, k.name, len(cm.Committables), len(own))
	}
	for i, d := range cm.Committables {
		if string(d) != own[i] {
			s.failf("commit of checkpoint %d of sink %s differs from the checkpoint's metadata at %d: %s, want %s", cm.Checkpoint, k.name, i, d, own[i])
		}
	}
}

// publish makes it visible under checkpoint c and checks what a consumer
// of the destination may see: only output of complete checkpoints, each
// item in the commit of the one checkpoint that holds it, its records before
// that checkpoint's cut, and no record twice.
func (s *commitSim) publish(k *csSink, it *csItem, c int64) {
	m := s.ever[c]
	switch {
	case m == nil:
		s.failf("visible only after complete: %s published under checkpoint %d, which never completed", it.name, c)
	case it.assigned != c:
		s.failf("exactly-once: %s published under checkpoint %d; the complete checkpoint holding it is %d", it.name, c, it.assigned)
	case it.at > c:
		s.failf("%s, staged at %d, published under the earlier checkpoint %d", it.name, it.at, c)
	}
	st, _ := m.Task(it.task.id)
	if cut := decodePos(st.Inline); it.to > cut {
		s.failf("%s holds records up to %d of %v, past checkpoint %d's cut %d", it.name, it.to, it.task.id, c, cut)
	}
	t := it.task
	for int64(len(t.vis)) < it.to {
		t.vis = append(t.vis, nil)
	}
	for o := it.from; o < it.to; o++ {
		if t.vis[o] != nil {
			s.failf("exactly-once: record %d of %v visible twice: in %s and %s", o, t.id, t.vis[o].name, it.name)
		}
		t.vis[o] = it
	}
	it.where, it.ckpt = itemVisible, c
	k.visible[c]++
	s.stats.Published++
	if s.log.on() {
		s.logf("visible: %s (records %d..%d) under %d", it.name, it.from, it.to, c)
	}
}

// readAll is a consumer reading a destination-wide sink: of every complete
// checkpoint it sees all of the sink's output or none (checkpointing.txt,
// "Atomic publication means consumers see either the complete checkpoint
// output or none of it").
//
// It runs after each step that made output of checkpoint c visible.
func (s *commitSim) readAll(k *csSink, c int64) {
	if n := k.visible[c]; k.kind.wide() && n != 0 && n != len(k.own[c]) {
		s.failf("atomic visibility: %d of the %d committables of checkpoint %d of sink %s are visible", n, len(k.own[c]), c, k.name)
	}
}

// abandonStep carries out one step of committer k's Abandon: it deletes one
// staged item (all of them for csTxn) and reports fin when none is left.
func (s *commitSim) abandonStep(k *csSink) (fin bool, err error) {
	k.staging = slices.DeleteFunc(k.staging, func(it *csItem) bool { return it.where == itemVisible || it.where == itemGone })
	if len(k.staging) == 0 {
		return true, nil
	}
	if s.fault(3) {
		return false, errBoom
	}
	n := 1
	if k.kind == csTxn {
		n = len(k.staging)
	}
	for _, it := range k.staging[:n] {
		// Abandon runs after the recovery point's commits were published:
		// output a complete checkpoint holds is visible by now.
		if it.assigned != 0 {
			s.failf("nothing committed is lost: abandon deletes %s of complete checkpoint %d (where %d)", it.name, it.assigned, it.where)
		}
		it.where = itemGone
		s.stats.AbandonedItems++
	}
	s.effect = true
	k.staging = k.staging[n:]
	return len(k.staging) == 0, nil
}
